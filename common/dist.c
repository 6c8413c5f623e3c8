/* dist.c - MPI behind dist.h: launch detection, rank-0 helpers, the deterministic tree sums. */
#include "common/dist.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/mem.h"

static int g_active, g_rank, g_size = 1, g_shared, g_shared_code;

static int launched_by_mpi(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK",
                                       "PMI_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

static int mpi_fail(int mrc, const char *what)
{
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(mrc, s, &n) != MPI_SUCCESS) snprintf(s, sizeof s, "error %d", mrc);
    return err_set(ERR_IO, "MPI %s failed on rank %d of %d: %s (did another rank die?)", what,
                   g_rank, g_size, s);
}

int dist_init(int *argc, char ***argv)
{
    if (g_active || !launched_by_mpi()) return OK;
    int provided = 0;
    int mrc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    if (mrc != MPI_SUCCESS) return err_set(ERR_IO, "MPI_Init failed (error %d)", mrc);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    g_active = 1;
    return OK;
}

static void shm_free_all(void);

void dist_finalize(void)
{
    if (!g_active) return;
    shm_free_all();
    MPI_Finalize();
    g_active = 0;
}

int dist_active(void) { return g_active; }
int dist_rank(void) { return g_rank; }
int dist_size(void) { return g_size; }
int dist_is_root(void) { return g_rank == 0; }
int dist_error_shared(void) { return g_shared; }
int dist_error_shared_code(void) { return g_shared ? g_shared_code : OK; }
int dist_pow2(int64_t n) { return n >= 1 && (n & (n - 1)) == 0; }

/* MPI counts are int: large buffers go in chunks of at most 2^28 elements. */
enum { CHUNK = 1 << 28 };

int dist_bcast(void *buf, size_t bytes)
{
    if (g_size == 1) return OK;
    unsigned char *p = buf;
    while (bytes > 0) {
        int n = bytes > CHUNK ? CHUNK : (int)bytes;
        int mrc = MPI_Bcast(p, n, MPI_BYTE, 0, MPI_COMM_WORLD);
        if (mrc != MPI_SUCCESS) return mpi_fail(mrc, "MPI_Bcast");
        p += n;
        bytes -= (size_t)n;
    }
    return OK;
}

/* One allgather of at most CHUNK bytes per rank; more goes in chunks: the chunk at offset o of
 * every rank's bytes is received as one element of a type of c bytes whose extent is a whole
 * rank's bytes, so rank r's piece lands at recv + r bytes + o (a copy: the same bytes as one
 * call). */
int dist_allgather(const void *send, void *recv, size_t bytes)
{
    if (g_size == 1) {
        if (recv != send) memmove(recv, send, bytes);
        return OK;
    }
    if (bytes <= CHUNK) {
        int mrc = MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE,
                                MPI_COMM_WORLD);
        return mrc == MPI_SUCCESS ? OK : mpi_fail(mrc, "MPI_Allgather");
    }
    for (size_t o = 0; o < bytes;) {
        int c = bytes - o > CHUNK ? CHUNK : (int)(bytes - o);
        MPI_Datatype one, piece;
        int mrc = MPI_Type_contiguous(c, MPI_BYTE, &one);
        if (mrc == MPI_SUCCESS) {
            mrc = MPI_Type_create_resized(one, 0, (MPI_Aint)bytes, &piece);
            MPI_Type_free(&one);
        }
        if (mrc != MPI_SUCCESS) return mpi_fail(mrc, "MPI_Type_create_resized");
        if ((mrc = MPI_Type_commit(&piece)) == MPI_SUCCESS)
            mrc = MPI_Allgather((const unsigned char *)send + o, c, MPI_BYTE,
                                (unsigned char *)recv + o, 1, piece, MPI_COMM_WORLD);
        MPI_Type_free(&piece);
        if (mrc != MPI_SUCCESS) return mpi_fail(mrc, "MPI_Allgather");
        o += (size_t)c;
    }
    return OK;
}

