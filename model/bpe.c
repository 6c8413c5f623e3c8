/* bpe.c - byte-level BPE training with incremental pair counts; GPT-2 vocabulary files. */
#include "model/bpe.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/hash.h"
#include "common/mem.h"
#include "common/progress.h"
#include "corpus/corpus.h"
#include "model/tokenizer.h"

static uint64_t fnv(const char *p, size_t n) { return hash_fnv1a(HASH_FNV1A_INIT_TOK, p, n) | 1; }

/* A set of byte strings -> int, open addressing, strings kept in an arena. */
typedef struct {
    uint64_t *h;
    uint32_t *off, *len;
    int *val;
    size_t mask, count;
    buf keys;
} strmap;

static void sm_free(strmap *m)
{
    mem_free(m->h);
    mem_free(m->off);
    mem_free(m->len);
    mem_free(m->val);
    mem_free(m->keys.p);
    memset(m, 0, sizeof *m);
}

static int sm_init(strmap *m, size_t cap)
{
    memset(m, 0, sizeof *m);
    m->h = mem_calloc(cap, sizeof *m->h);
    m->off = mem_alloc(cap * sizeof *m->off);
    m->len = mem_alloc(cap * sizeof *m->len);
    m->val = mem_alloc(cap * sizeof *m->val);
    m->mask = cap - 1;
    if (!m->h || !m->off || !m->len || !m->val) {
        sm_free(m);
        return err_set(ERR_NOMEM, "out of memory");
    }
    return OK;
}

static size_t sm_slot(const strmap *m, const char *s, size_t n, uint64_t h)
{
    size_t i = (h >> 1) & m->mask;
    while (m->h[i] && !(m->h[i] == h && m->len[i] == n && !memcmp(m->keys.p + m->off[i], s, n)))
        i = (i + 1) & m->mask;
    return i;
}

/* Returns the value for s, inserting val when absent (*added = 1). */
static int sm_get_or_add(strmap *m, const char *s, size_t n, int val, int *out, int *added)
{
    uint64_t h = fnv(s, n);
    size_t i = sm_slot(m, s, n, h);
    *added = 0;
    if (m->h[i]) {
        *out = m->val[i];
        return OK;
    }
    if ((m->count + 1) * 2 > m->mask + 1) {
        strmap g;
        if (sm_init(&g, (m->mask + 1) * 2)) return ERR_NOMEM;
        g.keys = m->keys;
        for (size_t k = 0; k <= m->mask; k++) {
            if (!m->h[k]) continue;
            size_t j = (m->h[k] >> 1) & g.mask;
            while (g.h[j]) j = (j + 1) & g.mask;
            g.h[j] = m->h[k];
            g.off[j] = m->off[k];
            g.len[j] = m->len[k];
            g.val[j] = m->val[k];
        }
        g.count = m->count;
        m->keys.p = NULL;
        sm_free(m);
        *m = g;
        i = sm_slot(m, s, n, h);
    }
    if (m->keys.n + n > UINT32_MAX) return err_set(ERR_NOMEM, "too much distinct text (4 GiB)");
    m->h[i] = h;
    m->off[i] = (uint32_t)m->keys.n;
    m->len[i] = (uint32_t)n;
    m->val[i] = val;
    if (buf_put(&m->keys, s, n)) return ERR_NOMEM;
    m->count++;
    *out = val;
    *added = 1;
    return OK;
}

/* ---- GPT-2 alphabet and files -------------------------------------------------------------- */

/* Token bytes in the alphabet, UTF-8 (json = 0) or as a JSON string body with \uXXXX (json = 1). */
static int put_alpha(buf *b, const char *s, size_t n, int json)
{
    for (size_t i = 0; i < n; i++) {
        unsigned cp = tok_byte_to_unicode((unsigned char)s[i]);
        char u[8];
        size_t k;
        if (json) {
            if (cp == '"' || cp == '\\') { u[0] = '\\'; u[1] = (char)cp; k = 2; }
            else if (cp < 0x80) { u[0] = (char)cp; k = 1; }
            else k = (size_t)snprintf(u, sizeof u, "\\u%04x", cp);
        } else if (cp < 0x80) { u[0] = (char)cp; k = 1; }
        else { u[0] = (char)(0xC0 | cp >> 6); u[1] = (char)(0x80 | (cp & 0x3F)); k = 2; }
        if (buf_put(b, u, k)) return ERR_NOMEM;
    }
    return OK;
}

