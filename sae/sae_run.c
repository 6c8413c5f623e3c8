/* sae_run.c - the sae-train pipeline (sae_run.h): data sources, the step loop with log rows,
 * checkpoints and stops, evaluation, the SAE files and the store's registry. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/dist.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/hash.h"
#include "common/mem.h"
#include "common/npy.h"
#include "common/progress.h"
#include "model/gpt2.h"
#include "sae/sae_run.h"
#include "store/store.h"
#include "store/store_sae.h"

int sae_run_d_sae(double expansion, int d_in, int *d_sae)
{
    double ds = lround(expansion * d_in);
    if (!(ds >= 1 && ds <= (double)(1 << 30)))
        return err_set(ERR_ARG, "--expansion %g x d_in %d gives %.4g latents; want 1 to 2^30",
                       expansion, d_in, expansion * d_in);
    *d_sae = (int)ds;
    return OK;
}

void sae_run_defaults(sae_run_opts *o)
{
    *o = (sae_run_opts){.shuffle_tokens = 65536, .val_frac = STORE_VAL_FRAC_DEFAULT, .eval_tokens = 65536, .expansion = 8,
                        .checkpoint_secs = 600};
    synth_defaults(&o->synth_cfg); /* d 256, 512 features, 5 active, seed 1 */
    sae_train_defaults(&o->train); /* topk, k 32, batch 4096, 10M tokens, seed 42 */
}

static int source_next(void *user, float *x, int rows)
{
    sae_source *s = user;
    return s->next(s, x, rows);
}

int sae_eval_source(const sae_model *m, sae_source *src, int64_t n, sae_metrics *acc)
{
    /* in pieces of whole SAE_EVAL_CHUNKs (the same rows per chunk as one call), with progress:
       the held-out evaluation ran after the training's ETA had run out */
    progress pr;
    progress_begin(&pr, "held-out eval", (double)n, "tok");
    int rc = OK;
    for (int64_t done = 0; !rc && done < n;) {
        int64_t nb = n - done < 16 * SAE_EVAL_CHUNK ? n - done : 16 * SAE_EVAL_CHUNK;
        if (src->rows_left) { /* a source that can run dry: what it can surely fill */
            int64_t left = src->rows_left(src);
            if (left <= 0) break;
            if (nb > left) nb = left;
        }
        rc = sae_metrics_eval(acc, m, NULL, nb, source_next, src);
        done += nb;
        progress_update(&pr, (double)done, NULL);
    }
    progress_end(&pr);
    return rc;
}

/* Rows of an in-memory array go to validation when a hash of the row index falls below frac. */
static int is_val_row(int64_t i, double frac)
{
    uint64_t z = (uint64_t)i * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 29;
    return (double)(z >> 11) * 0x1.0p-53 < frac;
}

/* Everything one run holds; freed in one place (run_free). */
typedef struct {
    sae_source *src, *val;
    sae_store_info sinfo;
    int64_t eval_tokens;
    sae_train_config c;
    sae_trainer *t;
    float *x;                 /* [max(batch, n_init), d_in] */
    FILE *logf;
    store_sae_log_row *logrows;
    size_t nlog, caplog;
    sae_model *m;
    sae_metrics acc;
    float *dens;
    char ckpt[4096], logp[4096], logbin[4096], runp[4096];
    float *truth;     /* --truth [truth_n, d_out or d_in], read before training */
    int64_t npy_rows; /* --npy: the file's rows */
    int64_t truth_n;
    int made_out;   /* this run created OUT */
    int lock;       /* OUT/.sae-train.lock, held for the whole run (rank 0; -1: none) */
    int made_lock;  /* this run created that file (a failed run removes it again) */
    int made_truth; /* this run created truth_out */
    int64_t ckpts;  /* checkpoints this run wrote (then what it leaves is resumable) */
    double t0;            /* when this call's step loop began */
    double prior_seconds; /* --resume: the step loops' seconds up to the checkpoint */
    char prec_ckpt[8];    /* --resume: the checkpoint's precision record ("" when it has none) */
    char settings[2048];  /* checkpoint_run.txt without its precision line (root) */
    int prec_written;     /* checkpoint_run.txt holds prec (at the first checkpoint: a resume
                             refused or stopped before a step leaves the record as it was) */
} run;

static void run_free(run *r)
{
    sae_source_close(r->src);
    sae_source_close(r->val);
    mem_free(r->x);
    sae_trainer_free(r->t);
    if (r->logf) fclose(r->logf);
    mem_free(r->logrows);
    sae_free(r->m);
    sae_metrics_free(&r->acc);
    mem_free(r->dens);
    mem_free(r->truth);
}

static int open_store(run *r, const sae_run_opts *o)
{
    double vf = o->val_frac;
    /* a transcoder reads (hook, hook_out) pairs of the same tokens */
    const char *ho = r->c.transcoder ? o->hook_out : NULL;
    /* a killed writer (extract under kill -9) leaves a hot -journal that the sources' read-only
       opens cannot roll back ("attempt to write a readonly database"); docs/store.md promised
       that sae-train --db, a writer (the registry), rolls it back first as analyze does. A
       read-write open does; where it cannot (a read-only file), the sources' open says why. */
    store *w = NULL;
    int wrc = store_open(&w, o->db, 0);
    if (wrc == OK) store_close(w);
    else if (wrc == ERR_BUSY) return wrc; /* the sources would wait for the lock a second time */
    else err_clear();
    int rc = sae_source_store_pair(&r->src, o->db, o->hook, ho,
                                   vf > 0 ? STORE_SPLIT_TRAIN : STORE_SPLIT_ALL, vf, r->c.seed,
                                   o->shuffle_tokens, !o->keep_bos, o->max_norm_ratio, &r->sinfo);
    if (rc) return rc;
    if (vf > 0 && sae_source_store_pair(&r->val, o->db, o->hook, ho, STORE_SPLIT_VAL, vf,
                                        r->c.seed + 1, 8192, !o->keep_bos, o->max_norm_ratio, NULL)) {
        err_clear(); /* no validation sequences: evaluate nothing */
        r->val = NULL;
    }
    r->c.d_in = r->sinfo.width;
    r->c.d_out = ho ? r->sinfo.width_out : 0;
    return OK;
}

/* A transcoder's --npy-out: the targets of the *x rows, row for row; *x becomes [x | y] rows
 * (grown in place; on error still the caller's to free). */
static int join_targets(float **x, int64_t n, int D, const char *xpath, const char *ypath, int *d_out)
{
    float *y = NULL;
    int nd;
    int64_t sh[NPY_MAX_DIMS];
    int rc = npy_read(ypath, &y, &nd, sh);
    if (rc) return rc;
    if (nd != 2 || sh[0] != n || sh[1] < 1) {
        char shs[200];
        npy_shape_str(shs, sizeof shs, nd, sh);
        rc = err_set(ERR_SHAPE, "%s: expected [%" PRId64 ", d_out] with d_out >= 1 (the rows of %s), "
                                "got shape %s", ypath, n, xpath, shs);
    }
    if (!rc) rc = npy_check_finite(ypath, y, sh[0], sh[1]);
    int Do = rc ? 0 : (int)sh[1];
    if (!rc) rc = sae_pairs_join(x, D, y, Do, n);
    mem_free(y);
    if (rc) return rc;
    *d_out = Do;
    return OK;
}

