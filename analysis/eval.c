/* eval.c - `saelite eval` as a library runner (eval.h): the SAE, the split by document, the
 * sampled sequences and positions, one pass over their activations, the sparse-probing and
 * absorption suites and the writing transaction. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/eval.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/hash.h"
#include "common/mem.h"
#include "common/progress.h"
#include "common/rng.h"
#include "store/store.h"
#include "store/store_ana.h"
#include "store/store_eval.h"
#include "sae/sae_run.h"
#include "store/store_sae.h"

void eval_defaults(eval_opts *o)
{
    *o = (eval_opts){.suites = "all", .seed = 42, .test_frac = 0.2, .seqs_per_genre = 150,
                     .train_per_class = 1500, .test_per_class = 500, .C = 1, .ckpt_secs = 60};
}

static int stopped(const eval_opts *o) { return o->stop && *o->stop; }

/* *all = 1 when "all" named the suites: then a suite whose data the database lacks is skipped
 * (eval_result.skipped) instead of failing the run. */
const char *const eval_suite_names[EVAL_NSUITES] = {"sparse_probing", "absorption", "scr", "tpp"};

int eval_parse_suites(const char *s, int *bits, int *all)
{
    *bits = 0;
    *all = 0;
    char w[64];
    int named = 0; /* the suites named so far ("scr,scr" and "scr," ran silently: an audit) */
    while (s && *s) {
        size_t n = strcspn(s, ",");
        snprintf(w, sizeof w, "%.*s", (int)(n < sizeof w ? n : sizeof w - 1), s);
        int i = 0;
        while (i < EVAL_NSUITES && strcmp(w, eval_suite_names[i])) i++;
        if (i < EVAL_NSUITES && (named & 1 << i))
            return err_set(ERR_ARG, "%s is given twice", w);
        /* "all" names every suite: beside another name (or itself) a suite is named twice, and
           "scr,all" skipped a missing scr as "all" does ("all,all" and "all,scr" ran silently) */
        int is_all = i == EVAL_NSUITES && !strcmp(w, "all");
        if ((is_all && named) || (i < EVAL_NSUITES && *all))
            return err_set(ERR_ARG, "%s", is_all && named == 1 << EVAL_NSUITES
                                              ? "all is given twice"
                                              : "all names every suite: give it alone");
        if (is_all) named |= 1 << EVAL_NSUITES;
        if (i < EVAL_NSUITES) *bits |= 1 << i, named |= 1 << i;
        else if (is_all) {
            *bits |= (1 << EVAL_NSUITES) - 1;
            *all = 1;
        }
        else if (!n) /* a,,b ran silently */
            return err_set(ERR_ARG, "an empty suite name in the list (sparse_probing, absorption, "
                                    "scr, tpp, all)");
        else
            return err_set(ERR_ARG, "unknown suite '%s' (sparse_probing, absorption, scr, tpp, all)", w);
        s += n;
        if (*s == ',' && !*++s)
            return err_set(ERR_ARG, "an empty suite name in the list (sparse_probing, absorption, "
                                    "scr, tpp, all): a trailing comma");
    }
    if (!*bits) return err_set(ERR_ARG, "no suite given");
    return OK;
}

int eval_random_sae(const sae_model *m, uint64_t seed, sae_model **out)
{
    int rc = sae_model_new(out, &m->cfg);
    if (rc) return rc;
    sae_model *r = *out;
    int D = m->cfg.d_sae, d = m->cfg.d_in, dout = sae_out_dim(&m->cfg);
    rng_state g;
    rng_seed(&g, seed ^ 0x52414e44ull);
    for (int j = 0; j < D; j++) {
        float *row = r->W_dec + (size_t)j * dout;
        double nr = 0;
        for (int i = 0; i < dout; i++) {
            row[i] = (float)rng_normal(&g);
            nr += (double)row[i] * row[i];
        }
        for (int i = 0; i < dout; i++) row[i] = (float)(row[i] / sqrt(nr));
    }
    for (int i = 0; i < d; i++)
        for (int j = 0; j < D; j++) r->W_enc[(size_t)i * D + j] = r->W_dec[(size_t)j * dout + i];
    memcpy(r->b_dec, m->b_dec, (size_t)dout * sizeof *r->b_dec);
    /* it reads C x as the SAE does (cfg copied), through sae_load's own fold */
    if (m->cfg.center_input) sae_center_encoder(r, 1);
    return OK;
}

/* ---- results held for the writing transaction ---------------------------------------------- */
/* The suites' rows wait in memory until everything is computed, so the database's write lock is
 * held only for the writing itself (a concurrent sae-train can register meanwhile). */
enum { SUITE_SP, SUITE_ABS, SUITE_SCR, SUITE_TPP, NSUITES }; /* bit positions of EVAL_SUITE_* */
_Static_assert((int)NSUITES == (int)EVAL_NSUITES, "one suite list");
enum { ROW_PROBE, ROW_ABS, ROW_ABL, ROW_METRIC };
typedef struct {
    unsigned char type, suite;
    char name[96];           /* task, parent or metric */
    const char *kind, *dict; /* static strings (probe rows) */
    char *json;              /* features / split features (mem_alloc'd) or NULL */
    int i[5];
    double v[6];
} pend_row;

/* ---- the read pass's checkpoint (a killed eval continues) -------------------------------------
 * The read is most of an eval (30 s of the demo's 51 s). Every ckpt_secs it saves the rows read so
 * far to DB.eval-HASH (HASH: the SAE's directory and hook), and the same command run again
 * continues after the last sequence saved, with the bits of an uninterrupted run (the rows of a
 * sequence depend on that sequence alone). The file opens with a key of what the rows depend on:
 * the SAE's cfg.json and weights, the random SAE's seed (or none), the hook's id and counts, a
 * fingerprint of 64 chosen sequences' stored values, and the plan itself (every chosen sequence
 * id and BOS flag, every marked token's class and split).
 * Another key, or a file that fails a check, is a fresh read with a notice (the file is a cache);
 * one that cannot be written stops the checkpoints, not the run. It goes once the tables are
 * written. Layout, host byte order (the binary that wrote it): int64 {magic, key0, key1,
 * sequences done, token rows n}, token raw [n,d] f32, class [n] int32, test [n] u8, then the
 * token rows' SAE and random-SAE codes, the pooled raw rows [done,d] f32 and their two codes, each
 * code set int64 {rows, nnz}, off [rows+1] size_t, idx [nnz] int32, val [nnz] f32; last the
 * FNV-1a (file_sum). */
#define EVAL_CKPT_MAGIC INT64_C(0x3150434b4c5645) /* "EVLKCP1" */

typedef struct {
    char path[4096];
    uint64_t key[2];
    double secs, last;
    int resumed;      /* sequences the checkpoint held */
    int ours;         /* the file at path is this command's: this run saved it or continued from it
                         (another run's, or one a run without checkpoints found, is not) */
} read_ckpt;

/* ---- shared state -------------------------------------------------------------------------------- */
typedef struct {
    int n;               /* rows */
    float *raw;          /* [n, d] */
    eval_csr sae, rnd;
    int *cls;            /* class per row */
    unsigned char *test; /* 1 = from a test document */
    int *doc;            /* its document (index into ctx.doc_stratum), for the standard errors;
                            NULL when it could not be told (rows_docs) */
} sample_set;

static void set_free(sample_set *s)
{
    mem_free(s->raw);
    eval_csr_free(&s->sae);
    eval_csr_free(&s->rnd);
    mem_free(s->cls);
    mem_free(s->test);
    mem_free(s->doc);
}

typedef struct {
    const eval_opts *o;
    store *s;
    store_hook hook;
    sae_model *sae, *rnd;
    char sae_dir[4096];
    int64_t sae_id;      /* -1 until known */
    int by_id;           /* --sae named a registry id */
    store_eval_seq *seqs;
    size_t nseq;
    char (*genres)[32];
    int ngenres;
    int *chosen;         /* indices into seqs, ascending */
    int nchosen;
    unsigned char *seq_test; /* [nseq] */
    int *seq_doc;        /* [nseq] its document's index among the distinct documents, ascending id */
    int ndocs;
    int *doc_stratum;    /* [ndocs] the split's stratum of a test document, -1 for a train one:
                            what the standard errors' bootstrap draws (eval_boot) */
    sample_set tok, seq; /* POS tokens; pooled sequences */
    signed char *tense;  /* [nchosen] 1 past, 0 present, -1 neither (more past than present finite verbs) */
    int bits;            /* EVAL_SUITE_* requested */
    int soft;            /* "all" or skip_missing: a suite without (enough) data is skipped, not an error */
    int scr_small;       /* run_scr skipped SCR (soft): its sets are below EVAL_MIN_* */
    int *ch_grp;         /* [nchosen] genre index */
    unsigned char *ch_genre, *ch_scr; /* [nchosen] in the per-genre sample / in SCR's cells */
    int nat[2][2];       /* all stored sequences per (imaginative, past): the labels' natural joint */
    store_sae_entry reg;   /* the SAE's registry row, when it has one (sae_id >= 0) */
    pend_row *rows;        /* results, written after every computation (flush_rows) */
    size_t nrows, caprows;
    read_ckpt ck;          /* the read pass's checkpoint */
    int read_began;        /* read_pass ran (before it ck is not set up: a stop there knows no file) */
    eval_memo *memo;       /* the probes' memo: the caller's, or own_memo for the journal */
    eval_memo *own_memo;
    char probes[4200];     /* the suites' checkpoint: ck.path + ".probes" ("" without a name) */
    eval_boot *boot;       /* the running suite's standard errors (NULL: none for this set) */
} ctx;

