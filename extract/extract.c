/* extract.c - the extraction runner (see extract.h): corpus -> tokens -> windows -> batches ->
 * hooked forward -> one store transaction per batch. */
#include <cblas.h>
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/checked.h"
#include "common/dist.h"
#include "common/err.h"
#include "common/hash.h"
#include "common/par.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "common/progress.h"
#include "common/utf8.h"
#include "corpus/corpus.h"
#include "extract/extract.h"
#include "model/gpt2.h"
#include "model/ops.h"
#include "model/tokenizer.h"
#include "store/store.h"

typedef struct {
    char name[128];
    int layer, width;
    store_hook sh;
    float *buf;    /* where the running forward writes: the hbuf of its batch */
    int B, T;      /* shape the hook saw */
    int fired;
    int64_t at_open; /* its activation rows from this corpus when the job opened */
} ext_hook;

/* A pending window of the current batch (document tokens copied, so the document may go). */
typedef struct {
    int64_t doc_id, start;
    int T;
} ext_win;

/* One batch in flight. A ring of them: while the compute thread runs the forward passes of the
 * queued ones, the main thread writes the activations of computed ones and fills the next. */
typedef struct {
    ext_win *win;
    int nwin, T, missing;
    int *ids;               /* [batch, ctx]; [B, T] contiguous once prepared */
    int64_t *bstart, *bend; /* [batch, ctx] byte spans (-1 for BOS) */
    char (*tags)[16];       /* [batch, ctx] */
    int64_t *seq_ids;       /* [batch] */
    unsigned char *have;    /* [nh, batch] activations already stored */
    float *hbuf[EXT_MAX_HOOKS]; /* [batch, ctx, width] per hook, filled by the forward */
    int fwd_rc;             /* set by the thread that computed it */
    int done;               /* computed, n_fwd not yet past it (under mu) */
    int by_main;            /* computed by the main thread (its model copy, m2) */
    double fwd_secs;
    char fwd_msg[ERR_MSG_MAX];
    /* Under mpirun -np N > 1: the rank computing the forward (0: this one); for another rank,
     * msg = {B, T, ids [B, T]} is sent to it (req until the send completes) and its hook
     * buffers come back into hbuf when the batch is written. */
    int owner;
    int *msg;               /* [2 + batch * ctx] */
    dist_req *req;
} ext_batch;

/* The messages of a distributed extract (rank 0 <-> the others). */
enum { EXT_TAG_BATCH = 11, EXT_TAG_RESULT = 12 };
typedef struct {
    int rc;
    double secs;
    char msg[ERR_MSG_MAX];
} ext_remote_status;

/* A batch message from rank 0: {windows, T, rank 0's OpenBLAS threads}, then windows x T ids;
 * {0, 0, 0} says the run is over, {0, 1, 0} that it was stopped. */
enum { EXT_MSG_HDR = 3 };

/* Batches in flight: filling, queued for the forward, computed but not yet written. Eight absorb
 * the main thread's uneven work (a commit's fsync of 32 MB takes ~30 ms, a new document to read
 * and tokenize) so the compute thread rarely waits for it (four let it idle 0.7 s in a 3 s run;
 * sixteen were no better than eight). */
#define EXT_RING 8
/* documents compared when the database may hold this corpus under another path (8 bytes each) */
#define EXT_DUP_DOCS 65536

struct ext_job {
    ext_opts o;
    char tokdir[4096], checksum[17];
    uint64_t *doc_sums;  /* the first n_doc_sums documents' text hashes (count_pass), for */
    int64_t n_doc_sums, doc_sums_cap; /* plan.dup_source */
    gpt2_model *m;
    tok_tokenizer *tok;
    store *s;
    int ctx, eot, nh;
    ext_hook h[EXT_MAX_HOOKS];
    int64_t model_id, run_id;
    ext_plan plan;
    ext_batch bt[EXT_RING];
    /* Batch numbers (slot = number % EXT_RING): n_fill is being filled; batches below n_ready
     * are queued, below n_take taken by a thread for their forward, below n_fwd computed, below
     * n_write written. mu/cv guard n_ready, n_take, n_fwd, the batches' done flags, quit. */
    int64_t n_fill, n_ready, n_take, n_fwd, n_write;
    /* The main thread's own copy of the model and hooks (NULL: none): while it waits for a
     * batch it computes queued ones nobody took yet (see write_next). */
    gpt2_model *m2;
    ext_hook h2[EXT_MAX_HOOKS];
    pthread_t worker;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int worker_on, quit, abandon; /* abandon: stop after the current forward, skip the queue */
    int stop_rank; /* rank 0: the first rank >0 that answered a batch "interrupted" (0: none) */
    int64_t dry_seq;      /* dry run: sequence ids handed out */
    int64_t n_dispatch;   /* batches with a forward to run, handed out round robin over ranks */
    int64_t pending_bytes; /* activation bytes written since the last commit */
    int64_t commit_bytes;  /* commit once this many are pending */
    double last_commit;
    int made_db; /* ext_open created the database file */
    store_mark mark; /* the store's largest ids before the setup added this run's rows */
    int64_t commits; /* transactions of this run committed (0: nothing of it stored yet) */
    int bf16;    /* the forward's matmuls in bf16 (o.precision resolved) */
    int ran;     /* ext_run was called (from then on the database is kept, for resuming) */
};

#define EXT_COMMIT_SECS 2.0

static double secs(void) { return now_seconds(); }

/* ---- options and validation ---------------------------------------------------------------- */
static int hook_list_msg(const gpt2_model *m, const char *bad)
{
    /* Names of layer 0 stand for every layer; the list stays short for deep models. */
    char list[900] = "";
    size_t len = 0;
    int n = gpt2_hook_count(m);
    for (int i = 0; i < n && len + 40 < sizeof list; i++) {
        const char *nm = gpt2_hook_name(m, i);
        if (!strncmp(nm, "blocks.", 7) && strncmp(nm, "blocks.0.", 9)) continue;
        if (strstr(nm, "attn_scores") || strstr(nm, "hook_pattern")) continue;
        if (!strncmp(nm, "blocks.0.", 9))
            len += (size_t)snprintf(list + len, sizeof list - len, "%sblocks.L.%s", len ? ", " : "", nm + 9);
        else len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "", nm);
    }
    return err_set(ERR_NOTFOUND, "unknown hook '%s' (valid, L = 0..%d: %s)", bad,
                   gpt2_cfg(m)->n_layer - 1, list);
}

static int hook_cb(const tensor_view *t, void *user)
{
    ext_hook *h = user;
    int64_t per = t->ndim >= 3 ? t->shape[0] * t->shape[1] : 0;
    /* an error of its own (the forward keeps a hook's code and message): a bare non-zero reads
       as ERR_ABORTED, which rank 0 takes for another rank's stop, not a failure */
    if (per <= 0 || tensor_numel(t) != per * h->width)
        return err_set(ERR_SHAPE, "hook %s delivered %lld values, not a multiple of its width %d",
                       h->name, (long long)tensor_numel(t), h->width);
    memcpy(h->buf, t->data, (size_t)tensor_numel(t) * sizeof(float));
    h->B = (int)t->shape[0];
    h->T = (int)t->shape[1];
    h->fired = 1;
    return 0;
}

static int parse_hooks(ext_job *j)
{
    const char *p = j->o.hooks;
    if (!p || !*p) return err_set(ERR_ARG, "no hook given (--hook NAME[,NAME...])");
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0 || n >= sizeof j->h[0].name)
            return err_set(ERR_ARG, "bad hook list '%s'", j->o.hooks);
        if (j->nh == EXT_MAX_HOOKS) return err_set(ERR_ARG, "more than %d hooks", EXT_MAX_HOOKS);
        ext_hook *h = &j->h[j->nh];
        memcpy(h->name, p, n);
        h->name[n] = 0;
        for (int i = 0; i < j->nh; i++)
            if (!strcmp(j->h[i].name, h->name)) return err_set(ERR_ARG, "hook %s given twice", h->name);
        int rc = gpt2_hook_token_info(j->m, h->name, &h->layer, &h->width);
        if (rc == ERR_NOTFOUND) return hook_list_msg(j->m, h->name);
        if (rc) return err_wrap(rc, "extract stores per-token points only");
        j->nh++;
        p += n;
        if (*p == ',') p++;
    }
    return OK;
}

/* ---- corpus passes ------------------------------------------------------------------------- */
typedef struct {
    corpus_doc *d;
    int *ids;
    size_t *off;
    size_t n;
    const char **tag; /* [n] POS tag per token or NULL */
} ext_doc;

