/* cmd_sae_train.c - `saelite sae-train`: train a sparse autoencoder. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/err.h"
#include "common/mem.h"
#include "common/npy.h"
#include "common/progress.h"
#include "sae/metrics.h"
#include "sae/sae.h"
#include "sae/sae_train.h"
#include "sae/synth.h"
#include "store/store.h"
#include "store/store_sae.h"

CLI_COMMAND(sae_train, "Train a sparse autoencoder (relu, topk, batchtopk, jumprelu)",
            "saelite sae-train (--db FILE --hook NAME | --npy ACTS.npy | --synth) --out DIR [--arch topk] [--k 32] "
            "[--expansion 8 | --d-sae N] [--tokens N] [--batch 4096] [--lr X] [--resume]")

/* Rows of an in-memory array go to validation when a hash of the row index falls below frac. */
static int is_val_row(int64_t i, double frac)
{
    uint64_t z = (uint64_t)i * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 29;
    return (double)(z >> 11) * 0x1.0p-53 < frac;
}

static int eval_model(const sae_model *m, sae_source *src, int64_t n, sae_metrics *acc)
{
    int D = m->cfg.d_in, S = m->cfg.d_sae, CH = 512;
    float *x = mem_alloc(sizeof(float) * (size_t)CH * D), *xh = mem_alloc(sizeof(float) * (size_t)CH * D);
    float *f = mem_alloc(sizeof(float) * (size_t)CH * S);
    int rc = (!x || !xh || !f) ? err_set(ERR_NOMEM, "evaluation: out of memory") : OK;
    for (int64_t done = 0; !rc && done < n; done += CH) {
        int nb = n - done < CH ? (int)(n - done) : CH;
        rc = src->next(src, x, nb);
        if (!rc) rc = sae_encode(m, x, nb, f);
        if (!rc) rc = sae_decode(m, f, nb, xh);
        if (!rc) sae_metrics_add(acc, x, xh, f, nb);
    }
    mem_free(x);
    mem_free(xh);
    mem_free(f);
    return rc;
}