static int genre_index(ctx *c, const char *g)
{
    for (int i = 0; i < c->ngenres; i++)
        if (!strcmp(c->genres[i], g)) return i;
    if (c->ngenres >= 64) return -1;
    snprintf(c->genres[c->ngenres], 32, "%s", g);
    return c->ngenres++;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Tense of a sequence from its tags: 1 when more finite verbs are past than present, 0 for the
 * reverse, -1 for a tie (none included). Each word counts once, not once per BPE piece (a verb
 * cut into three tokens counted three times, an audit). tags [seq_len][16] (left holding the
 * sequence's tags), cont [seq_len]: scratch; *tagged (may be NULL): some position is tagged. */
static int seq_tense(ctx *c, const store_eval_seq *sq, char (*tags)[16], unsigned char *cont,
                     int *tense, int *tagged)
{
    int any = 0, T = sq->n_tokens < c->hook.seq_len ? sq->n_tokens : c->hook.seq_len;
    int rc = store_ana_seq_tags(c->s, sq->seq_id, T, tags, &any, cont);
    if (tagged) *tagged = any;
    int npast = 0, npres = 0;
    for (int t = sq->bos ? 1 : 0; !rc && any && t < T; t++) {
        if (cont[t]) continue;
        int tn = eval_tense(tags[t]);
        npast += tn == 1;
        npres += tn == 0;
    }
    *tense = npast > npres ? 1 : npres > npast ? 0 : -1;
    return rc;
}

/* SCR's own sample: up to seqs_per_genre sequences per (split, prose kind, tense) cell, a seeded
 * choice among all stored sequences (the imaginative present-tense cell is rare: ~6% of the
 * imaginative sequences on Brown); flag bit 2 marks them, bit 1 stays the per-genre sample. */
static int scr_sample(ctx *c, const int *grp, int *perm, unsigned char *flag)
{
    char (*tags)[16] = mem_alloc((size_t)c->hook.seq_len * sizeof *tags);
    unsigned char *cont = mem_alloc((size_t)c->hook.seq_len);
    if (!tags || !cont) {
        mem_free(tags);
        mem_free(cont);
        return err_set(ERR_NOMEM, "out of memory");
    }
    int rc = OK;
    rng_state r;
    rng_seed(&r, c->o->seed ^ 0x534352ull);
    signed char *cell = mem_alloc(c->nseq);
    if (!cell) rc = err_set(ERR_NOMEM, "out of memory");
    progress pr;
    progress_begin(&pr, "eval tense", (double)c->nseq, "seq");
    for (size_t i = 0; !rc && i < c->nseq; i++) {
        int a = eval_imaginative(c->genres[grp[i]]), b = -1;
        if (a >= 0) rc = seq_tense(c, &c->seqs[i], tags, cont, &b, NULL);
        cell[i] = (signed char)(a < 0 || b < 0 ? -1 : c->seq_test[i] * 4 + a * 2 + b);
        if (a >= 0 && b >= 0) c->nat[a][b]++;
        if (!rc && stopped(c->o)) rc = err_set(ERR_ABORTED, "interrupted");
        if (i % 256 == 0) progress_update(&pr, (double)i, NULL);
    }
    progress_end(&pr);
    for (int q = 0; !rc && q < 8; q++) {
        int n = 0;
        for (size_t i = 0; i < c->nseq; i++)
            if (cell[i] == q) perm[n++] = (int)i;
        eval_shuffle(perm, n, &r);
        for (int i = 0; i < n && i < c->o->seqs_per_genre; i++) flag[perm[i]] |= 2;
    }
    mem_free(cell);
    mem_free(tags);
    mem_free(cont);
    return rc;
}

/* Genres, the split by document, and the sampled sequences. */
static int plan_sequences(ctx *c, eval_result *res)
{
    const eval_opts *o = c->o;
    int rc = store_eval_seqs(c->s, c->hook.id, &c->seqs, &c->nseq);
    if (rc) return rc;
    if (!c->nseq) return err_set(ERR_NOTFOUND, "%s: hook %s has no stored activations", o->db, c->hook.name);
    c->genres = mem_calloc(65, sizeof *c->genres); /* 64 genres and the "no genre" stratum */
    int *grp = mem_alloc(c->nseq * sizeof *grp);
    int64_t *docs = mem_alloc(c->nseq * sizeof *docs);
    c->seq_test = mem_alloc(c->nseq);
    int *dgrp = mem_alloc(c->nseq * sizeof *dgrp);
    unsigned char *dtest = mem_alloc(c->nseq);
    if (!c->genres || !grp || !docs || !c->seq_test || !dgrp || !dtest) {
        rc = err_set(ERR_NOMEM, "out of memory for %zu sequences", c->nseq);
        goto out;
    }
    /* the named genres first; sequences without one (documents.genre NULL or '') form one more
       stratum, index ngenres, for the split and the sample (their tokens feed the POS pools), but
       no genre task: they are neither a genre named '' nor negatives of the genres */
    for (size_t i = 0; i < c->nseq; i++) {
        grp[i] = c->seqs[i].genre[0] ? genre_index(c, c->seqs[i].genre) : -2;
        docs[i] = c->seqs[i].doc_id;
    }
    for (size_t i = 0; i < c->nseq; i++)
        if (grp[i] == -2) grp[i] = c->ngenres;
    qsort(docs, c->nseq, sizeof *docs, cmp_i64);
    size_t nd = 0;
    for (size_t i = 0; i < c->nseq; i++)
        if (!nd || docs[nd - 1] != docs[i]) docs[nd++] = docs[i];
    for (size_t i = 0; i < c->nseq; i++) { /* a document's genre: that of its sequences */
        int64_t *p = bsearch(&c->seqs[i].doc_id, docs, nd, sizeof *docs, cmp_i64);
        dgrp[p - docs] = grp[i];
    }
    if ((rc = eval_split_docs(docs, dgrp, nd, o->test_frac, o->seed, dtest))) goto out;
    for (size_t i = 0; i < nd; i++) {
        if (dtest[i]) res->n_test_docs++;
        else res->n_train_docs++;
    }
    c->seq_doc = mem_alloc(c->nseq * sizeof *c->seq_doc);
    c->doc_stratum = mem_alloc(nd * sizeof *c->doc_stratum);
    if (!c->seq_doc || !c->doc_stratum) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto out;
    }
    c->ndocs = (int)nd;
    for (size_t i = 0; i < nd; i++) c->doc_stratum[i] = dtest[i] ? dgrp[i] : -1;
    for (size_t i = 0; i < c->nseq; i++) {
        int64_t *p = bsearch(&c->seqs[i].doc_id, docs, nd, sizeof *docs, cmp_i64);
        c->seq_test[i] = dtest[p - docs];
        c->seq_doc[i] = (int)(p - docs);
    }
    /* up to seqs_per_genre sequences of each genre, a seeded choice */
    c->chosen = mem_alloc(c->nseq * sizeof *c->chosen);
    int *perm = mem_alloc(c->nseq * sizeof *perm);
    if (!c->chosen || !perm) {
        mem_free(perm);
        rc = err_set(ERR_NOMEM, "out of memory");
        goto out;
    }
    rng_state r;
    rng_seed(&r, o->seed ^ 0x53455153ull);
    for (int g = 0; g <= c->ngenres; g++) { /* and the sequences without a genre */
        int n = 0;
        for (size_t i = 0; i < c->nseq; i++)
            if (grp[i] == g) perm[n++] = (int)i;
        eval_shuffle(perm, n, &r);
        for (int i = 0; i < n && i < o->seqs_per_genre; i++) c->chosen[c->nchosen++] = perm[i];
    }
    unsigned char *flag = mem_calloc(c->nseq, 1); /* bit 1: per-genre sample, bit 2: SCR */
    if (!flag) rc = err_set(ERR_NOMEM, "out of memory");
    for (int i = 0; !rc && i < c->nchosen; i++) flag[c->chosen[i]] = 1;
    if (!rc && (c->bits & EVAL_SUITE_SCR)) rc = scr_sample(c, grp, perm, flag);
    if (!rc) {
        c->nchosen = 0;
        for (size_t i = 0; i < c->nseq; i++)
            if (flag[i]) c->chosen[c->nchosen++] = (int)i;
    }
    mem_free(perm);
    c->seq.cls = mem_alloc(((size_t)c->nchosen + 1) * sizeof *c->seq.cls);
    c->seq.test = mem_alloc((size_t)c->nchosen + 1);
    c->ch_grp = mem_alloc(((size_t)c->nchosen + 1) * sizeof *c->ch_grp);
    c->ch_genre = mem_alloc((size_t)c->nchosen + 1);
    c->ch_scr = mem_alloc((size_t)c->nchosen + 1);
    if (!rc && (!c->seq.cls || !c->seq.test || !c->ch_grp || !c->ch_genre || !c->ch_scr))
        rc = err_set(ERR_NOMEM, "out of memory");
    for (int i = 0; !rc && i < c->nchosen; i++) {
        int q = c->chosen[i];
        c->ch_grp[i] = grp[q];
        c->ch_genre[i] = flag[q] & 1;
        c->ch_scr[i] = (flag[q] & 2) != 0;
        /* SCR's extra sequences and those without a genre stay out of the genre tasks */
        c->seq.cls[i] = c->ch_genre[i] && grp[q] < c->ngenres ? grp[q] : -1;
        c->seq.test[i] = c->seq_test[q];
    }
    mem_free(flag);
    c->seq.n = c->nchosen;
out:
    mem_free(grp);
    mem_free(docs);
    mem_free(dgrp);
    mem_free(dtest);
    return rc;
}

typedef struct {
    int ci, pos;
} cand;

/* The POS token positions: per (class, split), a seeded choice of at most the pool size.
 * mark[off[ci] + pos] = class * 2 + test for a chosen position, else -1. */
static int plan_tokens(ctx *c, int **mark_out, int64_t **off_out)
{
    const eval_opts *o = c->o;
    int64_t *off = mem_alloc(((size_t)c->nchosen + 1) * sizeof *off);
    if (!off) return err_set(ERR_NOMEM, "out of memory");
    off[0] = 0;
    for (int i = 0; i < c->nchosen; i++) off[i + 1] = off[i] + c->seqs[c->chosen[i]].n_tokens;
    int *mark = mem_alloc(((size_t)off[c->nchosen] + 1) * sizeof *mark);
    cand *cd[EVAL_NPOS * 2] = {0};
    int nc[EVAL_NPOS * 2] = {0}, cc[EVAL_NPOS * 2] = {0};
    char (*tags)[16] = mem_alloc((size_t)c->hook.seq_len * sizeof *tags);
    unsigned char *cont = mem_alloc((size_t)c->hook.seq_len);
    c->tense = mem_alloc((size_t)c->nchosen + 1);
    int rc = mark && tags && cont && c->tense ? OK : err_set(ERR_NOMEM, "out of memory");
    for (int64_t q = 0; !rc && q < off[c->nchosen]; q++) mark[q] = -1;
    for (int i = 0; !rc && i < c->nchosen; i++) {
        const store_eval_seq *sq = &c->seqs[c->chosen[i]];
        int any = 0, T = sq->n_tokens;
        if (T > c->hook.seq_len) T = c->hook.seq_len;
        int tn;
        if ((rc = seq_tense(c, sq, tags, cont, &tn, &any))) break; /* tags: this sequence's */
        c->tense[i] = (signed char)tn;
        if (!c->ch_genre[i]) continue; /* POS positions come from the per-genre sample only */
        for (int t = sq->bos ? 1 : 0; any && t < T; t++) {
            int k = eval_pos_class(tags[t]);
            if (k < 0) continue;
            int b = k * 2 + c->seq_test[c->chosen[i]];
            if (nc[b] == cc[b]) {
                cc[b] = cc[b] ? 2 * cc[b] : 1024;
                cand *p = mem_realloc(cd[b], (size_t)cc[b] * sizeof *p);
                if (!p) {
                    rc = err_set(ERR_NOMEM, "out of memory for token candidates");
                    break;
                }
                cd[b] = p;
            }
            cd[b][nc[b]++] = (cand){i, t};
        }
        if (!rc && stopped(o)) rc = err_set(ERR_ABORTED, "interrupted");
    }
    rng_state r;
    rng_seed(&r, o->seed ^ 0x544f4b53ull);
    for (int b = 0; !rc && b < EVAL_NPOS * 2; b++) {
        int cap = b % 2 ? o->test_per_class : o->train_per_class;
        int take = nc[b] < cap ? nc[b] : cap;
        for (int i = 0; i < take; i++) { /* partial Fisher-Yates: the first take are the choice */
            int j = i + (int)rng_below(&r, (uint64_t)(nc[b] - i));
            cand t = cd[b][i];
            cd[b][i] = cd[b][j];
            cd[b][j] = t;
            mark[off[cd[b][i].ci] + cd[b][i].pos] = b;
        }
    }
    for (int b = 0; b < EVAL_NPOS * 2; b++) mem_free(cd[b]);
    mem_free(tags);
    mem_free(cont);
    if (rc) {
        mem_free(mark);
        mem_free(off);
        return rc;
    }
    *mark_out = mark;
    *off_out = off;
    return OK;
}

static int read_ckpt_setup(read_ckpt *ck, const ctx *c, const int *mark, const int64_t *off)
{
    const eval_opts *o = c->o;
    memset(ck, 0, sizeof *ck);
    /* the name first, also without checkpoints: a finished run removes an earlier run's file */
    uint64_t id[2] = {0x6576616c2d726431ull, HASH_FNV1A_INIT}, *h = ck->key;
    hash_absorb128_str(id, c->sae_dir);
    hash_absorb128_str(id, c->hook.name);
    if (path_fmt(ck->path, sizeof ck->path, "%s.eval-%016llx", o->db,
                 (unsigned long long)(id[0] ^ id[1]))) {
        ck->path[0] = 0;
        if (o->ckpt_secs > 0)
            progress_notice(o->notice, o->user, "no checkpoints for the read: %s", err_msg());
        err_clear();
        return OK;
    }
    file_remove_dead_temps_plain(ck->path, 1); /* its .probes too */
    if (!(o->ckpt_secs > 0)) return OK;
    char sum[17];
    int rc = sae_files_checksum(c->sae_dir, sum);
    if (rc) return rc;
    h[0] = id[0];
    h[1] = id[1];
    hash_absorb128_str(h, sum);
    int64_t w[] = {c->rnd ? 1 : 0, c->rnd ? (int64_t)o->seed : 0, c->hook.id, c->hook.n_seqs,
                   c->hook.n_tokens, c->hook.width, c->hook.seq_len, c->sae->cfg.d_sae, c->nchosen};
    for (size_t i = 0; i < sizeof w / sizeof *w; i++) hash_absorb128(h, (uint64_t)w[i]);
    for (int i = 0; i < c->nchosen; i++) {
        const store_eval_seq *sq = &c->seqs[c->chosen[i]];
        hash_absorb128(h, (uint64_t)sq->seq_id);
        hash_absorb128(h, (uint64_t)sq->bos);
        hash_absorb128(h, (uint64_t)off[i + 1]);
    }
    for (int64_t q = 0; q < off[c->nchosen]; q++) hash_absorb128(h, (uint64_t)(int64_t)mark[q]);
    /* the stored values too, sampled (store_act_fingerprint): a database made again with the
       same shapes had taken the old checkpoint (an audit) */
    int64_t *ids = mem_alloc(((size_t)c->nchosen + 1) * sizeof *ids);
    if (!ids) return err_set(ERR_NOMEM, "out of memory");
    for (int i = 0; i < c->nchosen; i++) ids[i] = c->seqs[c->chosen[i]].seq_id;
    rc = store_act_fingerprint(c->s, c->hook.id, ids, (size_t)c->nchosen, 64, h);
    mem_free(ids);
    if (rc) return rc;
    ck->secs = o->ckpt_secs;
    return OK;
}

static void csr_put(file_sum *io, const eval_csr *m)
{
    int64_t hdr[2] = {m->n, m->n ? (int64_t)m->off[m->n] : 0};
    file_sum_put(io, hdr, sizeof hdr);
    if (!m->n) return;
    file_sum_put(io, m->off, ((size_t)m->n + 1) * sizeof *m->off);
    file_sum_put(io, m->idx, (size_t)hdr[1] * sizeof *m->idx);
    file_sum_put(io, m->val, (size_t)hdr[1] * sizeof *m->val);
}

static int read_ckpt_save(const read_ckpt *ck, const ctx *c, int done)
{
    const int d = c->hook.width;
    file_atomic fa;
    int rc = file_atomic_open_plain(&fa, ck->path);
    if (rc) return rc;
    fa.sync = 1;
    file_sum io = file_sum_start(fa.f);
    int64_t hdr[5] = {EVAL_CKPT_MAGIC, (int64_t)ck->key[0], (int64_t)ck->key[1], done, c->tok.n};
    file_sum_put(&io, hdr, sizeof hdr);
    file_sum_put(&io, c->tok.raw, (size_t)c->tok.n * d * sizeof *c->tok.raw);
    file_sum_put(&io, c->tok.cls, (size_t)c->tok.n * sizeof *c->tok.cls);
    file_sum_put(&io, c->tok.test, (size_t)c->tok.n);
    csr_put(&io, &c->tok.sae);
    csr_put(&io, &c->tok.rnd);
    file_sum_put(&io, c->seq.raw, (size_t)done * d * sizeof *c->seq.raw);
    csr_put(&io, &c->seq.sae);
    csr_put(&io, &c->seq.rnd);
    file_sum_put_end(&io);
    if (io.bad) {
        file_atomic_abort(&fa);
        return err_set(ERR_IO, "%s: write failed", ck->path);
    }
    return file_atomic_commit(&fa);
}

/* rows of one code set into m (empty), pushed back through eval_csr_push so its layout is the
 * one the read makes; 0 when the stored rows do not fit (rows, nnz, offsets, indices). */
static int csr_get(file_sum *io, eval_csr *m, int64_t rows, int width, int64_t fsize, float *dense)
{
    int64_t hdr[2];
    file_sum_get(io, hdr, sizeof hdr);
    if (io->bad || hdr[0] != rows || hdr[1] < 0 || hdr[1] > fsize || hdr[1] > rows * (int64_t)width)
        return 0;
    if (!rows) return 1;
    size_t nnz = (size_t)hdr[1];
    size_t *o = mem_alloc(((size_t)rows + 1) * sizeof *o);
    int *idx = mem_alloc((nnz + 1) * sizeof *idx);
    float *val = mem_alloc((nnz + 1) * sizeof *val);
    int ok = o && idx && val;
    if (ok) {
        file_sum_get(io, o, ((size_t)rows + 1) * sizeof *o);
        file_sum_get(io, idx, nnz * sizeof *idx);
        file_sum_get(io, val, nnz * sizeof *val);
        ok = !io->bad && o[0] == 0 && o[rows] == nnz;
    }
    for (int64_t r = 0; ok && r < rows; r++) {
        ok = o[r] <= o[r + 1] && o[r + 1] <= nnz;
        memset(dense, 0, (size_t)width * sizeof *dense);
        for (size_t q = ok ? o[r] : 0; ok && q < o[r + 1]; q++) {
            ok = idx[q] >= 0 && idx[q] < width && (q == o[r] || idx[q] > idx[q - 1]);
            if (ok) dense[idx[q]] = val[q];
        }
        if (ok && eval_csr_push(m, dense, width)) {
            err_clear();
            ok = 0;
        }
    }
    mem_free(o);
    mem_free(idx);
    mem_free(val);
    return ok;
}

/* What the probes can fit: finite and below EVAL_MAX_ABS in size (NaN fails). */
static int in_bounds(float a) { return fabsf(a) < EVAL_MAX_ABS; }

static int bounded(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!in_bounds(v[i])) return 0;
    return 1;
}