static void doc_free(ext_doc *x)
{
    corpus_doc_free(x->d);
    mem_free(x->ids);
    mem_free(x->off);
    mem_free(x->tag);
    memset(x, 0, sizeof *x);
}

static int doc_tokenize(ext_job *j, corpus_doc *d, ext_doc *x, int want_detail)
{
    memset(x, 0, sizeof *x);
    x->d = d;
    int rc = tok_encode(j->tok, d->text, d->len, 0, &x->ids, want_detail ? &x->off : NULL, &x->n);
    if (rc) return err_wrap(rc, "%s: document %s", j->o.corpus, d->id);
    if (!want_detail || !d->tags || !x->n) return OK;
    if (!(x->tag = mem_calloc(x->n, sizeof *x->tag))) return err_set(ERR_NOMEM, "out of memory");
    /* Tag of the word holding the token's first non-space byte; tags are in text order. */
    size_t ti = 0;
    for (size_t i = 0; i < x->n; i++) {
        size_t b = x->off[i], e = i + 1 < x->n ? x->off[i + 1] : d->len;
        while (b < e && (d->text[b] == ' ' || d->text[b] == '\n' || d->text[b] == '\t')) b++;
        if (b >= e) continue;
        while (ti < d->ntags && d->tags[ti].end <= b) ti++;
        if (ti < d->ntags && d->tags[ti].start <= b) x->tag[i] = d->tags[ti].tag;
    }
    return OK;
}

/* Window lengths after the --max-tokens cap; returns 0 when the cap is reached. */
static int cap_len(const ext_job *j, int64_t total, int len)
{
    if (j->o.max_tokens <= 0) return len;
    int64_t left = j->o.max_tokens - total;
    if (left < len) len = (int)(left < 0 ? 0 : left);
    if (j->o.bos && len < 2) len = 0;
    return len;
}

/* Counts windows and tokens. The tags are read too, though counting does not need them: a bad
 * tags file then fails here, before the database is created (it failed in the run pass, leaving
 * a new database with a model, a hook and a run that could never finish). */
static int count_pass(ext_job *j)
{
    corpus_reader *r;
    int rc = corpus_open(&r, j->o.corpus, j->o.tags);
    if (rc) return rc;
    int64_t total = 0, windows = 0, docs = 0;
    int done = 0;
    for (;;) {
        corpus_doc *d;
        if ((rc = corpus_next(r, &d)) || !d) break;
        /* enough documents to tell two corpora apart that open alike (the first alone did) */
        if (docs < EXT_DUP_DOCS) {
            if (docs == j->doc_sums_cap) {
                int64_t cap = docs ? 2 * docs : 64;
                uint64_t *g = mem_realloc(j->doc_sums, (size_t)cap * sizeof *g);
                if (!g) {
                    rc = err_set(ERR_NOMEM, "out of memory");
                    break;
                }
                j->doc_sums = g;
                j->doc_sums_cap = cap;
            }
            j->doc_sums[docs] = hash_fnv1a(HASH_FNV1A_INIT, d->text, d->len);
            j->n_doc_sums = docs + 1;
        }
        docs++;
        ext_doc x;
        rc = doc_tokenize(j, d, &x, 0);
        int64_t nw = rc ? 0 : ext_windows((int64_t)x.n, j->ctx, j->o.bos, NULL, NULL, 0);
        int per = j->ctx - (j->o.bos ? 1 : 0);
        for (int64_t w = 0; !rc && w < nw && !done; w++) {
            int64_t left = (int64_t)x.n - w * per;
            int len = cap_len(j, total, (int)(left < per ? left : per) + (j->o.bos ? 1 : 0));
            if (len == 0) done = 1;
            else {
                total += len;
                windows++;
            }
        }
        doc_free(&x);
        if (rc || done) break;
    }
    corpus_close(r);
    if (rc) return rc;
    if (total == 0 && j->o.bos && j->o.max_tokens == 1)
        return err_set(ERR_ARG, "--max-tokens 1 leaves no room for a text token after the "
                       "<|endoftext|> each window starts with (--no-bos, or 2 or more)");
    if (total == 0)
        return err_set(ERR_FORMAT, "%s: the corpus holds no text (0 tokens in %lld document%s)",
                       j->o.corpus, (long long)docs, docs == 1 ? "" : "s");
    j->plan.n_docs = docs;
    j->plan.n_windows = windows;
    j->plan.n_tokens = total;
    return OK;
}

/* ---- open ---------------------------------------------------------------------------------- */
static int read_small(const char *path, char **out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(ERR_IO, "%s: cannot open", path);
    char *buf = mem_alloc(1 << 16);
    if (!buf) {
        fclose(f);
        return err_set(ERR_NOMEM, "out of memory");
    }
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = 0;
    fclose(f);
    *out = buf;
    return OK;
}

/* 1 when name is one of a --hook list's comma-separated entries (as parse_hooks splits it). */
static int hook_listed(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *q = list; q; q = strchr(q, ','), q = q ? q + 1 : NULL)
        if (!strncmp(q, name, len) && (q[len] == ',' || q[len] == 0)) return 1;
    return 0;
}

/* An extract run's precision from its params: absent is fp32 (runs from before the flag). */
static int run_bf16(const cJSON *params)
{
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(params, "precision");
    return cJSON_IsString(pr) && !strcmp(pr->valuestring, "bf16");
}

int ext_hook_precision(store *s, const char *hook, int *bf16)
{
    int64_t *ids = NULL;
    char **params = NULL;
    size_t n = 0;
    *bf16 = -1;
    int rc = store_run_list(s, "extract", &ids, &params, &n);
    for (size_t r = 0; !rc && r < n; r++) {
        cJSON *p = cJSON_Parse(params[r]);
        const cJSON *hk = cJSON_GetObjectItemCaseSensitive(p, "hooks");
        if (cJSON_IsString(hk) && hook_listed(hk->valuestring, hook)) *bf16 = run_bf16(p);
        cJSON_Delete(p);
    }
    store_run_list_free(ids, params, n);
    return rc;
}

/* A hook's rows come from one --bos choice and one precision: the window lookup that resumes a
 * run takes any stored row as done, so a rerun with the other --bos stored the same tokens a
 * second time in windows of their own, and an fp32 run after a bf16 one (or a bf16 resume of a
 * killed fp32 one) counted the other's rows as its own and filled in the rest (an audit's hook:
 * 4252 fp32 and 6048 bf16 sequences, exit 0). Refused when an earlier extract run lists one of
 * this run's hooks with the other choice: its rows may be there. */
static int check_mixing(ext_job *j)
{
    int64_t *ids = NULL;
    char **params = NULL;
    size_t n = 0;
    int rc = store_run_list(j->s, "extract", &ids, &params, &n);
    for (size_t r = 0; !rc && r < n; r++) {
        cJSON *p = cJSON_Parse(params[r]);
        const cJSON *hk = cJSON_GetObjectItemCaseSensitive(p, "hooks");
        const cJSON *bos = cJSON_GetObjectItemCaseSensitive(p, "bos");
        int bf16 = run_bf16(p);
        int run_bos = cJSON_IsNumber(bos) ? bos->valueint != 0 : j->o.bos;
        for (int h = 0; !rc && cJSON_IsString(hk) && h < j->nh; h++) {
            if (!hook_listed(hk->valuestring, j->h[h].name)) continue;
            if (run_bos != j->o.bos)
                rc = err_set(ERR_ARG, "%s: hook %s holds windows of extract run %lld, made with %s; "
                             "this run's (%s) would give it the same tokens again in other windows "
                             "(rerun with %s, or extract into a new --db)", j->o.db, j->h[h].name,
                             (long long)ids[r], run_bos ? "--bos" : "--no-bos",
                             j->o.bos ? "--bos" : "--no-bos", run_bos ? "--bos" : "--no-bos");
            else if (bf16 != j->bf16)
                rc = err_set(ERR_ARG, "%s: hook %s holds activations of extract run %lld, computed in "
                             "%s; this run computes in %s and would mix the two in one hook (rerun "
                             "with --precision %s, or extract into a new --db)", j->o.db,
                             j->h[h].name, (long long)ids[r], bf16 ? "bf16" : "fp32",
                             j->bf16 ? "bf16" : "fp32", bf16 ? "bf16" : "fp32");
        }
        cJSON_Delete(p);
    }
    store_run_list_free(ids, params, n);
    return rc;
}

