/* tokenizer.c - GPT-2 byte-level BPE: pre-tokenizer (PCRE2 JIT), merges by rank, word cache. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "model/tokenizer.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <pcre2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/err.h"
#include "common/fileio.h"
#include "common/hash.h"
#include "common/json.h"
#include "common/mem.h"
#include "common/utf8.h"

/* JavaScript's \s (ECMA-262 WhiteSpace + LineTerminator), which the reference encoder uses. */
#define WS "\\t\\n\\x0B\\f\\r\\p{Zs}\\x{2028}\\x{2029}\\x{FEFF}"
const char tok_pattern[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+"
                           "|[" WS "]+(?![^" WS "])|[" WS "]+";

#define SPECIAL_EOT "<|endoftext|>"
#define CACHE_MAX_WORD 128      /* longer pieces are not cached */
#define CACHE_MAX_ENTRIES (1u << 17)
#ifndef BPE_LONG
#define BPE_LONG 128 /* longer pieces use the heap version of the merge loop */
#endif

/* ---- byte <-> unicode alphabet ---------------------------------------------------------- */
/* GPT-2's bytes_to_unicode: the 188 printable Latin-1 bytes (33..126, 161..172, 174..255) stand
 * for themselves; the other 68 (0..32, 127..160, 173) map to U+0100.. in byte order. */

static int printable(unsigned b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; }

unsigned tok_byte_to_unicode(unsigned char b)
{
    if (printable(b)) return b;
    return 256 + (b <= 32 ? b : b <= 160 ? 33 + (b - 127u) : 67u);
}

int tok_unicode_to_byte(uint32_t cp)
{
    if (cp < 256) return printable(cp) ? (int)cp : -1;
    if (cp >= 256 + 68) return -1;
    unsigned i = cp - 256;
    return i < 33 ? (int)i : i < 67 ? (int)(127 + i - 33) : 173;
}

void tok_byte_order(unsigned char order[256])
{
    int k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (unsigned b = 0; b < 256; b++)
            if (printable(b) == !pass) order[k++] = (unsigned char)b;
}

long tok_alphabet_decode(const char *s, size_t n, char *out)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    long o = 0;
    while (i < n) {
        uint32_t cp;
        size_t k = utf8_decode(u + i, n - i, &cp);
        int b = k ? tok_unicode_to_byte(cp) : -1;
        if (b < 0) return -1;
        out[o++] = (char)b;
        i += k;
    }
    return o;
}

/* ---- pre-tokenizer ---------------------------------------------------------------------- */

struct tok_splitter {
    pcre2_code *re;
    pcre2_match_data *md;
    pcre2_match_context *mc;
    pcre2_jit_stack *js;
    int jit;
};

void tok_splitter_free(tok_splitter *s)
{
    if (!s) return;
    pcre2_match_data_free(s->md);
    pcre2_match_context_free(s->mc);
    pcre2_jit_stack_free(s->js);
    pcre2_code_free(s->re);
    mem_free(s);
}

int tok_splitter_new(tok_splitter **out)
{
    *out = NULL;
    tok_splitter *s = mem_calloc(1, sizeof *s);
    if (!s) return err_set(ERR_NOMEM, "out of memory");
    int ec;
    PCRE2_SIZE eo;
    s->re = pcre2_compile((PCRE2_SPTR)tok_pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                          &ec, &eo, NULL);
    if (!s->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        tok_splitter_free(s);
        return err_set(ERR_FORMAT, "PCRE2 cannot compile the GPT-2 pattern at %zu: %s", (size_t)eo,
                       (char *)msg);
    }
    s->md = pcre2_match_data_create_from_pattern(s->re, NULL);
    s->mc = pcre2_match_context_create(NULL);
    if (!s->md || !s->mc) {
        tok_splitter_free(s);
        return err_set(ERR_NOMEM, "out of memory");
    }
    /* JIT when available (about 3x faster); the interpreter is the fallback. The pattern needs
     * little stack, but a larger JIT stack keeps very long runs safe. */
    if (pcre2_jit_compile(s->re, PCRE2_JIT_COMPLETE) == 0) {
        s->js = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, NULL);
        if (s->js) {
            pcre2_jit_stack_assign(s->mc, NULL, s->js);
            s->jit = 1;
        }
    }
    *out = s;
    return OK;
}