/* The saved rows into c's sets (empty, allocated for the whole read); the sequences done, 0 when
 * there is nothing to continue (a notice when a file was there but not usable: the sets are
 * emptied again). */
static int read_ckpt_load(read_ckpt *ck, ctx *c, int64_t ntok)
{
    const eval_opts *o = c->o;
    const int d = c->hook.width, D = c->sae->cfg.d_sae;
    int64_t fsize = 0;
    if (!(ck->secs > 0)) return 0;
    file_sum io;
    const char *why = file_sum_open(ck->path, &io, &fsize);
    if (!why && !io.f) return 0;
    int64_t hdr[5];
    file_sum_get(&io, hdr, sizeof hdr); /* zeros when unreadable */
    float *dense = NULL;
    if (!why) {
        if (io.bad) why = "cannot be read";
        else if (hdr[0] != EVAL_CKPT_MAGIC) why = "is not an eval checkpoint of this build";
        else if ((uint64_t)hdr[1] != ck->key[0] || (uint64_t)hdr[2] != ck->key[1])
            why = "was made with other inputs or options";
        else if (hdr[3] < 1 || hdr[3] > c->nchosen || hdr[4] < 0 || hdr[4] > ntok)
            why = "is damaged (its counts do not fit this run)";
        else if (!(dense = mem_alloc((size_t)D * sizeof *dense))) why = "needs more memory than there is";
    }
    if (!why) {
        int done = (int)hdr[3];
        c->tok.n = (int)hdr[4];
        file_sum_get(&io, c->tok.raw, (size_t)c->tok.n * d * sizeof *c->tok.raw);
        file_sum_get(&io, c->tok.cls, (size_t)c->tok.n * sizeof *c->tok.cls);
        file_sum_get(&io, c->tok.test, (size_t)c->tok.n);
        int ok = csr_get(&io, &c->tok.sae, c->tok.n, D, fsize, dense) &&
                 csr_get(&io, &c->tok.rnd, c->tok.n, D, fsize, dense);
        if (ok) file_sum_get(&io, c->seq.raw, (size_t)done * d * sizeof *c->seq.raw);
        ok = ok && csr_get(&io, &c->seq.sae, done, D, fsize, dense) &&
             csr_get(&io, &c->seq.rnd, done, D, fsize, dense) && file_sum_get_end(&io);
        if (ok) { /* what the read makes: classes, and values the probes can fit (check_bounded) */
            for (int r = 0; r < c->tok.n && ok; r++)
                ok = c->tok.cls[r] >= 0 && c->tok.cls[r] < EVAL_NPOS && c->tok.test[r] <= 1;
            ok = ok && bounded(c->tok.raw, (size_t)c->tok.n * d) && bounded(c->seq.raw, (size_t)done * d);
            const eval_csr *sets[4] = {&c->tok.sae, &c->tok.rnd, &c->seq.sae, &c->seq.rnd};
            for (int k = 0; k < 4 && ok; k++)
                ok = !sets[k]->n || bounded(sets[k]->val, sets[k]->off[sets[k]->n]);
            if (!ok) why = "is damaged (a row's class or a value no read keeps)";
        } else why = "is damaged (its checksum or rows fail)";
        if (!why) {
            ck->resumed = done;
            progress_notice(o->notice, o->user, "continuing the read from %s (%d of %d sequences done)",
                            ck->path, done, c->nchosen);
        }
    }
    if (io.f) fclose(io.f);
    mem_free(dense);
    if (!why) return ck->resumed;
    c->tok.n = 0;
    eval_csr_free(&c->tok.sae);
    eval_csr_free(&c->tok.rnd);
    eval_csr_free(&c->seq.sae);
    eval_csr_free(&c->seq.rnd);
    progress_notice(o->notice, o->user, "%s %s: reading from the start", ck->path, why);
    return 0;
}

/* Rows v[T, w] of one sequence must be finite and below EVAL_MAX_ABS: a probe on larger values
 * cannot be fitted (LIBLINEAR never returned at 1e38). what NULL: the hook activations (the
 * database is named), else codes (the SAE directory is named). */
static int check_bounded(const ctx *c, const float *v, int T, int w, int64_t seq, const char *what)
{
    for (int t = 0; t < T; t++)
        for (int j = 0; j < w; j++) {
            float a = v[(size_t)t * w + j];
            if (in_bounds(a)) continue;
            if (!what)
                return err_set(ERR_FORMAT, "%s: hook %s holds %g at sequence %lld, token %d, unit %d "
                               "(the probes need finite activations below %g in size)", c->o->db,
                               c->hook.name, (double)a, (long long)seq, t, j, EVAL_MAX_ABS);
            return err_set(ERR_FORMAT, "%s: %s of latent %d is %g at sequence %lld, token %d (the "
                           "probes need finite codes below %g in size: a weight that large is bad "
                           "input)", c->sae_dir, what, j, (double)a, (long long)seq, t, EVAL_MAX_ABS);
        }
    return OK;
}

/* The suites' checkpoint, once the read is whole: the probes a killed run fitted (ck.path +
 * ".probes", under the read's key) are loaded into the memo, and from here every fit is kept (also
 * without checkpoints) and saved there every ck.secs. A memo entry answers only the problem it
 * was fitted on, bit for bit what fitting it again gives (every fit seeds LIBLINEAR's rand() the
 * same way), so the suites' rows equal an uninterrupted run's. The caller's memo (a sweep's)
 * journals for this run only. */
static int probes_setup(ctx *c, eval_result *res)
{
    const eval_opts *o = c->o;
    c->memo = o->memo;
    if (!c->memo) {
        int rc = eval_memo_new(&c->own_memo);
        if (rc) return rc;
        c->memo = c->own_memo;
    }
    if (!c->ck.path[0] || path_fmt(c->probes, sizeof c->probes, "%s.probes", c->ck.path)) {
        c->probes[0] = 0;
        err_clear();
    }
    double secs = c->probes[0] ? c->ck.secs : 0;
    if (secs > 0) {
        const char *why = NULL;
        int n = eval_memo_resume(c->memo, c->probes, c->ck.key, &why);
        if (why) progress_notice(o->notice, o->user, "%s %s: fitting every probe", c->probes, why);
        else if (n > 0)
            progress_notice(o->notice, o->user, "continuing the suites with %d probes fitted before (%s)",
                            n, c->probes);
        res->resumed_probes = n;
    }
    /* kept also without checkpoints: SCR and TPP fit many of the probing suite's problems again
       (their time on the demo 4.1 s -> 0.6 s) */
    return eval_memo_journal(c->memo, c->probes, c->ck.key, secs);
}