static int open_db(ext_job *j)
{
    j->made_db = access(j->o.db, F_OK) != 0;
    int64_t blob = 0; /* a new file's pages fit its smallest rows (store_page_for) */
    for (int i = 0; i < j->nh; i++) {
        int64_t b = (int64_t)j->ctx * j->h[i].width * store_dtype_size(j->o.dtype);
        if (!blob || b < blob) blob = b;
    }
    int rc = store_open_blobs(&j->s, j->o.db, STORE_CREATE, blob);
    if (rc) return rc;
    store_model *ms;
    size_t nm;
    if ((rc = store_model_list(j->s, &ms, &nm))) return rc;
    for (size_t i = 0; i < nm; i++)
        if (ms[i].checksum[0] && strcmp(ms[i].checksum, j->checksum)) {
            rc = err_set(ERR_ARG, "%s: holds activations of another model (%s, checksum %s), not "
                         "%s (%s); use another --db", j->o.db, ms[i].path, ms[i].checksum,
                         j->o.model_dir, j->checksum);
            break;
        }
    mem_free(ms);
    if (rc) return rc;
    /* sequences are found again by (document, start): with their documents deleted, a rerun
       stored every token a second time, exit 0 (an audit) */
    int64_t orphans = 0;
    if ((rc = store_orphan_sequences(j->s, &orphans))) return rc;
    if (orphans)
        return err_set(ERR_FORMAT, "%s: %lld stored sequences refer to documents that are no longer "
                       "in its documents table (changed outside saelite?); extract into a new --db",
                       j->o.db, (long long)orphans);
    if (j->o.tags) {
        /* the sequences (with their token rows) are shared by every extract into this store: ones
           stored without tags are reused as they are, so tags given now would silently not be
           stored (5655 tokens, 0 tagged, in an audit) */
        int tokens = 0, tagged = 0;
        if ((rc = store_tokens_tagged(j->s, &tokens, &tagged))) return rc;
        if (tokens && !tagged)
            return err_set(ERR_ARG, "%s: its stored tokens were extracted without --tags, and the "
                           "sequences are shared, so tags given now would not be stored; extract "
                           "with --tags into a new --db", j->o.db);
    }
    if ((rc = check_mixing(j))) return rc;
    char cfgpath[4200], *cfg = NULL;
    if ((rc = path_join(cfgpath, sizeof cfgpath, j->o.model_dir, "config.json"))) return rc;
    if ((rc = read_small(cfgpath, &cfg))) return rc;
    const char *base = strrchr(j->o.model_dir, '/');
    base = base && base[1] ? base + 1 : j->o.model_dir;
    if ((rc = store_mark_take(j->s, &j->mark)) || (rc = store_begin(j->s))) {
        mem_free(cfg);
        return rc;
    }
    rc = store_model_add(j->s, base, j->o.model_dir, cfg, j->checksum, &j->model_id);
    mem_free(cfg);
    for (int i = 0; !rc && i < j->nh; i++)
        rc = store_hook_add(j->s, j->model_id, j->h[i].name, j->h[i].layer, j->h[i].width,
                            j->o.dtype, j->ctx, &j->h[i].sh);
    /* The run's identity: everything that changes what gets stored. */
    if (!rc) {
        /* strings as stored before: control bytes as \u00XX (BUF_JSON_CTRL_U), so reruns match */
        const char *tags = j->o.tags ? j->o.tags : "";
        buf params = {0};
        rc = buf_str(&params, "{\"model\": ");
        if (!rc) rc = buf_json(&params, j->o.model_dir, strlen(j->o.model_dir), BUF_JSON_CTRL_U);
        if (!rc) rc = buf_printf(&params, ", \"checksum\": \"%s\", \"corpus\": ", j->checksum);
        if (!rc) rc = buf_json(&params, j->o.corpus, strlen(j->o.corpus), BUF_JSON_CTRL_U);
        if (!rc) rc = buf_str(&params, ", \"tags\": ");
        if (!rc) rc = buf_json(&params, tags, strlen(tags), BUF_JSON_CTRL_U);
        if (!rc) rc = buf_str(&params, ", \"tokenizer\": ");
        if (!rc) rc = buf_json(&params, j->tokdir, strlen(j->tokdir), BUF_JSON_CTRL_U);
        if (!rc) rc = buf_str(&params, ", \"hooks\": ");
        if (!rc) rc = buf_json(&params, j->o.hooks, strlen(j->o.hooks), BUF_JSON_CTRL_U);
        if (!rc)
            rc = buf_printf(&params, ", \"ctx\": %d, \"bos\": %d, \"dtype\": \"%s\", \"batch\": %d, "
                                     "\"max_tokens\": %lld}",
                            j->ctx, j->o.bos, store_dtype_name(j->o.dtype), j->o.batch,
                            (long long)j->o.max_tokens);
        /* fp32 runs keep their identity byte for byte */
        if (!rc && j->bf16) {
            params.p[--params.n] = 0; /* the closing brace */
            rc = buf_str(&params, ", \"precision\": \"bf16\"}");
        }
        if (!rc) rc = store_run_begin(j->s, "extract", params.p, &j->run_id, &j->plan.done_before);
        buf_free(&params);
    }
    if (!rc) rc = store_commit(j->s);
    if (rc) store_rollback(j->s);
    return rc;
}

/* The batch buffers' sizes, before the corpus pass or the database: --batch is a flag without an
 * upper bound, so its products are checked, and their sum is compared with the machine (the
 * allocations are lazy: buffers past its memory would be allocated, and the job killed when the
 * ring fills). */
static int check_buffers(const ext_job *j)
{
    size_t B = (size_t)j->o.batch, C = (size_t)j->ctx, bytes;
    for (int i = 0; i < j->nh; i++)
        if (ck_mul_size(B, C, &bytes) || ck_mul_size(bytes, (size_t)j->h[i].width, &bytes) ||
            ck_mul_size(bytes, sizeof(float), &bytes) || ck_mul_size(bytes, EXT_RING, &bytes))
            return err_set(ERR_ARG, "--batch %d x ctx %d x width %d of hook %s: the buffers' size "
                           "overflows", j->o.batch, j->ctx, j->h[i].width, j->h[i].name);
    /* a full window of each hook must fit one SQLite value, checked before the corpus pass (and
       in a dry run, which otherwise reported success for a run open_db would refuse) */
    for (int i = 0; i < j->nh; i++) {
        int rc = store_hook_size_check(j->o.db ? j->o.db : "(dry run)", j->h[i].name,
                                       j->h[i].width, j->o.dtype, j->ctx);
        if (rc) return rc;
    }
    double need = (double)B * C * (sizeof(int) + 2 * sizeof(int64_t) + 16) * EXT_RING;
    for (int i = 0; i < j->nh; i++) need += (double)B * C * j->h[i].width * sizeof(float) * EXT_RING;
    long long phys = mem_physical_bytes();
    if (phys > 0 && need > (double)phys)
        return err_set(ERR_ARG, "--batch %d: the %d batches in flight need %.1f GB, more than this "
                       "machine's %.1f GB of memory (a smaller --batch?)", j->o.batch, EXT_RING,
                       need / 1e9, (double)phys / 1e9);
    return OK;
}