int tok_split(tok_splitter *s, const char *text, size_t len, tok_piece_fn fn, void *user)
{
    const unsigned char *u = (const unsigned char *)text;
    size_t pos = 0;
    while (pos < len) {
        size_t v = utf8_valid_prefix(u + pos, len - pos);
        /* Each valid run is matched as a subject of its own, so an invalid byte acts like the
         * end of the text (the pattern has no lookbehind; (?!\S) succeeds at the end). */
        size_t off = 0;
        while (off < v) {
            int rc = s->jit ? pcre2_jit_match(s->re, u + pos, v, off, 0, s->md, s->mc)
                            : pcre2_match(s->re, u + pos, v, off, PCRE2_NO_UTF_CHECK, s->md, s->mc);
            if (rc <= 0) {
                PCRE2_UCHAR msg[256];
                pcre2_get_error_message(rc, msg, sizeof msg);
                return err_set(ERR_FORMAT, "pre-tokenizer failed at byte %zu: %s", pos + off,
                               (char *)msg);
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
            /* every character matches some alternative, so matches are contiguous */
            if (ov[0] != off || ov[1] <= off)
                return err_set(ERR_FORMAT, "pre-tokenizer: unexpected match at byte %zu", pos + off);
            int r = fn(text + pos + off, ov[1] - off, 0, user);
            if (r) return r;
            off = ov[1];
        }
        pos += v;
        while (pos < len && !utf8_len(u + pos, len - pos)) {
            int r = fn(text + pos, 1, 1, user);
            if (r) return r;
            pos++;
        }
    }
    return OK;
}

/* ---- tokenizer ------------------------------------------------------------------------- */

typedef struct {
    uint64_t h;
    uint32_t kpos, klen, vpos, vlen;
} cache_ent;

struct tok_tokenizer {
    int nvocab;
    char *pool;          /* token bytes */
    size_t *toff;        /* [nvocab] offset into pool */
    uint32_t *tlen;      /* [nvocab] */
    unsigned char *used; /* [nvocab] id present in the vocabulary */
    int byte_id[256];
    int eot;
    /* merges: open addressing on (a << 32 | b) */
    uint64_t *mkey;
    int32_t *mrank, *mres;
    size_t mmask;
    int heap_ok; /* bpe_long gives bpe()'s ids for this merge list (merges_ordered) */
    tok_splitter *sp;
    /* word cache: piece bytes -> ids */
    cache_ent *ctab;
    size_t cmask, ccount;
    char *ckeys;
    size_t cklen, ckcap;
    int *cids;
    size_t cvlen, cvcap;
    /* BPE scratch */
    int *sym, *tmp, *rk;
    size_t scap;
};

#define MKEY_EMPTY UINT64_MAX


static inline int merge_find(const tok_tokenizer *t, int a, int b, int *res)
{
    uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (size_t i = hash_slot(k, t->mmask);; i = (i + 1) & t->mmask) {
        if (t->mkey[i] == k) {
            *res = t->mres[i];
            return t->mrank[i];
        }
        if (t->mkey[i] == MKEY_EMPTY) return INT_MAX;
    }
}

static uint64_t fnv(const char *p, size_t n)
{
    return hash_fnv1a(HASH_FNV1A_INIT_TOK, p, n) | 1; /* 0 marks an empty cache slot */
}

void tok_free(tok_tokenizer *t)
{
    if (!t) return;
    mem_free(t->pool);
    mem_free(t->toff);
    mem_free(t->tlen);
    mem_free(t->used);
    mem_free(t->mkey);
    mem_free(t->mrank);
    mem_free(t->mres);
    tok_splitter_free(t->sp);
    mem_free(t->ctab);
    mem_free(t->ckeys);
    mem_free(t->cids);
    mem_free(t->sym);
    mem_free(t->tmp);
    mem_free(t->rk);
    mem_free(t);
}

int tok_vocab_size(const tok_tokenizer *t) { return t->nvocab; }
int tok_eot(const tok_tokenizer *t) { return t->eot; }

int tok_check_model(const tok_tokenizer *t, const char *tok_name, int model_vocab,
                    const char *model_name)
{
    if (t->nvocab <= model_vocab) return OK;
    /* the hint only where a tokenizer other than the model's own was given */
    int other = tok_name && model_name && strcmp(tok_name, model_name);
    return err_set(ERR_SHAPE, "tokenizer%s%s has %d ids but %s%s only %d%s", tok_name ? " " : "",
                   tok_name ? tok_name : "", t->nvocab, model_name ? "model " : "the model",
                   model_name ? model_name : "", model_vocab, other ? " (wrong --tokenizer?)" : "");
}

const char *tok_token_bytes(const tok_tokenizer *t, int id, size_t *len)
{
    if (id < 0 || id >= t->nvocab || !t->used[id]) return NULL;
    if (len) *len = t->tlen[id];
    return t->pool + t->toff[id];
}

/* ---- loading ----------------------------------------------------------------------------- */

/* file_read_text refuses a FIFO or directory at once instead of blocking or failing oddly;
 * the limit is far above any real vocabulary (GPT-2's files are 1 MB) */
static int read_file(const char *path, char **out, size_t *len)
{
    return file_read_text(path, (size_t)1 << 30, out, len);
}

/* bytes -> id map used while loading merges */
typedef struct {
    uint64_t *h;
    int *id;
    size_t mask;
} strmap;

static int strmap_find(const strmap *m, const tok_tokenizer *t, const char *s, size_t n)
{
    uint64_t h = fnv(s, n);
    for (size_t i = (h >> 1) & m->mask;; i = (i + 1) & m->mask) {
        if (!m->h[i]) return -1;
        int id = m->id[i];
        if (m->h[i] == h && t->tlen[id] == n && !memcmp(t->pool + t->toff[id], s, n)) return id;
    }
}

static int load_vocab(tok_tokenizer *t, const char *path, strmap *m)
{
    cJSON *root;
    int rc = json_read_object_file(path, "token -> id", (size_t)1 << 30, &root);
    if (rc) return rc;
    int maxid = -1, count = 0;
    size_t bytes = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, root)
    {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > 1e9 ||
            e->valuedouble != (double)(int)e->valuedouble) {
            /* e->string belongs to root: format the message before freeing it */
            rc = err_set(ERR_FORMAT, "%s: token '%.40s' has no valid integer id", path, e->string);
            cJSON_Delete(root);
            return rc;
        }
        if (e->valuedouble > 1e7) { /* the arrays are sized by the largest id */
            rc = err_set(ERR_FORMAT, "%s: token '%.40s' has id %d, above the largest this loader "
                         "takes (10000000)", path, e->string, e->valueint);
            cJSON_Delete(root);
            return rc;
        }
        if (e->valueint > maxid) maxid = e->valueint;
        bytes += strlen(e->string);
        count++;
    }
    if (count < 256) {
        cJSON_Delete(root);
        return err_set(ERR_FORMAT, "%s: only %d tokens (a byte-level BPE needs the 256 byte tokens)",
                       path, count);
    }
    t->nvocab = maxid + 1;
    t->pool = mem_alloc(bytes + 1);
    t->toff = mem_calloc((size_t)t->nvocab, sizeof *t->toff);
    t->tlen = mem_calloc((size_t)t->nvocab, sizeof *t->tlen);
    t->used = mem_calloc((size_t)t->nvocab, 1);
    size_t cap = 1;
    while (cap < (size_t)count * 2) cap <<= 1;
    m->h = mem_calloc(cap, sizeof *m->h);
    m->id = mem_calloc(cap, sizeof *m->id);
    m->mask = cap - 1;
    if (!t->pool || !t->toff || !t->tlen || !t->used || !m->h || !m->id) {
        cJSON_Delete(root);
        return err_set(ERR_NOMEM, "out of memory loading %s", path);
    }
    size_t p = 0;
    rc = OK;
    cJSON_ArrayForEach(e, root)
    {
        int id = e->valueint;
        size_t n = strlen(e->string);
        if (t->used[id]) {
            rc = err_set(ERR_FORMAT, "%s: id %d is used twice", path, id);
            break;
        }
        long k = tok_alphabet_decode(e->string, n, t->pool + p);
        int special = k < 0 || !strcmp(e->string, SPECIAL_EOT);
        if (special) {
            memcpy(t->pool + p, e->string, n); /* added tokens decode to their own text */
            k = (long)n;
        }
        t->toff[id] = p;
        t->tlen[id] = (uint32_t)k;
        t->used[id] = 1;
        p += (size_t)k;
        if (!strcmp(e->string, SPECIAL_EOT)) t->eot = id;
        if (special || strmap_find(m, t, t->pool + t->toff[id], (size_t)k) >= 0) continue;
        uint64_t h = fnv(t->pool + t->toff[id], (size_t)k);
        size_t i = (h >> 1) & m->mask;
        while (m->h[i]) i = (i + 1) & m->mask;
        m->h[i] = h;
        m->id[i] = id;
        if (k == 1) t->byte_id[(unsigned char)t->pool[t->toff[id]]] = id;
    }
    cJSON_Delete(root);
    if (rc) return rc;
    for (int b = 0; b < 256; b++)
        if (t->byte_id[b] < 0)
            return err_set(ERR_FORMAT, "%s: no token for byte 0x%02x (not a byte-level BPE vocabulary)",
                           path, b);
    return OK;
}