/* One pass over the chosen sequences: pooled rows for the genre tasks, token rows for POS. */
static int read_pass(ctx *c, const int *mark, const int64_t *off)
{
    const int d = c->hook.width, D = c->sae->cfg.d_sae, Tm = c->hook.seq_len;
    int64_t ntok = 0;
    for (int64_t q = 0; q < off[c->nchosen]; q++) ntok += mark[q] >= 0;
    c->tok.raw = mem_alloc(((size_t)ntok + 1) * d * sizeof *c->tok.raw);
    c->tok.cls = mem_alloc(((size_t)ntok + 1) * sizeof *c->tok.cls);
    c->tok.test = mem_alloc((size_t)ntok + 1);
    c->seq.raw = mem_alloc(((size_t)c->nchosen + 1) * d * sizeof *c->seq.raw);
    float *x = mem_alloc((size_t)Tm * d * sizeof *x);
    float *f = mem_alloc((size_t)Tm * D * sizeof *f), *g = mem_alloc((size_t)Tm * D * sizeof *g);
    float *pf = mem_alloc((size_t)D * sizeof *pf), *pg = mem_alloc((size_t)D * sizeof *pg);
    int rc = c->tok.raw && c->tok.cls && c->tok.test && c->seq.raw && x && f && g && pf && pg
                 ? OK : err_set(ERR_NOMEM, "out of memory for %lld token rows", (long long)ntok);
    c->read_began = 1;
    if (!rc) rc = read_ckpt_setup(&c->ck, c, mark, off);
    int start = rc ? 0 : read_ckpt_load(&c->ck, c, ntok);
    if (start > 0) c->ck.ours = 1;
    progress pr;
    progress_begin_at(&pr, "eval read", (double)c->nchosen, "seq", start);
    c->ck.last = now_seconds();
    for (int i = start; !rc && i < c->nchosen; i++) {
        const store_eval_seq *sq = &c->seqs[c->chosen[i]];
        int T = 0;
        if ((rc = store_act_read(c->s, c->hook.id, sq->seq_id, x, &T))) break;
        if ((rc = check_bounded(c, x, T, d, sq->seq_id, NULL))) break;
        if ((rc = sae_encode(c->sae, x, T, f)) || (c->rnd && (rc = sae_encode(c->rnd, x, T, g)))) break;
        if ((rc = check_bounded(c, f, T, D, sq->seq_id, "the SAE's code")) ||
            (c->rnd && (rc = check_bounded(c, g, T, D, sq->seq_id, "the random SAE's code (the SAE's b_dec)"))))
            break;
        if (!c->rnd) memset(g, 0, (size_t)T * D * sizeof *g); /* --no-random: empty rows */
        int t0 = sq->bos && T > 1 ? 1 : 0; /* BOS masked, as SAEBench pools */
        float *pr_raw = c->seq.raw + (size_t)i * d;
        memset(pr_raw, 0, (size_t)d * sizeof *pr_raw);
        memset(pf, 0, (size_t)D * sizeof *pf);
        memset(pg, 0, (size_t)D * sizeof *pg);
        for (int t = t0; t < T; t++) {
            for (int j = 0; j < d; j++) pr_raw[j] += x[(size_t)t * d + j];
            for (int j = 0; j < D; j++) {
                pf[j] += f[(size_t)t * D + j];
                pg[j] += g[(size_t)t * D + j];
            }
            int b = t < off[i + 1] - off[i] ? mark[off[i] + t] : -1;
            if (b < 0) continue;
            int row = c->tok.n++;
            memcpy(c->tok.raw + (size_t)row * d, x + (size_t)t * d, (size_t)d * sizeof *x);
            c->tok.cls[row] = b / 2;
            c->tok.test[row] = (unsigned char)(b % 2);
            if ((rc = eval_csr_push(&c->tok.sae, f + (size_t)t * D, D)) ||
                (rc = eval_csr_push(&c->tok.rnd, g + (size_t)t * D, D)))
                break;
        }
        double inv = T > t0 ? 1.0 / (T - t0) : 0;
        for (int j = 0; j < d; j++) pr_raw[j] = (float)(pr_raw[j] * inv);
        for (int j = 0; j < D; j++) {
            pf[j] = (float)(pf[j] * inv);
            pg[j] = (float)(pg[j] * inv);
        }
        if (!rc) rc = eval_csr_push(&c->seq.sae, pf, D);
        if (!rc) rc = eval_csr_push(&c->seq.rnd, pg, D);
        if (!rc && stopped(c->o)) rc = err_set(ERR_ABORTED, "interrupted");
        progress_update(&pr, (double)(i + 1), "%d token rows", c->tok.n);
        /* the last sequence's too: a kill in the suites keeps the read */
        if (!rc && c->ck.secs > 0 && now_seconds() - c->ck.last >= c->ck.secs) {
            if (read_ckpt_save(&c->ck, c, i + 1)) { /* the run goes on: it is only a cache */
                progress_notice(c->o->notice, c->o->user,
                                "no more checkpoints for the read: %s", err_msg());
                err_clear();
                c->ck.secs = 0;
            }
            else c->ck.ours = 1;
            c->ck.last = now_seconds();
        }
    }
    progress_end(&pr);
    mem_free(x);
    mem_free(f);
    mem_free(g);
    mem_free(pf);
    mem_free(pg);
    return rc;
}

/* Each row's document, for the standard errors. A pooled row is chosen sequence i; the token rows
 * are the marked positions in the read's order (sequence, then position: read_pass), which a
 * checkpoint's rows follow too. Should the read have kept fewer rows than are marked (a sequence
 * stored shorter than planned), or a row's document not be in the row's split, the token rows'
 * documents are not known: tok.doc stays NULL and the standard errors NaN (NULL), the numbers
 * themselves unchanged. */
static int rows_docs(ctx *c, const int *mark, const int64_t *off)
{
    c->seq.doc = mem_alloc(((size_t)c->seq.n + 1) * sizeof *c->seq.doc);
    c->tok.doc = mem_alloc(((size_t)c->tok.n + 1) * sizeof *c->tok.doc);
    if (!c->seq.doc || !c->tok.doc) return err_set(ERR_NOMEM, "out of memory");
    for (int i = 0; i < c->seq.n; i++) c->seq.doc[i] = c->seq_doc[c->chosen[i]];
    int row = 0;
    for (int i = 0; i < c->nchosen && row <= c->tok.n; i++)
        for (int64_t q = off[i]; q < off[i + 1]; q++)
            if (mark[q] >= 0) {
                if (row < c->tok.n) c->tok.doc[row] = c->seq_doc[c->chosen[i]];
                row++;
            }
    /* and every row's document in the row's split (a cheap check of the alignment) */
    for (int r = 0; row == c->tok.n && r < c->tok.n; r++)
        if ((c->doc_stratum[c->tok.doc[r]] >= 0) != (c->tok.test[r] != 0)) row = -1;
    if (row != c->tok.n) {
        mem_free(c->tok.doc);
        c->tok.doc = NULL;
    }
    return OK;
}

/* A result row for the writing transaction (json copied). */
static int put_row(ctx *c, const pend_row *r, const char *json)
{
    if (c->nrows == c->caprows) {
        size_t cap = c->caprows ? 2 * c->caprows : 256;
        pend_row *p = mem_realloc(c->rows, cap * sizeof *p);
        if (!p) return err_set(ERR_NOMEM, "out of memory for the results");
        c->rows = p;
        c->caprows = cap;
    }
    pend_row *o = &c->rows[c->nrows];
    *o = *r;
    o->json = NULL;
    if (json) {
        size_t n = strlen(json) + 1;
        if (!(o->json = mem_alloc(n))) return err_set(ERR_NOMEM, "out of memory for the results");
        memcpy(o->json, json, n);
    }
    c->nrows++;
    return OK;
}

static int put_probe(ctx *c, const char *task, const char *kind, const char *dict, int k,
                     int n_train, int n_test, double train_acc, double test_acc, const char *features)
{
    pend_row r = {.type = ROW_PROBE, .suite = SUITE_SP, .kind = kind, .dict = dict,
                  .i = {k, n_train, n_test}, .v = {train_acc, test_acc}};
    snprintf(r.name, sizeof r.name, "%s", task);
    return put_row(c, &r, features);
}

static int put_absorption(ctx *c, const char *parent, const eval_abs_class *a, const char *split)
{
    pend_row r = {.type = ROW_ABS, .suite = SUITE_ABS, .i = {a->included, a->n_split, a->n_tp, a->n_fn},
                  .v = {a->gt_f1, a->split_f1, a->mean_frac, a->full_rate}};
    snprintf(r.name, sizeof r.name, "%s", parent);
    return put_row(c, &r, split);
}

static int put_ablation(ctx *c, int suite, const char *task, int n, double clean_acc,
                        double orig_acc, double ablated_acc, double other_diff, double score)
{
    pend_row r = {.type = ROW_ABL, .suite = (unsigned char)suite, .i = {n},
                  .v = {clean_acc, orig_acc, ablated_acc, other_diff, score}};
    snprintf(r.name, sizeof r.name, "%s", task);
    return put_row(c, &r, NULL);
}

/* Every held row, in the order computed, under the run ids of run[NSUITES]. */
static int flush_rows(ctx *c, const int64_t *run)
{
    int rc = OK;
    for (size_t i = 0; !rc && i < c->nrows; i++) {
        const pend_row *r = &c->rows[i];
        int64_t id = run[r->suite];
        switch (r->type) {
        case ROW_PROBE:
            rc = store_eval_probe(c->s, id, r->name, r->kind, r->dict, r->i[0], r->i[1], r->i[2],
                                  r->v[0], r->v[1], r->json);
            break;
        case ROW_ABS:
            rc = store_eval_absorption(c->s, id, r->name, r->v[0], r->i[0], r->json, r->i[1],
                                       r->v[1], r->i[2], r->i[3], r->v[2], r->v[3]);
            break;
        case ROW_ABL:
            rc = store_eval_ablation(c->s, id, r->name, r->i[0], r->v[0], r->v[1], r->v[2], r->v[3],
                                     r->v[4]);
            break;
        default:
            rc = store_eval_metric(c->s, id, r->name, r->v[0]);
        }
    }
    return rc;
}

/* ---- the suites ---------------------------------------------------------------------------- */
typedef struct {
    int *rows;
    unsigned char *y;
    int n;
} labelled;

static void lab_free(labelled *l)
{
    mem_free(l->rows);
    mem_free(l->y);
}

/* The balanced one-vs-rest train and test sets of class k in a sample set. */
static int task_sets(const sample_set *s, int k, int nclasses, int max_tr, int max_te,
                     uint64_t seed, labelled *tr, labelled *te)
{
    int *cls = mem_alloc(((size_t)s->n + 1) * sizeof *cls);
    tr->rows = mem_alloc(((size_t)s->n + 1) * 2 * sizeof *tr->rows);
    tr->y = mem_alloc(((size_t)s->n + 1) * 2);
    te->rows = mem_alloc(((size_t)s->n + 1) * 2 * sizeof *te->rows);
    te->y = mem_alloc(((size_t)s->n + 1) * 2);
    int rc = cls && tr->rows && tr->y && te->rows && te->y ? OK : err_set(ERR_NOMEM, "out of memory");
    for (int pass = 0; !rc && pass < 2; pass++) {
        for (int i = 0; i < s->n; i++) cls[i] = s->test[i] == pass ? s->cls[i] : -1;
        labelled *l = pass ? te : tr;
        rc = eval_balance(cls, s->n, k, nclasses, pass ? max_te : max_tr, seed + (uint64_t)pass,
                          l->rows, l->y, &l->n);
    }
    mem_free(cls);
    return rc;
}

static int json_ints(buf *b, const int *v, int n)
{
    buf_reset(b);
    int rc = buf_str(b, "[");
    for (int i = 0; !rc && i < n; i++) rc = buf_printf(b, "%s%d", i ? "," : "", v[i]);
    if (!rc) rc = buf_str(b, "]");
    return rc;
}

typedef struct {
    double sum[3][EVAL_NK], sum_kind[2][3][EVAL_NK], full[2];
    int n, n_kind[2];
} sp_acc;

/* The sparse-probing series of the bootstrap (eval_boot): per k the SAE, random-SAE and neuron
 * means over all tasks and the SAE's over the POS and the genre tasks; the two full probes. */
enum { SP_SE_DICT = 0, SP_SE_KIND = 3 * EVAL_NK, SP_SE_FULL = 5 * EVAL_NK, SP_SE_N = 5 * EVAL_NK + 2 };

/* The test rows' documents and whether each prediction (score > 0) is right, as a task of
 * series (and of also, when >= 0) of c->boot; nothing without one. */
static int boot_task(ctx *c, const sample_set *s, const labelled *te, const double *sc, int *doc,
                     double *v, int series, int also)
{
    if (!c->boot) return OK;
    for (int i = 0; i < te->n; i++) {
        doc[i] = s->doc[te->rows[i]];
        v[i] = (sc[i] > 0) == (te->y[i] != 0); /* eval_accuracy's count */
    }
    int rc = eval_boot_add(c->boot, series, doc, v, te->n);
    if (!rc && also >= 0) rc = eval_boot_add(c->boot, also, doc, v, te->n);
    return rc;
}

static int probe_task(ctx *c, const sample_set *s, int kind, const char *task, const labelled *tr,
                      const labelled *te, sp_acc *acc, buf *b)
{
    const int d = c->hook.width;
    const char *dict_names[3] = {"sae", "random_sae", "neurons"};
    volatile int *stop = c->o->stop;
    eval_feats feats[3] = {{.sparse = &s->sae, .memo = c->memo, .stop = stop},
                           {.sparse = &s->rnd, .memo = c->memo, .stop = stop},
                           {.dense = s->raw, .d = d, .memo = c->memo, .stop = stop}};
    double *sc = mem_alloc(((size_t)tr->n + te->n + 1) * sizeof *sc);
    double *bv = mem_alloc(((size_t)te->n + 1) * sizeof *bv);
    int *bd = mem_alloc(((size_t)te->n + 1) * sizeof *bd);
    if (!sc || !bv || !bd) {
        mem_free(sc);
        mem_free(bv);
        mem_free(bd);
        return err_set(ERR_NOMEM, "out of memory");
    }
    int rc = OK, cols[20];
    const char *kn = kind ? "genre" : "pos";
    for (int di = 0; !rc && di < 3; di++) {
        if (di == 1 && !c->rnd) continue;
        int W = di < 2 ? c->sae->cfg.d_sae : d, kmax = W < 20 ? W : 20;
        if ((rc = eval_top_mean_diff(&feats[di], tr->rows, tr->y, tr->n, kmax, cols))) break;
        for (int ki = 0; !rc && ki < EVAL_NK; ki++) {
            int k = eval_k_values[ki] < kmax ? eval_k_values[ki] : kmax;
            eval_probe p;
            if ((rc = eval_logreg(&feats[di], tr->rows, tr->y, tr->n, cols, k, c->o->C, 0, &p))) break;
            eval_scores(&p, &feats[di], tr->rows, tr->n, cols, k, sc);
            double tra = eval_accuracy(sc, tr->y, tr->n);
            eval_scores(&p, &feats[di], te->rows, te->n, cols, k, sc);
            double tea = eval_accuracy(sc, te->y, te->n);
            eval_probe_free(&p);
            rc = boot_task(c, s, te, sc, bd, bv, SP_SE_DICT + di * EVAL_NK + ki,
                           di == 0 ? SP_SE_KIND + kind * EVAL_NK + ki : -1);
            if (rc) break;
            acc->sum[di][ki] += tea;
            acc->sum_kind[kind][di][ki] += tea;
            if (!(rc = json_ints(b, cols, k)))
                rc = put_probe(c, task, kn, dict_names[di], k, tr->n, te->n, tra, tea, b->p);
        }
    }
    /* every hook unit ('full', SAEBench's llm_test_accuracy) and every latent ('sae_full',
       SAEBench's sae_test_accuracy) */
    for (int fi = 0; !rc && fi < 2; fi++) {
        eval_feats *f = fi ? &feats[0] : &feats[2];
        eval_probe p;
        rc = eval_logreg(f, tr->rows, tr->y, tr->n, NULL, 0, c->o->C, 0, &p);
        if (rc) break;
        eval_scores(&p, f, tr->rows, tr->n, NULL, 0, sc);
        double tra = eval_accuracy(sc, tr->y, tr->n);
        eval_scores(&p, f, te->rows, te->n, NULL, 0, sc);
        double tea = eval_accuracy(sc, te->y, te->n);
        eval_probe_free(&p);
        if ((rc = boot_task(c, s, te, sc, bd, bv, SP_SE_FULL + fi, -1))) break;
        acc->full[fi] += tea;
        rc = put_probe(c, task, kn, fi ? "sae_full" : "full", fi ? c->sae->cfg.d_sae : d, tr->n,
                       te->n, tra, tea, NULL);
    }
    if (!rc) {
        acc->n++;
        acc->n_kind[kind]++;
    }
    mem_free(sc);
    mem_free(bv);
    mem_free(bd);
    return rc;
}