int ext_open(ext_job **out, const ext_opts *o)
{
    *out = NULL;
    if (o->batch < 1) return err_set(ERR_ARG, "--batch must be >= 1, got %d", o->batch);
    if (o->ctx < 0) return err_set(ERR_ARG, "ctx must be >= 1 (0: the default), got %d", o->ctx);
    if (o->max_tokens < 0) return err_set(ERR_ARG, "--max-tokens must be >= 0");
    if (!o->model_dir || !o->corpus || (!o->db && !o->dry_run))
        return err_set(ERR_ARG, "--model, --corpus and --db are required");
    ext_job *j = mem_calloc(1, sizeof *j);
    if (!j) return err_set(ERR_NOMEM, "out of memory");
    j->o = *o;
    if (o->precision != OP_PRECISION_FP32) { /* resolve (and refuse) before touching the db */
        int prev = op_precision_bf16();
        int rc0 = op_set_precision(o->precision);
        j->bf16 = !rc0 && op_precision_bf16();
        op_set_precision(prev ? OP_PRECISION_BF16 : OP_PRECISION_FP32);
        if (rc0) {
            mem_free(j);
            return rc0;
        }
    }
    j->commit_bytes = o->commit_mb > 0 ? (int64_t)(o->commit_mb * 1048576.0) : (int64_t)32 << 20;
    int rc = gpt2_load(&j->m, o->model_dir);
    if (!rc) rc = gpt2_dir_checksum(o->model_dir, j->checksum);
    if (!rc) {
        const gpt2_config *cfg = gpt2_cfg(j->m);
        j->ctx = o->ctx ? o->ctx : cfg->n_ctx < 128 ? cfg->n_ctx : 128;
        if (j->ctx > cfg->n_ctx)
            rc = err_set(ERR_ARG, "--ctx %d exceeds the context of %s (n_ctx %d)", j->ctx,
                         o->model_dir, cfg->n_ctx);
        else if (o->bos && j->ctx < 2 && o->ctx)
            rc = err_set(ERR_ARG, "--ctx must be >= 2 with --bos");
        else if (o->bos && j->ctx < 2) /* the model's own n_ctx, no --ctx given: say so */
            rc = err_set(ERR_ARG, "%s: n_ctx 1 leaves no room for a token after the "
                         "<|endoftext|> each window starts with; use --no-bos", o->model_dir);
    }
    if (!rc) rc = parse_hooks(j);
    if (!rc) rc = check_buffers(j);
    if (!rc) {
        if (o->tokenizer_dir) rc = path_fmt(j->tokdir, sizeof j->tokdir, "%s", o->tokenizer_dir);
        else ext_default_tokenizer(o->model_dir, j->tokdir, sizeof j->tokdir);
        if (!rc) rc = tok_load(&j->tok, j->tokdir);
    }
    if (!rc) {
        j->eot = tok_eot(j->tok);
        if (o->bos && j->eot < 0)
            rc = err_set(ERR_ARG, "%s: the tokenizer has no <|endoftext|>; use --no-bos", j->tokdir);
        else rc = tok_check_model(j->tok, j->tokdir, gpt2_cfg(j->m)->vocab_size, o->model_dir);
    }
    /* Under mpirun the other ranks only run forward passes of rank 0's batches: no corpus pass,
     * no database (rank 0 plans, reads, writes). */
    int root = dist_is_root();
    if (!rc && root) rc = count_pass(j);
    if (!rc && !o->dry_run && root) rc = open_db(j);
    if (!rc) {
        ext_plan *p = &j->plan;
        p->nhooks = j->nh;
        p->ctx = j->ctx;
        int64_t stored = -1;
        for (int i = 0; i < j->nh; i++) {
            ext_hook_plan *hp = &p->hooks[i];
            snprintf(hp->name, sizeof hp->name, "%s", j->h[i].name);
            hp->layer = j->h[i].layer;
            hp->width = j->h[i].width;
            hp->bytes = p->n_tokens * hp->width * store_dtype_size(o->dtype);
            p->act_bytes += hp->bytes;
            int64_t n = 0;
            if (!rc && j->s) rc = store_count_source_acts(j->s, j->h[i].sh.id, o->corpus, &n);
            j->h[i].at_open = n;
            if (stored < 0 || n < stored) stored = n;
        }
        /* ids blob + one tokens row (~40 bytes) per token; documents' text once. */
        p->other_bytes = p->n_tokens * 48;
        p->stored_windows = stored < 0 ? 0 : stored > p->n_windows ? p->n_windows : stored;
        p->resumed = p->stored_windows > 0;
        if (!rc && j->s) rc = file_free_bytes(o->db, &p->free_bytes);
        /* windows are shared by (source, ordinal): the same corpus given by another path (a
           copied database, another directory) is stored again, not shared (a user's run) */
        if (!rc && j->s)
            rc = store_doc_other_source(j->s, o->corpus, j->doc_sums, j->n_doc_sums, p->dup_source,
                                        sizeof p->dup_source);
    }
    if (!rc) {
        size_t B = (size_t)o->batch, C = (size_t)j->ctx;
        for (int k = 0; k < EXT_RING && !rc; k++) {
            ext_batch *bt = &j->bt[k];
            bt->win = mem_calloc(B, sizeof *bt->win);
            bt->ids = mem_alloc(B * C * sizeof *bt->ids);
            bt->bstart = mem_alloc(B * C * sizeof *bt->bstart);
            bt->bend = mem_alloc(B * C * sizeof *bt->bend);
            bt->tags = mem_alloc(B * C * sizeof *bt->tags);
            bt->seq_ids = mem_alloc(B * sizeof *bt->seq_ids);
            bt->have = mem_alloc((size_t)j->nh * B + 1);
            bt->msg = dist_size() > 1 ? mem_alloc((B * C + EXT_MSG_HDR) * sizeof *bt->msg) : NULL;
            if (!bt->win || !bt->ids || !bt->bstart || !bt->bend || !bt->tags || !bt->seq_ids ||
                !bt->have || (dist_size() > 1 && !bt->msg))
                rc = err_set(ERR_NOMEM, "out of memory for batch buffers");
            for (int i = 0; !rc && i < j->nh; i++) {
                size_t n = B * C * (size_t)j->h[i].width;
                if (!(bt->hbuf[i] = mem_alloc_aligned(n * sizeof(float))))
                    rc = err_set(ERR_NOMEM, "out of memory (%zu MB for hook %s)", n * 4 >> 20,
                                 j->h[i].name);
            }
        }
        for (int i = 0; !rc && i < j->nh; i++) rc = gpt2_hook_add(j->m, j->h[i].name, hook_cb, &j->h[i]);
    }
    if (rc) {
        ext_close(j);
        return rc;
    }
    *out = j;
    return OK;
}

const ext_plan *ext_get_plan(const ext_job *j) { return &j->plan; }

int ext_same_model(const ext_job *j)
{
    if (dist_size() == 1) return OK;
    return dist_same(OK, j->checksum, sizeof j->checksum,
                     "the model's files (config.json and model.safetensors)");
}

int ext_check_space(const ext_job *j)
{
    const ext_plan *p = &j->plan;
    if (!j->s) return OK;
    double left = p->n_windows ? 1.0 - (double)p->stored_windows / (double)p->n_windows : 0;
    int64_t need = (int64_t)((double)(p->act_bytes + p->other_bytes) * left);
    if (need > p->free_bytes)
        return err_set(ERR_IO, "%s: needs about %.1f MB but only %.1f MB are free on its filesystem "
                       "(--force to try anyway)", j->o.db, (double)need / 1e6,
                       (double)p->free_bytes / 1e6);
    return OK;
}

void ext_close(ext_job *j)
{
    if (!j) return;
    if (j->m) gpt2_hook_clear(j->m);
    gpt2_free(j->m);
    gpt2_free(j->m2); /* (helper_stop frees it; an error path may not reach it) */
    tok_free(j->tok);
    store_close(j->s);
    if (j->made_db && (!j->ran || !j->commits)) {
        /* refused after the database was created (ext_open failed late, ext_check_space, or the
         * run failed before its first commit): nothing was stored, so the new file and its side
         * files go */
        static const char *const side[] = {"", "-wal", "-shm", "-journal"};
        char p[4200];
        for (int i = 0; i < 4; i++)
            if (path_fmt(p, sizeof p, "%s%s", j->o.db, side[i]) == OK) unlink(p);
    }
    for (int k = 0; k < EXT_RING; k++) {
        ext_batch *bt = &j->bt[k];
        for (int i = 0; i < j->nh; i++) mem_free_aligned(bt->hbuf[i]);
        mem_free(bt->win);
        mem_free(bt->ids);
        mem_free(bt->bstart);
        mem_free(bt->bend);
        mem_free(bt->tags);
        mem_free(bt->seq_ids);
        mem_free(bt->have);
        mem_free(bt->msg);
        dist_wait(&bt->req);
    }
    mem_free(j->doc_sums);
    mem_free(j);
}

/* ---- run ----------------------------------------------------------------------------------- */
static int ensure_tx(ext_job *j, int *in_tx)
{
    if (*in_tx || !j->s) return OK;
    int rc = store_begin(j->s);
    if (!rc) *in_tx = 1;
    return rc;
}

static int commit(ext_job *j, int *in_tx)
{
    if (!*in_tx) return OK;
    int rc = store_commit(j->s);
    if (!rc) {
        *in_tx = 0;
        j->commits++;
    }
    j->pending_bytes = 0;
    j->last_commit = secs();
    return rc;
}