int tok_merges_parse(const char *txt, size_t tn, const char *path, tok_merge_fn fn, void *user)
{
    int rc = OK;
    size_t pos = 0;
    long lineno = 0, rank = 0;
    while (pos < tn && !rc) {
        size_t e = pos;
        while (e < tn && txt[e] != '\n') e++;
        const char *line = txt + pos;
        size_t ln = e - pos;
        pos = e + 1;
        lineno++;
        if (ln && line[ln - 1] == '\r') ln--;
        if (lineno == 1 && ln >= 3 && !memcmp(line, "\xef\xbb\xbf", 3)) { /* a UTF-8 BOM */
            line += 3;
            ln -= 3;
        }
        if (lineno == 1 && ln >= 8 && !memcmp(line, "#version", 8)) continue;
        if (memchr(line, 0, ln)) { /* invisible in the message below, which it would cut */
            rc = err_set(ERR_FORMAT, "%s:%ld: a NUL byte in a merge line", path, lineno);
            break;
        }
        /* the reference ranks merges by line, so a blank line still takes a rank */
        long r = rank++;
        size_t a0 = 0;
        while (a0 < ln && (line[a0] == ' ' || line[a0] == '\t')) a0++;
        if (a0 == ln) continue;
        size_t a1 = a0;
        while (a1 < ln && line[a1] != ' ' && line[a1] != '\t') a1++;
        size_t b0 = a1;
        while (b0 < ln && (line[b0] == ' ' || line[b0] == '\t')) b0++;
        size_t b1 = b0;
        while (b1 < ln && line[b1] != ' ' && line[b1] != '\t') b1++;
        size_t z = b1;
        while (z < ln && (line[z] == ' ' || line[z] == '\t')) z++;
        if (b0 == b1 || z != ln) {
            rc = err_set(ERR_FORMAT, "%s:%ld: expected two tokens separated by a space", path, lineno);
            break;
        }
        rc = fn(user, path, lineno, r, line + a0, a1 - a0, line + b0, b1 - b0);
    }
    return rc;
}