/* ---- point to point ---- */
struct dist_req {
    MPI_Request r;
};

static int p2p_args(size_t bytes, int peer)
{
    if (g_size == 1 || peer < 0 || peer >= g_size || peer == g_rank)
        return err_set(ERR_ARG, "no rank %d to talk to (rank %d of %d)", peer, g_rank, g_size);
    if (bytes > 2147483647u) return err_set(ERR_ARG, "message of %zu bytes is too large", bytes);
    return OK;
}

int dist_send(const void *buf, size_t bytes, int peer, int tag)
{
    int rc = p2p_args(bytes, peer);
    if (rc) return rc;
    int mrc = MPI_Send(buf, (int)bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
    return mrc == MPI_SUCCESS ? OK : mpi_fail(mrc, "MPI_Send");
}

int dist_recv(void *buf, size_t bytes, int peer, int tag, size_t *got)
{
    int rc = p2p_args(bytes, peer), n = 0;
    if (rc) return rc;
    MPI_Status st;
    int mrc = MPI_Recv(buf, (int)bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st);
    if (mrc == MPI_SUCCESS) mrc = MPI_Get_count(&st, MPI_BYTE, &n);
    if (mrc != MPI_SUCCESS) return mpi_fail(mrc, "MPI_Recv");
    if (got) *got = (size_t)n;
    return OK;
}

int dist_isend(const void *buf, size_t bytes, int peer, int tag, dist_req **req)
{
    *req = NULL;
    int rc = p2p_args(bytes, peer);
    if (rc) return rc;
    dist_req *q = mem_alloc(sizeof *q);
    if (!q) return err_set(ERR_NOMEM, "out of memory");
    int mrc = MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &q->r);
    if (mrc != MPI_SUCCESS) {
        mem_free(q);
        return mpi_fail(mrc, "MPI_Isend");
    }
    *req = q;
    return OK;
}

int dist_test(dist_req **req)
{
    if (!*req) return OK;
    int flag = 0, mrc = MPI_Test(&(*req)->r, &flag, MPI_STATUS_IGNORE);
    if (mrc != MPI_SUCCESS) return mpi_fail(mrc, "MPI_Test");
    if (flag) {
        mem_free(*req);
        *req = NULL;
    }
    return OK;
}

int dist_wait(dist_req **req)
{
    long ns = 20000;
    for (;;) {
        int rc = dist_test(req);
        if (rc || !*req) return rc;
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        if (ns < 1000000) ns *= 2;
    }
}

int dist_probe(int peer, int tag, int *ready)
{
    *ready = 0;
    int rc = p2p_args(0, peer);
    if (rc) return rc;
    int mrc = MPI_Iprobe(peer, tag, MPI_COMM_WORLD, ready, MPI_STATUS_IGNORE);
    return mrc == MPI_SUCCESS ? OK : mpi_fail(mrc, "MPI_Iprobe");
}