static int open_npy(run *r, const sae_run_opts *o)
{
    float *data = NULL;
    int nd;
    int64_t shape[NPY_MAX_DIMS];
    int rc = npy_read(o->npy, &data, &nd, shape);
    if (rc) return rc;
    if (nd != 2 || shape[0] < 1 || shape[1] < 1) {
        char sh[200];
        npy_shape_str(sh, sizeof sh, nd, shape);
        mem_free(data);
        return nd != 2 ? err_set(ERR_SHAPE, "%s: expected [tokens, d_in], got %d dims (shape %s)",
                                 o->npy, nd, sh)
                       : err_set(ERR_SHAPE, "%s: expected [tokens, d_in] with tokens and d_in >= 1, "
                                            "got shape %s (an empty array)", o->npy, sh);
    }
    if ((rc = npy_check_finite(o->npy, data, shape[0], shape[1]))) {
        mem_free(data);
        return rc;
    }
    r->c.d_in = (int)shape[1];
    int W = r->c.d_in; /* a source row: x, or a transcoder's [x | y] */
    if (o->npy_out && (rc = join_targets(&data, shape[0], r->c.d_in, o->npy, o->npy_out, &r->c.d_out))) {
        mem_free(data);
        return rc;
    }
    W += r->c.d_out;
    int64_t n = shape[0], nv = 0, nt = 0;
    r->npy_rows = n;
    int64_t *rows = mem_alloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    int64_t *vrows = mem_alloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    for (int64_t i = 0; rows && vrows && i < n; i++) {
        if (is_val_row(i, o->val_frac)) vrows[nv++] = i;
        else rows[nt++] = i;
    }
    rc = rows && vrows ? OK : err_set(ERR_NOMEM, "out of memory");
    if (!rc && nt < 1)
        rc = err_set(ERR_ARG, "%s: its %lld rows all went to validation (--val-frac %g); none is "
                     "left to train on", o->npy, (long long)n, o->val_frac);
    if (!rc) rc = sae_source_mem_rows(&r->src, data, rows, nt, W, r->c.seed);
    if (!rc && nv) rc = sae_source_mem_rows(&r->val, data, vrows, nv, W, r->c.seed + 1);
    mem_free(rows);
    mem_free(vrows);
    if (rc) mem_free(data);
    else sae_source_adopt(r->src, data);
    return rc;
}

static int open_synth(run *r, const sae_run_opts *o)
{
    synth_config sc = o->synth_cfg;
    int rc = sae_source_synth(&r->src, &sc);
    if (rc) return rc;
    sc.sample_seed = sc.seed + 1000003; /* held-out samples, same features */
    if ((rc = sae_source_synth(&r->val, &sc))) return rc;
    r->c.d_in = sc.d;
    if (o->truth_out && dist_is_root()) {
        int64_t sh[2] = {sc.n_features, sc.d};
        r->made_truth = access(o->truth_out, F_OK) != 0;
        rc = npy_write(o->truth_out, sae_source_synth_directions(r->src), 2, sh);
    }
    return rc;
}

/* Data sources, the trainer's shape and the output paths. */
static int run_open(run *r, const sae_run_opts *o)
{
    if (r->c.transcoder && !(o->db && o->hook_out && o->hook_out[0]) && !(o->npy && o->npy_out))
        return err_set(ERR_ARG, "a transcoder trains on a store's --hook and --hook-out, "
                                "or on --npy with --npy-out");
    if (o->npy_out && !(r->c.transcoder && o->npy))
        return err_set(ERR_ARG, "--npy-out is a transcoder's targets for --npy");
    /* a transcoder maps a hook to a later one: trained the other way round, analyze refused it
       only after training (its forward meets the output first); imported names are not GPT-2's
       and go unchecked. With --npy too: the names go into cfg.json for analyze (the check was
       --db's only, and a reversed --npy pair trained into a transcoder analyze refuses) */
    long long pin, pout;
    if (r->c.transcoder && o->hook && o->hook_out && gpt2_hook_order(o->hook, &pin) == OK &&
        gpt2_hook_order(o->hook_out, &pout) == OK && pout <= pin)
        return err_set(ERR_ARG, "the transcoder's --hook-out %s %s its --hook %s in the "
                       "forward pass: a transcoder maps a hook to a later one (e.g. "
                       "blocks.L.ln2.hook_normalized -> blocks.L.hook_mlp_out)", o->hook_out,
                       pout == pin ? "is the same point as" : "runs before", o->hook);
    int rc = o->db ? open_store(r, o) : o->npy ? open_npy(r, o) : open_synth(r, o);
    if (rc) return rc;
    int64_t avail = !r->val ? 0 : r->val->n_rows < 0 ? INT64_MAX : r->val->n_rows;
    r->eval_tokens = o->eval_tokens < avail ? o->eval_tokens : avail;
    sae_train_config *c = &r->c;
    if (!c->d_sae && (rc = sae_run_d_sae(o->expansion, c->d_in, &c->d_sae))) return rc;
    if (c->arch == SAE_RELU || c->arch == SAE_JUMPRELU || c->arch == SAE_GATED) c->k = 0;
    /* OUT exists: lock_out made it */
    int rc2 = path_join(r->ckpt, sizeof r->ckpt, o->out, "checkpoint.bin");
    if (!rc2) rc2 = path_join(r->logp, sizeof r->logp, o->out, "training_log.csv");
    if (!rc2) rc2 = path_join(r->logbin, sizeof r->logbin, o->out, "checkpoint_log.bin");
    if (!rc2) rc2 = path_join(r->runp, sizeof r->runp, o->out, "checkpoint_run.txt");
    /* a run killed inside an atomic write leaves its NAME.tmp.PID; the renamed files are intact */
    static const char *const outputs[] = {"checkpoint.bin", "checkpoint_log.bin", "training_log.csv",
                                          "cfg.json", "sae_weights.safetensors",
                                          "sparsity.safetensors", "checkpoint_run.txt"};
    if (!rc2 && dist_is_root()) file_remove_temps(o->out, outputs, sizeof outputs / sizeof *outputs);
    return rc2;
}

static int latent_shards(const sae_run_opts *o) { return o->latent_shards > 0 ? o->latent_shards : 1; }
static int latent_blocks(const sae_run_opts *o)
{
    return o->latent_blocks > 0 ? o->latent_blocks : latent_shards(o);
}

/* The first rows of the stream initialise scale and b_dec; a resumed run instead checks that
 * the checkpoint's run had the same settings and replays the stream to where it stopped. */