int cmd_sae_train(int argc, char **argv)
{
    const char *cmd = "sae-train";
    const char *db = NULL, *npy = NULL, *out = NULL, *arch_s = "topk", *bdec_s = "median", *truth = NULL;
    const char *hook = "", *model = "", *truth_out = NULL;
    int keep_bos = 0, synth = 0, d_sae = 0, k = 32, k_aux = 0, batch = 4096, resume = 0, no_norm = 0;
    int ckpt_every = 0, log_every = 0, context = 0, syn_d = 256, syn_f = 512;
    double max_norm = 0, jr_bw = 0, jr_th = 0, jr_lrm = 0, expansion = 8, l1 = 0, lr = NAN, aux_coef = 1.0 / 32, val_frac = 0.05, syn_active = 5;
    int64_t shuffle_tokens = 65536, max_steps = 0, tokens = 10000000, seed = 42, dead_window = 0, eval_tokens = 65536, syn_seed = 1;
    arg_spec spec[] = {
        {"--db", ARG_STR, &db, "store with the activations of --hook"},
        {"--shuffle-buffer", ARG_I64, &shuffle_tokens, "store: token shuffle buffer (65536)"},
        {"--keep-bos", ARG_FLAG, &keep_bos, "store: keep BOS positions (dropped by default)"},
        {"--max-norm-ratio", ARG_FLOAT, &max_norm,
         "store: drop tokens with norm > R x the mean token norm (0 = off)"},
        {"--npy", ARG_STR, &npy, "activations [tokens, d_in] (float .npy)"},
        {"--synth", ARG_FLAG, &synth, "train on generated synthetic superposition data"},
        {"--synth-d", ARG_INT, &syn_d, "synthetic: dimension (256)"},
        {"--synth-features", ARG_INT, &syn_f, "synthetic: true features (512)"},
        {"--synth-active", ARG_FLOAT, &syn_active, "synthetic: mean active features (5)"},
        {"--synth-seed", ARG_I64, &syn_seed, "synthetic: generator seed (1)"},
        {"--truth", ARG_STR, &truth, "ground-truth directions [F, d_in] .npy: report MMCS"},
        {"--truth-out", ARG_STR, &truth_out, "synthetic: write the true directions here"},
        {"--out", ARG_STR, &out, "output directory (SAELens layout)"},
        {"--arch", ARG_STR, &arch_s, "relu | topk | batchtopk | jumprelu (topk)"},
        {"--expansion", ARG_FLOAT, &expansion, "d_sae = expansion * d_in (8)"},
        {"--d-sae", ARG_INT, &d_sae, "latents (overrides --expansion)"},
        {"--k", ARG_INT, &k, "active latents per token, topk/batchtopk (32)"},
        {"--k-aux", ARG_INT, &k_aux, "AuxK latents (d_in/2)"},
        {"--aux-coef", ARG_FLOAT, &aux_coef, "AuxK coefficient (1/32)"},
        {"--l1", ARG_FLOAT, &l1, "relu: L1 coefficient (5); jumprelu: L0 coefficient (1)"},
        {"--jr-bandwidth", ARG_FLOAT, &jr_bw, "jumprelu: STE kernel width, normalised units"},
        {"--jr-threshold", ARG_FLOAT, &jr_th, "jumprelu: initial threshold, normalised units"},
        {"--jr-lr-mult", ARG_FLOAT, &jr_lrm, "jumprelu: learning-rate multiplier of the thresholds (10)"},
        {"--lr", ARG_FLOAT, &lr, "learning rate (2e-4 / sqrt(d_sae / 16384))"},
        {"--batch", ARG_INT, &batch, "tokens per step (4096)"},
        {"--tokens", ARG_I64, &tokens, "training tokens (10M)"},
        {"--seed", ARG_I64, &seed, "seed for init and data order (42)"},
        {"--bdec-init", ARG_STR, &bdec_s, "median | mean | zero (median)"},
        {"--no-normalize", ARG_FLAG, &no_norm, "do not scale inputs to mean norm sqrt(d_in)"},
        {"--dead-window", ARG_I64, &dead_window, "tokens without firing = dead (auto)"},
        {"--val-frac", ARG_FLOAT, &val_frac, "held-out fraction of sequences / --npy rows (0.05)"},
        {"--eval-tokens", ARG_I64, &eval_tokens, "tokens for the final evaluation (65536)"},
        {"--checkpoint-every", ARG_INT, &ckpt_every, "steps between checkpoints (0 = end only)"},
        {"--log-every", ARG_INT, &log_every, "steps between log rows (auto: ~100 rows)"},
        {"--max-steps", ARG_I64, &max_steps, "stop (with a checkpoint) after N steps this run"},
        {"--resume", ARG_FLAG, &resume, "continue from DIR/checkpoint.bin (same flags)"},
        {"--hook", ARG_STR, &hook, "hook name (with --db: which activations; else metadata)"},
        {"--model-name", ARG_STR, &model, "metadata: model name"},
        {"--context-size", ARG_INT, &context, "metadata: context size"},
        {NULL, 0, NULL, NULL},
    };
    int np = 0;
    int prc = args_parse(cmd, argc, argv, spec, NULL, 0, &np);
    if (prc) return prc < 0 ? 0 : prc;
    if (!out) return cli_usage_error(cmd, "--out DIR is required");
    if (!!db + !!npy + synth != 1)
        return cli_usage_error(cmd, "give exactly one of --db, --npy, --synth");
    if (db && !hook[0]) return cli_usage_error(cmd, "--db needs --hook NAME");
    sae_train_config c;
    sae_train_defaults(&c);
    if (sae_arch_parse(arch_s, &c.arch)) return cli_usage_error(cmd, "%s", err_msg());
    c.bdec_init = !strcmp(bdec_s, "median") ? SAE_BDEC_MEDIAN
                  : !strcmp(bdec_s, "mean") ? SAE_BDEC_MEAN
                  : !strcmp(bdec_s, "zero") ? SAE_BDEC_ZERO
                                            : -1;
    if (c.bdec_init < 0) return cli_usage_error(cmd, "--bdec-init must be median, mean or zero");
    if (max_norm < 0) return cli_usage_error(cmd, "--max-norm-ratio must be >= 0");
    if (val_frac < 0 || val_frac >= 1) return cli_usage_error(cmd, "--val-frac must be in [0,1)");
    if (batch < 1 || tokens < 1 || k < 1 || expansion <= 0 || eval_tokens < 0)
        return cli_usage_error(cmd, "--batch, --tokens, --k, --expansion must be positive");
    /* lr starts as NaN = "not given" (args_parse refuses NaN): a given rate must be positive */
    if (!isnan(lr) && !(lr > 0)) return cli_usage_error(cmd, "--lr must be positive, got %g", lr);
    if (d_sae < 0 || k_aux < 0 || shuffle_tokens < 1 || syn_d < 1 || syn_f < 1 || !(syn_active > 0) ||
        ckpt_every < 0 || log_every < 0 || max_steps < 0 || dead_window < 0 || context < 0)
        return cli_usage_error(cmd, "--d-sae, --k-aux, --shuffle-buffer, --synth-d, --synth-features, "
                                    "--synth-active must be positive; --checkpoint-every, "
                                    "--log-every, --max-steps, --dead-window, --context-size >= 0");
    if (l1 < 0 || aux_coef < 0 || jr_bw < 0 || jr_th < 0 || jr_lrm < 0)
        return cli_usage_error(cmd, "--l1, --aux-coef, --jr-bandwidth, --jr-threshold, --jr-lr-mult "
                                    "must be >= 0");

    /* data */
    sae_source *src = NULL, *val = NULL;
    float *data = NULL;
    int rc;
    sae_store_info sinfo;
    memset(&sinfo, 0, sizeof sinfo);
    sinfo.hook_id = -1;
    if (db) {
        rc = sae_source_store(&src, db, hook, val_frac > 0 ? STORE_SPLIT_TRAIN : STORE_SPLIT_ALL,
                              val_frac, (uint64_t)seed, shuffle_tokens, !keep_bos, max_norm,
                              &sinfo);
        if (rc) return cli_fail(cmd);
        if (val_frac > 0 && sae_source_store(&val, db, hook, STORE_SPLIT_VAL, val_frac,
                                             (uint64_t)seed + 1, 8192, !keep_bos, max_norm,
                                             NULL)) {
            err_clear(); /* no validation sequences: evaluate nothing */
            val = NULL;
        }
        if (!val) eval_tokens = 0;
        else if (eval_tokens > val->n_rows) eval_tokens = val->n_rows;
        c.d_in = sinfo.width;
        if (!model[0]) model = sinfo.model_name;
        if (!context) context = sinfo.seq_len;
    } else if (npy) {
        int nd;
        int64_t shape[NPY_MAX_DIMS];
        if ((rc = npy_read(npy, &data, &nd, shape))) return cli_fail(cmd);
        if (nd != 2) {
            mem_free(data);
            err_set(ERR_SHAPE, "%s: expected [tokens, d_in], got %d dims", npy, nd);
            return cli_fail(cmd);
        }
        int64_t n = shape[0], nv = 0;
        int64_t *rows = mem_alloc(sizeof(int64_t) * (size_t)(n ? n : 1));
        int64_t *vrows = mem_alloc(sizeof(int64_t) * (size_t)(n ? n : 1));
        int64_t nt = 0;
        for (int64_t i = 0; rows && vrows && i < n; i++) {
            if (is_val_row(i, val_frac)) vrows[nv++] = i;
            else rows[nt++] = i;
        }
        c.d_in = (int)shape[1];
        rc = rows && vrows ? sae_source_mem_rows(&src, data, rows, nt, c.d_in, (uint64_t)seed)
                           : err_set(ERR_NOMEM, "out of memory");
        if (!rc && nv) rc = sae_source_mem_rows(&val, data, vrows, nv, c.d_in, (uint64_t)seed + 1);
        mem_free(rows);
        mem_free(vrows);
        if (rc) {
            mem_free(data);
            sae_source_close(src);
            return cli_fail(cmd);
        }
        sae_source_adopt(src, data);
        if (!val) eval_tokens = 0;
        else if (eval_tokens > nv) eval_tokens = nv;
    } else {
        synth_config sc;
        synth_defaults(&sc);
        sc.d = syn_d;
        sc.n_features = syn_f;
        sc.active = syn_active;
        sc.seed = (uint64_t)syn_seed;
        if ((rc = sae_source_synth(&src, &sc))) return cli_fail(cmd);
        sc.sample_seed = (uint64_t)syn_seed + 1000003; /* held-out samples, same features */
        if ((rc = sae_source_synth(&val, &sc))) {
            sae_source_close(src);
            return cli_fail(cmd);
        }
        c.d_in = syn_d;
        if (truth_out) {
            int64_t sh[2] = {syn_f, syn_d};
            sae_synth *gen = src->impl;
            if ((rc = npy_write(truth_out, sae_synth_directions(gen), 2, sh))) {
                sae_source_close(src);
                sae_source_close(val);
                return cli_fail(cmd);
            }
        }
    }
    c.d_sae = d_sae > 0 ? d_sae : (int)lround(expansion * c.d_in);
    c.k = k;
    c.k_aux = k_aux;
    c.aux_coef = aux_coef;
    c.l1 = l1;
    c.lr = isnan(lr) ? 0 : lr; /* 0: the trainer's default */
    c.batch = batch;
    c.total_tokens = tokens;
    c.seed = (uint64_t)seed;
    c.normalize = !no_norm;
    c.dead_window = dead_window;
    if (jr_bw > 0) c.jr_bandwidth = jr_bw;
    if (jr_th > 0) c.jr_init_threshold = jr_th;
    if (jr_lrm > 0) c.jr_lr_mult = jr_lrm;
    if (c.arch == SAE_RELU || c.arch == SAE_JUMPRELU) c.k = 0;

    struct stat sb;
    if (stat(out, &sb) != 0 && mkdir(out, 0755) != 0) {
        err_set(ERR_IO, "%s: cannot create directory: %s", out, strerror(errno));
        sae_source_close(src);
        sae_source_close(val);
        return cli_fail(cmd);
    }
    char ckpt[4096], logp[4096];
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint.bin", out);
    snprintf(logp, sizeof logp, "%s/training_log.csv", out);

    /* the first rows of the stream initialise scale and b_dec */
    int64_t n_init = batch < 16384 ? 16384 : batch;
    float *x = mem_alloc(sizeof(float) * (size_t)n_init * c.d_in);
    sae_trainer *t = NULL;
    rc = x ? src->next(src, x, (int)n_init) : err_set(ERR_NOMEM, "out of memory");
    if (!rc) {
        if (resume) {
            rc = sae_trainer_resume(&t, ckpt);
            if (!rc) {
                /* compare the flags that define the run (defaults filled in identically) */
                sae_trainer *probe = NULL;
                rc = sae_trainer_new(&probe, &c, x, 1);
                if (!rc) {
                    int same = sae_train_config_equal(sae_trainer_cfg(t), sae_trainer_cfg(probe));
                    sae_trainer_free(probe);
                    if (!same)
                        rc = err_set(ERR_ARG, "%s: the flags differ from the checkpoint's run; "
                                              "resume with the same flags", ckpt);
                }
            }
            if (!rc)
                rc = sae_source_skip(src, sae_trainer_step_index(t) * (int64_t)batch, batch);
        } else rc = sae_trainer_new(&t, &c, x, n_init);
    }
    FILE *logf = NULL;
    store_sae_log_row *logrows = NULL;
    size_t nlog = 0, caplog = 0;
    if (!rc) {
        logf = fopen(logp, resume ? "a" : "w");
        if (!logf) rc = err_set(ERR_IO, "%s: cannot open: %s", logp, strerror(errno));
        else if (!resume) fprintf(logf, "step,tokens,mse,explained_variance,l0,dead_frac,lr,loss\n");
    }
    if (rc) {
        mem_free(x);
        sae_trainer_free(t);
        sae_source_close(src);
        sae_source_close(val);
        if (logf) fclose(logf);
        return cli_fail(cmd);
    }
    cli_catch_signals();
    int64_t T = sae_trainer_total_steps(t);
    if (log_every <= 0) log_every = T / 100 > 0 ? (int)(T / 100) : 1;
    progress pr;
    progress_begin(&pr, "sae-train", (double)T * batch, "tok");
    sae_step_stats st;
    memset(&st, 0, sizeof st);
    double t0 = now_seconds(), tread = 0;
    int64_t s0 = sae_trainer_step_index(t);
    while (!rc && sae_trainer_step_index(t) < T) {
        double ta = now_seconds();
        rc = src->next(src, x, batch);
        tread += now_seconds() - ta;
        if (!rc) rc = sae_trainer_step(t, x, &st);
        if (rc) break;
        int64_t s = st.step;
        if (s % log_every == 0 || s == T)
        {
            fprintf(logf, "%" PRId64 ",%" PRId64 ",%.6g,%.6g,%.4g,%.4g,%.4g,%.6g\n", s, st.tokens,
                    st.mse, st.ev, st.l0, st.dead_frac, st.lr, st.loss);
            if (nlog == caplog) {
                caplog = caplog ? 2 * caplog : 256;
                store_sae_log_row *p = mem_realloc(logrows, caplog * sizeof *p);
                if (!p) {
                    rc = err_set(ERR_NOMEM, "training log: out of memory");
                    break;
                }
                logrows = p;
            }
            logrows[nlog++] = (store_sae_log_row){s, st.tokens, st.mse, st.ev, st.l0,
                                                  st.dead_frac, st.lr, st.loss};
        }
        progress_update(&pr, (double)st.tokens, "step %" PRId64 " mse %.4g ev %.3f L0 %.1f dead %.1f%%",
                        s, st.mse, st.ev, st.l0, 100 * st.dead_frac);
        int stop = max_steps > 0 && s - s0 >= max_steps && s < T;
        if ((ckpt_every > 0 && s % ckpt_every == 0) || s == T || stop)
            rc = sae_trainer_checkpoint(t, ckpt);
        if (!rc && stop) break;
        if (!rc && cli_interrupted()) {
            rc = sae_trainer_checkpoint(t, ckpt);
            if (!rc) rc = err_set(ERR_ABORTED, "interrupted at step %" PRId64 "; checkpoint %s "
                                               "(continue with --resume)", s, ckpt);
        }
    }
    double secs = now_seconds() - t0;
    progress_end(&pr);
    fclose(logf);
    mem_free(x);
    sae_model *m = NULL;
    sae_config meta;
    memset(&meta, 0, sizeof meta);
    snprintf(meta.hook_name, sizeof meta.hook_name, "%s", hook);
    snprintf(meta.model_name, sizeof meta.model_name, "%s", model);
    meta.context_size = context;
    if (!rc) rc = sae_trainer_export(t, &meta, &m);
    sae_metrics acc;
    memset(&acc, 0, sizeof acc);
    sae_metrics_summary sum;
    memset(&sum, 0, sizeof sum);
    float *dens = NULL;
    if (!rc) rc = sae_metrics_init(&acc, c.d_in, m->cfg.d_sae);
    if (!rc && eval_tokens > 0) rc = eval_model(m, val, eval_tokens, &acc);
    if (!rc && eval_tokens > 0) {
        sae_metrics_summarize(&acc, &sum);
        dens = mem_alloc(sizeof(float) * m->cfg.d_sae);
        if (dens) sae_metrics_log10_density(&acc, dens);
    }
    if (!rc) {
        const sae_train_config *tc = sae_trainer_cfg(t);
        char js[2048];
        snprintf(js, sizeof js,
                 "{\"architecture\":\"%s\",\"k\":%d,\"k_aux\":%d,\"aux_coef\":%g,\"l1\":%g,"
                 "\"lr\":%g,\"batch\":%d,\"tokens\":%" PRId64 ",\"seed\":%" PRIu64 ","
                 "\"normalize\":%d,\"scale\":%.9g,\"jr_bandwidth\":%g,\"jr_init_threshold\":%g,"
                 "\"jr_lr_mult\":%g,\"source\":\"%s\",\"eval_tokens\":%" PRId64 ","
                 "\"mse\":%.6g,\"explained_variance\":%.6g,\"cos\":%.6g,\"l2_ratio\":%.6g,"
                 "\"l0\":%.6g,\"dead_frac\":%.6g,\"dense_frac\":%.6g}",
                 sae_arch_name(tc->arch), tc->k, tc->k_aux, tc->aux_coef, tc->l1, tc->lr,
                 tc->batch, tc->total_tokens, tc->seed, tc->normalize, sae_trainer_scale(t),
                 tc->jr_bandwidth, tc->jr_init_threshold, tc->jr_lr_mult, db ? "store" : npy ? "npy" : "synth", eval_tokens, sum.mse, sum.ev, sum.cos, sum.l2_ratio,
                 sum.l0, sum.dead_frac, sum.dense_frac);
        rc = sae_save_ex(m, out, js, dens);
    }
    double mm = -1, rec = -1;
    if (!rc && truth) {
        float *tr = NULL;
        int nd;
        int64_t sh[NPY_MAX_DIMS];
        rc = npy_read(truth, &tr, &nd, sh);
        if (!rc && (nd != 2 || sh[1] != c.d_in))
            rc = err_set(ERR_SHAPE, "%s: expected [features, %d]", truth, c.d_in);
        if (!rc) rc = sae_mmcs(tr, (int)sh[0], m->W_dec, m->cfg.d_sae, c.d_in, 0.9, &mm, &rec, NULL);
        mem_free(tr);
    }
    /* the sources hold read transactions on the store: close them before writing to it
       (rollback-journal databases refuse a writer while readers are open) */
    int64_t dropped = db ? sae_source_store_dropped(src) : 0;
    sae_source_close(src);
    sae_source_close(val);
    src = val = NULL;
    int64_t steps = sae_trainer_step_index(t) - s0, sae_id = -1;
    int64_t step_now = sae_trainer_step_index(t);
    int finished = step_now == T;
    /* The sources hold read transactions on the database; with its rollback journal a writer
     * would wait on them, so they are closed before the registry is written. */
    sae_source_close(src);
    sae_source_close(val);
    src = val = NULL;
    if (!rc && db && finished) {
        /* register the SAE and this invocation's log rows (a resumed run appends its rows) */
        store *sd = NULL;
        const sae_train_config *tc = sae_trainer_cfg(t);
        char cj[512];
        snprintf(cj, sizeof cj,
                 "{\"architecture\":\"%s\",\"k\":%d,\"l1\":%g,\"lr\":%g,\"batch\":%d,"
                 "\"tokens\":%" PRId64 ",\"seed\":%" PRIu64 ",\"shuffle_buffer\":%" PRId64 ","
                 "\"keep_bos\":%d,\"val_frac\":%g}",
                 sae_arch_name(tc->arch), tc->k, tc->l1, tc->lr, tc->batch, tc->total_tokens,
                 tc->seed, shuffle_tokens, keep_bos, val_frac);
        store_sae_row row = {.dir = out, .architecture = sae_arch_name(tc->arch),
                             .hook_name = hook, .model_name = model, .config_json = cj,
                             .d_in = c.d_in, .d_sae = c.d_sae, .k = tc->k, .hook_id = sinfo.hook_id,
                             .tokens = tc->total_tokens, .eval_tokens = eval_tokens,
                             .eval_mse = sum.mse, .eval_ev = sum.ev, .eval_cos = sum.cos,
                             .eval_l2_ratio = sum.l2_ratio, .eval_l0 = sum.l0,
                             .eval_dead = sum.dead_frac, .eval_dense = sum.dense_frac,
                             .seconds = secs};
        rc = store_open(&sd, db, 0);
        if (!rc) rc = store_sae_init(sd);
        if (!rc) rc = store_begin(sd);
        if (!rc) rc = store_sae_register(sd, &row, &sae_id);
        if (!rc) rc = store_sae_log(sd, sae_id, logrows, nlog);
        if (!rc) rc = store_commit(sd);
        else if (sd) store_rollback(sd);
        store_close(sd);
    }
    mem_free(logrows);
    sae_metrics_free(&acc);
    mem_free(dens);
    sae_free(m);
    sae_trainer_free(t);
    if (rc) return cli_fail(cmd);
    if (max_norm > 0)
        printf("dropped %" PRId64 " training tokens above %.2f x the mean token norm\n", dropped,
               max_norm);
    printf("sae-train: %s d_in %d d_sae %d, %" PRId64 " steps in %.1fs (%.0f tok/s, reading %.0f%%) "
           "-> %s\n",
           sae_arch_name(c.arch), c.d_in, c.d_sae, steps, secs,
           secs > 0 ? steps * (double)batch / secs : 0, secs > 0 ? 100 * tread / secs : 0, out);
    if (eval_tokens > 0)
        printf("eval (%" PRId64 " held-out tokens): mse %.5g  explained variance %.4f  cos %.4f  "
               "l2 ratio %.3f  L0 %.2f  dead %.1f%%  dense %.1f%%\n",
               sum.n, sum.mse, sum.ev, sum.cos, sum.l2_ratio, sum.l0, 100 * sum.dead_frac,
               100 * sum.dense_frac);
    if (mm >= 0) printf("ground truth: MMCS %.4f, recovered (cos > 0.9) %.1f%%\n", mm, 100 * rec);
    if (sae_id >= 0) printf("registered in %s as SAE id %" PRId64 "\n", db, sae_id);
    if (!finished)
        printf("stopped at step %" PRId64 " of %" PRId64 "; continue with --resume\n",
               step_now, T);
    return 0;
}
