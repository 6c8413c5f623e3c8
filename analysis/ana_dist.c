/* ana_dist.c - analyze's split, fixed-tree sums, agreement and gather (ana_dist.h). */
#include "analysis/ana_dist.h"

#include <string.h>

#include "common/dist.h"
#include "common/err.h"
#include "common/mem.h"

/* tags of analyze's point-to-point messages (dist_sum_* uses 1 .. 2N) */
enum { TAG_ARRIVE = 7301, TAG_GO = 7302, TAG_ACC = 7303 };
/* bytes per message of the gather (MPI counts are int) */
enum { MSG_MAX = 1 << 28 };

int ana_dist_check_world(void)
{
    int N = dist_size();
    if (!dist_pow2(N))
        return err_set(ERR_ARG, "world size %d (mpirun -np) is not a power of two: analyze adds "
                       "its float sums in a fixed tree of %d blocks of sequences, which only a "
                       "power-of-two number of ranks splits evenly (give -np 1, 2, 4, ... %d)", N,
                       ANA_BLOCKS, ANA_BLOCKS);
    if (N > ANA_BLOCKS)
        return err_set(ERR_ARG, "world size %d (mpirun -np) is more than the %d blocks of "
                       "sequences analyze splits its work into (give -np %d or fewer)", N,
                       ANA_BLOCKS, ANA_BLOCKS);
    return OK;
}

size_t ana_block_start(size_t n, int b) { return (size_t)((uint64_t)n * (uint64_t)b / ANA_BLOCKS); }

void ana_dist_blocks(int *b0, int *b1)
{
    int per = ANA_BLOCKS / dist_size();
    if (b0) *b0 = dist_rank() * per;
    if (b1) *b1 = (dist_rank() + 1) * per;
}

int ana_tree_init(ana_tree *t, int64_t n)
{
    memset(t, 0, sizeof *t);
    t->n = n;
    int levels = 2; /* log2(blocks per rank) + 2 stack slots */
    for (int b = ANA_BLOCKS / dist_size(); b > 1; b >>= 1) levels++;
    t->leaf = mem_calloc((size_t)n + 1, sizeof *t->leaf);
    int ok = t->leaf != NULL;
    for (int i = 0; i < levels && ok; i++) ok = (t->stk[i] = mem_calloc((size_t)n + 1, sizeof(double))) != NULL;
    if (!ok) {
        ana_tree_free(t);
        return err_set(ERR_NOMEM, "out of memory for the sums (%lld values)", (long long)n);
    }
    return OK;
}

void ana_tree_free(ana_tree *t)
{
    mem_free(t->leaf);
    for (int i = 0; i < 16; i++) mem_free(t->stk[i]);
    memset(t, 0, sizeof *t);
}

/* A binary counter: the new block goes on the stack at level 0, and while the two top entries
 * are at the same level they become one, left + right, a level up. */
void ana_tree_push(ana_tree *t)
{
    memcpy(t->stk[t->depth], t->leaf, (size_t)t->n * sizeof *t->leaf);
    memset(t->leaf, 0, (size_t)t->n * sizeof *t->leaf);
    t->level[t->depth++] = 0;
    while (t->depth >= 2 && t->level[t->depth - 1] == t->level[t->depth - 2]) {
        double *a = t->stk[t->depth - 2];
        const double *b = t->stk[t->depth - 1];
        for (int64_t i = 0; i < t->n; i++) a[i] = a[i] + b[i];
        t->level[t->depth - 2]++;
        t->depth--;
    }
}

int ana_tree_total(ana_tree *t, const double **out)
{
    *out = NULL;
    if (t->depth != 1)
        return err_set(ERR_ARG, "sum tree: %d partial sums left (a rank pushed the wrong number "
                       "of blocks)", t->depth);
    int rc = dist_sum_f64(t->stk[0], t->n);
    if (!rc) *out = t->stk[0];
    return rc;
}

int ana_agree(int rc)
{
    if (dist_size() == 1) return rc;
    int mrc = ana_barrier();
    if (mrc) return mrc; /* MPI failed: a peer is gone, mpirun ends the job */
    return dist_check(rc);
}