static int run_trainer(run *r, const sae_run_opts *o)
{
    int batch = r->c.batch;
    int64_t n_init = batch < 16384 ? 16384 : batch, W = r->c.d_in + r->c.d_out;
    double need = 4.0 * (double)n_init * W; /* the rows alone; the trainer checks the rest */
    long long phys = mem_physical_bytes();
    if (phys > 0 && need > (double)phys)
        return err_set(ERR_ARG, "--batch %d: a batch of %d-float rows needs %.1f GB, more than this "
                       "machine's %.1f GB of memory", batch, (int)W, need / 1e9, (double)phys / 1e9);
    r->x = mem_alloc(sizeof(float) * (size_t)n_init * W); /* [x | y] rows */
    int rc = r->x ? r->src->next(r->src, r->x, (int)n_init)
                  : err_set(ERR_NOMEM, "--batch %d: out of memory for its %lld x %d input rows", batch,
                            (long long)n_init, (int)W);
    if (rc) return rc;
    int mb = o->micro_batches > 0 ? o->micro_batches : 1, lb = latent_blocks(o);
    if (!o->resume) {
        rc = sae_trainer_new(&r->t, &r->c, r->x, n_init);
        if (rc == ERR_FORMAT) /* the data's fault: name where they came from */
            rc = err_wrap(rc, "%s", o->db ? o->db : o->npy ? o->npy : "synthetic data");
        if (!rc && lb == 1) rc = sae_trainer_set_micro_batches(r->t, mb);
        return rc ? rc : sae_trainer_set_latent_blocks(r->t, lb);
    }
    if ((rc = sae_trainer_resume(&r->t, r->ckpt))) return rc;
    if (sae_trainer_micro_batches(r->t) != mb)
        return err_set(ERR_ARG, "%s: the checkpoint's run has --micro-batches %d (not %d); resume "
                                "with the same (any world size dividing it)",
                       r->ckpt, sae_trainer_micro_batches(r->t), mb);
    if (sae_trainer_latent_blocks(r->t) != lb)
        return err_set(ERR_ARG, "%s: the checkpoint's run has --latent-blocks %d (not %d); resume "
                                "with the same (any --latent-shards dividing it)",
                       r->ckpt, sae_trainer_latent_blocks(r->t), lb);
    /* compare the settings that define the run (defaults filled in identically) */
    sae_trainer *probe = NULL;
    if ((rc = sae_trainer_new(&probe, &r->c, r->x, 1))) return rc;
    char why[600];
    int differ = sae_train_config_diff(sae_trainer_cfg(r->t), sae_trainer_cfg(probe), why, sizeof why);
    sae_trainer_free(probe);
    if (differ)
        return err_set(ERR_ARG, "%s: the checkpoint's run had %s; %s", r->ckpt, why,
                       o->resume_advice ? o->resume_advice : "resume with the same flags");
    return sae_source_skip(r->src, sae_trainer_step_index(r->t) * (int64_t)batch, batch);
}

/* The log rows of the whole run so far go beside the checkpoint (OUT/checkpoint_log.bin: magic,
 * count, the step loops' seconds up to the checkpoint (a double), rows, then the FNV-1a 64 of
 * everything before it), so a resumed run registers the complete curve and the whole run's
 * training time, and its CSV export loses no rows and repeats none. Written before the
 * checkpoint: rows past the checkpoint's step are dropped on resume. SAELOG02 files, from before
 * the checksum (a changed byte gave the registry and the CSV another curve, a review), still
 * resume; SAELOG01, from before the seconds, has none (its run's time starts again). */
static const char LOG_MAGIC[8] = "SAELOG03", LOG_MAGIC_V2[8] = "SAELOG02",
                  LOG_MAGIC_V1[8] = "SAELOG01";

static int log_push(run *r, const store_sae_log_row *row)
{
    if (r->nlog == r->caplog) {
        size_t cap = r->caplog ? 2 * r->caplog : 256;
        store_sae_log_row *p = mem_realloc(r->logrows, cap * sizeof *p);
        if (!p) return err_set(ERR_NOMEM, "training log: out of memory");
        r->logrows = p;
        r->caplog = cap;
    }
    r->logrows[r->nlog++] = *row;
    return OK;
}

/* The steps' precision: this call's; "mixed" where the checkpoint's record differs; the
 * checkpoint's where this call ran no step (a finished run resumed). */
static const char *steps_precision(const run *r, int ran_steps)
{
    const char *cur = sae_k_precision() == SAE_PRECISION_BF16 ? "bf16" : "fp32";
    if (!r->prec_ckpt[0]) return cur;
    if (!ran_steps) return r->prec_ckpt;
    return strcmp(r->prec_ckpt, cur) ? "mixed" : cur;
}

static int run_checkpoint(run *r)
{
    size_t n = 24 + r->nlog * sizeof *r->logrows;
    unsigned char *b = mem_alloc(n + 8);
    if (!b) return err_set(ERR_NOMEM, "training log: out of memory");
    int64_t cnt = (int64_t)r->nlog;
    double secs = r->prior_seconds + (now_seconds() - r->t0);
    memcpy(b, LOG_MAGIC, 8);
    memcpy(b + 8, &cnt, 8);
    memcpy(b + 16, &secs, 8);
    if (r->nlog) memcpy(b + 24, r->logrows, r->nlog * sizeof *r->logrows);
    uint64_t sum = hash_fnv1a(HASH_FNV1A_INIT, b, n);
    memcpy(b + n, &sum, 8);
    int rc = file_write_atomic(r->logbin, b, n + 8);
    mem_free(b);
    if (!rc && !r->prec_written) { /* before the checkpoint: never a record of fewer kinds */
        char b2[2100];
        snprintf(b2, sizeof b2, "%sprecision %s\n", r->settings, steps_precision(r, 1));
        if (!(rc = file_write_atomic(r->runp, b2, strlen(b2)))) r->prec_written = 1;
    }
    if (!rc) rc = sae_trainer_checkpoint(r->t, r->ckpt);
    if (!rc) r->ckpts++;
    return rc;
}

/* The rows of the checkpointed run up to its step (none for a checkpoint without a log file). */
static int log_restore(run *r, int64_t step)
{
    FILE *f = fopen(r->logbin, "rb");
    if (!f) return OK;
    char magic[8];
    int64_t cnt = 0;
    double secs = 0;
    int v1 = 0, v3 = 0;
    int rc = fread(magic, 8, 1, f) == 1 &&
                     ((v3 = !memcmp(magic, LOG_MAGIC, 8)) || !memcmp(magic, LOG_MAGIC_V2, 8) ||
                      (v1 = !memcmp(magic, LOG_MAGIC_V1, 8))) &&
                     fread(&cnt, 8, 1, f) == 1 && cnt >= 0 && (v1 || fread(&secs, 8, 1, f) == 1) &&
                     secs >= 0 && isfinite(secs)
                 ? OK
                 : err_set(ERR_FORMAT, "%s: not a training-log file", r->logbin);
    uint64_t h = HASH_FNV1A_INIT, want;
    h = hash_fnv1a(h, magic, 8);
    h = hash_fnv1a(h, &cnt, 8);
    if (!v1) h = hash_fnv1a(h, &secs, 8);
    size_t first = r->nlog;
    for (int64_t i = 0; !rc && i < cnt; i++) {
        store_sae_log_row row;
        if (fread(&row, sizeof row, 1, f) != 1) rc = err_set(ERR_FORMAT, "%s: truncated", r->logbin);
        else {
            h = hash_fnv1a(h, &row, sizeof row);
            if (row.step <= step) rc = log_push(r, &row);
        }
    }
    if (!rc && v3 && (fread(&want, 8, 1, f) != 1 || want != h || fgetc(f) != EOF))
        rc = err_set(ERR_FORMAT, "%s: damaged (its checksum does not match); remove it to resume "
                     "without the training log so far", r->logbin);
    fclose(f);
    if (rc) r->nlog = first; /* none of a refused file's rows */
    else r->prior_seconds = secs;
    return rc;
}

/* The CSV export, rewritten from the rows so far (a resumed run then appends to it). */
static int log_open_csv(run *r)
{
    file_atomic a;
    char line[256];
    int rc = file_atomic_open(&a, r->logp);
    if (rc) return rc;
    fputs(store_sae_log_csv_header, a.f);
    for (size_t i = 0; !rc && i < r->nlog; i++) {
        rc = store_sae_log_csv_row(line, sizeof line, &r->logrows[i]);
        if (!rc) fputs(line, a.f);
    }
    if (rc) file_atomic_abort(&a);
    else rc = file_atomic_commit(&a);
    if (!rc) {
        r->logf = fopen(r->logp, "a");
        if (!r->logf) rc = err_set(ERR_IO, "%s: cannot open: %s", r->logp, strerror(errno));
    }
    return rc;
}