int tok_merges_read(const char *path, tok_merge_fn fn, void *user)
{
    char *txt;
    size_t tn;
    int rc = read_file(path, &txt, &tn);
    if (rc) return rc;
    rc = tok_merges_parse(txt, tn, path, fn, user);
    mem_free(txt);
    return rc;
}

typedef struct {
    tok_tokenizer *t;
    const strmap *m;
    char *buf; /* room for the bytes of any line */
} merge_load;

static int add_merge_rank(void *user, const char *path, long lineno, long r, const char *a,
                          size_t alen, const char *b, size_t blen)
{
    merge_load *L = user;
    tok_tokenizer *t = L->t;
    const strmap *m = L->m;
    char *buf = L->buf;
    long ka = tok_alphabet_decode(a, alen, buf);
    long kb = ka < 0 ? -1 : tok_alphabet_decode(b, blen, buf + ka);
    int ia = ka < 0 ? -1 : strmap_find(m, t, buf, (size_t)ka);
    int ib = kb < 0 ? -1 : strmap_find(m, t, buf + ka, (size_t)kb);
    int ir = ia < 0 || ib < 0 ? -1 : strmap_find(m, t, buf, (size_t)(ka + kb));
    if (ir < 0) {
        size_t ln = (size_t)(b + blen - a);
        return err_set(ERR_FORMAT, "%s:%ld: merge '%.*s' uses or makes a token missing from the "
                       "vocabulary", path, lineno, (int)(ln > 60 ? 60 : ln), a);
    }
    uint64_t k = (uint64_t)(uint32_t)ia << 32 | (uint32_t)ib;
    size_t i = hash_slot(k, t->mmask);
    while (t->mkey[i] != MKEY_EMPTY && t->mkey[i] != k) i = (i + 1) & t->mmask;
    /* a repeated merge takes its later rank, as in the reference (dict of pairs -> rank) */
    t->mkey[i] = k;
    t->mrank[i] = (int32_t)r;
    t->mres[i] = ir;
    return OK;
}