int bpe_write(const char *dir, const bpe_merge *merges, size_t n)
{
    int rc = file_mkdir_p(dir);
    if (rc) return rc;
    buf voc = {0}, enc = {0}, tokb = {0};
    strmap seen;
    rc = sm_init(&seen, 1024);
    if (rc) return rc;
    unsigned char order[256];
    tok_byte_order(order);
    int id = 0, dummy, added;
    char num[32];
    rc = buf_put(&enc, "{", 1);
    for (int k = 0; k < 256 && !rc; k++) {
        char c = (char)order[k];
        rc = sm_get_or_add(&seen, &c, 1, id, &dummy, &added);
        if (!rc) rc = buf_put(&enc, k ? ", \"" : "\"", k ? 3 : 1);
        if (!rc) rc = put_alpha(&enc, &c, 1, 1);
        snprintf(num, sizeof num, "\": %d", id++);
        if (!rc) rc = buf_put(&enc, num, strlen(num));
    }
    if (!rc) rc = buf_put(&voc, "#version: 0.2\n", 14);
    for (size_t i = 0; i < n && !rc; i++) {
        const bpe_merge *m = &merges[i];
        rc = put_alpha(&voc, m->a, m->alen, 0);
        if (!rc) rc = buf_put(&voc, " ", 1);
        if (!rc) rc = put_alpha(&voc, m->b, m->blen, 0);
        if (!rc) rc = buf_put(&voc, "\n", 1);
        tokb.n = 0;
        if (!rc) rc = buf_put(&tokb, m->a, m->alen);
        if (!rc) rc = buf_put(&tokb, m->b, m->blen);
        if (!rc) rc = sm_get_or_add(&seen, tokb.p, tokb.n, id, &dummy, &added);
        if (rc || !added) continue; /* a merge that recreates an existing token adds none */
        rc = buf_put(&enc, ", \"", 3);
        if (!rc) rc = put_alpha(&enc, tokb.p, tokb.n, 1);
        snprintf(num, sizeof num, "\": %d", id++);
        if (!rc) rc = buf_put(&enc, num, strlen(num));
    }
    snprintf(num, sizeof num, ", \"<|endoftext|>\": %d}", id);
    if (!rc) rc = buf_put(&enc, num, strlen(num));
    char path[4200];
    /* vocab.bpe last: it is the file `make demo` takes as the step's product, so a kill of the
       whole job (make too) between the two renames leaves no vocab.bpe without its encoder.json */
    /* each after the temps a killed run left (NAME.tmp.PID: a rerun kept them beside its files) */
    if (!rc) rc = path_join(path, sizeof path, dir, "encoder.json");
    if (!rc) file_remove_dead_temps(path);
    if (!rc) rc = file_write_atomic(path, enc.p, enc.n);
    if (!rc) rc = path_join(path, sizeof path, dir, "vocab.bpe");
    if (!rc) file_remove_dead_temps(path);
    if (!rc) rc = file_write_atomic(path, voc.p, voc.n);
    sm_free(&seen);
    buf_free(&voc);
    buf_free(&enc);
    buf_free(&tokb);
    return rc;
}

void bpe_merges_free(bpe_merge *m, size_t n)
{
    if (!m) return;
    for (size_t i = 0; i < n; i++) mem_free(m[i].a); /* a and b share one allocation */
    mem_free(m);
}

static int add_merge(bpe_merge **ms, size_t *n, size_t *cap, const char *a, size_t alen,
                     const char *b, size_t blen)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 1024;
        bpe_merge *q = mem_realloc(*ms, nc * sizeof *q);
        if (!q) return err_set(ERR_NOMEM, "out of memory");
        *ms = q;
        *cap = nc;
    }
    char *p = mem_alloc(alen + blen + 1);
    if (!p) return err_set(ERR_NOMEM, "out of memory");
    memcpy(p, a, alen);
    memcpy(p + alen, b, blen);
    (*ms)[*n] = (bpe_merge){p, p + alen, alen, blen};
    (*n)++;
    return OK;
}