static int log_row(run *r, const sae_step_stats *st)
{
    store_sae_log_row row = {st->step, st->tokens, st->mse, st->ev, st->l0, st->dead_frac, st->lr,
                             st->loss};
    char line[256];
    int rc = store_sae_log_csv_row(line, sizeof line, &row);
    if (!rc) fputs(line, r->logf);
    return rc ? rc : log_push(r, &row);
}

/* Several ranks: whether any rank failed (then every rank returns the failing rank's error) or
 * was asked to stop (*stop, in/out). One small all-reduce; nothing with one rank. */
static int agree_due(int rc, int *stop, int *due)
{
    if (dist_size() == 1) return rc;
    int64_t v[3] = {rc != 0, stop && *stop, due && *due};
    int mrc = dist_max_i64(v, 3);
    if (mrc) return mrc;
    if (stop) *stop = (int)v[1];
    if (due) *due = (int)v[2];
    return v[0] ? dist_check(rc) : OK;
}

static int agree(int rc, int *stop) { return agree_due(rc, stop, NULL); }

/* A checkpoint at this step, on every rank at once: every rank's latents (latent shards) or
 * Adam moments (data parallel) to rank 0 (collective), which writes it; *last: when it ended. */
static int checkpoint_now(run *r, sae_run_result *res, double *last)
{
    double tc = now_seconds();
    int rc = sae_trainer_gather(r->t);
    if (!rc) rc = dist_is_root() ? run_checkpoint(r) : (r->ckpts++, OK);
    *last = now_seconds();
    res->ckpt_seconds += *last - tc;
    return rc;
}

/* The step loop: log rows, checkpoints, max_steps and *stop (rank 0 logs and checkpoints). */
static int run_steps(run *r, const sae_run_opts *o, sae_run_result *res)
{
    const int batch = r->c.batch, root = dist_is_root();
    int rc = root && o->resume ? log_restore(r, sae_trainer_step_index(r->t)) : OK;
    if (!rc && root) rc = log_open_csv(r);
    if ((rc = agree(rc, NULL))) return rc;
    int64_t T = sae_trainer_total_steps(r->t), s0 = sae_trainer_step_index(r->t);
    int log_every = o->log_every > 0 ? o->log_every : T / 100 > 0 ? (int)(T / 100) : 1;
    progress pr;
    progress_begin_at(&pr, "sae-train", (double)T * batch, "tok", (double)s0 * batch);
    sae_step_stats st;
    memset(&st, 0, sizeof st);
    double t0 = r->t0 = now_seconds(), last_ckpt = t0;
    int r0, nr; /* this rank's rows of each batch: the only ones it reads where the source can skip */
    sae_trainer_rows(r->t, &r0, &nr);
    while (!rc && sae_trainer_step_index(r->t) < T) {
        double ta = now_seconds();
        rc = agree(sae_source_next_rows(r->src, r->x, batch, r0, nr), NULL);
        res->read_seconds += now_seconds() - ta;
        /* a step that fails fails on every rank alike (sae_trainer_step agrees before its
           collectives), so every rank leaves here together */
        if (!rc) rc = sae_trainer_step(r->t, r->x, &st);
        if (rc) break;
        res->clipped += st.clipped;
        int64_t s = st.step;
        if (root && (s % log_every == 0 || s == T)) rc = log_row(r, &st);
        progress_update(&pr, (double)st.tokens, "step %" PRId64 " mse %.4g ev %.3f L0 %.1f dead %.1f%%",
                        s, st.mse, st.ev, st.l0, 100 * st.dead_frac);
        int max_stop = o->max_steps > 0 && s - s0 >= o->max_steps && s < T;
        if ((o->checkpoint_every > 0 && s % o->checkpoint_every == 0) || s == T || max_stop) {
            /* the gather is collective: agreed first */
            if (dist_size() > 1) rc = agree(rc, NULL);
            if (!rc) rc = checkpoint_now(r, res, &last_ckpt);
        }
        int stop = o->stop && *o->stop;
        /* also by the clock, rank 0's (the ranks' clocks differ, and the gather is collective):
           with checkpoints by steps only, or none, a kill -9 lost hours of training */
        int due = root && o->checkpoint_secs > 0 && s < T && now_seconds() - last_ckpt >= o->checkpoint_secs;
        if ((rc = agree_due(rc, &stop, &due)) || max_stop) break;
        /* agreed: rank 0's checkpoints so far are on disk (the SIGTERM line says --resume) */
        if (r->ckpts && o->ckpt_done) *o->ckpt_done = 1;
        if (due || stop) {
            rc = checkpoint_now(r, res, &last_ckpt);
            /* a stop: every rank stops with this message (dist_check: printed once) */
            if (!(rc = agree(rc, NULL)) && stop)
                rc = dist_check(err_set(ERR_ABORTED, "interrupted at step %" PRId64 "; checkpoint "
                                                     "%s (continue with --resume)", s, r->ckpt));
        }
    }
    res->seconds = now_seconds() - t0;
    res->total_seconds = r->prior_seconds + res->seconds;
    progress_end(&pr);
    if (r->logf && fclose(r->logf) && !rc) rc = err_set(ERR_IO, "%s: cannot write", r->logp);
    r->logf = NULL;
    res->steps = sae_trainer_step_index(r->t) - s0;
    res->grad_clip = sae_trainer_cfg(r->t)->grad_clip;
    return rc;
}