int dist_await(int peer, int tag)
{
    int rc = p2p_args(0, peer);
    if (rc) return rc;
    long ns = 20000;
    for (;;) {
        int flag = 0;
        int mrc = MPI_Iprobe(peer, tag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        if (mrc != MPI_SUCCESS) return mpi_fail(mrc, "MPI_Iprobe");
        if (flag) return OK;
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        if (ns < 1000000) ns *= 2;
    }
}

static int allreduce(void *buf, int64_t n, MPI_Datatype t, size_t esz, MPI_Op op, const char *what)
{
    if (g_size == 1) return OK;
    unsigned char *p = buf;
    while (n > 0) {
        int c = n > CHUNK ? CHUNK : (int)n;
        int mrc = MPI_Allreduce(MPI_IN_PLACE, p, c, t, op, MPI_COMM_WORLD);
        if (mrc != MPI_SUCCESS) return mpi_fail(mrc, what);
        p += (size_t)c * esz;
        n -= c;
    }
    return OK;
}

int dist_sum_i64(int64_t *buf, int n)
{
    return allreduce(buf, n, MPI_INT64_T, sizeof *buf, MPI_SUM, "MPI_Allreduce(sum)");
}
int dist_max_i64(int64_t *buf, int n)
{
    return allreduce(buf, n, MPI_INT64_T, sizeof *buf, MPI_MAX, "MPI_Allreduce(max)");
}
int dist_max_u8(unsigned char *buf, int64_t n)
{
    return allreduce(buf, n, MPI_UNSIGNED_CHAR, 1, MPI_MAX, "MPI_Allreduce(max)");
}
int dist_min_f32(float *buf, int n)
{
    return allreduce(buf, n, MPI_FLOAT, sizeof *buf, MPI_MIN, "MPI_Allreduce(min)");
}

/* The fixed tree, bandwidth-optimal (Rabenseifner): a recursive-halving reduce-scatter then a
 * recursive-doubling allgather. At level l (mask = 2^l) rank r and r ^ mask hold the same index
 * range [lo, hi); the rank with the bit clear keeps [lo, mid), the other [mid, hi); each receives
 * the partner's copy of its half and adds lower-block + upper-block (lower = the block of ranks
 * with the bit clear), so every element is the same binary tree of additions as a plain
 * recursive doubling, bit for bit, whoever computes it (and however the vector is chunked). The
 * allgather copies the finished halves back level by level. Each rank sends 2 (N-1)/N of the
 * vector instead of log2(N) times all of it. */
#define TREE_SUM(NAME, T, MT)                                                                     \
    int NAME(T *buf, int64_t n)                                                                   \
    {                                                                                             \
        if (g_size == 1 || n <= 0) return OK;                                                     \
        if (!dist_pow2(g_size))                                                                   \
            return err_set(ERR_ARG, "the deterministic sum needs a power-of-two world size, "    \
                                    "not %d", g_size);                                            \
        int64_t cmax = n < (1 << 23) ? n : (1 << 23); /* elements per chunk */                    \
        T *tmp = mem_alloc(sizeof(T) * (size_t)(cmax / 2 + 1));                                   \
        /* agreed: a rank that cannot allocate must not leave the others in MPI_Sendrecv */      \
        int rc = dist_check(tmp ? OK : err_set(ERR_NOMEM, "deterministic sum: out of memory")); \
        if (rc) {                                                                                 \
            mem_free(tmp);                                                                        \
            return rc;                                                                            \
        }                                                                                         \
        int nl = 0, mrc;                                                                          \
        int64_t lo[32], hi[32];                                                                   \
        for (int64_t off = 0; off < n && !rc; off += cmax) {                                      \
            T *b = buf + off;                                                                     \
            int64_t l0 = 0, h0 = n - off < cmax ? n - off : cmax;                                 \
            nl = 0;                                                                               \
            for (int mask = 1; mask < g_size; mask <<= 1, nl++) {                                 \
                int peer = g_rank ^ mask, up = (g_rank & mask) != 0;                              \
                int64_t mid = l0 + (h0 - l0) / 2;                                                 \
                int64_t kl = up ? mid : l0, kh = up ? h0 : mid; /* kept */                        \
                int64_t sl = up ? l0 : mid, sh = up ? mid : h0; /* sent */                        \
                lo[nl] = l0;                                                                      \
                hi[nl] = h0;                                                                      \
                mrc = MPI_Sendrecv(b + sl, (int)(sh - sl), MT, peer, mask, tmp, (int)(kh - kl),   \
                                   MT, peer, mask, MPI_COMM_WORLD, MPI_STATUS_IGNORE);            \
                if (mrc != MPI_SUCCESS) {                                                         \
                    rc = mpi_fail(mrc, "MPI_Sendrecv");                                           \
                    break;                                                                        \
                }                                                                                 \
                T *k = b + kl;                                                                    \
                if (up)                                                                           \
                    for (int64_t i = 0; i < kh - kl; i++) k[i] = tmp[i] + k[i];                   \
                else                                                                              \
                    for (int64_t i = 0; i < kh - kl; i++) k[i] = k[i] + tmp[i];                   \
                l0 = kl;                                                                          \
                h0 = kh;                                                                          \
            }                                                                                     \
            /* allgather: back up the levels, swapping the finished halves */                    \
            for (int l = nl - 1; l >= 0 && !rc; l--) {                                            \
                int mask = 1 << l, peer = g_rank ^ mask, up = (g_rank & mask) != 0;               \
                int64_t mid = lo[l] + (hi[l] - lo[l]) / 2;                                        \
                int64_t kl = up ? mid : lo[l], kh = up ? hi[l] : mid;                             \
                int64_t rl = up ? lo[l] : mid, rh = up ? mid : hi[l];                             \
                mrc = MPI_Sendrecv(b + kl, (int)(kh - kl), MT, peer, mask + g_size, b + rl,       \
                                   (int)(rh - rl), MT, peer, mask + g_size, MPI_COMM_WORLD,       \
                                   MPI_STATUS_IGNORE);                                            \
                if (mrc != MPI_SUCCESS) rc = mpi_fail(mrc, "MPI_Sendrecv");                       \
            }                                                                                     \
        }                                                                                         \
        mem_free(tmp);                                                                            \
        return rc;                                                                                \
    }
TREE_SUM(dist_sum_f32, float, MPI_FLOAT)
TREE_SUM(dist_sum_f64, double, MPI_DOUBLE)

/* ---- the same tree in two halves, split by units (ZeRO-1 style data parallel) ----------------
 * The recursive halving above, on [0, units) instead of on 2^23-element chunks: at level l the
 * pair (r, r ^ 2^l) halves its common range of units, lower units to the rank with the bit
 * clear. Each element is still lower-block + upper-block at every level, so its bits are
 * dist_sum_f32's; only who finishes which element changes. */
static int tree_levels(int64_t units, int rank, int64_t *lo, int64_t *hi)
{
    int nl = 0;
    int64_t l0 = 0, h0 = units;
    for (int mask = 1; mask < g_size; mask <<= 1, nl++) {
        lo[nl] = l0;
        hi[nl] = h0;
        int64_t mid = l0 + (h0 - l0) / 2;
        if (rank & mask) l0 = mid;
        else h0 = mid;
    }
    lo[nl] = l0;
    hi[nl] = h0;
    return nl;
}

void dist_tree_part(int64_t units, int rank, int64_t *lo, int64_t *hi)
{
    int64_t l[33], h[33];
    int nl = tree_levels(units, rank, l, h);
    *lo = l[nl];
    *hi = h[nl];
}

enum { PART_CHUNK = 1 << 23 }; /* elements per message (and the exchange buffer) */

/* One level with peer: send b[sl, sh), receive the peer's copy of b[kl, kh) (elements) and, when
 * add, add it (lower + upper: up says this rank's copy is the upper block), in messages of at
 * most PART_CHUNK elements; the peer's kept range is this rank's sent one, so both loop alike. */
static int part_exchange(float *b, int64_t kl, int64_t kh, int64_t sl, int64_t sh, int peer,
                         int up, int add, int tag, float *tmp)
{
    int64_t nk = kh - kl, ns = sh - sl, nmax = nk > ns ? nk : ns;
    for (int64_t o = 0; o < nmax; o += PART_CHUNK) {
        int64_t ck = nk - o < 0 ? 0 : nk - o < PART_CHUNK ? nk - o : PART_CHUNK;
        int64_t cs = ns - o < 0 ? 0 : ns - o < PART_CHUNK ? ns - o : PART_CHUNK;
        float *k = b + kl + o, *into = add ? tmp : k;
        int mrc = MPI_Sendrecv(b + sl + o, (int)cs, MPI_FLOAT, peer, tag, into, (int)ck, MPI_FLOAT,
                               peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (mrc != MPI_SUCCESS) return mpi_fail(mrc, "MPI_Sendrecv");
        if (add && up)
            for (int64_t i = 0; i < ck; i++) k[i] = tmp[i] + k[i];
        else if (add)
            for (int64_t i = 0; i < ck; i++) k[i] = k[i] + tmp[i];
    }
    return OK;
}

int dist_sum_part_f32(float *buf, int64_t units, int64_t unit_len)
{
    if (g_size == 1 || units <= 0) return OK;
    if (!dist_pow2(g_size))
        return err_set(ERR_ARG, "the deterministic sum needs a power-of-two world size, not %d", g_size);
    int64_t n = units * unit_len;
    float *tmp = mem_alloc(sizeof(float) * (size_t)(n < PART_CHUNK ? n : PART_CHUNK));
    int rc = dist_check(tmp ? OK : err_set(ERR_NOMEM, "deterministic sum: out of memory"));
    int64_t lo[33], hi[33];
    int nl = tree_levels(units, g_rank, lo, hi);
    for (int l = 0; l < nl && !rc; l++) {
        int mask = 1 << l, up = (g_rank & mask) != 0;
        int64_t mid = lo[l] + (hi[l] - lo[l]) / 2;
        int64_t kl = up ? mid : lo[l], kh = up ? hi[l] : mid, sl = up ? lo[l] : mid, sh = up ? mid : hi[l];
        rc = part_exchange(buf, kl * unit_len, kh * unit_len, sl * unit_len, sh * unit_len,
                           g_rank ^ mask, up, 1, 0x1000 + mask, tmp);
    }
    mem_free(tmp);
    return rc;
}

int dist_gather_part_f32(float *buf, int64_t units, int64_t unit_len)
{
    if (g_size == 1 || units <= 0) return OK;
    if (!dist_pow2(g_size))
        return err_set(ERR_ARG, "the deterministic sum needs a power-of-two world size, not %d", g_size);
    int64_t lo[33], hi[33];
    int nl = tree_levels(units, g_rank, lo, hi), rc = OK;
    for (int l = nl - 1; l >= 0 && !rc; l--) {
        int mask = 1 << l, up = (g_rank & mask) != 0;
        int64_t mid = lo[l] + (hi[l] - lo[l]) / 2;
        int64_t kl = up ? mid : lo[l], kh = up ? hi[l] : mid, rl = up ? lo[l] : mid, rh = up ? mid : hi[l];
        /* send the finished half kept at this level, receive the peer's into its place */
        rc = part_exchange(buf, rl * unit_len, rh * unit_len, kl * unit_len, kh * unit_len,
                           g_rank ^ mask, up, 0, 0x2000 + mask, NULL);
    }
    return rc;
}

/* ---- node-shared windows (MPI-3 shared memory) -----------------------------------------------
 * Windows live until dist_finalize (MPI_Win_free is collective, and a trainer is freed on error
 * paths where the ranks are not together); a released window is reused by the next
 * dist_shm_new asking for the same sizes, a decision every rank makes alike. */
struct dist_shm {
    MPI_Win win;
    size_t bytes;       /* this rank's segment */
    int key;            /* the caller's name for what it holds: reuse only the same */
    float **seg;        /* every rank's segment [g_size] */
    float *tree;        /* the sum's level buffers [g_size/2, SHM_BLK] */
    int used;
    struct dist_shm *next;
};
static struct dist_shm *g_shm;
enum { SHM_BLK = 1024 };

static int shm_one_node(void)
{
    static int known = -1;
    if (known >= 0) return known;
    MPI_Comm node;
    int n = 0;
    known = 0;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        MPI_Comm_size(node, &n);
        MPI_Comm_free(&node);
        known = n == g_size;
    }
    return known;
}

int dist_shm_new(dist_shm **out, size_t bytes, int key)
{
    *out = NULL;
    if (g_size == 1 || !dist_pow2(g_size)) return OK;
    /* agreed: a rank given SAELITE_NO_SHM alone must not leave the others in the allocation */
    const char *e = getenv("SAELITE_NO_SHM");
    int want = !(e && e[0] && strcmp(e, "0")), all = 0;
    if (MPI_Allreduce(&want, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS || !all)
        return OK;
    if (!shm_one_node()) return OK; /* the same answer on every rank: one communicator */
    /* a released window of this rank's size and key, the same one on every rank (windows are
       listed in the same order everywhere; sizes may differ by rank, so the choice is agreed) */
    int idx = 0, pick = -1, lohi[2];
    dist_shm *found = NULL;
    for (dist_shm *w = g_shm; w; w = w->next, idx++)
        if (!w->used && w->bytes == bytes && w->key == key && !found) {
            found = w;
            pick = idx;
        }
    lohi[0] = pick;
    lohi[1] = -pick;
    if (MPI_Allreduce(MPI_IN_PLACE, lohi, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS)
        return OK;
    if (lohi[0] >= 0 && lohi[0] == -lohi[1]) { /* every rank picked the same window */
        MPI_Barrier(MPI_COMM_WORLD); /* nobody reads the last user's contents any more */
        if (bytes) memset(found->seg[g_rank], 0, bytes);
        found->used = 1;
        *out = found;
        dist_shm_sync(found, NULL);
        return OK;
    }
    dist_shm *w = mem_calloc(1, sizeof *w);
    float **seg = mem_calloc((size_t)g_size, sizeof *seg);
    float *tree = mem_alloc(sizeof(float) * (size_t)(g_size / 2) * SHM_BLK);
    int rc = dist_check(w && seg && tree ? OK : err_set(ERR_NOMEM, "shared window: out of memory"));
    MPI_Info info = MPI_INFO_NULL;
    if (!rc && MPI_Info_create(&info) == MPI_SUCCESS)
        MPI_Info_set(info, "alloc_shared_noncontig", "true");
    void *base = NULL;
    int mrc = rc ? MPI_ERR_OTHER
                 : MPI_Win_allocate_shared((MPI_Aint)bytes, sizeof(float), info, MPI_COMM_WORLD,
                                           &base, &w->win);
    if (info != MPI_INFO_NULL) MPI_Info_free(&info);
    if (!rc) {
        /* a node without room for the window (a small /dev/shm) is no error: the message path */
        int okw = mrc == MPI_SUCCESS;
        MPI_Allreduce(&okw, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all) {
            /* MPI_Win_free is collective and the failed ranks have no window: a rank that got
               one keeps it unused (it leaks until exit) rather than wait for them */
            mem_free(w);
            mem_free(seg);
            mem_free(tree);
            return OK;
        }
        for (int r = 0; r < g_size; r++) {
            MPI_Aint sz;
            int du;
            void *b = NULL;
            MPI_Win_shared_query(w->win, r, &sz, &du, &b);
            seg[r] = b;
        }
        MPI_Win_lock_all(MPI_MODE_NOCHECK, w->win);
        if (bytes) memset(seg[g_rank], 0, bytes);
        w->bytes = bytes;
        w->key = key;
        w->seg = seg;
        w->tree = tree;
        w->used = 1;
        w->next = g_shm;
        g_shm = w;
        *out = w;
        dist_shm_sync(w, NULL);
        return OK;
    }
    mem_free(w);
    mem_free(seg);
    mem_free(tree);
    return rc;
}

float *dist_shm_seg(dist_shm *w, int rank) { return w->seg[rank]; }

void dist_shm_release(dist_shm *w)
{
    if (w) w->used = 0;
}

void dist_shm_sync(dist_shm *w, dist_shm *w2)
{
    MPI_Win_sync(w->win);
    if (w2) MPI_Win_sync(w2->win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_sync(w->win);
    if (w2) MPI_Win_sync(w2->win);
}

static void shm_free_all(void)
{
    while (g_shm) {
        dist_shm *w = g_shm;
        g_shm = w->next;
        MPI_Win_unlock_all(w->win);
        MPI_Win_free(&w->win);
        mem_free(w->seg);
        mem_free(w->tree);
        mem_free(w);
    }
}

/* Elements [a, b) of every rank's segment summed in dist_sum_f32's tree (level l adds the
 * partial sums of rank blocks 2j and 2j+1, lower first) into this rank's segment; the other
 * ranks' copies there are set to zero. SHM_BLK elements at a time, through g_size/2 buffers. */
void dist_shm_sum_part(dist_shm *w, int64_t a, int64_t b)
{
    int N = g_size;
    float *own = w->seg[g_rank], *t = w->tree;
    if (N == 2) { /* one level: no buffers */
        const float *x = w->seg[0], *y = w->seg[1];
        float *other = w->seg[1 - g_rank];
        for (int64_t i = a; i < b; i++) {
            float v = x[i] + y[i];
            own[i] = v;
            other[i] = 0;
        }
        return;
    }
    for (int64_t i0 = a; i0 < b; i0 += SHM_BLK) {
        int n = b - i0 < SHM_BLK ? (int)(b - i0) : SHM_BLK;
        for (int j = 0; j < N / 2; j++) {
            const float *lo = w->seg[2 * j] + i0, *hi = w->seg[2 * j + 1] + i0;
            float *o = t + (size_t)j * SHM_BLK;
            for (int i = 0; i < n; i++) o[i] = lo[i] + hi[i];
        }
        for (int m = N / 2; m > 1; m /= 2)
            for (int j = 0; j < m / 2; j++) {
                float *o = t + (size_t)j * SHM_BLK;
                const float *hi = t + (size_t)(2 * j + 1) * SHM_BLK, *lo = t + (size_t)(2 * j) * SHM_BLK;
                for (int i = 0; i < n; i++) o[i] = lo[i] + hi[i];
            }
        memcpy(own + i0, t, sizeof(float) * (size_t)n);
        for (int r = 0; r < N; r++)
            if (r != g_rank) memset(w->seg[r] + i0, 0, sizeof(float) * (size_t)n);
    }
}

int dist_same(int rc, const void *v, size_t n, const char *what)
{
    if (g_size == 1) return rc;
    if ((rc = dist_check(rc))) return rc;
    unsigned char buf[256];
    if (n > sizeof buf) return err_set(ERR_ARG, "dist_same: %zu bytes (at most %zu)", n, sizeof buf);
    memcpy(buf, v, n);
    if ((rc = dist_bcast(buf, n))) return rc;
    if (memcmp(buf, v, n))
        rc = err_set(ERR_ARG, "%s: not the same as on rank 0 (every rank must read the same files: "
                     "another file behind the same path?)", what);
    return dist_check(rc);
}

int dist_check(int rc)
{
    if (g_size == 1) {
        g_shared = 0;
        return rc;
    }
    int mine = rc ? g_rank : g_size, first = g_size;
    int mrc = MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (mrc != MPI_SUCCESS) return mpi_fail(mrc, "MPI_Allreduce(check)");
    if (first == g_size) {
        g_shared = 0;
        return OK;
    }
    int nfail = rc != 0, all = 0;
    if ((mrc = MPI_Allreduce(&nfail, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD)) != MPI_SUCCESS)
        return mpi_fail(mrc, "MPI_Allreduce(check)");
    char msg[ERR_MSG_MAX];
    int code = rc;
    if (g_rank == first) snprintf(msg, sizeof msg, "%s", err_msg()[0] ? err_msg() : err_str(rc));
    int hdr[1] = {code};
    if ((mrc = MPI_Bcast(hdr, 1, MPI_INT, first, MPI_COMM_WORLD)) != MPI_SUCCESS ||
        (mrc = MPI_Bcast(msg, sizeof msg, MPI_CHAR, first, MPI_COMM_WORLD)) != MPI_SUCCESS)
        return mpi_fail(mrc, "MPI_Bcast(check)");
    msg[sizeof msg - 1] = 0;
    if (all == g_size) err_set(hdr[0], "%s", msg); /* every rank failed: the same problem */
    else err_set(hdr[0], "rank %d: %s", first, msg);
    g_shared = 1;
    g_shared_code = hdr[0];
    return hdr[0];
}