typedef struct {
    bpe_merge **ms;
    size_t *n, cap;
    char *buf;
    size_t bcap;
} merge_list;

static int list_merge(void *user, const char *path, long lineno, long rank, const char *a,
                      size_t alen, const char *b, size_t blen)
{
    merge_list *L = user;
    if (alen + blen > L->bcap) { /* the raw bytes are never longer than the alphabet text */
        mem_free(L->buf);
        L->bcap = (alen + blen) * 2 + 16;
        if (!(L->buf = mem_alloc(L->bcap))) return err_set(ERR_NOMEM, "out of memory");
    }
    long ka = tok_alphabet_decode(a, alen, L->buf);
    long kb = ka > 0 ? tok_alphabet_decode(b, blen, L->buf + ka) : -1;
    if (ka <= 0 || kb <= 0)
        return err_set(ERR_FORMAT, "%s:%ld: a token outside GPT-2's byte alphabet", path, lineno);
    return add_merge(L->ms, L->n, &L->cap, L->buf, (size_t)ka, L->buf + ka, (size_t)kb);
}

int bpe_read_merges(const char *path, bpe_merge **merges, size_t *nm)
{
    *merges = NULL;
    *nm = 0;
    merge_list L = {merges, nm, 0, NULL, 0};
    int rc = tok_merges_read(path, list_merge, &L);
    mem_free(L.buf);
    if (rc) {
        bpe_merges_free(*merges, *nm);
        *merges = NULL;
        *nm = 0;
    }
    return rc;
}

/* ---- training --------------------------------------------------------------------------- */

typedef struct {
    int *v;
    int n, cap;
} ivec;

static int iv_push(ivec *a, int x)
{
    if (a->n == a->cap) {
        int nc = a->cap ? a->cap * 2 : 4;
        int *q = mem_realloc(a->v, (size_t)nc * sizeof *q);
        if (!q) return err_set(ERR_NOMEM, "out of memory");
        a->v = q;
        a->cap = nc;
    }
    a->v[a->n++] = x;
    return OK;
}

typedef struct {
    long count;
    int a, b;
} hent;

typedef struct {
    /* words (distinct pieces): symbols in one pool, shrinking in place as merges apply */
    size_t *woff;
    int *wlen;
    long *wcount;
    int *wstamp;
    int *sym;
    size_t nwords;
    /* pairs */
    uint64_t *pkey;   /* (a << 32 | b), UINT64_MAX = empty */
    int *pidx;        /* slot -> pair index */
    size_t pmask, npairs, pcap;
    long *pcount, *pold;
    int *pstamp, *pa, *pb;
    ivec *pwords;     /* words that contain (or once contained) the pair */
    hent *heap;
    size_t nheap, hcap;
    /* tokens */
    buf tbytes;
    size_t *toff;
    int *tlen;
    int ntok, tcap;
} trainer;

static int pair_less(const hent *x, const hent *y) /* x ranks below y in the max-heap */
{
    if (x->count != y->count) return x->count < y->count;
    if (x->a != y->a) return x->a > y->a;
    return x->b > y->b;
}

static int heap_push(trainer *T, long count, int a, int b)
{
    if (T->nheap == T->hcap) {
        size_t nc = T->hcap ? T->hcap * 2 : 4096;
        hent *q = mem_realloc(T->heap, nc * sizeof *q);
        if (!q) return err_set(ERR_NOMEM, "out of memory");
        T->heap = q;
        T->hcap = nc;
    }
    size_t i = T->nheap++;
    hent e = {count, a, b};
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!pair_less(&T->heap[p], &e)) break;
        T->heap[i] = T->heap[p];
        i = p;
    }
    T->heap[i] = e;
    return OK;
}

static hent heap_pop(trainer *T)
{
    hent top = T->heap[0], e = T->heap[--T->nheap];
    size_t i = 0, n = T->nheap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && pair_less(&T->heap[c], &T->heap[c + 1])) c++;
        if (!pair_less(&e, &T->heap[c])) break;
        T->heap[i] = T->heap[c];
        i = c;
    }
    if (n) T->heap[i] = e;
    return top;
}