/* Export, held-out evaluation and the SAE files. */
static int run_save(run *r, const sae_run_opts *o, sae_run_result *res)
{
    sae_config meta;
    memset(&meta, 0, sizeof meta);
    snprintf(meta.hook_name, sizeof meta.hook_name, "%s", o->hook ? o->hook : "");
    snprintf(meta.model_name, sizeof meta.model_name, "%s", o->model_name && o->model_name[0]
             ? o->model_name : r->sinfo.model_name);
    meta.context_size = o->context_size ? o->context_size : r->sinfo.seq_len;
    snprintf(meta.model_checksum, sizeof meta.model_checksum, "%s", r->sinfo.model_checksum);
    snprintf(meta.hook_name_out, sizeof meta.hook_name_out, "%s", o->hook_out ? o->hook_out : "");
    int rc = sae_trainer_export(r->t, &meta, &r->m);
    if (!rc) rc = sae_metrics_init(&r->acc, sae_out_dim(&r->m->cfg), r->m->cfg.d_sae);
    if (!rc) sae_metrics_prefixes(&r->acc, &r->m->cfg); /* a Matryoshka's, as analyze's */
    if (!rc && r->eval_tokens > 0 && (rc = sae_eval_source(r->m, r->val, r->eval_tokens, &r->acc)))
        rc = err_wrap(rc, "evaluating the trained SAE on the held-out rows");
    sae_metrics_summary *sum = &res->eval;
    if (!rc && r->eval_tokens > 0) {
        sae_metrics_summarize(&r->acc, sum);
        r->eval_tokens = sum->n; /* fewer where --max-norm-ratio dropped held-out tokens */
        r->dens = mem_alloc(sizeof(float) * r->m->cfg.d_sae);
        if (r->dens) sae_metrics_log10_density(&r->acc, r->dens);
    }
    if (rc) return rc;
    const sae_train_config *tc = sae_trainer_cfg(r->t);
    /* the tokens trained: a last partial batch is not (--tokens 12000 at --batch 5000 trains
       10000, and cfg.json said 12000); no held-out rows: null, not an mse of 0 that reads as a
       perfect reconstruction */
    int64_t trained = sae_trainer_total_steps(r->t) * tc->batch;
    char mets[400];
    if (r->eval_tokens > 0)
        snprintf(mets, sizeof mets, "\"mse\":%.6g,\"explained_variance\":%.6g,\"cos\":%.6g,"
                 "\"l2_ratio\":%.6g,\"l0\":%.6g,\"dead_frac\":%.6g,\"dense_frac\":%.6g",
                 sum->mse, sum->ev, sum->cos, sum->l2_ratio, sum->l0, sum->dead_frac, sum->dense_frac);
    else
        snprintf(mets, sizeof mets, "\"mse\":null,\"explained_variance\":null,\"cos\":null,"
                 "\"l2_ratio\":null,\"l0\":null,\"dead_frac\":null,\"dense_frac\":null");
    char js[2048];
    snprintf(js, sizeof js,
             "{\"architecture\":\"%s\",\"k\":%d,\"k_aux\":%d,\"aux_coef\":%g,\"l1\":%g,"
             "\"lr\":%g,\"batch\":%d,\"tokens\":%" PRId64 ",\"seed\":%" PRIu64 ","
             "\"normalize\":%d,\"scale\":%.9g,\"jr_bandwidth\":%g,\"jr_init_threshold\":%g,"
             "\"jr_lr_mult\":%g,\"grad_clip\":%g,\"adam_beta1\":%g,\"source\":\"%s\",\"eval_tokens\":%" PRId64 ","
             "%s}",
             sae_arch_name(tc->arch), tc->k, tc->k_aux, tc->aux_coef, tc->l1, tc->lr,
             tc->batch, trained, tc->seed, tc->normalize, sae_trainer_scale(r->t),
             tc->jr_bandwidth, tc->jr_init_threshold, tc->jr_lr_mult, fmax(tc->grad_clip, 0),
             tc->adam_b1,
             o->db ? "store" : o->npy ? "npy" : "synth", r->eval_tokens, mets);
    size_t jl = strlen(js);
    if (tc->transcoder && jl + 300 < sizeof js) /* a transcoder's kind and output side */
        snprintf(js + jl - 1, sizeof js - jl + 1, ",\"transcoder\":\"%s\",\"d_out\":%d}",
                 tc->transcoder == SAE_SKIP_TRANSCODER ? "skip_transcoder" : "transcoder",
                 tc->d_out);
    jl = strlen(js);
    if (tc->arch == SAE_MATRYOSHKA && jl + 16 * 12 < sizeof js) { /* the widths, after the rest */
        jl--; /* over the closing brace */
        for (int i = 0; i < tc->n_widths; i++)
            jl += (size_t)snprintf(js + jl, sizeof js - jl, "%s%d", i ? "," : ",\"widths\":[",
                                   tc->widths[i]);
        snprintf(js + jl, sizeof js - jl, "],\"levels\":\"%s\"}",
                 tc->mat_levels == SAE_MAT_OWN ? "own" : "shared");
    }
    jl = strlen(js) - 1;
    if (r->eval_tokens > 0 && sum->n_prefix > 0 && /* each inner prefix's held-out EV, all or none */
        jl + 40 * (size_t)(sum->n_prefix + 1) < sizeof js) {
        for (int g = 0; g < sum->n_prefix; g++)
            jl += (size_t)snprintf(js + jl, sizeof js - jl, "%s%.6g",
                                   g ? "," : ",\"prefix_explained_variance\":[", sum->prefix_ev[g]);
        snprintf(js + jl, sizeof js - jl, "]}");
    }
    if (sae_trainer_micro_batches(r->t) > 1) /* one-leaf runs keep their cfg.json byte for byte */
        snprintf(js + strlen(js) - 1, sizeof js - strlen(js) + 1, ",\"micro_batches\":%d}",
                 sae_trainer_micro_batches(r->t));
    if (sae_trainer_latent_blocks(r->t) > 1)
        snprintf(js + strlen(js) - 1, sizeof js - strlen(js) + 1, ",\"latent_blocks\":%d}",
                 sae_trainer_latent_blocks(r->t));
    const char *prec = steps_precision(r, res->steps > 0);
    if (strcmp(prec, "fp32")) /* fp32 runs keep their cfg.json byte for byte */
        snprintf(js + strlen(js) - 1, sizeof js - strlen(js) + 1, ",\"precision\":\"%s\"}", prec);
    return sae_save_ex(r->m, o->out, js, r->dens);
}

/* --truth is read and checked once the data's width is known, before the first step: a bad
 * file fails the run then, not after training (which left a finished OUT that --force alone
 * could replace). */
static int load_truth(run *r, const sae_run_opts *o)
{
    int nd;
    int64_t sh[NPY_MAX_DIMS];
    int rc = npy_read(o->truth, &r->truth, &nd, sh);
    if (rc) return rc;
    int Do = r->c.d_out > 0 ? r->c.d_out : r->c.d_in; /* decoder rows live in the output space */
    if (nd != 2 || sh[0] < 1 || sh[0] > INT32_MAX || sh[1] != Do) {
        char shs[200];
        npy_shape_str(shs, sizeof shs, nd, sh);
        return err_set(ERR_SHAPE, "%s: expected [features, %d] (the SAE's %s width), got shape %s",
                       o->truth, Do, r->c.d_out > 0 ? "output" : "input", shs);
    }
    r->truth_n = sh[0];
    return sae_truth_check(o->truth, r->truth, sh[0], (int)sh[1]);
}

static int run_truth(run *r, sae_run_result *res)
{
    return sae_mmcs(r->truth, (int)r->truth_n, r->m->W_dec, r->m->cfg.d_sae,
                    sae_out_dim(&r->m->cfg), 0.9, &res->mmcs, &res->recovered, NULL);
}

/* What defines a run's data beside the trainer's settings (which the checkpoint holds): one
 * "key value" line each, in OUT/checkpoint_run.txt from the start, so that --resume refuses
 * other data settings as it refuses other training flags. */
static int run_settings(char *b, size_t cap, const run *r, const sae_run_opts *o)
{
    const synth_config *y = &o->synth_cfg;
    char e[6][40];
    int n = 0;
    if (o->db)
        n = snprintf(b, cap, "source --db\nhook %s\nhook_out %s\nval_frac %s\nshuffle_buffer %lld\n"
                     "keep_bos %d\nmax_norm_ratio %s\nstore_rows %lld\nstore_model %s\n", o->hook,
                     o->hook_out ? o->hook_out : "", buf_double(e[0], 40, o->val_frac),
                     (long long)o->shuffle_tokens, !!o->keep_bos, buf_double(e[1], 40, o->max_norm_ratio),
                     (long long)(r->src ? r->src->n_rows : 0), r->sinfo.model_checksum);
    else if (o->npy)
        n = snprintf(b, cap, "source --npy\nval_frac %s\nrows %lld\n", buf_double(e[0], 40, o->val_frac),
                     (long long)r->npy_rows);
    else
        n = snprintf(b, cap, "source --synth\nsynth %d %d %s %s %d %s %llu %d %d %s\n", y->d,
                     y->n_features, buf_double(e[2], 40, y->active), buf_double(e[3], 40, y->decay), y->rank,
                     buf_double(e[4], 40, y->corr), (unsigned long long)y->seed, y->parents, y->children,
                     buf_double(e[5], 40, y->child_p));
    return n > 0 && (size_t)n < cap ? OK : err_set(ERR_ARG, "%s: run settings too long", o->out);
}