int ana_barrier(void)
{
    const int N = dist_size();
    if (N == 1) return OK;
    int one = 1, mrc = OK;
    if (dist_is_root()) {
        for (int r = 1; r < N && !mrc; r++) {
            mrc = dist_await(r, TAG_ARRIVE);
            if (!mrc) mrc = dist_recv(&one, sizeof one, r, TAG_ARRIVE, NULL);
        }
        for (int r = 1; r < N && !mrc; r++) mrc = dist_send(&one, sizeof one, r, TAG_GO);
    } else {
        mrc = dist_send(&one, sizeof one, 0, TAG_ARRIVE);
        if (!mrc) mrc = dist_await(0, TAG_GO);
        if (!mrc) mrc = dist_recv(&one, sizeof one, 0, TAG_GO, NULL);
    }
    return mrc;
}

static int send_bulk(const unsigned char *buf, uint64_t bytes, int peer)
{
    int rc = OK;
    for (uint64_t off = 0; off < bytes && !rc; off += MSG_MAX) {
        size_t c = bytes - off < MSG_MAX ? (size_t)(bytes - off) : MSG_MAX;
        dist_req *q = NULL;
        rc = dist_isend(buf + off, c, peer, TAG_ACC, &q);
        if (!rc) rc = dist_wait(&q); /* sleeps between polls */
    }
    return rc;
}

static int recv_bulk(unsigned char *buf, uint64_t bytes, int peer)
{
    int rc = OK;
    for (uint64_t off = 0; off < bytes && !rc; off += MSG_MAX) {
        size_t c = bytes - off < MSG_MAX ? (size_t)(bytes - off) : MSG_MAX, got = 0;
        rc = dist_await(peer, TAG_ACC);
        if (!rc) rc = dist_recv(buf + off, c, peer, TAG_ACC, &got);
        if (!rc && got != c)
            rc = err_set(ERR_IO, "feature statistics from rank %d: %zu bytes, want %zu", peer, got, c);
    }
    return rc;
}

int ana_gather_acc(ana_feat_acc *acc)
{
    const int N = dist_size(), root = dist_is_root();
    if (N == 1) return OK;
    int rc = OK;
    unsigned char *buf = NULL;
    uint64_t size = 0, *sizes = NULL;
    if (!root) {
        size = ana_feat_acc_packed_size(acc);
        if (!(buf = mem_alloc(size))) {
            rc = err_set(ERR_NOMEM, "out of memory for %llu bytes of feature statistics",
                         (unsigned long long)size);
            size = 0;
        } else
            ana_feat_acc_pack(acc, buf);
        int src = dist_send(&size, sizeof size, 0, TAG_ACC);
        if (src) rc = src;
    } else {
        uint64_t most = 1;
        if (!(sizes = mem_calloc((size_t)N, sizeof *sizes))) rc = err_set(ERR_NOMEM, "out of memory");
        for (int r = 1; r < N && !rc; r++) {
            rc = dist_await(r, TAG_ACC);
            if (!rc) rc = dist_recv(&sizes[r], sizeof *sizes, r, TAG_ACC, NULL);
            if (sizes[r] > most) most = sizes[r];
        }
        if (!rc && !(buf = mem_alloc(most)))
            rc = err_set(ERR_NOMEM, "out of memory for %llu bytes of feature statistics",
                         (unsigned long long)most);
    }
    rc = ana_agree(rc);
    if (!rc && !root) rc = send_bulk(buf, size, 0);
    int merged = OK; /* a bad buffer stops the merging, not the receiving: nobody stays in a send */
    for (int r = 1; root && r < N && !rc; r++) {
        rc = recv_bulk(buf, sizes[r], r); /* fails only when MPI does: a peer is gone */
        if (!rc && !merged) merged = ana_feat_acc_merge_packed(acc, buf, sizes[r]);
    }
    if (!rc) rc = merged;
    mem_free(buf);
    mem_free(sizes);
    return rc;
}