static int pair_grow(trainer *T)
{
    size_t cap = (T->pmask + 1) * 2;
    uint64_t *k = mem_alloc(cap * sizeof *k);
    int *ix = mem_alloc(cap * sizeof *ix);
    if (!k || !ix) {
        mem_free(k);
        mem_free(ix);
        return err_set(ERR_NOMEM, "out of memory");
    }
    memset(k, 0xff, cap * sizeof *k);
    for (size_t i = 0; i <= T->pmask; i++) {
        if (T->pkey[i] == UINT64_MAX) continue;
        size_t j = hash_slot(T->pkey[i], cap - 1);
        while (k[j] != UINT64_MAX) j = (j + 1) & (cap - 1);
        k[j] = T->pkey[i];
        ix[j] = T->pidx[i];
    }
    mem_free(T->pkey);
    mem_free(T->pidx);
    T->pkey = k;
    T->pidx = ix;
    T->pmask = cap - 1;
    return OK;
}

/* Index of pair (a, b), created with count 0 when absent; -1 on OOM. */
static int pair_get(trainer *T, int a, int b)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t i = hash_slot(key, T->pmask);
    while (T->pkey[i] != UINT64_MAX) {
        if (T->pkey[i] == key) return T->pidx[i];
        i = (i + 1) & T->pmask;
    }
    if ((T->npairs + 1) * 2 > T->pmask + 1) {
        if (pair_grow(T)) return -1;
        return pair_get(T, a, b);
    }
    if (T->npairs == T->pcap) {
        size_t nc = T->pcap ? T->pcap * 2 : 4096;
        long *c = mem_realloc(T->pcount, nc * sizeof *c);
        if (c) T->pcount = c;
        long *o = mem_realloc(T->pold, nc * sizeof *o);
        if (o) T->pold = o;
        int *s = mem_realloc(T->pstamp, nc * sizeof *s);
        if (s) T->pstamp = s;
        ivec *w = mem_realloc(T->pwords, nc * sizeof *w);
        if (w) T->pwords = w;
        int *pa = mem_realloc(T->pa, nc * sizeof *pa);
        if (pa) T->pa = pa;
        int *pb = mem_realloc(T->pb, nc * sizeof *pb);
        if (pb) T->pb = pb;
        if (!c || !o || !s || !w || !pa || !pb) {
            err_set(ERR_NOMEM, "out of memory");
            return -1;
        }
        T->pcap = nc;
    }
    int p = (int)T->npairs++;
    T->pkey[i] = key;
    T->pidx[i] = p;
    T->pcount[p] = 0;
    T->pstamp[p] = 0;
    T->pa[p] = a;
    T->pb[p] = b;
    T->pwords[p] = (ivec){0};
    return p;
}

static int add_token(trainer *T, const char *s, size_t n)
{
    if (T->ntok == T->tcap) {
        int nc = T->tcap ? T->tcap * 2 : 1024;
        size_t *o = mem_realloc(T->toff, (size_t)nc * sizeof *o);
        if (o) T->toff = o;
        int *l = mem_realloc(T->tlen, (size_t)nc * sizeof *l);
        if (l) T->tlen = l;
        if (!o || !l) return err_set(ERR_NOMEM, "out of memory");
        T->tcap = nc;
    }
    T->toff[T->ntok] = T->tbytes.n;
    T->tlen[T->ntok] = (int)n;
    T->ntok++;
    return buf_put(&T->tbytes, s, n);
}

static void trainer_free(trainer *T)
{
    mem_free(T->woff);
    mem_free(T->wlen);
    mem_free(T->wcount);
    mem_free(T->wstamp);
    mem_free(T->sym);
    mem_free(T->pkey);
    mem_free(T->pidx);
    mem_free(T->pcount);
    mem_free(T->pold);
    mem_free(T->pstamp);
    mem_free(T->pa);
    mem_free(T->pb);
    for (size_t i = 0; i < T->npairs; i++) mem_free(T->pwords[i].v);
    mem_free(T->pwords);
    mem_free(T->heap);
    mem_free(T->tbytes.p);
    mem_free(T->toff);
    mem_free(T->tlen);
}

typedef struct {
    strmap words;
    long *counts;
    size_t ccap;
    size_t pieces;
} count_ctx;