/* Whether every merge's parts are bytes or made only by merges of lower rank (GPT-2's and
 * bpe-train's lists are): then no merge creates a pair that outranks it, and bpe_long, which
 * takes one occurrence at a time, gives bpe()'s ids. A list that breaks it (an audit's "ab a"
 * before "a b") tokenized a piece differently by its length; such lists take bpe() always. */
static int merges_ordered(const tok_tokenizer *t, int *ok)
{
    int32_t *made = mem_alloc((size_t)t->nvocab * sizeof *made);
    if (!made) return err_set(ERR_NOMEM, "out of memory");
    for (int i = 0; i < t->nvocab; i++) made[i] = -1;
    for (size_t i = 0; i <= t->mmask; i++)
        if (t->mkey[i] != MKEY_EMPTY && t->mrank[i] > made[t->mres[i]]) made[t->mres[i]] = t->mrank[i];
    *ok = 1;
    for (size_t i = 0; i <= t->mmask && *ok; i++) {
        if (t->mkey[i] == MKEY_EMPTY) continue;
        int a = (int)(t->mkey[i] >> 32), b = (int)(uint32_t)t->mkey[i];
        if (made[a] >= t->mrank[i] || made[b] >= t->mrank[i]) *ok = 0;
    }
    mem_free(made);
    return OK;
}

/* The merge table from path: one slot per line at most (a power of two, half full). */
static int load_merges(tok_tokenizer *t, const char *path, const strmap *m)
{
    char *txt;
    size_t tn;
    int rc = read_file(path, &txt, &tn);
    if (rc) return rc;
    size_t nlines = 1;
    for (size_t i = 0; i < tn; i++) nlines += txt[i] == '\n';
    size_t cap = 1;
    while (cap < nlines * 2) cap <<= 1;
    t->mkey = mem_alloc(cap * sizeof *t->mkey);
    t->mrank = mem_alloc(cap * sizeof *t->mrank);
    t->mres = mem_alloc(cap * sizeof *t->mres);
    merge_load L = {t, m, mem_alloc(tn + 1)};
    if (!t->mkey || !t->mrank || !t->mres || !L.buf) {
        mem_free(txt);
        mem_free(L.buf);
        return err_set(ERR_NOMEM, "out of memory loading %s", path);
    }
    memset(t->mkey, 0xff, cap * sizeof *t->mkey);
    t->mmask = cap - 1;
    rc = tok_merges_parse(txt, tn, path, add_merge_rank, &L);
    mem_free(txt);
    mem_free(L.buf);
    if (!rc) rc = merges_ordered(t, &t->heap_ok);
    return rc;
}

static int file_exists(const char *dir, const char *name, char *path, size_t cap)
{
    if (path_join(path, cap, dir, name)) return 0; /* too long to name an existing file */
    /* exists, whatever it is: opening it here would block on a FIFO; read_file then says what
       is wrong with it */
    struct stat st;
    return stat(path, &st) == 0;
}

int tok_load(tok_tokenizer **out, const char *dir)
{
    *out = NULL;
    char vpath[4096], mpath[4096];
    if (!(file_exists(dir, "encoder.json", vpath, sizeof vpath) &&
          file_exists(dir, "vocab.bpe", mpath, sizeof mpath)) &&
        !(file_exists(dir, "vocab.json", vpath, sizeof vpath) &&
          file_exists(dir, "merges.txt", mpath, sizeof mpath)))
        return err_set(ERR_NOTFOUND, "%s: no tokenizer files (want encoder.json + vocab.bpe, or "
                       "vocab.json + merges.txt)", dir);
    tok_tokenizer *t = mem_calloc(1, sizeof *t);
    if (!t) return err_set(ERR_NOMEM, "out of memory");
    t->eot = -1;
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    strmap m = {0};
    int rc = load_vocab(t, vpath, &m);
    if (!rc) rc = load_merges(t, mpath, &m);
    mem_free(m.h);
    mem_free(m.id);
    if (!rc) rc = tok_splitter_new(&t->sp);
    if (!rc) {
        size_t cap = 1u << 14; /* grows with use: a small table stays in cache */
        t->ctab = mem_calloc(cap, sizeof *t->ctab);
        t->cmask = cap - 1;
        if (!t->ctab) rc = err_set(ERR_NOMEM, "out of memory");
    }
    if (rc) {
        tok_free(t);
        return rc;
    }
    *out = t;
    return OK;
}