static int usable(const labelled *tr, const labelled *te)
{
    int ptr = 0, pte = 0;
    for (int i = 0; i < tr->n; i++) ptr += tr->y[i];
    for (int i = 0; i < te->n; i++) pte += te->y[i];
    return ptr >= 2 && ptr < tr->n && pte >= 1 && pte < te->n;
}

static void lab_counts(const labelled *l, int *pos, int *neg)
{
    *pos = 0;
    for (int i = 0; i < l->n; i++) *pos += l->y[i] != 0;
    *neg = l->n - *pos;
}

/* Whether a task's sets are large enough to score (eval_sets_big_enough). A task with rows but
 * too few is named in *small ("task 12/3": train / test positives) for the suite's note; a class
 * with no rows at all is absent, not small, and is not named. */
static int big_enough(const labelled *tr, const labelled *te, const char *task, buf *small, int *rc)
{
    int tp, tn, ep, en;
    lab_counts(tr, &tp, &tn);
    lab_counts(te, &ep, &en);
    if (eval_sets_big_enough(tp, tn, ep, en)) return 1;
    if (tp + ep > 0 && !*rc)
        *rc = buf_printf(small, "%s%s %d/%d", small->n ? ", " : "", task, tp < tn ? tp : tn,
                         ep < en ? ep : en);
    return 0;
}

/* A line for eval_result.notes (what the numbers leave out; the CLI prints them). */
static void note(eval_result *res, const char *fmt, ...)
{
    size_t have = strlen(res->notes), cap = sizeof res->notes;
    if (have + 5 >= cap) return; /* already full and marked */
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(res->notes + have, cap - have - 4, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap - have - 4) snprintf(res->notes + cap - 5, 5, "...\n");
    else snprintf(res->notes + have + n, cap - have - n, "\n");
}

/* The note of a suite whose tasks big_enough named. */
static void note_small(eval_result *res, const char *suite, const buf *small)
{
    if (small->n)
        note(res, "%s: skipped as too small (train / test positives; a task needs %d / %d): %s",
             suite, EVAL_MIN_TRAIN_POS, EVAL_MIN_TEST_POS, small->p);
}

/* metric fmt names one with "%d" for k (metric_k) or none (metric) */
static int metric(ctx *c, int suite, const char *name, double v)
{
    pend_row r = {.type = ROW_METRIC, .suite = (unsigned char)suite, .v = {v}};
    snprintf(r.name, sizeof r.name, "%s", name);
    return put_row(c, &r, NULL);
}

static int metric_k(ctx *c, int suite, const char *fmt, int k, double v)
{
    char name[96];
    snprintf(name, sizeof name, fmt, k);
    return metric(c, suite, name, v);
}

/* The bootstrap of a suite over the test documents (c->boot; NULL when a row's document is not
 * known, rows_docs: the se are then NaN). */
static int boot_begin(ctx *c, int need_tok)
{
    c->boot = NULL;
    if (need_tok && !c->tok.doc) return OK;
    return eval_boot_new(&c->boot, c->ndocs, c->doc_stratum);
}

/* se[n] of the suite's series (NaN without a bootstrap); the bootstrap goes. The seed is the
 * run's, so a rerun gives the same bits. */
static int boot_end(ctx *c, int n, uint64_t tag, double *se)
{
    for (int i = 0; i < n; i++) se[i] = NAN;
    int rc = c->boot ? eval_boot_se(c->boot, n, c->o->seed ^ tag, EVAL_BOOT_N, se) : OK;
    eval_boot_free(c->boot);
    c->boot = NULL;
    return rc;
}

/* A metric and its standard error, "<name>_se" (docs/eval.md, "Standard errors"). */
static int metric_se(ctx *c, int suite, const char *name, double v, double se)
{
    char sn[96];
    snprintf(sn, sizeof sn, "%.88s_se", name);
    int rc = metric(c, suite, name, v);
    return rc ? rc : metric(c, suite, sn, se);
}

static int metric_k_se(ctx *c, int suite, const char *fmt, int k, double v, double se)
{
    char name[96];
    snprintf(name, sizeof name, fmt, k);
    return metric_se(c, suite, name, v, se);
}

static int run_sparse_probing(ctx *c, eval_result *res)
{
    sp_acc acc;
    memset(&acc, 0, sizeof acc);
    buf b = {0}, small = {0};
    int rc = boot_begin(c, 1);
    double se[SP_SE_N];
    char task[96];
    progress pr;
    progress_begin(&pr, "eval probes", EVAL_NPOS + c->ngenres, "task");
    for (int kind = 0; !rc && kind < 2; kind++) {
        const sample_set *s = kind ? &c->seq : &c->tok;
        int ncls = kind ? c->ngenres : EVAL_NPOS;
        if (ncls < 2) continue; /* one genre (or none recorded): no genre tasks */
        for (int k = 0; !rc && k < ncls; k++) {
            labelled tr = {0}, te = {0};
            int cap = c->o->train_per_class, capt = c->o->test_per_class;
            rc = task_sets(s, k, ncls, cap, capt, c->o->seed + 7919u * (uint64_t)(kind * 64 + k), &tr, &te);
            snprintf(task, sizeof task, "%s:%s", kind ? "genre" : "pos",
                     kind ? c->genres[k] : eval_pos_names[k]);
            if (!rc && big_enough(&tr, &te, task, &small, &rc)) rc = probe_task(c, s, kind, task, &tr, &te, &acc, &b);
            lab_free(&tr);
            lab_free(&te);
            if (!rc && stopped(c->o)) rc = err_set(ERR_ABORTED, "interrupted");
            progress_update(&pr, kind * EVAL_NPOS + k + 1, "%s", task);
        }
    }
    progress_end(&pr);
    if (!rc) note_small(res, "sparse_probing", &small);
    if (!rc && acc.n == 0 && small.n)
        rc = err_set(ERR_NOTFOUND, "%s: every probing task is too small (train / test positives; a "
                     "task needs %d / %d): %s", c->o->db, EVAL_MIN_TRAIN_POS, EVAL_MIN_TEST_POS, small.p);
    if (!rc && acc.n == 0)
        rc = err_set(ERR_NOTFOUND, "%s: no probing task has train and test rows (%d genre%s in the "
                     "sample, and no POS class with tagged tokens in both splits)", c->o->db,
                     c->ngenres, c->ngenres == 1 ? "" : "s");
    res->n_tasks = acc.n;
    res->n_pos_tasks = acc.n_kind[0];
    res->n_genre_tasks = acc.n_kind[1];
    int brc = boot_end(c, SP_SE_N, 0x5350424f4f54ull, se); /* "SPBOOT" */
    if (!rc) rc = brc;
    for (int ki = 0; !rc && ki < EVAL_NK; ki++) {
        int k = eval_k_values[ki];
        res->sae_acc[ki] = acc.sum[0][ki] / acc.n;
        res->rnd_acc[ki] = c->rnd ? acc.sum[1][ki] / acc.n : NAN;
        res->neuron_acc[ki] = acc.sum[2][ki] / acc.n;
        res->sae_acc_se[ki] = se[SP_SE_DICT + ki];
        res->rnd_acc_se[ki] = c->rnd ? se[SP_SE_DICT + EVAL_NK + ki] : NAN;
        res->neuron_acc_se[ki] = se[SP_SE_DICT + 2 * EVAL_NK + ki];
        rc = metric_k_se(c, SUITE_SP, "sparse_probing_top%d_acc", k, res->sae_acc[ki], res->sae_acc_se[ki]);
        if (!rc && c->rnd)
            rc = metric_k_se(c, SUITE_SP, "sparse_probing_random_top%d_acc", k, res->rnd_acc[ki],
                             res->rnd_acc_se[ki]);
        if (!rc)
            rc = metric_k_se(c, SUITE_SP, "sparse_probing_neurons_top%d_acc", k, res->neuron_acc[ki],
                             res->neuron_acc_se[ki]);
        for (int kind = 0; !rc && kind < 2; kind++)
            if (acc.n_kind[kind])
                rc = metric_k_se(c, SUITE_SP, kind ? "sparse_probing_genre_top%d_acc" : "sparse_probing_pos_top%d_acc",
                                 k, acc.sum_kind[kind][0][ki] / acc.n_kind[kind],
                                 se[SP_SE_KIND + kind * EVAL_NK + ki]);
    }
    if (!rc) {
        res->full_acc = acc.full[0] / acc.n;
        res->sae_full_acc = acc.full[1] / acc.n;
        res->full_acc_se = se[SP_SE_FULL];
        res->sae_full_acc_se = se[SP_SE_FULL + 1];
        rc = metric_se(c, SUITE_SP, "sparse_probing_full_acc", res->full_acc, res->full_acc_se);
        if (!rc)
            rc = metric_se(c, SUITE_SP, "sparse_probing_sae_full_acc", res->sae_full_acc, res->sae_full_acc_se);
    }
    if (!rc) rc = metric(c, SUITE_SP, "sparse_probing_n_tasks", acc.n);
    buf_free(&b);
    buf_free(&small);
    return rc;
}