static int count_piece(const char *p, size_t n, int raw, void *user)
{
    count_ctx *c = user;
    c->pieces++;
    if (raw || n < 2) return OK; /* no pairs inside */
    int id, added;
    if (sm_get_or_add(&c->words, p, n, (int)c->words.count, &id, &added)) return ERR_NOMEM;
    if (added) {
        if ((size_t)id >= c->ccap) {
            size_t nc = c->ccap ? c->ccap * 2 : 65536;
            long *q = mem_realloc(c->counts, nc * sizeof *q);
            if (!q) return err_set(ERR_NOMEM, "out of memory");
            c->counts = q;
            c->ccap = nc;
        }
        c->counts[id] = 0;
    }
    c->counts[id]++;
    return OK;
}

/* Track a pair whose count changes in this merge step. */
static inline int touch(trainer *T, int p, int stamp, ivec *touched)
{
    if (T->pstamp[p] == stamp) return OK;
    T->pstamp[p] = stamp;
    T->pold[p] = T->pcount[p];
    return iv_push(touched, p);
}

/* Reading: every document of paths[npaths] split into pieces, the distinct pieces (words) and
 * their counts into *cc (the caller frees it, also on an error); counts into *st. */
static int stop_asked(const bpe_train_opts *opt)
{
    return opt->stop && *opt->stop ? err_set(ERR_ABORTED, "interrupted; nothing written") : OK;
}

static int count_corpus(const char *const *paths, int npaths, const bpe_train_opts *opt,
                        count_ctx *cc, bpe_train_stats *st)
{
    tok_splitter *sp = NULL;
    int rc = sm_init(&cc->words, 1 << 16);
    if (!rc) rc = tok_splitter_new(&sp);
    progress pr;
    progress_begin(&pr, "bpe-train: reading", 0, "doc");
    for (int f = 0; f < npaths && !rc; f++) {
        corpus_reader *r;
        if ((rc = corpus_open(&r, paths[f], NULL))) break;
        corpus_doc *d;
        while (!(rc = corpus_next(r, &d)) && d) {
            st->docs++;
            st->bytes += d->len;
            rc = tok_split(sp, d->text, d->len, count_piece, cc);
            corpus_doc_free(d);
            if (rc) {
                if (rc == ERR_NOMEM) err_set(ERR_NOMEM, "out of memory counting pieces");
                break;
            }
            progress_update(&pr, (double)st->docs, "%zu pieces", cc->pieces);
            if ((rc = stop_asked(opt))) break;
        }
        corpus_close(r);
    }
    progress_end(&pr);
    tok_splitter_free(sp);
    st->pieces = cc->pieces;
    st->distinct_pieces = cc->words.count;
    return rc;
}

/* The trainer's start from the counted words: each word's symbols (its bytes), the 256 byte
 * tokens, *toks (token text -> id; the caller frees it unless this fails), every adjacent pair's
 * count and the words holding it, and the heap of pairs. */