/* Token rows of window b: text (valid UTF-8), byte span, POS tag. */
static int store_window_tokens(ext_job *j, ext_batch *bt, int b)
{
    int T = bt->T, C = j->ctx, rc = OK;
    int *ids = bt->ids + (size_t)b * C;
    char textbuf[256];
    char *tx[T], store_txt[T][64];
    const char *tg[T];
    for (int t = 0; t < T; t++) {
        size_t blen = 0;
        const char *bytes = tok_token_bytes(j->tok, ids[t], &blen);
        size_t l = bytes ? utf8_clean(bytes, blen, textbuf, sizeof textbuf) : 0;
        if (l < sizeof store_txt[t]) {
            memcpy(store_txt[t], textbuf, l + 1);
            tx[t] = store_txt[t];
        } else tx[t] = NULL;
        const char *tag = bt->tags[(size_t)b * C + t];
        tg[t] = tag[0] ? tag : NULL;
    }
    /* Rare long tokens (> 63 bytes) are stored via a heap copy. */
    char *heap[T];
    for (int t = 0; t < T; t++) {
        heap[t] = NULL;
        if (tx[t]) continue;
        size_t blen = 0;
        const char *bytes = tok_token_bytes(j->tok, ids[t], &blen);
        if (!bytes) continue;
        if (!(heap[t] = mem_alloc(3 * blen + 1))) rc = err_set(ERR_NOMEM, "out of memory");
        else utf8_clean(bytes, blen, heap[t], 3 * blen + 1);
        tx[t] = heap[t];
    }
    if (!rc)
        rc = store_tokens_add(j->s, bt->seq_ids[b], T, ids, (const char *const *)tx,
                              bt->bstart + (size_t)b * C, bt->bend + (size_t)b * C, tg);
    for (int t = 0; t < T; t++) mem_free(heap[t]);
    return rc;
}

/* Windows of another length at window w's place, from an extract with another --max-tokens (the
 * window its cap cut short): per hook, a longer one already holds w's tokens (covered[h] = 1, and
 * w is not stored for it: a smaller --max-tokens changes nothing); a shorter one gives up its
 * activations to w, which holds all of its tokens with the same context (a larger --max-tokens
 * extends the extraction as a fresh run would make it, and the hook never holds a token twice).
 * The short window's sequence and token rows stay: analysis rows may point into them. Only hooks
 * that had rows when the job opened can hold one. Inside the batch's transaction. */
static int window_overlaps(ext_job *j, const ext_win *w, unsigned char *covered, int *n_covered)
{
    *n_covered = 0;
    for (int h = 0; h < j->nh; h++) {
        int other = 0;
        int64_t oseq = -1;
        int rc = j->h[h].at_open > 0 ? store_act_other_len(j->s, j->h[h].sh.id, w->doc_id,
                                                            w->start, j->o.bos, w->T, &other, &oseq)
                                     : OK;
        if (!rc && other > 0 && other < w->T) rc = store_act_delete(j->s, j->h[h].sh.id, oseq);
        if (rc) return rc;
        covered[h] = other > w->T;
        *n_covered += covered[h];
    }
    return OK;
}

/* Sequences and token rows of a full batch; which activations are missing. */
static int batch_prepare(ext_job *j, ext_batch *bt, ext_stats *st, int *in_tx)
{
    int B = bt->nwin, T = bt->win[0].T, C = j->ctx, rc = ensure_tx(j, in_tx);
    double t0 = secs();
    bt->T = T;
    bt->missing = 0;
    for (int b = 0; !rc && b < B; b++) {
        int ins = 0, n_cov = 0;
        unsigned char cov[EXT_MAX_HOOKS] = {0};
        if (!j->s) {
            bt->seq_ids[b] = ++j->dry_seq;
        } else if (!(rc = window_overlaps(j, &bt->win[b], cov, &n_cov)) && n_cov == j->nh) {
            bt->seq_ids[b] = -1; /* every hook has these tokens already: no sequence row */
        } else if (!rc) {
            rc = store_seq_add(j->s, bt->win[b].doc_id, bt->win[b].start, j->o.bos,
                               bt->ids + (size_t)b * C, T, &bt->seq_ids[b], &ins);
            if (!rc && ins) rc = store_window_tokens(j, bt, b);
        }
        for (int h = 0; !rc && h < j->nh; h++) {
            int ex = cov[h];
            if (j->s && !ex) rc = store_act_exists(j->s, j->h[h].sh.id, bt->seq_ids[b], &ex);
            bt->have[h * B + b] = (unsigned char)ex;
            bt->missing += !ex;
        }
    }
    /* Windows are laid out [B, ctx] in the buffers; the model wants [B, T] contiguous. */
    if (!rc && bt->missing && T != C)
        for (int b = 1; b < B; b++)
            memmove(bt->ids + (size_t)b * T, bt->ids + (size_t)b * C, (size_t)T * sizeof(int));
    st->t_store += secs() - t0;
    return rc;
}

/* Stores the activations of a batch whose forward is done; commits now and then. */
static int batch_finish(ext_job *j, ext_batch *bt, ext_stats *st, int *in_tx)
{
    int B = bt->nwin, T = bt->T;
    double t0 = secs();
    /* a commit by the batch written before this one ended the transaction: without a new one
       every row below would be a transaction of its own, three fsyncs each */
    int rc = bt->missing ? ensure_tx(j, in_tx) : OK;
    for (int h = 0; !rc && h < j->nh; h++)
        for (int b = 0; !rc && b < B; b++)
            if (!bt->have[h * B + b]) {
                if (j->s)
                    rc = store_act_write(j->s, j->h[h].sh.id, bt->seq_ids[b],
                                         bt->hbuf[h] + (size_t)b * T * j->h[h].width, T);
                j->pending_bytes += (int64_t)T * j->h[h].width * store_dtype_size(j->o.dtype);
            }
    /* Batches are grouped into transactions of ~32 MB (or 2 s): bulk appends in rollback-journal
     * mode then run at dd speed (docs/store.md). Resume does not depend on where commits fall. */
    if (!rc && (j->pending_bytes >= j->commit_bytes || secs() - j->last_commit >= EXT_COMMIT_SECS))
        rc = commit(j, in_tx);
    st->t_store += secs() - t0;
    if (rc) return rc;
    st->batches++;
    st->batches_skipped += !bt->missing;
    st->tokens_skipped += bt->missing ? 0 : (int64_t)B * T;
    st->windows += B;
    st->tokens += (int64_t)B * T;
    bt->nwin = 0;
    return OK;
}

/* The forward pass of one prepared batch with model m and its hooks hk (the compute thread's
 * j->m, j->h or the main thread's j->m2, j->h2: the same weights, so the same bits); checks what
 * the hooks got. */
static void compute(ext_job *j, ext_batch *bt, gpt2_model *m, ext_hook *hk)
{
    bt->fwd_rc = OK;
    bt->fwd_secs = 0;
    if (!bt->missing || bt->owner) return; /* nothing to compute, or another rank's */
    double t0 = secs();
    for (int h = 0; h < j->nh; h++) {
        hk[h].fired = 0;
        hk[h].buf = bt->hbuf[h];
    }
    int rc = gpt2_forward(m, bt->ids, bt->nwin, bt->T, 0);
    for (int h = 0; !rc && h < j->nh; h++)
        if (!hk[h].fired || hk[h].B != bt->nwin || hk[h].T != bt->T)
            rc = err_set(ERR_SHAPE, "hook %s did not deliver [%d, %d, %d]", hk[h].name,
                         bt->nwin, bt->T, hk[h].width);
    if (rc) snprintf(bt->fwd_msg, sizeof bt->fwd_msg, "%s", err_msg());
    bt->fwd_rc = rc;
    bt->fwd_secs = secs() - t0;
}

/* Takes the next queued batch and computes it with (m, hk); under mu, which it releases while
 * computing. Batches finish out of order when two threads compute: n_fwd moves over the done
 * ones in order. */
static void take_and_compute(ext_job *j, gpt2_model *m, ext_hook *hk)
{
    ext_batch *bt = &j->bt[j->n_take++ % EXT_RING];
    pthread_mutex_unlock(&j->mu);
    compute(j, bt, m, hk);
    pthread_mutex_lock(&j->mu);
    bt->done = 1;
    while (j->n_fwd < j->n_take && j->bt[j->n_fwd % EXT_RING].done) {
        j->bt[j->n_fwd % EXT_RING].done = 0;
        j->n_fwd++;
    }
    pthread_cond_broadcast(&j->cv);
}