/* A line of checkpoint_run.txt: its key, what it records (by flag) and, where the same flags
 * cannot continue the checkpoint, what can. */
typedef struct {
    const char *key, *what, *advice;
} setting_line;

static const setting_line *setting_of(const char *line)
{
    static const char other_data[] = "resume on the database it was trained on, or train it from "
                                     "the start on this one (--force without --resume)";
    static const setting_line map[] = {
        {"source ", "the data source (--db, --npy, --synth)", NULL}, {"hook ", "--hook", NULL},
        {"hook_out ", "--hook-out", NULL}, {"val_frac ", "--val-frac", NULL},
        {"shuffle_buffer ", "--shuffle-buffer", NULL}, {"keep_bos ", "--keep-bos", NULL},
        {"max_norm_ratio ", "--max-norm-ratio", NULL}, {"rows ", "the --npy file's rows", NULL},
        /* other data under the same flags: those flags cannot continue it (a review) */
        {"store_rows ", "the training split's tokens in --db: another database, or rows added "
                        "or removed since", other_data},
        /* the same count of another model's activations (the corpus extracted again with
           another model): the rows alone let it continue */
        {"store_model ", "the checksum of the model whose activations --db holds: another "
                         "database, or the hook extracted again with another model", other_data},
        {"synth ", "the generator (--synth-* or --synth-spec)", NULL}};
    static const setting_line other = {"", "the data settings", NULL};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strncmp(line, map[i].key, strlen(map[i].key))) return &map[i];
    return &other;
}

/* Whether b holds only lines that checkpoint_run.txt gained after its first format (the last
 * ones in it, in this order). */
static int later_lines_only(const char *b)
{
    static const char *const later[] = {"store_rows ", "store_model "};
    for (size_t i = 0; *b && i < sizeof later / sizeof later[0]; i++) {
        if (strncmp(b, later[i], strlen(later[i]))) continue;
        b = strchr(b, '\n');
        b = b ? b + 1 : "";
    }
    return !*b;
}

/* The file's last line, "precision P", is not a setting: a resume may change the precision (a
 * bf16 run continued where the CPU has none), and the steps' record becomes "mixed" (cfg.json
 * said fp32 or bf16 for a run of both, an audit). run_checkpoint writes it with this call's
 * first checkpoint; a checkpoint from before the line counts as this call's precision. */
static int check_settings(run *r, const sae_run_opts *o)
{
    char now[2048];
    int rc = run_settings(now, sizeof now, r, o);
    r->prec_ckpt[0] = 0;
    r->prec_written = 0;
    if (rc || !dist_is_root()) return rc;
    snprintf(r->settings, sizeof r->settings, "%s", now);
    if (!o->resume) {
        char b2[2100];
        snprintf(b2, sizeof b2, "%sprecision %s\n", now, steps_precision(r, 0));
        rc = file_write_atomic(r->runp, b2, strlen(b2));
        r->prec_written = !rc;
        return rc;
    }
    char *was = NULL;
    rc = file_read_text(r->runp, 1 << 16, &was, NULL);
    if (rc == ERR_NOTFOUND) { /* a checkpoint from before this file: nothing to compare */
        err_clear();
        return OK;
    }
    if (rc) return rc;
    char *pl = strstr(was, "precision ");
    if (pl && (pl == was || pl[-1] == '\n')) {
        char p[8] = "";
        sscanf(pl + 10, "%7s", p);
        snprintf(r->prec_ckpt, sizeof r->prec_ckpt, "%s", p);
        *pl = 0;
    }
    const char *a = was, *b = now;
    while (*a && *a == *b) a++, b++;
    /* a checkpoint from before the store_rows and store_model lines (the last ones) resumes as
       before: another database, or rows added since, continued it unnoticed (a sweep into a
       directory of another database's runs registered their SAEs as its own: an audit) */
    if (!*a && (a == was || a[-1] == '\n') && later_lines_only(b)) b += strlen(b);
    if (*a || *b) {
        while (a > was && a[-1] != '\n') a--, b--;
        int la = (int)strcspn(a, "\n"), lb = (int)strcspn(b, "\n");
        const setting_line *sl = setting_of(*a ? a : b);
        rc = err_set(ERR_ARG, "%s: the checkpoint's run had \"%.*s\", this one \"%.*s\" (%s); %s",
                     r->ckpt, la, a, lb, b, sl->what,
                     o->resume_advice ? o->resume_advice
                     : sl->advice     ? sl->advice
                                      : "resume with the same flags");
    }
    mem_free(was);
    return rc;
}

/* Register the SAE and this invocation's log rows (a resumed run appends its rows). */
static int run_register(run *r, const sae_run_opts *o, sae_run_result *res)
{
    const sae_train_config *tc = sae_trainer_cfg(r->t);
    const sae_metrics_summary *sum = &res->eval;
    char cj[512];
    snprintf(cj, sizeof cj,
             "{\"architecture\":\"%s\",\"k\":%d,\"l1\":%g,\"lr\":%g,\"batch\":%d,"
             "\"tokens\":%" PRId64 ",\"seed\":%" PRIu64 ",\"shuffle_buffer\":%" PRId64 ","
             "\"keep_bos\":%d,\"val_frac\":%g}",
             sae_arch_name(tc->arch), tc->k, tc->l1, tc->lr, tc->batch, tc->total_tokens,
             tc->seed, o->shuffle_tokens, o->keep_bos, o->val_frac);
    if (tc->transcoder) /* the activation stays in architecture; the kind and output hook here */
        snprintf(cj + strlen(cj) - 1, sizeof cj - strlen(cj) + 1,
                 ",\"transcoder\":\"%s\",\"hook_out\":\"%s\",\"d_out\":%d}",
                 tc->transcoder == SAE_SKIP_TRANSCODER ? "skip_transcoder" : "transcoder",
                 o->hook_out ? o->hook_out : "", tc->d_out);
    store_sae_row row = {.dir = o->out, .architecture = sae_arch_name(tc->arch),
                         .hook_name = o->hook,
                         .model_name = o->model_name && o->model_name[0] ? o->model_name
                                                                        : r->sinfo.model_name,
                         .config_json = cj, .d_in = r->c.d_in, .d_sae = r->c.d_sae, .k = tc->k,
                         .hook_id = r->sinfo.hook_id,
                         .tokens = sae_trainer_total_steps(r->t) * tc->batch,
                         .eval_tokens = r->eval_tokens, .eval_mse = sum->mse, .eval_ev = sum->ev,
                         .eval_cos = sum->cos, .eval_l2_ratio = sum->l2_ratio, .eval_l0 = sum->l0,
                         .eval_dead = sum->dead_frac, .eval_dense = sum->dense_frac,
                         .seconds = res->total_seconds};
    char wsum[17];
    int rc = sae_weights_checksum(o->out, wsum);
    row.weights = wsum;
    store *sd = NULL;
    if (!rc) rc = store_open(&sd, o->db, 0);
    if (!rc) rc = store_begin(sd);
    if (!rc) rc = store_sae_init(sd); /* in the transaction: a failure leaves no empty tables */
    if (!rc) rc = store_sae_register(sd, &row, &res->sae_id);
    if (!rc) rc = store_sae_log(sd, res->sae_id, r->logrows, r->nlog);
    if (!rc) rc = store_commit(sd);
    else if (sd) store_rollback(sd);
    store_close(sd);
    return rc;
}