static int trainer_init(trainer *T, const count_ctx *cc, strmap *toks)
{
    /* words: symbols are token ids; ids 0..255 are the bytes themselves */
    T->nwords = cc->words.count;
    size_t total = cc->words.keys.n;
    T->woff = mem_alloc((T->nwords + 1) * sizeof *T->woff);
    T->wlen = mem_alloc((T->nwords + 1) * sizeof *T->wlen);
    T->wcount = mem_alloc((T->nwords + 1) * sizeof *T->wcount);
    T->wstamp = mem_calloc(T->nwords + 1, sizeof *T->wstamp);
    T->sym = mem_alloc((total + 1) * sizeof *T->sym);
    T->pkey = mem_alloc(4096 * sizeof *T->pkey);
    T->pidx = mem_alloc(4096 * sizeof *T->pidx);
    if (!T->woff || !T->wlen || !T->wcount || !T->wstamp || !T->sym || !T->pkey || !T->pidx)
        return err_set(ERR_NOMEM, "out of memory");
    memset(T->pkey, 0xff, 4096 * sizeof *T->pkey);
    T->pmask = 4095;
    for (size_t i = 0; i <= cc->words.mask; i++) {
        if (!cc->words.h[i]) continue;
        int w = cc->words.val[i];
        T->woff[w] = cc->words.off[i];
        T->wlen[w] = (int)cc->words.len[i];
        T->wcount[w] = cc->counts[w];
        const unsigned char *s = (const unsigned char *)cc->words.keys.p + cc->words.off[i];
        for (uint32_t k = 0; k < cc->words.len[i]; k++) T->sym[T->woff[w] + k] = s[k];
    }
    int rc = OK;
    for (int b = 0; b < 256 && !rc; b++) {
        char c = (char)b;
        rc = add_token(T, &c, 1);
    }
    if (!rc) rc = sm_init(toks, 1 << 14);
    if (rc) return rc;
    for (int b = 0; b < 256 && !rc; b++) {
        char c = (char)b;
        int dummy, added;
        rc = sm_get_or_add(toks, &c, 1, b, &dummy, &added);
    }
    /* initial pair counts */
    for (size_t w = 0; w < T->nwords && !rc; w++) {
        const int *s = T->sym + T->woff[w];
        for (int i = 0; i + 1 < T->wlen[w]; i++) {
            int p = pair_get(T, s[i], s[i + 1]);
            if (p < 0) { rc = ERR_NOMEM; break; }
            T->pcount[p] += T->wcount[w];
            ivec *pw = &T->pwords[p];
            if (!(pw->n && pw->v[pw->n - 1] == (int)w) && (rc = iv_push(pw, (int)w))) break;
        }
    }
    for (size_t q = 0; q < T->npairs && !rc; q++) rc = heap_push(T, T->pcount[q], T->pa[q], T->pb[q]);
    if (rc) sm_free(toks);
    return rc;
}

/* The merge loop: pop the most frequent pair, add its token and merge, rewrite the words that
 * hold it and re-count their pairs, until opt->vocab_size - 1 tokens, a pair count below
 * min_freq or no pairs. The merges so far are in *ms[*nm] (the caller frees them), also on an
 * error. */
static int merge_loop(trainer *T, strmap *toks, const bpe_train_opts *opt, bpe_merge **ms, size_t *nm,
                      bpe_train_stats *st)
{
    int target_tokens = opt->vocab_size - 1; /* <|endoftext|> comes last */
    int stamp = 0, rc = OK;
    size_t mcap = 0;
    ivec touched = {0};
    progress pr;
    progress_begin(&pr, "bpe-train: merging", target_tokens - 256, "merge");
    buf nb = {0};
    while (T->ntok < target_tokens && T->nheap && !rc) {
        if ((rc = stop_asked(opt))) break;
        hent e = heap_pop(T);
        int p = pair_get(T, e.a, e.b);
        if (p < 0) { rc = ERR_NOMEM; break; }
        if (T->pcount[p] != e.count || e.count <= 0) continue; /* stale heap entry */
        if (e.count < opt->min_freq) break;
        int A = e.a, B = e.b;
        nb.n = 0;
        rc = buf_put(&nb, T->tbytes.p + T->toff[A], (size_t)T->tlen[A]);
        if (!rc) rc = buf_put(&nb, T->tbytes.p + T->toff[B], (size_t)T->tlen[B]);
        int C, added;
        if (!rc) rc = sm_get_or_add(toks, nb.p, nb.n, T->ntok, &C, &added);
        if (!rc && added) rc = add_token(T, nb.p, nb.n);
        if (!rc) rc = add_merge(ms, nm, &mcap, T->tbytes.p + T->toff[A], (size_t)T->tlen[A],
                                T->tbytes.p + T->toff[B], (size_t)T->tlen[B]);
        if (rc) break;
        st->last_count = e.count;
        stamp++;
        touched.n = 0;
        ivec list = T->pwords[p];
        T->pwords[p] = (ivec){0};
        for (int li = 0; li < list.n && !rc; li++) {
            int w = list.v[li];
            if (T->wstamp[w] == stamp) continue;
            T->wstamp[w] = stamp;
            int *s = T->sym + T->woff[w];
            int n = T->wlen[w];
            int has = 0;
            for (int i = 0; i + 1 < n; i++)
                if (s[i] == A && s[i + 1] == B) { has = 1; break; }
            if (!has) continue; /* stale: the word lost this pair to an earlier merge */
            long wc = T->wcount[w];
            for (int i = 0; i + 1 < n && !rc; i++) {
                int q = pair_get(T, s[i], s[i + 1]);
                if (q < 0 || touch(T, q, stamp, &touched)) { rc = ERR_NOMEM; break; }
                T->pcount[q] -= wc;
            }
            int j = 0;
            for (int i = 0; i < n;) {
                if (i + 1 < n && s[i] == A && s[i + 1] == B) { s[j++] = C; i += 2; }
                else s[j++] = s[i++];
            }
            T->wlen[w] = n = j;
            for (int i = 0; i + 1 < n && !rc; i++) {
                int q = pair_get(T, s[i], s[i + 1]);
                if (q < 0 || touch(T, q, stamp, &touched)) { rc = ERR_NOMEM; break; }
                T->pcount[q] += wc;
                ivec *pw = &T->pwords[q];
                if ((s[i] == C || s[i + 1] == C) && !(pw->n && pw->v[pw->n - 1] == w))
                    rc = iv_push(pw, w);
            }
        }
        mem_free(list.v);
        for (int k = 0; k < touched.n && !rc; k++) {
            int q = touched.v[k];
            if (T->pcount[q] != T->pold[q] && T->pcount[q] > 0)
                rc = heap_push(T, T->pcount[q], T->pa[q], T->pb[q]);
        }
        if (rc) break;
        progress_update(&pr, (double)(T->ntok - 256), "count %ld", e.count);
    }
    progress_end(&pr);
    mem_free(nb.p);
    mem_free(touched.v);
    return rc;
}