static int run_absorption(ctx *c, eval_result *res)
{
    eval_abs_params p;
    eval_abs_defaults(&p);
    p.C = c->o->C;
    buf b = {0}, small = {0}, notp = {0};
    int rc = boot_begin(c, 1), no_tp = 0, n_rated = 0;
    double sf = 0, sf0 = 0, sr = 0, ss = 0, se[3];
    /* the per-row values of the three means, for their standard errors */
    size_t cap = (size_t)c->tok.n + 1; /* a test set's rows are distinct token rows */
    double *rv = mem_alloc(3 * cap * sizeof *rv);
    int *rd = mem_alloc(cap * sizeof *rd);
    if (!rc && (!rv || !rd)) rc = err_set(ERR_NOMEM, "out of memory");
    char task[96];
    eval_feats f = {.dense = c->tok.raw, .d = c->hook.width, .sparse = &c->tok.sae, .memo = c->memo,
                    .stop = c->o->stop};
    /* absorption and TPP ran 10 s on the demo with nothing on stderr (audit) */
    progress pr;
    progress_begin(&pr, "eval absorption", EVAL_NPOS, "class");
    for (int k = 0; !rc && k < EVAL_NPOS; k++) {
        labelled tr = {0}, te = {0};
        if (k) progress_update(&pr, k, "%s", eval_pos_names[k - 1]);
        rc = task_sets(&c->tok, k, EVAL_NPOS, c->o->train_per_class, c->o->test_per_class,
                       c->o->seed + 7919u * (uint64_t)k, &tr, &te);
        snprintf(task, sizeof task, "pos:%s", eval_pos_names[k]);
        if (!rc && big_enough(&tr, &te, task, &small, &rc)) {
            eval_abs_class r;
            res->abs_parents++;
            eval_abs_rows rows = {rv, rv + cap, rv + 2 * cap};
            rc = eval_absorption_class(&f, tr.rows, tr.y, tr.n, &f, te.rows, te.y, NULL, te.n,
                                       c->sae->W_dec, c->sae->cfg.d_sae, &p, &r, &rows);
            for (int i = 0; !rc && c->boot && i < te.n; i++) rd[i] = c->tok.doc[te.rows[i]];
            for (int m = 0; !rc && c->boot && r.n_tp > 0 && m < 3; m++)
                rc = eval_boot_add(c->boot, m, rd, rv + m * cap, te.n);
            if (!rc) rc = json_ints(&b, r.split, r.n_split);
            if (!rc && r.n_tp == 0) r.mean_frac = r.full_rate = r.mean_frac_nogate = NAN; /* NULL */
            if (!rc)
                rc = put_absorption(c, eval_pos_names[k], &r, b.p);
            /* every parent counts in the means, as in SAEBench (its min_GT_probe_f1 only asks
               that enough letters have a usable probe: abs_included, reported), but one whose
               probe finds no test positive has no rate (SAEBench's 0/0 is NaN, which its mean
               skips; here it read as absorption 0, a review) */
            if (!rc) res->abs_included += r.included;
            if (!rc && r.n_tp == 0) {
                no_tp++;
                rc = buf_printf(&notp, "%s%s", notp.n ? ", " : "", eval_pos_names[k]);
            } else if (!rc) {
                n_rated++;
                sf += r.mean_frac;
                sf0 += r.mean_frac_nogate;
                sr += r.full_rate;
                ss += r.n_split;
            }
        }
        lab_free(&tr);
        lab_free(&te);
        if (!rc && stopped(c->o)) rc = err_set(ERR_ABORTED, "interrupted");
    }
    progress_end(&pr);
    if (!rc) note_small(res, "absorption", &small);
    if (!rc && no_tp)
        note(res, "absorption: %d parent%s without a ground-truth-probe positive in the test set, "
             "left out of the means: %s", no_tp, no_tp == 1 ? "" : "s", notp.p);
    buf_free(&notp);
    int n = n_rated;
    res->abs_mean_frac = n ? sf / n : NAN;
    res->abs_mean_frac_nogate = n ? sf0 / n : NAN;
    res->abs_full_rate = n ? sr / n : NAN;
    res->abs_mean_split = n ? ss / n : NAN;
    int brc = boot_end(c, 3, 0x4142424f4f54ull, se); /* "ABBOOT" */
    if (!rc) rc = brc;
    res->abs_mean_frac_se = se[0];
    res->abs_mean_frac_nogate_se = se[1];
    res->abs_full_rate_se = se[2];
    if (!rc) rc = metric_se(c, SUITE_ABS, "absorption_mean_frac", res->abs_mean_frac, se[0]);
    if (!rc) rc = metric_se(c, SUITE_ABS, "absorption_mean_frac_nogate", res->abs_mean_frac_nogate, se[1]);
    if (!rc) rc = metric_se(c, SUITE_ABS, "absorption_full_rate", res->abs_full_rate, se[2]);
    if (!rc) rc = metric(c, SUITE_ABS, "absorption_mean_split", res->abs_mean_split);
    if (!rc) rc = metric(c, SUITE_ABS, "absorption_n_parents", n);
    if (!rc) rc = metric(c, SUITE_ABS, "absorption_n_gt_parents", res->abs_included);
    mem_free(rv);
    mem_free(rd);
    buf_free(&b);
    buf_free(&small);
    return rc;
}

/* ---- SCR and TPP: latent ablation read through linear probes ------------------------------ */
/* M[F] = w . W_dec[F]: what ablating latent F (x -> x - f_F W_dec[F], the SAE error kept) does to
 * the probe's score per unit of f_F. */
static void probe_dec(const eval_probe *p, const sae_model *m, double *M)
{
    const int d = m->cfg.d_in;
    for (int f = 0; f < m->cfg.d_sae; f++) {
        const float *w = m->W_dec + (size_t)f * d;
        double v = 0;
        for (int i = 0; i < d; i++) v += p->w[i] * w[i];
        M[f] = v;
    }
}

typedef struct {
    double e;
    int id;
} ranked;

static int cmp_ranked(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->e != y->e) return x->e > y->e ? -1 : 1;
    return x->id - y->id;
}

/* SAEBench's effect of latent F on a probe: (mean code over positives - over negatives) x M[F];
 * TPP clamps the difference at 0, SCR takes |effect|. rank[F] = its place among the non-zero
 * effects (descending), -1 beyond the largest N or when zero. */
static int effect_ranks(const eval_csr *codes, const labelled *l, const double *M, int clamp,
                        int absval, int *rank)
{
    const int D = codes->width;
    double *sp = mem_calloc((size_t)D, sizeof *sp), *sn = mem_calloc((size_t)D, sizeof *sn);
    ranked *r = mem_alloc((size_t)D * sizeof *r);
    if (!sp || !sn || !r) {
        mem_free(sp);
        mem_free(sn);
        mem_free(r);
        return err_set(ERR_NOMEM, "out of memory for latent effects");
    }
    int np = 0, nn = 0;
    for (int i = 0; i < l->n; i++) {
        int row = l->rows[i];
        double *acc = l->y[i] ? sp : sn;
        if (l->y[i]) np++;
        else nn++;
        for (size_t q = codes->off[row]; q < codes->off[row + 1]; q++) acc[codes->idx[q]] += codes->val[q];
    }
    int m = 0;
    for (int f = 0; f < D; f++) {
        double diff = (np ? sp[f] / np : 0) - (nn ? sn[f] / nn : 0);
        if (clamp && diff < 0) diff = 0;
        double e = diff * M[f];
        if (absval) e = fabs(e);
        rank[f] = -1;
        if (e != 0) r[m++] = (ranked){e, f};
    }
    qsort(r, (size_t)m, sizeof *r, cmp_ranked);
    for (int i = 0; i < m && i < eval_n_values[EVAL_NN - 1]; i++) rank[r[i].id] = i;
    mem_free(sp);
    mem_free(sn);
    mem_free(r);
    return OK;
}

/* Accuracy on test rows of a probe (clean scores base[n], M its decoder products) with the
 * latents of rank < N ablated, for each N: acc[EVAL_NN]. */
static void ablated_acc(const double *base, const eval_csr *codes, const labelled *te,
                        const double *M, const int *rank, double *acc)
{
    int ok[EVAL_NN] = {0};
    for (int i = 0; i < te->n; i++) {
        double bucket[EVAL_NN] = {0};
        int row = te->rows[i];
        for (size_t q = codes->off[row]; q < codes->off[row + 1]; q++) {
            int rk = rank[codes->idx[q]];
            if (rk < 0) continue;
            int t = 0;
            while (t < EVAL_NN && eval_n_values[t] <= rk) t++;
            if (t < EVAL_NN) bucket[t] += codes->val[q] * M[codes->idx[q]];
        }
        double cum = 0;
        for (int t = 0; t < EVAL_NN; t++) {
            cum += bucket[t];
            ok[t] += (base[i] - cum > 0) == (te->y[i] != 0);
        }
    }
    for (int t = 0; t < EVAL_NN; t++) acc[t] = te->n ? (double)ok[t] / te->n : NAN;
}

/* A probe on the full hook activations and its clean test scores. */
static int full_probe(ctx *c, const sample_set *s, const labelled *tr, const labelled *te,
                      eval_probe *p, double **base, double *acc)
{
    eval_feats f = {.dense = s->raw, .d = c->hook.width, .memo = c->memo, .stop = c->o->stop};
    int rc = eval_logreg(&f, tr->rows, tr->y, tr->n, NULL, 0, c->o->C, 0, p);
    if (rc) return rc;
    *base = mem_alloc(((size_t)te->n + 1) * sizeof **base);
    if (!*base) return err_set(ERR_NOMEM, "out of memory");
    eval_scores(p, &f, te->rows, te->n, NULL, 0, *base);
    *acc = eval_accuracy(*base, te->y, te->n);
    return OK;
}

/* TPP over the classes of one sample set: ablate class i's latents, read every class's probe. */
static int tpp_set(ctx *c, const sample_set *s, int kind, int ncls, double *sum, int *count, buf *small)
{
    const int D = c->sae->cfg.d_sae;
    labelled *tr = mem_calloc((size_t)ncls, sizeof *tr), *te = mem_calloc((size_t)ncls, sizeof *te);
    eval_probe *pr = mem_calloc((size_t)ncls, sizeof *pr);
    double **base = mem_calloc((size_t)ncls, sizeof *base), *clean = mem_calloc((size_t)ncls, sizeof *clean);
    double *M = mem_alloc((size_t)ncls * D * sizeof *M);
    int *rank = mem_alloc((size_t)ncls * D * sizeof *rank), *use = mem_calloc((size_t)ncls, sizeof *use);
    double *acc = mem_alloc((size_t)ncls * EVAL_NN * sizeof *acc);
    int rc = tr && te && pr && base && clean && M && rank && use && acc ? OK : err_set(ERR_NOMEM, "out of memory for TPP");
    int nuse = 0;
    char task[96];
    progress pg;
    progress_begin(&pg, kind ? "eval tpp genre" : "eval tpp pos", ncls, "class");
    for (int k = 0; !rc && k < ncls; k++) {
        if (k) progress_update(&pg, k, NULL);
        rc = task_sets(s, k, ncls, c->o->train_per_class, c->o->test_per_class,
                       c->o->seed + 7919u * (uint64_t)(kind * 64 + k), &tr[k], &te[k]);
        snprintf(task, sizeof task, "%s:%s", kind ? "genre" : "pos", kind ? c->genres[k] : eval_pos_names[k]);
        if (rc || !big_enough(&tr[k], &te[k], task, small, &rc)) continue;
        if (!(rc = full_probe(c, s, &tr[k], &te[k], &pr[k], &base[k], &clean[k]))) {
            probe_dec(&pr[k], c->sae, M + (size_t)k * D);
            rc = effect_ranks(&s->sae, &tr[k], M + (size_t)k * D, 1, 0, rank + (size_t)k * D);
            use[k] = 1;
            nuse++;
        }
    }
    progress_end(&pg);
    for (int i = 0; !rc && nuse >= 2 && i < ncls; i++) {
        if (!use[i]) continue;
        for (int j = 0; j < ncls; j++)
            if (use[j]) ablated_acc(base[j], &s->sae, &te[j], M + (size_t)j * D, rank + (size_t)i * D, acc + (size_t)j * EVAL_NN);
        snprintf(task, sizeof task, "tpp:%s:%s", kind ? "genre" : "pos", kind ? c->genres[i] : eval_pos_names[i]);
        for (int t = 0; !rc && t < EVAL_NN; t++) {
            double other = 0;
            for (int j = 0; j < ncls; j++)
                if (use[j] && j != i) other += clean[j] - acc[(size_t)j * EVAL_NN + t];
            other /= nuse - 1;
            double intended = clean[i] - acc[(size_t)i * EVAL_NN + t], score = intended - other;
            sum[t] += score;
            rc = put_ablation(c, SUITE_TPP, task, eval_n_values[t], clean[i], NAN,
                              acc[(size_t)i * EVAL_NN + t], other, score);
        }
        (*count)++;
    }
    for (int k = 0; k < ncls && tr; k++) {
        lab_free(&tr[k]);
        lab_free(&te[k]);
        if (pr) eval_probe_free(&pr[k]);
        if (base) mem_free(base[k]);
    }
    mem_free(tr);
    mem_free(te);
    mem_free(pr);
    mem_free(base);
    mem_free(clean);
    mem_free(M);
    mem_free(rank);
    mem_free(use);
    mem_free(acc);
    return rc;
}

/* The headline is SAEBench's: the mean over classes per dataset (create_tpp_plotting_dict), then
 * over the datasets (average_results_dictionaries); pooling the 10 POS classes with the 15 genres
 * weighted the genres 3:2 (0.02-0.026 off on the demo). */
static int run_tpp(ctx *c, eval_result *res)
{
    double sum[2][EVAL_NN] = {{0}};
    buf small = {0};
    int n[2] = {0, 0}, rc = tpp_set(c, &c->tok, 0, EVAL_NPOS, sum[0], &n[0], &small);
    if (!rc && c->ngenres >= 2) rc = tpp_set(c, &c->seq, 1, c->ngenres, sum[1], &n[1], &small);
    if (!rc) note_small(res, "tpp", &small);
    buf_free(&small);
    if (!rc && n[0] + n[1] == 0)
        rc = err_set(ERR_NOTFOUND, "%s: no two classes with train and test rows for TPP", c->o->db);
    res->tpp_classes = n[0] + n[1];
    for (int t = 0; !rc && t < EVAL_NN; t++) {
        double s[2] = {sum[0][t], sum[1][t]};
        res->tpp[t] = eval_mean_of_means(s, n, 2);
        res->tpp_pos[t] = n[0] ? s[0] / n[0] : NAN;
        res->tpp_genre[t] = n[1] ? s[1] / n[1] : NAN;
        rc = metric_k(c, SUITE_TPP, "tpp_threshold_%d_total_metric", eval_n_values[t], res->tpp[t]);
        if (!rc && n[0])
            rc = metric_k(c, SUITE_TPP, "tpp_pos_threshold_%d_total_metric", eval_n_values[t], res->tpp_pos[t]);
        if (!rc && n[1])
            rc = metric_k(c, SUITE_TPP, "tpp_genre_threshold_%d_total_metric", eval_n_values[t], res->tpp_genre[t]);
    }
    if (!rc) rc = metric(c, SUITE_TPP, "tpp_n_classes", res->tpp_classes);
    return rc;
}