/* Before anything is opened or created: OUT must be a directory or missing; --resume needs its
 * checkpoint; without --resume an OUT holding an SAE or a checkpoint is refused unless force.
 * probe_lock: first refuse an OUT whose lock another run holds (0 once this run holds it). */
static int check_out(const sae_run_opts *o, int probe_lock)
{
    struct stat sb;
    char p[4096];
    if (stat(o->out, &sb) != 0) {
        if (!o->resume) return OK;
        int rc = path_join(p, sizeof p, o->out, "checkpoint.bin");
        return rc ? rc : err_set(ERR_NOTFOUND, "%s: no checkpoint to --resume (run without "
                                               "--resume to start)", p);
    }
    if (!S_ISDIR(sb.st_mode)) return err_set(ERR_IO, "%s: exists and is not a directory", o->out);
    /* another run's files are there because it is writing them: say so, not "--resume" (which
       lock_out would refuse anyway while that run holds the lock) */
    int rc = probe_lock ? file_dir_lock_refuse(o->out, ".sae-train.lock", "sae-train") : OK;
    if (rc) return rc;
    static const char *const held[] = {"sae_weights.safetensors", "cfg.json", "checkpoint.bin"};
    for (int i = 0; i < 3; i++) {
        if ((rc = path_join(p, sizeof p, o->out, held[i]))) return rc;
        int there = access(p, F_OK) == 0;
        if (o->resume && i == 2 && !there)
            return err_set(ERR_NOTFOUND, "%s: no checkpoint to --resume (run without --resume to "
                                         "start)", p);
        if (!o->resume && !o->force && there)
            return err_set(ERR_ARG, "%s already holds %s (%s): --resume continues its run, --force "
                                    "overwrites it",
                           o->out, i == 2 ? "a training checkpoint" : "a trained SAE", held[i]);
    }
    return OK;
}

/* One sae-train per OUT: two started together into one directory both passed check_out and
 * both exited 0, leaving one run's weights beside the other's training_log.csv (an audit, 7 of
 * 18 tries). After check_out, rank 0 creates OUT when it is missing and takes
 * OUT/.sae-train.lock; of two runs that both passed check_out the second is refused, naming the
 * lock. A run that fails before its first checkpoint removes the file again if it made it.
 * report refuses to read a directory whose lock is held (its files are being rewritten). */
static int lock_out(run *r, const sae_run_opts *o)
{
    r->lock = -1;
    if (!dist_is_root()) return OK;
    /* check_out passed: OUT is a directory, or missing and this is no --resume */
    if (mkdir(o->out, 0755) == 0) r->made_out = 1;
    else if (errno != EEXIST)
        return err_set(ERR_IO, "%s: cannot create directory: %s", o->out, strerror(errno));
    char lp[4096];
    int rc = path_join(lp, sizeof lp, o->out, ".sae-train.lock");
    if (rc) return rc;
    r->made_lock = access(lp, F_OK) != 0;
    rc = file_dir_lock(o->out, ".sae-train.lock", "sae-train", &r->lock);
    if (rc) r->made_lock = 0;
    /* again under the lock: a run into OUT may have finished since check_out (this one then
       trained over its SAE without --force, exit 0; a review) */
    if (!rc) rc = check_out(o, 0);
    return rc;
}

/* A run that failed before its first checkpoint leaves nothing that can be resumed: remove the
 * files it wrote and OUT itself when it created it (rmdir: only when empty). */
static void run_discard(run *r, const sae_run_opts *o)
{
    if (r->ckpts || o->resume || !dist_is_root()) return;
    if (r->logp[0]) unlink(r->logp);
    if (r->runp[0]) unlink(r->runp);
    if (r->made_truth) unlink(o->truth_out);
    if (r->made_lock) { /* snprintf, not path_join: the run's error message stays */
        char lp[4200];
        snprintf(lp, sizeof lp, "%s/.sae-train.lock", o->out);
        unlink(lp);
    }
    if (r->made_out) rmdir(o->out);
}

int sae_train_run(const sae_run_opts *o, sae_run_result *res)
{
    memset(res, 0, sizeof *res);
    res->mmcs = res->recovered = -1;
    res->sae_id = -1;
    sae_run_opts with_spec;
    if (o->synth_spec) { /* the generator a file describes, in place of synth_cfg */
        with_spec = *o;
        int rc = sae_synth_spec_load(&with_spec.synth_cfg, o->synth_spec);
        if (rc) return rc;
        o = &with_spec;
    }
    if (!o->out || !o->out[0]) return err_set(ERR_ARG, "no output directory given (--out)");
    if (!!o->db + !!o->npy + !!o->synth != 1)
        return err_set(ERR_ARG, "give exactly one data source (store, .npy or synthetic)");
    if (o->db && !(o->hook && o->hook[0])) return err_set(ERR_ARG, "a store source needs a hook");
    if (o->max_norm_ratio > 0 && !o->db)
        return err_set(ERR_ARG, "--max-norm-ratio filters a store's tokens (--db); an "
                                ".npy or synthetic source has no such filter");
    run r;
    memset(&r, 0, sizeof r);
    r.lock = -1;
    r.sinfo.hook_id = -1;
    r.c = o->train;
    sae_precision prev = sae_k_precision();
    /* the world size and the micro-batches: before anything is opened, the same on every rank */
    int mb = o->micro_batches > 0 ? o->micro_batches : 1;
    int rc = latent_blocks(o) > 1 || latent_shards(o) > 1
                 ? sae_latent_blocks_check(&o->train, mb, latent_blocks(o), latent_shards(o))
                 : sae_micro_batches_check(o->train.batch, mb);
    if (!rc) rc = check_out(o, 1);
    /* every rank has checked OUT before rank 0 creates and locks it: a rank whose check came
       after rank 0's lock_out saw that lock and refused the job ("another sae-train is writing
       into this directory"), a fresh or --resume run under mpirun -np 2 about one try in two
       with both ranks on one busy core (an audit) */
    rc = agree(rc, NULL);
    if (!rc) rc = lock_out(&r, o);
    res->unlocked = !rc && dist_is_root() && r.lock < 0;
    if (!rc) rc = sae_k_set_precision(o->precision);
    rc = agree(rc, NULL);
    /* a rank that cannot open its data fails the job here, before any step, naming the rank */
    if (!rc) rc = agree(run_open(&r, o), NULL);
    if (!rc && dist_size() > 1) {
        /* every rank's data is rank 0's: another width hung the job in a collective, and a
           database with rows missing on one rank trained with exit 0 (an audit) */
        struct { int64_t d_in, n_rows; uint64_t npy, npy_out; } f = {r.src->d_in, r.src->n_rows, 0, 0};
        int frc = o->npy ? file_fnv1a(o->npy, &f.npy) : OK;
        if (!frc && o->npy_out) frc = file_fnv1a(o->npy_out, &f.npy_out);
        rc = dist_same(frc, &f, sizeof f, "the training data (its width, rows or .npy files)");
    }
    if (!rc && o->truth && dist_is_root()) rc = load_truth(&r, o);
    if (!rc) rc = check_settings(&r, o);
    rc = agree(rc, NULL);
    if (!rc) rc = agree(run_trainer(&r, o), NULL);
    if (!rc) rc = agree(sae_trainer_bcast(r.t), NULL);
    if (!rc) rc = run_steps(&r, o, res);
    /* latent shards: rank 0 exports every rank's parameters (nothing to do when the last step's
       checkpoint gathered them, as it does at the end and at --max-steps) */
    if (!rc) rc = agree(sae_trainer_gather_params(r.t), NULL);
    /* the SAE files, its evaluation and the registry are rank 0's */
    int root = dist_is_root();
    if (!rc && root) rc = run_save(&r, o, res);
    if (!rc && root && o->truth) rc = run_truth(&r, res);
    sae_k_engine(res->engine, sizeof res->engine);
    /* the note's "was": a checkpoint in the other precision, this call having run steps (a
       "mixed" one stays so without a new note) */
    snprintf(res->precision, sizeof res->precision, "%s", steps_precision(&r, res->steps > 0));
    int changed = res->steps > 0 && !strcmp(res->precision, "mixed") && strcmp(r.prec_ckpt, "mixed");
    snprintf(res->precision_was, sizeof res->precision_was, "%s", changed ? r.prec_ckpt : "");
    sae_k_set_precision(prev);
    res->arch = r.c.arch;
    res->d_in = r.c.d_in;
    res->d_out = r.c.d_out;
    res->d_sae = r.c.d_sae;
    res->batch = r.c.batch;
    res->eval_tokens = r.eval_tokens;
    res->unfinished_run = o->db ? r.sinfo.unfinished_run : -1;
    res->hook_tokens = r.sinfo.tokens;
    if (r.t) {
        res->step = sae_trainer_step_index(r.t);
        res->total_steps = sae_trainer_total_steps(r.t);
        res->finished = res->step == res->total_steps;
        const sae_train_config *tcf = sae_trainer_cfg(r.t);
        res->tokens_asked = tcf->total_tokens;
        res->dead_window = sae_trainer_dead_window(r.t);
        res->auxk = tcf->aux_coef > 0 && (tcf->arch == SAE_TOPK || tcf->arch == SAE_BATCHTOPK ||
                                          tcf->arch == SAE_MATRYOSHKA);
    }
    /* the sources hold read transactions on the store: with its rollback journal a writer would
       wait on them, so they are closed before the registry is written */
    if (o->db) res->dropped = r.src ? sae_source_store_dropped(r.src) : 0;
    res->train_rows = r.src ? r.src->n_rows : -1;
    sae_source_close(r.src);
    sae_source_close(r.val);
    r.src = r.val = NULL;
    if (!rc && root && o->db && res->finished) rc = run_register(&r, o, res);
    run_free(&r);
    if (rc) run_discard(&r, o);
    file_dir_unlock(r.lock);
    return rc;
}