/* The phases: count_corpus (read_s), trainer_init and merge_loop (train_s). */
int bpe_train(const char *const *paths, int npaths, const bpe_train_opts *opt, bpe_merge **merges,
              size_t *nmerges, bpe_train_stats *st)
{
    *merges = NULL;
    *nmerges = 0;
    memset(st, 0, sizeof *st);
    if (opt->vocab_size < 257)
        return err_set(ERR_ARG, "vocabulary size %d is too small (256 byte tokens + <|endoftext|>)",
                       opt->vocab_size);
    if (opt->min_freq < 1) return err_set(ERR_ARG, "min-freq must be >= 1");
    double t0 = now_seconds();
    count_ctx cc = {0};
    int rc = count_corpus(paths, npaths, opt, &cc, st);
    /* a corpus without a byte of text trained a tokenizer of byte tokens alone, exit 0 (audit) */
    if (!rc && st->bytes == 0)
        rc = err_set(ERR_FORMAT, "%s%s: no text to train on", paths[0], npaths > 1 ? " (and the other inputs)" : "");
    st->read_s = now_seconds() - t0;
    t0 = now_seconds();

    trainer T = {0};
    bpe_merge *ms = NULL;
    size_t nm = 0;
    strmap toks;
    if (!rc && !(rc = trainer_init(&T, &cc, &toks))) {
        rc = merge_loop(&T, &toks, opt, &ms, &nm, st);
        sm_free(&toks);
    }
    trainer_free(&T);
    sm_free(&cc.words);
    mem_free(cc.counts);
    st->train_s = now_seconds() - t0;
    if (rc) {
        if (rc == ERR_NOMEM) err_set(ERR_NOMEM, "out of memory training BPE");
        bpe_merges_free(ms, nm);
        return rc;
    }
    st->merges = nm;
    *merges = ms;
    *nmerges = nm;
    return OK;
}

int bpe_train_run(const bpe_run_opts *o, bpe_train_stats *st)
{
    static const char *const names[2] = {"encoder.json", "vocab.bpe"};
    for (int i = 0; i < 2 && !o->force; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", o->out, names[i]);
        if (access(p, F_OK) == 0)
            return err_set(ERR_ARG, "%s already holds a tokenizer (%s): give another -o, or --force "
                           "to replace it", o->out, names[i]);
    }
    bpe_merge *m;
    size_t nm;
    int rc = bpe_train(o->paths, o->npaths, &o->train, &m, &nm, st);
    if (rc) return rc;
    struct timespec cpu;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu); /* steadier than wall time on a busy machine */
    st->cpu_s = (double)cpu.tv_sec + 1e-9 * (double)cpu.tv_nsec;
    rc = bpe_write(o->out, m, nm);
    bpe_merges_free(m, nm);
    return rc;
}