/* SCR's four sets from the sampled sequences: cells [split][group][tense]. */
typedef struct {
    labelled biased, a_tr, b_tr, a_te, b_te; /* b_tr/b_te: the a_ rows with the tense labels */
} scr_sets;

static int scr_build(ctx *c, scr_sets *S, int cells[2][2][2])
{
    const sample_set *s = &c->seq;
    int n = s->n;
    int *cell = mem_alloc(((size_t)n + 1) * sizeof *cell);
    labelled *all[5] = {&S->biased, &S->a_tr, &S->b_tr, &S->a_te, &S->b_te};
    int bad = !cell;
    for (int i = 0; i < 5; i++) {
        all[i]->rows = mem_alloc(((size_t)n + 1) * sizeof *all[i]->rows);
        all[i]->y = mem_alloc((size_t)n + 1);
        bad |= !all[i]->rows || !all[i]->y;
    }
    if (bad) {
        mem_free(cell);
        return err_set(ERR_NOMEM, "out of memory for SCR");
    }
    memset(cells, 0, sizeof(int) * 8);
    for (int i = 0; i < n; i++) {
        int a = eval_imaginative(c->genres[c->ch_grp[i]]), b = c->tense[i];
        cell[i] = !c->ch_scr[i] || a < 0 || b < 0 ? -1 : s->test[i] * 4 + a * 2 + b;
        if (cell[i] >= 0) cells[s->test[i]][a][b]++;
    }
    rng_state r;
    rng_seed(&r, c->o->seed ^ 0x534352ull);
    int *perm = mem_alloc(((size_t)n + 1) * sizeof *perm);
    if (!perm) {
        mem_free(cell);
        return err_set(ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++) perm[i] = i;
    eval_shuffle(perm, n, &r);
    for (int split = 0; split < 2; split++) {
        int m = INT32_MAX, taken[4] = {0};
        for (int q = 0; q < 4; q++) m = cells[split][q / 2][q % 2] < m ? cells[split][q / 2][q % 2] : m;
        int mb = cells[split][0][0] < cells[split][1][1] ? cells[split][0][0] : cells[split][1][1];
        int tb[2] = {0, 0};
        labelled *A = split ? &S->a_te : &S->a_tr, *B = split ? &S->b_te : &S->b_tr;
        for (int k = 0; k < n; k++) {
            int i = perm[k], q = cell[i] - split * 4;
            if (cell[i] < 0 || q < 0 || q > 3) continue;
            int a = q / 2, b = q % 2;
            if (taken[q] < m) { /* the four cells equally: neither label predicts the other */
                taken[q]++;
                A->rows[A->n] = i;
                A->y[A->n++] = (unsigned char)a;
                B->rows[B->n] = i;
                B->y[B->n++] = (unsigned char)b;
            }
            if (!split && a == b && tb[a] < mb) { /* the biased set: imaginative-past vs informative-present */
                tb[a]++;
                S->biased.rows[S->biased.n] = i;
                S->biased.y[S->biased.n++] = (unsigned char)a;
            }
        }
    }
    mem_free(perm);
    mem_free(cell);
    return OK;
}

static double phi_of(const int nat[2][2])
{
    double n[2][2];
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) n[a][b] = nat[a][b];
    double den = sqrt((n[0][0] + n[0][1]) * (n[1][0] + n[1][1]) * (n[0][0] + n[1][0]) * (n[0][1] + n[1][1]));
    return den > 0 ? (n[1][1] * n[0][0] - n[1][0] * n[0][1]) / den : NAN;
}

static int run_scr(ctx *c, eval_result *res)
{
    const int D = c->sae->cfg.d_sae;
    scr_sets S;
    memset(&S, 0, sizeof S);
    int cells[2][2][2];
    eval_probe pb = {0}, pa = {0}, pt = {0};
    double *bA = NULL, *bB = NULL, *tmp = NULL, accA = 0, accB = 0, o1 = 0, o2 = 0, a1[EVAL_NN], a2[EVAL_NN];
    double *Mb = mem_alloc((size_t)D * sizeof *Mb), *Mx = mem_alloc((size_t)D * sizeof *Mx);
    int *rank = mem_alloc((size_t)D * sizeof *rank);
    int rc = Mb && Mx && rank ? scr_build(c, &S, cells) : err_set(ERR_NOMEM, "out of memory");
    for (int q = 0; !rc && q < 4; q++) res->scr_cells[q] = c->nat[q / 2][q % 2];
    res->scr_phi = phi_of(c->nat);
    if (!rc && (!usable(&S.biased, &S.a_te) || !usable(&S.a_tr, &S.a_te) || !usable(&S.b_tr, &S.b_te)))
        rc = err_set(ERR_NOTFOUND, "%s: SCR needs Brown genres of both prose kinds with past- and "
                     "present-tense sequences in train and test documents (cells %d %d %d %d)",
                     c->o->db, cells[0][0][0], cells[0][0][1], cells[0][1][0], cells[0][1][1]);
    /* and sets large enough to score (EVAL_MIN_*): too small is skipped with a note under "all",
       an error when scr was named */
    buf small = {0};
    if (!rc && (!big_enough(&S.biased, &S.a_te, "biased probe", &small, &rc) +
                !big_enough(&S.a_tr, &S.a_te, "prose-kind probe", &small, &rc) +
                !big_enough(&S.b_tr, &S.b_te, "tense probe", &small, &rc)) && !rc) {
        if (c->soft) {
            note(res, "scr: skipped as too small (train / test positives; a probe needs %d / %d): %s",
                 EVAL_MIN_TRAIN_POS, EVAL_MIN_TEST_POS, small.p);
            res->skipped |= EVAL_SUITE_SCR;
            c->scr_small = 1;
        } else
            rc = err_set(ERR_NOTFOUND, "%s: SCR's sets are too small (train / test positives; a probe "
                         "needs %d / %d): %s; raise --seqs-per-genre", c->o->db, EVAL_MIN_TRAIN_POS,
                         EVAL_MIN_TEST_POS, small.p);
    }
    buf_free(&small);
    if (c->scr_small) goto done;
    /* the biased probe, read on the genre-group and the tense test sets; the two clean probes */
    if (!rc) rc = full_probe(c, &c->seq, &S.biased, &S.a_te, &pb, &bA, &o1);
    if (!rc) {
        eval_feats f = {.dense = c->seq.raw, .d = c->hook.width};
        bB = mem_alloc(((size_t)S.b_te.n + 1) * sizeof *bB);
        if (!bB) rc = err_set(ERR_NOMEM, "out of memory");
        else {
            eval_scores(&pb, &f, S.b_te.rows, S.b_te.n, NULL, 0, bB);
            o2 = eval_accuracy(bB, S.b_te.y, S.b_te.n);
        }
    }
    if (!rc) rc = full_probe(c, &c->seq, &S.a_tr, &S.a_te, &pa, &tmp, &accA);
    mem_free(tmp);
    tmp = NULL;
    if (!rc) rc = full_probe(c, &c->seq, &S.b_tr, &S.b_te, &pt, &tmp, &accB);
    mem_free(tmp);
    if (!rc) probe_dec(&pb, c->sae, Mb);
    /* dir 1: ablate the tense latents (by the tense probe), read the genre-group test set */
    if (!rc) {
        probe_dec(&pt, c->sae, Mx);
        rc = effect_ranks(&c->seq.sae, &S.b_tr, Mx, 0, 1, rank);
    }
    if (!rc) ablated_acc(bA, &c->seq.sae, &S.a_te, Mb, rank, a1);
    /* dir 2: ablate the genre-group latents, read the tense test set */
    if (!rc) {
        probe_dec(&pa, c->sae, Mx);
        rc = effect_ranks(&c->seq.sae, &S.a_tr, Mx, 0, 1, rank);
    }
    if (!rc) ablated_acc(bB, &c->seq.sae, &S.b_te, Mb, rank, a2);
    res->scr_dir = o1 < o2 ? 1 : 2; /* SAEBench: the direction whose label the biased probe reads worse */
    /* a direction whose clean probe is not better than the biased one by more than one test
       example has no normalised score (eval_scr_score): NULL, and a note */
    static const char *const dir_names[2] = {"1 (tense ablated, prose kind read)",
                                             "2 (prose kind ablated, tense read)"};
    static const char *const read_names[2] = {"prose-kind", "tense"};
    const double clean[2] = {accA, accB}, orig[2] = {o1, o2};
    const int nte[2] = {S.a_te.n, S.b_te.n};
    for (int dirn = 0; !rc && dirn < 2; dirn++)
        if (isnan(eval_scr_score(clean[dirn], orig[dirn], clean[dirn], nte[dirn])))
            note(res, "scr: direction %s left NULL: the clean %s probe scores %.4f, the biased probe "
                 "%.4f on %d test rows (the clean one must be better by more than one row)",
                 dir_names[dirn], read_names[dirn], clean[dirn], orig[dirn], nte[dirn]);
    for (int t = 0; !rc && t < EVAL_NN; t++) {
        double s1 = eval_scr_score(a1[t], o1, accA, S.a_te.n), s2 = eval_scr_score(a2[t], o2, accB, S.b_te.n);
        res->scr[t] = res->scr_dir == 1 ? s1 : s2;
        rc = put_ablation(c, SUITE_SCR, "scr:ablate_tense", eval_n_values[t], accA, o1, a1[t], NAN, s1);
        if (!rc) rc = put_ablation(c, SUITE_SCR, "scr:ablate_genre", eval_n_values[t], accB, o2, a2[t], NAN, s2);
        if (!rc) rc = metric_k(c, SUITE_SCR, "scr_metric_threshold_%d", eval_n_values[t], res->scr[t]);
        if (!rc) rc = metric_k(c, SUITE_SCR, "scr_dir1_threshold_%d", eval_n_values[t], s1);
        if (!rc) rc = metric_k(c, SUITE_SCR, "scr_dir2_threshold_%d", eval_n_values[t], s2);
    }
    if (!rc) rc = metric(c, SUITE_SCR, "scr_dir", res->scr_dir);
    if (!rc) rc = metric(c, SUITE_SCR, "scr_label_phi", res->scr_phi);
    if (!rc) rc = metric(c, SUITE_SCR, "scr_biased_train_rows", S.biased.n);
    if (!rc) rc = metric(c, SUITE_SCR, "scr_balanced_test_rows", S.a_te.n);
done:
    eval_probe_free(&pb);
    eval_probe_free(&pa);
    eval_probe_free(&pt);
    mem_free(bA);
    mem_free(bB);
    mem_free(Mb);
    mem_free(Mx);
    mem_free(rank);
    lab_free(&S.biased);
    lab_free(&S.a_tr);
    lab_free(&S.b_tr);
    lab_free(&S.a_te);
    lab_free(&S.b_te);
    return rc;
}

/* ---- the runner ------------------------------------------------------------------------------ */

/* The SAE: a directory, or a registry id of the database. A registry row's directory is used as
 * recorded (a relative one from the current directory, as every path given to saelite is: that
 * is how sae-train records it), and the SAE found there must be the one the row describes. */
static int resolve_sae(ctx *c)
{
    const eval_opts *o = c->o;
    c->sae_id = -1;
    if (!o->sae[0]) return err_set(ERR_ARG, "the SAE is an empty string (give an SAE directory or a registry id)");
    if (snprintf(c->sae_dir, sizeof c->sae_dir, "%s", o->sae) >= (int)sizeof c->sae_dir)
        return err_set(ERR_ARG, "the SAE directory '%.64s...' is too long", o->sae);
    int rc = sae_registry_arg(c->s, o->db, o->sae, &c->reg, &c->by_id);
    if (rc) return rc;
    if (c->by_id) {
        snprintf(c->sae_dir, sizeof c->sae_dir, "%s", c->reg.dir);
        c->sae_id = c->reg.id;
    }
    if ((rc = sae_load(&c->sae, c->sae_dir))) return rc;
    if (c->sae_id < 0) { /* a directory: its registry row, however spelt, if it has one */
        rc = store_sae_get(c->s, -1, c->sae_dir, &c->reg);
        if (rc == ERR_NOTFOUND) {
            err_clear();
            return OK;
        }
        if (rc) return rc;
        c->sae_id = c->reg.id;
    }
    return sae_check_registered(c->sae, c->sae_dir, &c->reg, o->db);
}