static void *worker_main(void *arg)
{
    ext_job *j = arg;
    pthread_mutex_lock(&j->mu);
    for (;;) {
        while (j->n_take == j->n_ready && !j->quit) pthread_cond_wait(&j->cv, &j->mu);
        if (j->n_take == j->n_ready || j->abandon) break; /* quit, and nothing (wanted) queued */
        take_and_compute(j, j->m, j->h);
    }
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

/* Forward FLOPs per token up to the last hooked layer (blocks run; ln_final hooks need all). */
static double ext_forward_flops_per_token(const ext_job *j)
{
    const gpt2_config *c = gpt2_cfg(j->m);
    int blocks = 0;
    for (int h = 0; h < j->nh; h++) {
        int l = !strncmp(j->h[h].name, "ln_final", 8) ? c->n_layer : j->h[h].layer + 1;
        if (l > blocks) blocks = l;
    }
    double C = c->n_embd, F = c->n_inner, T = j->ctx;
    return blocks * (2 * (4 * C * C + 2 * C * F) + 4 * T * C);
}

static void helper_stop(ext_job *j)
{
    gpt2_free(j->m2);
    j->m2 = NULL;
}

/* The main thread's model copy (j->m2, gpt2_clone), for the forwards it runs while it would
 * wait: when the forward has one OpenBLAS thread in fp32 in one process, and the weights are small
 * (at most 64M parameters: the copy costs their memory once more). Both copies run the same calls
 * on the same weights, so a batch's bits do not depend on which thread computed it. Without the
 * copy (out of memory) the main thread just waits. */
enum { EXT_HELPER_MAX_PARAMS = 64 << 20 };

static int helper_eligible(const ext_job *j)
{
    size_t params;
    gpt2_params(j->m, &params);
    return j->worker_on && !j->bf16 && par_threads() >= 2 && dist_size() == 1 &&
           params <= EXT_HELPER_MAX_PARAMS;
}

static void helper_start(ext_job *j)
{
    j->m2 = NULL;
    if (!helper_eligible(j) || openblas_get_num_threads() != 1 || gpt2_clone(&j->m2, j->m)) {
        j->m2 = NULL;
        return;
    }
    int rc = OK;
    for (int i = 0; !rc && i < j->nh; i++) {
        j->h2[i] = j->h[i];
        rc = gpt2_hook_add(j->m2, j->h2[i].name, hook_cb, &j->h2[i]);
    }
    if (rc) helper_stop(j);
}

/* OpenBLAS threads for the forward while extract runs, chosen by cost. The main thread stores
 * (converts, inserts, commits) while the compute thread runs the forward; if both want a core,
 * they and OpenBLAS's pool take turns, and a preempted BLAS thread stalls the whole GEMM. So the
 * forward gets every core when the main thread's share of the work is small, all cores but one
 * otherwise. Estimate, per token: forward FLOPs up to the last hooked layer (2 x the weights'
 * multiply-adds + the attention products over the window) against the bytes stored (all hooks;
 * 0 in a dry run) plus a fixed 64 for tokenizing and bookkeeping. One core of AVX-512 sgemm does
 * roughly 250 FLOPs in the time the main thread stores one byte (50-100 GFLOP/s per core against
 * the 200-400 MB/s the main thread stores at: 205 MB in 0.98 s on a loaded 2-core Xeon), so the
 * main thread's share of the core time is about 250 bytes / FLOPs; with n cores the forward takes
 * them all when that share is below 1/(4 (n-1)) (all cores win below 1/(n-1); the margin of 4 is
 * for the stalls). Measured on 2 cores: the demo model (1 layer, d_model 128, f32 at mlp.hook_post:
 * ~220 FLOPs per byte) ran 3.3 s on one thread, 4.2 s on two; GPT-2 small to
 * blocks.5.mlp.hook_post (~7100 FLOPs per byte) 1.74k tok/s on one, 2.6k on two (issue 21).
 * On 2 cores a model the main thread can copy (helper_eligible) gets one thread whatever the
 * estimate says: the two threads then run whole forwards side by side, with no GEMM split between
 * them to synchronise, and the main thread stores first and computes only when it would wait. The
 * demo model's dry run (all of Brown) took 5.8-6.4 s on two OpenBLAS threads (a quarter of the
 * samples in sched_yield) and 3.9-4.3 s so, on the 2-core Zen 5 VM; a 6-layer d_model 512 model
 * (44M parameters, f32 at blocks.5.mlp.hook_post, 100k tokens) 5743-5810 tok/s so against
 * 4817-5271 on two OpenBLAS threads. GPT-2 small (124M) is past the copy's limit; with more cores
 * the pool's n - 1 threads should outrun two single-threaded forwards (not measured: 2-core
 * machines only), so the estimate decides there.
 * An explicit choice wins: OPENBLAS_NUM_THREADS / GOTO_NUM_THREADS / OMP_NUM_THREADS leave
 * OpenBLAS as the user set it, SAELITE_THREADS=N gives the forward N threads. Returns the count
 * to restore, or 0. */
static int blas_threads_for_pipeline(const ext_job *j)
{
    if (getenv("OPENBLAS_NUM_THREADS") || getenv("GOTO_NUM_THREADS") || getenv("OMP_NUM_THREADS"))
        return 0;
    int before = openblas_get_num_threads(), want = 0;
    const char *e = getenv("SAELITE_THREADS");
    if (e && atoi(e) >= 1) want = atoi(e);
    else {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        if (n < 2 || before <= 1) return 0;
        if (n == 2 && helper_eligible(j)) {
            openblas_set_num_threads(1);
            return before;
        }
        double flops = ext_forward_flops_per_token(j), bytes = 64;
        for (int h = 0; h < j->nh && !j->o.dry_run; h++)
            bytes += (double)j->h[h].width * store_dtype_size(j->o.dtype);
        want = flops >= 250.0 * 4 * (n - 1) * bytes ? (int)n : (int)n - 1;
        if (want > before) want = before;
    }
    if (want == before) return 0;
    openblas_set_num_threads(want);
    return before;
}

static void worker_start(ext_job *j)
{
    j->n_fill = j->n_ready = j->n_take = j->n_fwd = j->n_write = 0;
    j->quit = j->abandon = 0;
    j->worker_on = pthread_mutex_init(&j->mu, NULL) == 0;
    if (j->worker_on && pthread_cond_init(&j->cv, NULL) != 0) {
        pthread_mutex_destroy(&j->mu);
        j->worker_on = 0;
    }
    if (j->worker_on && pthread_create(&j->worker, NULL, worker_main, j) != 0) {
        pthread_cond_destroy(&j->cv);
        pthread_mutex_destroy(&j->mu);
        j->worker_on = 0; /* no thread to be had: forward passes run on the main thread */
    }
}

/* Lets the compute thread finish what is queued (or, abandon, only its current batch), then
 * joins it. */
static void worker_stop(ext_job *j, int abandon)
{
    if (!j->worker_on) return;
    pthread_mutex_lock(&j->mu);
    j->quit = 1;
    j->abandon = abandon;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    pthread_join(j->worker, NULL);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    j->worker_on = 0;
}

/* ---- mpirun -np N > 1 ------------------------------------------------------------------------
 * Rank 0 does everything but the forward passes of the other ranks' batches: it reads, tokenizes,
 * stores the rows and decides (from the database) which batches still need activations; the
 * k-th such batch is computed by rank k % N (rank 0's own ones on its compute thread, as in one
 * process). Another rank gets {B, T, ids} and sends back a status and the hook buffers; rank 0
 * receives them when it writes that batch, in batch order, so the database gets the same rows in
 * the same order as one process. At most EXT_RING batches are in flight (bounded memory). The
 * forward of a batch is the same call on the same inputs on every rank, so its bits do not depend
 * on who computes it (for the same OpenBLAS thread count). */
enum { EXT_CHUNK = 1 << 28 };

/* (a send that sleeps while it waits for rank 0 to take it, see dist_await) */
static int send_big(const void *buf, size_t bytes, int peer)
{
    const char *p = buf;
    int rc = OK;
    do {
        size_t n = bytes > EXT_CHUNK ? EXT_CHUNK : bytes;
        dist_req *q;
        rc = dist_isend(p, n, peer, EXT_TAG_RESULT, &q);
        if (!rc) rc = dist_wait(&q);
        p += n;
        bytes -= n;
    } while (!rc && bytes > 0);
    return rc;
}

static int recv_big(void *buf, size_t bytes, int peer)
{
    char *p = buf;
    int rc = OK;
    do {
        size_t n = bytes > EXT_CHUNK ? EXT_CHUNK : bytes, got = 0;
        rc = dist_recv(p, n, peer, EXT_TAG_RESULT, &got);
        if (!rc && got != n)
            rc = err_set(ERR_IO, "rank %d sent %zu bytes of activations, expected %zu", peer, got, n);
        p += n;
        bytes -= n;
    } while (!rc && bytes > 0);
    return rc;
}

/* Rank 0: moves the batches being sent along (see dist_test). */
static int progress_sends(ext_job *j)
{
    int rc = OK;
    for (int64_t n = j->n_write; !rc && n < j->n_fill; n++) rc = dist_test(&j->bt[n % EXT_RING].req);
    return rc;
}

/* Rank 0, after a batch was prepared: hands it to its rank when another one computes it. */
static int dispatch(ext_job *j, ext_batch *bt)
{
    bt->owner = 0;
    if (dist_size() == 1 || !bt->missing) return OK;
    bt->owner = (int)(j->n_dispatch++ % dist_size());
    if (!bt->owner) return OK;
    size_t n = (size_t)bt->nwin * (size_t)bt->T;
    bt->msg[0] = bt->nwin;
    bt->msg[1] = bt->T;
    /* the forward's OpenBLAS threads are rank 0's, so a batch has the same bits whichever rank
       computes it: the other ranks kept OpenBLAS's default, 2 threads on an unbound oversubscribed
       rank against rank 0's 1 (-np 4 on 2 cores: 1771 of 2381 rows differed from one process,
       a review) */
    bt->msg[2] = openblas_get_num_threads();
    memcpy(bt->msg + EXT_MSG_HDR, bt->ids, n * sizeof(int));
    return dist_isend(bt->msg, (n + EXT_MSG_HDR) * sizeof(int), bt->owner, EXT_TAG_BATCH, &bt->req);
}

/* Rank 0: the result of another rank's batch, into the batch's hook buffers (fwd_rc / fwd_msg
 * carry its failure). The batch is its own again afterwards (owner 0). */
static int collect(ext_job *j, ext_batch *bt)
{
    int peer = bt->owner, rc = dist_wait(&bt->req);
    bt->owner = 0;
    ext_remote_status rs;
    size_t got = 0;
    if (!rc) rc = dist_await(peer, EXT_TAG_RESULT);
    if (!rc) rc = dist_recv(&rs, sizeof rs, peer, EXT_TAG_RESULT, &got);
    if (!rc && got != sizeof rs) rc = err_set(ERR_IO, "rank %d: a short status message", peer);
    if (rc) return rc;
    bt->fwd_secs = rs.secs;
    bt->fwd_rc = rs.rc;
    rs.msg[sizeof rs.msg - 1] = 0;
    if (rs.rc) {
        snprintf(bt->fwd_msg, sizeof bt->fwd_msg, "rank %d: %.*s", peer, ERR_MSG_MAX - 32, rs.msg);
        return OK;
    }
    for (int h = 0; !rc && h < j->nh; h++)
        rc = recv_big(bt->hbuf[h], (size_t)bt->nwin * bt->T * j->h[h].width * sizeof(float), peer);
    return rc;
}

/* Rank 0 at the end (done, failed or stopped): takes in the results still owed by other ranks
 * (in batch order; they are dropped: a failed or stopped run does not write them), then tells
 * every other rank to stop. */
static int release_ranks(ext_job *j, int stopped)
{
    int rc = OK;
    for (int64_t n = j->n_write; n < j->n_fill; n++) {
        ext_batch *bt = &j->bt[n % EXT_RING];
        if (bt->owner) {
            int rc2 = collect(j, bt);
            if (!rc) rc = rc2;
        }
    }
    /* {0, 1, 0}: the run was stopped, and every rank ends stopped (rank 0 alone did, and
       dist_check's "rank 0: " came before its line, a review) */
    int stop[EXT_MSG_HDR] = {0, stopped ? 1 : 0, 0};
    for (int r = 1; r < dist_size(); r++) {
        int rc2 = dist_send(stop, sizeof stop, r, EXT_TAG_BATCH);
        if (!rc) rc = rc2;
    }
    return rc;
}

/* Ranks 1..N-1: forward passes of the batches rank 0 sends, until it says stop. */
static int serve_forwards(ext_job *j, ext_stats *st)
{
    ext_batch *bt = &j->bt[0];
    size_t cap = ((size_t)j->o.batch * j->ctx + EXT_MSG_HDR) * sizeof(int), got = 0;
    int stopped = 0;
    for (;;) {
        int rc = dist_await(0, EXT_TAG_BATCH);
        if (!rc) rc = dist_recv(bt->msg, cap, 0, EXT_TAG_BATCH, &got);
        if (rc) return rc;
        int B = bt->msg[0], T = bt->msg[1];
        if (B == 0) return stopped || T == 1 ? err_set(ERR_ABORTED, "interrupted") : OK;
        int threads = bt->msg[2];
        if (got < EXT_MSG_HDR * sizeof(int) || B < 1 || B > j->o.batch || T < 1 || T > j->ctx ||
            threads < 1 || threads > 4096 || got != ((size_t)B * T + EXT_MSG_HDR) * sizeof(int))
            return err_set(ERR_IO, "a malformed batch message from rank 0 (%zu bytes)", got);
        if (threads != openblas_get_num_threads()) openblas_set_num_threads(threads);
        memcpy(bt->ids, bt->msg + EXT_MSG_HDR, (size_t)B * T * sizeof(int));
        bt->nwin = B;
        bt->T = T;
        bt->missing = 1;
        bt->owner = 0;
        /* a signal to this rank alone (mpirun passes one to every rank): its next batches are
           answered "interrupted" and rank 0 stops the run as for its own (they ran to the end,
           exit 0, an audit) */
        stopped = stopped || (j->o.stop && *j->o.stop);
        if (stopped) {
            bt->fwd_rc = ERR_ABORTED;
            bt->fwd_secs = 0;
            snprintf(bt->fwd_msg, sizeof bt->fwd_msg, "interrupted");
        } else {
            compute(j, bt, j->m, j->h);
        }
        ext_remote_status rs = {bt->fwd_rc, bt->fwd_secs, ""};
        snprintf(rs.msg, sizeof rs.msg, "%s", bt->fwd_rc ? bt->fwd_msg : "");
        rc = send_big(&rs, sizeof rs, 0);
        for (int h = 0; !rc && !bt->fwd_rc && h < j->nh; h++)
            rc = send_big(bt->hbuf[h], (size_t)B * T * j->h[h].width * sizeof(float), 0);
        if (rc) return rc;
        if (stopped) continue;
        st->batches++;
        st->windows += B;
        st->tokens += (int64_t)B * T;
        st->t_forward += bt->fwd_secs;
    }
}

/* Writes the oldest unwritten batch once it is computed (waiting for it when block). */
static int write_next(ext_job *j, ext_stats *st, int *in_tx, int block, int *wrote)
{
    *wrote = 0;
    if (j->n_write == j->n_ready || j->stop_rank) return OK;
    if (j->worker_on) {
        double t0 = secs();
        pthread_mutex_lock(&j->mu);
        /* rather than wait, compute a queued batch the compute thread has not taken (its own
           model copy, m2); the compute thread never waits for it, it takes the next one */
        if (block)
            while (j->n_fwd == j->n_write) {
                if (j->m2 && j->n_take < j->n_ready && !j->abandon) {
                    j->bt[j->n_take % EXT_RING].by_main = 1;
                    take_and_compute(j, j->m2, j->h2);
                } else {
                    pthread_cond_wait(&j->cv, &j->mu);
                }
            }
        int ready = j->n_fwd > j->n_write;
        pthread_mutex_unlock(&j->mu);
        st->t_wait += secs() - t0;
        if (!ready) return OK;
    }
    ext_batch *bt = &j->bt[j->n_write % EXT_RING];
    if (bt->owner && !block) { /* another rank's: only when its result is here */
        int here = 0, rc = dist_test(&bt->req);
        if (!rc) rc = dist_probe(bt->owner, EXT_TAG_RESULT, &here);
        if (rc || !here) return rc;
    }
    if (bt->owner) {
        double t0 = secs();
        int peer = bt->owner, rc = collect(j, bt);
        st->t_wait += secs() - t0;
        if (rc) {
            j->n_write++;
            *wrote = 1;
            return rc;
        }
        if (bt->fwd_rc == ERR_ABORTED) { /* that rank was stopped: a stop, not an error */
            j->stop_rank = peer;
            return OK; /* this batch and the ones after it stay unwritten */
        }
    }
    st->t_forward += bt->fwd_secs;
    st->batches_main += bt->by_main && bt->missing; /* a stored batch took no forward */
    bt->by_main = 0;
    int rc = bt->fwd_rc ? err_set(bt->fwd_rc, "%s", bt->fwd_msg) : batch_finish(j, bt, st, in_tx);
    j->n_write++;
    *wrote = 1;
    return rc;
}

/* The filled batch goes in: its rows are stored and it is queued for the compute thread; computed
 * batches are written meanwhile, and the next slot is freed for filling. */
static int flush(ext_job *j, ext_stats *st, int *in_tx)
{
    ext_batch *bt = &j->bt[j->n_fill % EXT_RING];
    if (bt->nwin == 0) return OK;
    int rc = batch_prepare(j, bt, st, in_tx), wrote;
    if (!rc) rc = dispatch(j, bt);
    if (rc) return rc;
    j->n_fill++;
    if (dist_size() > 1 && (rc = progress_sends(j))) return rc;
    if (j->worker_on) {
        pthread_mutex_lock(&j->mu);
        j->n_ready = j->n_fill;
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&j->mu);
    } else {
        compute(j, bt, j->m, j->h);
        j->n_ready = j->n_take = j->n_fwd = j->n_fill;
    }
    do rc = write_next(j, st, in_tx, 0, &wrote); /* whatever is computed already */
    while (!rc && wrote);
    while (!rc && !j->stop_rank && j->n_fill - j->n_write >= EXT_RING)
        rc = write_next(j, st, in_tx, 1, &wrote);
    return rc; /* the next slot to fill was emptied when it was written (batch_finish) */
}