int sae_check_hook_model(const sae_model *m, const char *dir, store *s, const store_hook *h,
                         const char *db)
{
    if (!m->cfg.model_checksum[0]) return OK;
    store_model *models = NULL;
    size_t nm = 0;
    int rc = store_model_list(s, &models, &nm);
    for (size_t i = 0; !rc && i < nm; i++)
        if (models[i].id == h->model_id && models[i].checksum[0] &&
            strcmp(models[i].checksum, m->cfg.model_checksum))
            rc = err_set(ERR_ARG, "%s: the SAE was trained on activations of a model with checksum %s, "
                         "but %s's hook %s comes from model '%s' with checksum %s: another model's "
                         "activations", dir, m->cfg.model_checksum, db, h->name, models[i].name,
                         models[i].checksum);
    mem_free(models);
    return rc;
}

int sae_registry_arg_is_id(const char *arg)
{
    struct stat st;
    return arg[0] && strspn(arg, "0123456789") == strlen(arg) && stat(arg, &st) != 0;
}

int sae_registry_arg(store *s, const char *db, const char *arg, store_sae_entry *r, int *by_id)
{
    struct stat st;
    *by_id = 0;
    if (!sae_registry_arg_is_id(arg)) return OK;
    errno = 0;
    long long id = strtoll(arg, NULL, 10);
    if (errno == ERANGE)
        return err_set(ERR_ARG, "SAE id %s is out of range (at most %lld)", arg, (long long)INT64_MAX);
    int rc = store_sae_get(s, id, NULL, r);
    if (rc == ERR_NOTFOUND && !strstr(err_msg(), "with id"))
        rc = err_set(ERR_NOTFOUND, "%s: no SAE registry, so '%s' is no SAE id", db, arg);
    if (rc) return rc;
    if (stat(r->dir, &st) != 0)
        return err_set(ERR_NOTFOUND, "%s: SAE id %lld's directory '%s' does not exist here (a "
                       "relative one is taken from the current directory, where sae-train ran; "
                       "give the directory instead)", db, id, r->dir);
    *by_id = 1;
    return OK;
}

int sae_check_registered(const sae_model *m, const char *dir, const store_sae_entry *r,
                         const char *db)
{
    const sae_config *c = &m->cfg;
    sae_arch ra;
    /* the architecture as trained; its saved form: BatchTopK as JumpReLU (TopK without a
       threshold), every other as itself */
    int arch_ok = sae_arch_parse(r->architecture, &ra) == OK &&
                  (ra == c->arch || (ra == SAE_BATCHTOPK && (c->arch == SAE_JUMPRELU || c->arch == SAE_TOPK)));
    err_clear();
    buf have = {0}, want = {0};
    int rc = OK;
#define DIFF(cond, hf, hv, wf, wv)                                                          \
    if (!rc && (cond)) {                                                                   \
        rc = buf_printf(&have, "%s" hf, have.n ? ", " : "", hv);                           \
        if (!rc) rc = buf_printf(&want, "%s" wf, want.n ? ", " : "", wv);                  \
    }
    DIFF(!arch_ok, "architecture %s", sae_arch_name(c->arch), "architecture %s", r->architecture)
    DIFF(c->d_in != r->d_in, "d_in %d", c->d_in, "d_in %d", r->d_in)
    DIFF(c->d_sae != r->d_sae, "d_sae %d", c->d_sae, "d_sae %d", r->d_sae)
    DIFF(c->arch == SAE_TOPK && c->k > 0 && r->k > 0 && c->k != r->k, "k %d", c->k, "k %d", r->k)
    DIFF(c->hook_name[0] && r->hook_name[0] && strcmp(c->hook_name, r->hook_name),
         "hook_name %s", c->hook_name, "hook_name %s", r->hook_name)
    DIFF(c->model_name[0] && r->model_name[0] && strcmp(c->model_name, r->model_name),
         "model_name %s", c->model_name, "model_name %s", r->model_name)
#undef DIFF
    /* the same shape retrained or replaced in place (registries since schema version 2 record
       the weights): the registry's results are another SAE's */
    char wsum[17] = "";
    int only_weights = !have.n;
    if (!rc && r->weights[0] && !(rc = sae_weights_checksum(dir, wsum)) && strcmp(wsum, r->weights)) {
        rc = buf_printf(&have, "%sweights checksum %s", have.n ? ", " : "", wsum);
        if (!rc) rc = buf_printf(&want, "%sweights checksum %s", want.n ? ", " : "", r->weights);
    }
    if (!rc && have.n)
        rc = err_set(ERR_ARG, "%s: the SAE there has %s, but registry id %lld of %s says %s (%s)",
                     dir, have.p, (long long)r->id, db, want.p,
                     only_weights ? "retrained or replaced since it was registered: re-register it "
                                    "with sae-train --db, or evaluate a copy in a new directory"
                                  : "another SAE in its place: give its directory, or re-register it "
                                    "with sae-train");
    buf_free(&have);
    buf_free(&want);
    return rc;
}