/* In the writing transaction: the SAE's registry row again (sae-train may have replaced it
 * while eval computed: then the SAE is checked against the new row), or a new row. */
static int register_sae(ctx *c, eval_result *res)
{
    int by_id = c->by_id;
    int rc = store_sae_get(c->s, by_id ? c->sae_id : -1, by_id ? NULL : c->sae_dir, &c->reg);
    if (!rc) {
        c->sae_id = c->reg.id;
        return sae_check_registered(c->sae, c->sae_dir, &c->reg, c->o->db);
    }
    if (rc != ERR_NOTFOUND || by_id) return rc;
    err_clear();
    /* the registry records the architecture as trained, as sae-train registers it: the loaded
       model's is the saved form (sae-train's BatchTopK SAE loads as JumpReLU, without its k) */
    sae_config tr;
    if ((rc = sae_load_config(c->sae_dir, &tr))) return rc;
    const sae_config *cf = &c->sae->cfg;
    store_sae_row row = {.dir = c->sae_dir, .architecture = sae_arch_name(tr.arch),
                         .hook_name = c->hook.name, .model_name = cf->model_name[0] ? cf->model_name : NULL,
                         .config_json = "{}", .d_in = cf->d_in, .d_sae = cf->d_sae, .k = tr.k,
                         .hook_id = c->hook.id};
    char wsum[17];
    rc = sae_weights_checksum(c->sae_dir, wsum);
    row.weights = wsum;
    if (!rc) rc = store_sae_register(c->s, &row, &c->sae_id);
    if (!rc) res->registered = 1;
    return rc;
}

static int config_json(const ctx *c, buf *b)
{
    const eval_opts *o = c->o;
    eval_abs_params p;
    eval_abs_defaults(&p);
    return buf_printf(b, "{\"random_sae\":%s,\"seed\":%llu,\"test_frac\":%g,\"seqs_per_genre\":%d,\"train_per_class\":%d,"
                      "\"test_per_class\":%d,\"C\":%g,\"k\":[1,2,5,10,20],\"solver\":\"liblinear "
                      "L2R_LR, bias as a regularised feature\",\"min_train_pos\":%d,\"min_test_pos\":%d,"
                      "\"scr_margin\":\"clean - orig > 1/n_test\",\"absorption\":{\"min_gt_f1\":%g,"
                      "\"max_k\":%d,\"f1_jump\":%g,\"l1_decay\":%g}}",
                      o->no_random ? "false" : "true", (unsigned long long)o->seed, o->test_frac, o->seqs_per_genre,
                      o->train_per_class, o->test_per_class, o->C, EVAL_MIN_TRAIN_POS, EVAL_MIN_TEST_POS,
                      p.min_gt_f1, p.max_k, p.f1_jump,
                      p.l1_decay);
}

int eval_run(const eval_opts *o, eval_result *res)
{
    memset(res, 0, sizeof *res);
    double t0 = now_seconds();
    if (!o->db || !o->sae) return err_set(ERR_ARG, "eval: needs a database and an SAE");
    if (!(o->test_frac > 0 && o->test_frac < 1) || o->seqs_per_genre < 1)
        return err_set(ERR_ARG, "eval: test_frac in (0, 1), seqs_per_genre >= 1");
    if (o->train_per_class < EVAL_MIN_TRAIN_POS || o->test_per_class < EVAL_MIN_TEST_POS)
        return err_set(ERR_ARG, "eval: train_per_class %d, test_per_class %d: a task needs at least "
                       "%d train and %d test positives", o->train_per_class, o->test_per_class,
                       EVAL_MIN_TRAIN_POS, EVAL_MIN_TEST_POS);
    if (!(o->C >= EVAL_C_MIN && o->C <= EVAL_C_MAX))
        return err_set(ERR_ARG, "C %g is outside [%g, %g]", o->C, EVAL_C_MIN, EVAL_C_MAX);
    int bits, all;
    int rc = eval_parse_suites(o->suites, &bits, &all);
    if (rc) return rc;
    ctx c = {.o = o, .bits = bits, .soft = all || o->skip_missing};
    int *mark = NULL;
    int64_t *off = NULL;
    buf cfg = {0};
    int in_tx = 0;
    if ((rc = store_open(&c.s, o->db, 0))) goto out;
    if ((rc = resolve_sae(&c))) goto out;
    if (c.sae->cfg.transcoder) {
        rc = err_set(ERR_ARG, "%s: a transcoder; the evaluations need an SAE of its input hook", c.sae_dir);
        goto out;
    }
    if (!c.sae->cfg.hook_name[0]) {
        rc = err_set(ERR_ARG, "%s: the SAE's cfg.json names no hook_name", c.sae_dir);
        goto out;
    }
    if ((rc = store_hook_find(c.s, c.sae->cfg.hook_name, &c.hook))) goto out;
    if ((rc = sae_check_hook_model(c.sae, c.sae_dir, c.s, &c.hook, o->db))) goto out;
    int64_t unfinished;
    if ((rc = store_hook_unfinished(c.s, c.hook.name, &unfinished))) goto out;
    if (unfinished >= 0) /* an extract running now, or killed: only what it stored so far */
        note(res, "%s's extract (run %lld) is unfinished: these numbers use the %lld tokens it "
             "stored so far; rerun that extract to complete the hook", c.hook.name,
             (long long)unfinished, (long long)c.hook.n_tokens);
    snprintf(res->hook, sizeof res->hook, "%s", c.hook.name);
    if (c.hook.width != c.sae->cfg.d_in) {
        rc = err_set(ERR_SHAPE, "%s: the SAE reads %d values per token but %s stores %d at %s",
                     c.sae_dir, c.sae->cfg.d_in, o->db, c.hook.width, c.hook.name);
        goto out;
    }
    if (!o->no_random && (rc = eval_random_sae(c.sae, o->seed, &c.rnd))) goto out;
    if ((rc = plan_sequences(&c, res))) goto out;
    if ((rc = plan_tokens(&c, &mark, &off))) goto out;
    double t1 = now_seconds();
    if ((rc = read_pass(&c, mark, off))) goto out;
    if ((rc = rows_docs(&c, mark, off))) goto out;
    if ((rc = probes_setup(&c, res))) goto out;
    res->n_seqs = (size_t)c.nchosen;
    res->t_read = now_seconds() - t1;
    if (all || o->skip_missing) { /* skip what the database cannot feed */
        int have[2][2][2] = {{{0}}}, cells = 0;
        for (int i = 0; i < c.nchosen; i++) {
            int a = eval_imaginative(c.genres[c.ch_grp[i]]), b = c.tense[i];
            if (c.ch_scr[i] && a >= 0 && b >= 0) have[c.seq.test[i]][a][b]++;
        }
        for (int q = 0; q < 8; q++) cells += have[q / 4][q / 2 % 2][q % 2] >= 2;
        int skip = (c.tok.n == 0 ? EVAL_SUITE_ABSORPTION : 0) | (cells < 8 ? EVAL_SUITE_SCR : 0);
        if (c.tok.n == 0 && c.ngenres < 2) skip |= EVAL_SUITE_SPARSE_PROBING | EVAL_SUITE_TPP;
        res->skipped = bits & skip;
        bits &= ~skip;
        if (!bits) {
            rc = err_set(ERR_NOTFOUND, "%s: neither POS tags nor two genres: no suite can run", o->db);
            goto out;
        }
    }
    if ((bits & EVAL_SUITE_ABSORPTION) && c.tok.n == 0) {
        rc = err_set(ERR_NOTFOUND, "%s: no POS-tagged tokens for the absorption suite", o->db);
        goto out;
    }
    /* every suite computes into memory (put_row) ... */
    if (bits & EVAL_SUITE_SPARSE_PROBING) {
        double ts = now_seconds();
        if ((rc = run_sparse_probing(&c, res))) goto out;
        res->t_probe = now_seconds() - ts;
    }
    if (bits & EVAL_SUITE_ABSORPTION) {
        double ts = now_seconds();
        if ((rc = run_absorption(&c, res))) goto out;
        res->t_absorb = now_seconds() - ts;
    }
    if (bits & (EVAL_SUITE_SCR | EVAL_SUITE_TPP)) {
        double ts = now_seconds();
        if ((bits & EVAL_SUITE_SCR) && (rc = run_scr(&c, res))) goto out;
        if (c.scr_small) bits &= ~EVAL_SUITE_SCR; /* too small: skipped, with a note */
        if ((bits & EVAL_SUITE_TPP) && (rc = run_tpp(&c, res))) goto out;
        res->t_ablate = now_seconds() - ts;
    }
    if (eval_memo_journal_error(c.memo))
        progress_notice(o->notice, o->user, "no more checkpoints for the suites: %s",
                        eval_memo_journal_error(c.memo));
    res->suites = bits;
    res->seconds = now_seconds() - t0;
    for (int i = 0; i < NSUITES; i++)
        if ((bits & (1 << i)) && (rc = metric(&c, i, "seconds", res->seconds))) goto out;
    if (stopped(o)) {
        rc = err_set(ERR_ABORTED, "interrupted");
        goto out;
    }
    /* ... and only then the tables, in one short transaction: the write lock is not held while
       the probes run (a concurrent sae-train --db can register its SAE meanwhile) */
    if ((rc = config_json(&c, &cfg))) goto out;
    if ((rc = store_begin(c.s))) goto out;
    in_tx = 1;
    /* the tables too: a failure leaves none behind */
    if ((rc = store_eval_init(c.s))) goto out;
    if ((rc = register_sae(&c, res))) goto out;
    res->sae_id = c.sae_id;
    int64_t run[NSUITES] = {-1, -1, -1, -1};
    for (int i = 0; i < NSUITES; i++)
        if ((bits & (1 << i)) && (rc = store_eval_run_begin(c.s, c.sae_id, eval_suite_names[i], c.hook.name,
                                                            cfg.p, c.nchosen, &run[i])))
            goto out;
    if ((rc = flush_rows(&c, run))) goto out;
    rc = store_commit(c.s);
    in_tx = 0;
    if (!rc && c.ck.path[0]) unlink(c.ck.path); /* written: nothing left to continue */
    if (!rc && c.probes[0]) unlink(c.probes);
    res->resumed_seqs = c.ck.resumed;
out:
    if (in_tx) store_rollback(c.s);
    if (rc) res->suites = 0;
    /* a stop said only "interrupted": whether the same command continues is the user's next
       question (an audit) */
    if (rc == ERR_ABORTED && stopped(o)) {
        struct stat ckst;
        /* only a file this run saved or continued from: one another run left (other options, or
           found by a run with --checkpoint-secs 0) is not where the same command continues */
        if (c.ck.ours && c.ck.path[0] && stat(c.ck.path, &ckst) == 0)
            err_set(rc, "interrupted; the same command continues from %s", c.ck.path);
        /* the suites' file alone (a read shorter than the interval): the rerun reads again and
           takes the probes fitted so far; this said "before the first checkpoint ... starts
           again" (a review) */
        else if (c.probes[0] && (res->resumed_probes > 0 || eval_memo_journal_saved(c.memo)) &&
                 stat(c.probes, &ckst) == 0)
            err_set(rc, "interrupted; the same command reads again and continues the suites from %s",
                    c.probes);
        /* before the read no checkpoint name is known: an earlier run's file there is continued
           (this said "before the first checkpoint ... starts again" beside one, a review) */
        else if (o->ckpt_secs > 0 && !c.read_began)
            err_set(rc, "interrupted before the read; the same command starts it (or continues it "
                    "from the checkpoint an earlier run of it saved, where there is one)");
        /* before the first save the rerun starts again, as sae-train says in that case (it was
           "interrupted" alone: a scale audit) */
        else if (o->ckpt_secs > 0)
            err_set(rc, "interrupted before the first checkpoint (every %g s, --checkpoint-secs); "
                    "the same command starts again", o->ckpt_secs);
    }
    if (c.memo && c.memo == o->memo) eval_memo_journal_end(c.memo); /* the caller's again */
    eval_memo_free(c.own_memo);
    eval_boot_free(c.boot);
    buf_free(&cfg);
    mem_free(mark);
    mem_free(off);
    set_free(&c.tok);
    set_free(&c.seq);
    mem_free(c.seqs);
    mem_free(c.genres);
    mem_free(c.chosen);
    mem_free(c.seq_test);
    mem_free(c.seq_doc);
    mem_free(c.doc_stratum);
    mem_free(c.tense);
    mem_free(c.ch_grp);
    mem_free(c.ch_genre);
    mem_free(c.ch_scr);
    for (size_t i = 0; i < c.nrows; i++) mem_free(c.rows[i].json);
    mem_free(c.rows);
    sae_free(c.sae);
    sae_free(c.rnd);
    store_close(c.s);
    return rc;
}