/* ---- encoding ---------------------------------------------------------------------------- */

typedef struct {
    tok_tokenizer *t;
    const char *base;
    int *ids;
    size_t *offs;
    size_t n, cap;
    int want_offs;
} enc_ctx;

static int emit_reserve(enc_ctx *c, size_t k)
{
    if (c->n + k <= c->cap) return OK;
    size_t nc = (c->n + k) * 2 + 64;
    int *ni = mem_realloc(c->ids, nc * sizeof *ni);
    if (!ni) return err_set(ERR_NOMEM, "out of memory");
    c->ids = ni;
    if (c->want_offs) {
        size_t *no = mem_realloc(c->offs, nc * sizeof *no);
        if (!no) return err_set(ERR_NOMEM, "out of memory");
        c->offs = no;
    }
    c->cap = nc;
    return OK;
}

static void emit(enc_ctx *c, const int *ids, size_t k, size_t off)
{
    memcpy(c->ids + c->n, ids, k * sizeof *ids);
    if (c->want_offs)
        for (size_t i = 0; i < k; i++) {
            c->offs[c->n + i] = off;
            off += c->t->tlen[ids[i]];
        }
    c->n += k;
}

static int scratch(tok_tokenizer *t, size_t n)
{
    if (n <= t->scap) return OK;
    size_t nc = n * 2;
    mem_free(t->sym);
    mem_free(t->tmp);
    mem_free(t->rk);
    t->sym = mem_alloc(nc * sizeof *t->sym);
    t->tmp = mem_alloc(nc * sizeof *t->tmp);
    t->rk = mem_alloc(nc * sizeof *t->rk);
    t->scap = t->sym && t->tmp && t->rk ? nc : 0;
    return t->scap ? OK : err_set(ERR_NOMEM, "out of memory");
}

/* Merge the bytes of one piece by rank into t->sym; returns the number of symbols.
 * Each round takes the lowest-ranked adjacent pair and merges all its occurrences left to
 * right, exactly as the reference bpe() does. */
static size_t bpe(tok_tokenizer *t, const unsigned char *w, size_t n)
{
    int *s = t->sym, *rk = t->rk;
    for (size_t i = 0; i < n; i++) s[i] = t->byte_id[w[i]];
    size_t m = n;
    int dummy;
    for (size_t i = 0; i + 1 < m; i++) rk[i] = merge_find(t, s[i], s[i + 1], &dummy);
    while (m > 1) {
        int best = INT_MAX;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < m; i++)
            if (rk[i] < best) { best = rk[i]; bi = i; }
        if (best == INT_MAX) break;
        int a = s[bi], b = s[bi + 1], res = -1;
        merge_find(t, a, b, &res);
        size_t j = 0;
        for (size_t i = 0; i < m;) {
            if (i + 1 < m && s[i] == a && s[i + 1] == b) {
                s[j++] = res;
                i += 2;
            } else s[j++] = s[i++];
        }
        m = j;
        /* pairs left of the first merge are unchanged; from there on positions shifted */
        for (size_t i = bi ? bi - 1 : 0; i + 1 < m; i++) rk[i] = merge_find(t, s[i], s[i + 1], &dummy);
    }
    return m;
}

/* Long pieces (a minified file, a base64 blob): the same merges with a min-heap of
 * (rank, position) over a linked list, O(n log n) instead of O(n * merges). For merge lists
 * where every merge's parts are made by earlier merges (GPT-2's and bpe-train's are; load_merges
 * checks, and other lists never come here) this gives exactly the ids of bpe(): equal ranks are
 * the same pair, taken left to right. The hostile test file has long pieces checked against the
 * reference. Returns 0 when out of memory. */
typedef struct {
    int rank, pos, a, b;
} bpe_hent;

static int hent_less(const bpe_hent *x, const bpe_hent *y)
{
    return x->rank != y->rank ? x->rank < y->rank : x->pos < y->pos;
}