/* At the end: writes every queued batch and stops the compute thread. When stopped (Ctrl-C) it
 * writes only the batches already computed, so stopping takes at most one more forward pass (the
 * rows of the others stay without activations, which a resume computes). After an error (rc) it
 * only stops the thread, keeping the error's message. */
static int drain(ext_job *j, ext_stats *st, int *in_tx, int rc, int stopped)
{
    int wrote = 1;
    if (rc || stopped) {
        worker_stop(j, 1);
        if (!rc) j->n_ready = j->n_take = j->n_fwd; /* forget the abandoned ones */
    }
    while (!rc && !j->stop_rank && j->n_write < j->n_ready) rc = write_next(j, st, in_tx, 1, &wrote);
    worker_stop(j, j->stop_rank != 0);
    return rc;
}

int ext_bf16(const ext_job *j) { return j->bf16; }

/* A run that failed before committing anything takes back its setup's rows (a new hook, the run,
 * the model): they fixed the hook's dtype and window length, so a corrected command was refused
 * ("stored as f32, not bf16"), and info called the run unfinished (an audit). The error stays
 * the run's own. */
static void undo_setup(ext_job *j, int code)
{
    char msg[ERR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s", err_msg());
    int64_t ids[EXT_MAX_HOOKS];
    for (int i = 0; i < j->nh; i++) ids[i] = j->h[i].sh.id;
    if (store_mark_undo(j->s, &j->mark, j->model_id, ids, j->nh, j->run_id) != OK)
        err_set(code, "%s", msg);
}

static int run_root(ext_job *j, ext_stats *st, void (*progress)(const ext_stats *st, void *u),
                    void *u)
{
    double t0 = secs();
    corpus_reader *r;
    /* after every check of ext_open: failures leave the file as is */
    int rc = j->s ? store_set_bulk(j->s) : OK;
    if (rc) return rc;
    rc = corpus_open(&r, j->o.corpus, j->o.tags);
    st->t_corpus += secs() - t0;
    if (rc) return rc;
    int in_tx = 0, done = 0, C = j->ctx, per = C - (j->o.bos ? 1 : 0);
    int64_t total = 0, ordinal = 0;
    for (int k = 0; k < EXT_RING; k++) j->bt[k].nwin = 0;
    /* bf16: oneDNN's OpenMP threads run the matmuls; OpenBLAS (the attention's small GEMMs)
       stays on one thread, since its idle workers spin and stall OpenMP's barriers (measured:
       a 1024x768x768 bf16 matmul 1.2 ms alone, 35 ms right after a 2-thread sgemm) */
    int blas_before = 0;
    if (j->bf16) {
        blas_before = openblas_get_num_threads();
        if (blas_before > 1) openblas_set_num_threads(1);
        else blas_before = 0;
    }
    worker_start(j);
    if (!j->bf16) blas_before = j->worker_on ? blas_threads_for_pipeline(j) : 0;
    helper_start(j);
    j->dry_seq = 0;
    j->pending_bytes = 0;
    j->last_commit = secs();
    while (!rc && !done) {
        corpus_doc *d;
        double tc = secs();
        rc = corpus_next(r, &d);
        st->t_corpus += secs() - tc;
        if (rc || !d) break;
        double tt = secs();
        ext_doc x;
        rc = doc_tokenize(j, d, &x, 1);
        st->t_tokenize += secs() - tt;
        int64_t doc_id = ordinal + 1;
        if (!rc) rc = ensure_tx(j, &in_tx);
        if (!rc && j->s) {
            double ts = secs();
            rc = store_doc_add(j->s, j->o.corpus, ordinal, d->id, d->genre, d->text, d->len, &doc_id);
            st->t_store += secs() - ts;
        }
        ordinal++;
        for (int64_t s0 = 0; !rc && s0 < (int64_t)x.n; s0 += per) {
            int n = (int)((int64_t)x.n - s0 < per ? (int64_t)x.n - s0 : per);
            int len = cap_len(j, total, n + (j->o.bos ? 1 : 0));
            if (len == 0) {
                done = 1;
                break;
            }
            n = len - (j->o.bos ? 1 : 0);
            ext_batch *bt = &j->bt[j->n_fill % EXT_RING];
            if (bt->nwin && (bt->nwin == j->o.batch || bt->win[0].T != len)) {
                rc = flush(j, st, &in_tx);
                if (!rc && progress) progress(st, u);
                if (!rc && ((j->o.stop && *j->o.stop) || j->stop_rank)) {
                    done = 2;
                    break;
                }
                if (!rc) rc = ensure_tx(j, &in_tx);
                if (rc) break;
                bt = &j->bt[j->n_fill % EXT_RING];
            }
            int b = bt->nwin++;
            bt->win[b].doc_id = doc_id;
            bt->win[b].start = s0;
            bt->win[b].T = len;
            size_t o = (size_t)b * C;
            int t = 0;
            if (j->o.bos) {
                bt->ids[o] = j->eot;
                bt->bstart[o] = bt->bend[o] = -1;
                bt->tags[o][0] = 0;
                t = 1;
            }
            for (int i = 0; i < n; i++, t++) {
                size_t k = (size_t)(s0 + i);
                bt->ids[o + t] = x.ids[k];
                bt->bstart[o + t] = (int64_t)x.off[k];
                bt->bend[o + t] = k + 1 < x.n ? (int64_t)x.off[k + 1] : (int64_t)d->len;
                snprintf(bt->tags[o + t], sizeof bt->tags[0], "%s", x.tag && x.tag[k] ? x.tag[k] : "");
            }
            total += len;
        }
        doc_free(&x);
    }
    corpus_close(r);
    if (!rc && done != 2) rc = flush(j, st, &in_tx);
    rc = drain(j, st, &in_tx, rc, done == 2); /* also after an error: the thread must stop */
    if (j->stop_rank) done = 2; /* found in the last flush or the drain */
    helper_stop(j);
    if (blas_before) openblas_set_num_threads(blas_before);
    if (!rc && progress) progress(st, u);
    if (!rc && done != 2 && j->s) {
        rc = ensure_tx(j, &in_tx);
        if (!rc) rc = store_run_done(j->s, j->run_id);
    }
    double tc = secs();
    if (!rc) rc = commit(j, &in_tx); /* also what an interruption has done so far */
    st->t_store += secs() - tc;
    if (in_tx) store_rollback(j->s);
    if (rc && j->s && !j->commits) undo_setup(j, rc);
    st->t_total = secs() - t0;
    if (!rc && done == 2)
        rc = j->stop_rank && !(j->o.stop && *j->o.stop)
                 ? err_set(ERR_ABORTED, "rank %d was interrupted; stopped after %lld windows; the "
                           "database holds every finished batch; run the same command again to "
                           "resume", j->stop_rank, (long long)st->windows)
                 : err_set(ERR_ABORTED, "interrupted after %lld windows; the database holds every "
                           "finished batch; run the same command again to resume", (long long)st->windows);
    return rc;
}

int ext_run(ext_job *j, ext_stats *st, void (*progress)(const ext_stats *st, void *u), void *u)
{
    memset(st, 0, sizeof *st);
    j->ran = 1;
    /* every rank's forward passes in the job's matmul precision */
    int prev_bf16 = op_precision_bf16(), rc;
    if (j->bf16) op_set_precision(OP_PRECISION_BF16);
    if (!dist_is_root()) {
        double t0 = secs();
        int blas_before = openblas_get_num_threads(); /* serve_forwards takes rank 0's */
        rc = serve_forwards(j, st);
        if (openblas_get_num_threads() != blas_before) openblas_set_num_threads(blas_before);
        st->t_total = secs() - t0;
    } else {
        j->n_fill = j->n_write = j->n_dispatch = 0;
        for (int k = 0; k < EXT_RING; k++) j->bt[k].owner = 0;
        rc = run_root(j, st, progress, u);
        if (dist_size() > 1) {
            int rc2 = release_ranks(j, rc == ERR_ABORTED);
            if (!rc) rc = rc2;
        }
    }
    op_set_precision(prev_bf16 ? OP_PRECISION_BF16 : OP_PRECISION_FP32);
    return rc;
}