static void hpush(bpe_hent *h, size_t *n, bpe_hent e)
{
    size_t i = (*n)++;
    while (i > 0 && hent_less(&e, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = e;
}

static bpe_hent hpop(bpe_hent *h, size_t *n)
{
    bpe_hent top = h[0], e = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && hent_less(&h[c + 1], &h[c])) c++;
        if (!hent_less(&h[c], &e)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = e;
    return top;
}

static size_t bpe_long(tok_tokenizer *t, const unsigned char *w, size_t n)
{
    int *s = t->sym;
    int *nx = mem_alloc(n * sizeof *nx), *pv = mem_alloc(n * sizeof *pv);
    bpe_hent *h = mem_alloc(3 * n * sizeof *h); /* n - 1 initial pairs + 2 per merge */
    size_t hn = 0, m = 0;
    int res = -1;
    if (!nx || !pv || !h) goto out;
    for (size_t i = 0; i < n; i++) {
        s[i] = t->byte_id[w[i]];
        nx[i] = i + 1 < n ? (int)i + 1 : -1;
        pv[i] = (int)i - 1;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        int r = merge_find(t, s[i], s[i + 1], &res);
        if (r != INT_MAX) hpush(h, &hn, (bpe_hent){r, (int)i, s[i], s[i + 1]});
    }
    while (hn) {
        bpe_hent e = hpop(h, &hn);
        int p = e.pos, q = nx[p];
        if (s[p] != e.a || q < 0 || s[q] != e.b) continue; /* stale */
        merge_find(t, e.a, e.b, &res);
        s[p] = res;
        s[q] = -1;
        nx[p] = nx[q];
        if (nx[q] >= 0) pv[nx[q]] = p;
        int r;
        if (pv[p] >= 0 && (r = merge_find(t, s[pv[p]], s[p], &res)) != INT_MAX)
            hpush(h, &hn, (bpe_hent){r, pv[p], s[pv[p]], s[p]});
        if (nx[p] >= 0 && (r = merge_find(t, s[p], s[nx[p]], &res)) != INT_MAX)
            hpush(h, &hn, (bpe_hent){r, p, s[p], s[nx[p]]});
    }
    for (int i = 0; i >= 0; i = nx[i]) s[m++] = s[i];
out:
    mem_free(nx);
    mem_free(pv);
    mem_free(h);
    return m;
}

static void cache_clear(tok_tokenizer *t)
{
    memset(t->ctab, 0, (t->cmask + 1) * sizeof *t->ctab);
    t->ccount = 0;
    t->cklen = 0;
    t->cvlen = 0;
}

/* Double the cache table (load factor <= 1/2); on failure the old table stays. */
static int cache_grow(tok_tokenizer *t)
{
    size_t cap = (t->cmask + 1) * 2;
    cache_ent *nt = mem_calloc(cap, sizeof *nt);
    if (!nt) return ERR_NOMEM;
    for (size_t i = 0; i <= t->cmask; i++) {
        if (!t->ctab[i].h) continue;
        size_t j = (t->ctab[i].h >> 1) & (cap - 1);
        while (nt[j].h) j = (j + 1) & (cap - 1);
        nt[j] = t->ctab[i];
    }
    mem_free(t->ctab);
    t->ctab = nt;
    t->cmask = cap - 1;
    return OK;
}

static int on_piece(const char *p, size_t n, int raw, void *user)
{
    enc_ctx *c = user;
    tok_tokenizer *t = c->t;
    size_t off = (size_t)(p - c->base);
    const unsigned char *u = (const unsigned char *)p;
    if (raw || n == 1) {
        if (emit_reserve(c, 1)) return ERR_NOMEM;
        emit(c, &t->byte_id[u[0]], 1, off);
        return OK;
    }
    uint64_t h = 0;
    size_t slot = 0;
    if (n <= CACHE_MAX_WORD) {
        h = fnv(p, n);
        for (slot = (h >> 1) & t->cmask; t->ctab[slot].h; slot = (slot + 1) & t->cmask) {
            cache_ent *e = &t->ctab[slot];
            if (e->h == h && e->klen == n && !memcmp(t->ckeys + e->kpos, p, n)) {
                if (emit_reserve(c, e->vlen)) return ERR_NOMEM;
                emit(c, t->cids + e->vpos, e->vlen, off);
                return OK;
            }
        }
    }
    if (scratch(t, n)) return ERR_NOMEM;
    size_t m = n > BPE_LONG && t->heap_ok ? bpe_long(t, u, n) : 0;
    if (!m) m = bpe(t, u, n);
    if (emit_reserve(c, m)) return ERR_NOMEM;
    emit(c, t->sym, m, off);
    if (n > CACHE_MAX_WORD) return OK;
    if (t->ccount >= CACHE_MAX_ENTRIES) { /* bounded memory: start over */
        cache_clear(t);
        for (slot = (h >> 1) & t->cmask; t->ctab[slot].h; slot = (slot + 1) & t->cmask) {}
    } else if ((t->ccount + 1) * 2 > t->cmask + 1 && cache_grow(t) == OK) {
        for (slot = (h >> 1) & t->cmask; t->ctab[slot].h; slot = (slot + 1) & t->cmask) {}
    }
    if (t->cklen + n > t->ckcap) {
        size_t nc = (t->cklen + n) * 2 + 4096;
        char *nk = mem_realloc(t->ckeys, nc);
        if (!nk) return OK; /* the cache is an optimisation only */
        t->ckeys = nk;
        t->ckcap = nc;
    }
    if (t->cvlen + m > t->cvcap) {
        size_t nc = (t->cvlen + m) * 2 + 4096;
        int *nv = mem_realloc(t->cids, nc * sizeof *nv);
        if (!nv) return OK;
        t->cids = nv;
        t->cvcap = nc;
    }
    cache_ent *e = &t->ctab[slot];
    e->h = h;
    e->kpos = (uint32_t)t->cklen;
    e->klen = (uint32_t)n;
    e->vpos = (uint32_t)t->cvlen;
    e->vlen = (uint32_t)m;
    memcpy(t->ckeys + t->cklen, p, n);
    memcpy(t->cids + t->cvlen, t->sym, m * sizeof *t->sym);
    t->cklen += n;
    t->cvlen += m;
    t->ccount++;
    return OK;
}

int tok_encode(tok_tokenizer *t, const char *text, size_t len, int allow_special, int **ids,
               size_t **offsets, size_t *n)
{
    *ids = NULL;
    if (offsets) *offsets = NULL;
    *n = 0;
    enc_ctx c = {.t = t, .base = text, .want_offs = offsets != NULL};
    int rc = emit_reserve(&c, len / 3 + 16);
    size_t pos = 0;
    const size_t sl = sizeof SPECIAL_EOT - 1;
    while (!rc && pos < len) {
        size_t end = len;
        const char *sp = NULL;
        if (allow_special && t->eot >= 0) {
            sp = memmem(text + pos, len - pos, SPECIAL_EOT, sl);
            if (sp) end = (size_t)(sp - text);
        }
        rc = tok_split(t->sp, text + pos, end - pos, on_piece, &c);
        if (rc == ERR_NOMEM) rc = err_set(ERR_NOMEM, "out of memory encoding %zu bytes", len);
        if (rc || !sp) break;
        rc = emit_reserve(&c, 1);
        if (!rc) emit(&c, &t->eot, 1, end);
        pos = end + sl;
    }
    if (rc) {
        mem_free(c.ids);
        mem_free(c.offs);
        return rc;
    }
    *ids = c.ids;
    if (offsets) *offsets = c.offs;
    *n = c.n;
    return OK;
}

int tok_decode(const tok_tokenizer *t, const int *ids, size_t n, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->nvocab)
            return err_set(ERR_ARG, "token id %d at position %zu is not in the vocabulary (0..%d)",
                           ids[i], i, t->nvocab - 1);
        if (!t->used[ids[i]]) /* a gap in a hand-made vocabulary's ids (the range was named) */
            return err_set(ERR_ARG, "token id %d at position %zu is not in the vocabulary (no "
                           "token has that id)", ids[i], i);
        total += t->tlen[ids[i]];
    }
    char *b = mem_alloc(total + 1);
    if (!b) return err_set(ERR_NOMEM, "out of memory decoding %zu tokens", n);
    size_t p = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(b + p, t->pool + t->toff[ids[i]], t->tlen[ids[i]]);
        p += t->tlen[ids[i]];
    }
    b[p] = 0;
    *out = b;
    *len = p;
    return OK;
}
