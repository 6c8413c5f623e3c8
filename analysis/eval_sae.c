/* eval_sae.c - `saelite sae-eval` as a library call (eval.h, eval_sae_run): an SAE against true
 * directions, against a rebuilt generator (with its absorption check), and on activations. */
#include <inttypes.h>
#include <string.h>

#include "analysis/eval.h"
#include "common/err.h"
#include "common/mem.h"
#include "common/npy.h"

void eval_sae_defaults(eval_sae_opts *o)
{
    *o = (eval_sae_opts){.synth_samples = 16384, .thr = 0.9};
}

static int stopped(const eval_sae_opts *o)
{
    return o->stop && *o->stop ? err_set(ERR_ABORTED, "interrupted") : OK;
}

/* A [rows, D] float array whose first n rows are finite (NaN/Inf would only print 'mse nan'). */
static int check_array(const char *path, const char *rows, const float *x, int nd,
                       const int64_t *sh, int D, const char *width, int64_t n)
{
    if (nd != 2)
        return err_set(ERR_SHAPE, "%s: expected a 2-D array [%s, %d], got %d dims", path, rows, D,
                       nd);
    if (sh[1] != D)
        return err_set(ERR_SHAPE, "%s: expected [%s, %d], got [%lld, %lld] (the SAE's %s is %d)",
                       path, rows, D, (long long)sh[0], (long long)sh[1], width, D);
    /* an empty file scored "0 tokens, mse 0", exit 0 (an audit) */
    if (sh[0] < 1)
        return err_set(ERR_SHAPE, "%s: no %s (shape [0, %d])", path, rows, D);
    return npy_check_finite(path, x, n, D);
}

/* MMCS of the decoder rows against the true directions of o->truth. */
static int truth_part(const eval_sae_opts *o, const sae_model *m, eval_sae_result *r)
{
    int Do = sae_out_dim(&m->cfg), nd;
    const char *dname = m->cfg.transcoder ? "d_out" : "d_in"; /* the decoder rows' width */
    float *data = NULL;
    int64_t sh[NPY_MAX_DIMS];
    int rc = npy_read(o->truth, &data, &nd, sh);
    if (!rc) rc = check_array(o->truth, "features", data, nd, sh, Do, dname, sh[0]);
    if (!rc) rc = sae_truth_check(o->truth, data, sh[0], Do);
    if (!rc)
        rc = sae_mmcs(data, (int)sh[0], m->W_dec, m->cfg.d_sae, Do, o->thr, &r->truth_mmcs,
                      &r->truth_recovered, NULL);
    mem_free(data);
    if (rc) return rc;
    r->truth_features = sh[0];
    r->done |= EVAL_SAE_TRUTH;
    return OK;
}

/* The generator of `saelite synth --spec` rebuilt: MMCS against its directions and, when it has
 * a hierarchy, SAEBench's absorption metric beside the generator's own (docs/eval.md, "The
 * synthetic check"). */
static int synth_part(const eval_sae_opts *o, const sae_model *m, eval_sae_result *r)
{
    synth_config *c = &r->gen;
    int rc = sae_synth_spec_load(c, o->synth);
    if (rc) return rc;
    int Do = sae_out_dim(&m->cfg);
    /* a transcoder was refused as "the generator makes 32 values, the SAE is a transcoder
       writing 32": no reason where the widths agree. Named by its directory, as the other
       refusals of a transcoder here (it read "GEN.json: the SAE is a transcoder", the
       generator's file for the SAE's fault) */
    if (m->cfg.transcoder)
        return err_set(ERR_ARG, "%s is a transcoder (d_in %d -> d_out %d): the synthetic check "
                       "of %s needs an SAE of the generator's activations", o->sae, m->cfg.d_in,
                       Do, o->synth);
    if (c->d != Do)
        return err_set(ERR_SHAPE, "%s: the generator makes %d values, the SAE reads %d", o->synth,
                       c->d, Do);
    sae_synth *g;
    rc = sae_synth_new(&g, c);
    if (!rc)
        rc = sae_mmcs(sae_synth_directions(g), c->n_features, m->W_dec, m->cfg.d_sae, Do, o->thr,
                      &r->gen_mmcs, &r->gen_recovered, NULL);
    sae_synth_free(g);
    if (rc) return rc;
    r->done |= EVAL_SAE_GENERATOR;
    if (c->parents < 1 || c->children < 1) return OK; /* no hierarchy: nothing absorbs */
    if ((rc = stopped(o))) return rc;
    int n = o->synth_samples;
    eval_abs_defaults(&r->abs_params);
    rc = eval_absorption_synth(m, c, n, n, &r->abs_params, &r->abs_saebench, NULL, &r->abs_exact,
                               NULL);
    if (rc) return rc;
    r->abs_samples = n;
    r->done |= EVAL_SAE_ABSORPTION;
    return OK;
}

/* Reconstruction metrics on the first rows of o->acts (a transcoder's joined with o->acts_out). */
static int recon_part(const eval_sae_opts *o, const sae_model *m, eval_sae_result *r)
{
    int D = m->cfg.d_in, Do = sae_out_dim(&m->cfg), nd;
    float *data = NULL;
    int64_t sh[NPY_MAX_DIMS];
    int rc = npy_read(o->acts, &data, &nd, sh);
    int64_t n = !rc && nd == 2 ? sh[0] : 0;
    if (o->max_tokens > 0 && n > o->max_tokens) n = o->max_tokens;
    if (!rc) rc = check_array(o->acts, "tokens", data, nd, sh, D, "d_in", n);
    if (!rc && o->acts_out) { /* transcoders: rows become (input, target) pairs */
        float *yd = NULL;
        int64_t sy[NPY_MAX_DIMS];
        rc = npy_read(o->acts_out, &yd, &nd, sy);
        if (!rc)
            rc = check_array(o->acts_out, "tokens", yd, nd, sy, Do, "d_out", sy[0] < n ? sy[0] : n);
        if (!rc && sy[0] < n)
            rc = err_set(ERR_SHAPE, "%s: %" PRId64 " rows, fewer than the %" PRId64 " of %s",
                         o->acts_out, sy[0], n, o->acts);
        if (!rc) rc = sae_pairs_join(&data, D, yd, Do, n);
        mem_free(yd);
    }
    sae_metrics acc;
    memset(&acc, 0, sizeof acc);
    if (!rc) rc = sae_metrics_init(&acc, Do, m->cfg.d_sae);
    if (!rc) sae_metrics_prefixes(&acc, &m->cfg); /* Matryoshka's */
    if (!rc && (rc = sae_metrics_eval(&acc, m, data, n, NULL, NULL)))
        rc = err_wrap(rc, "%s on %s", o->sae, o->acts);
    if (!rc) {
        sae_metrics_summarize(&acc, &r->recon);
        r->done |= EVAL_SAE_RECON;
    }
    sae_metrics_free(&acc);
    mem_free(data);
    return rc;
}

int eval_sae_run(const eval_sae_opts *o, eval_sae_result *r)
{
    memset(r, 0, sizeof *r);
    sae_model *m;
    int rc = sae_load(&m, o->sae);
    if (rc) return rc;
    int tc = m->cfg.transcoder;
    if (tc && o->acts && !o->acts_out) {
        r->misuse = EVAL_SAE_NEEDS_TARGETS;
        rc = err_set(ERR_ARG, "%s is a transcoder: its activations need their targets", o->sae);
    } else if (!tc && o->acts_out) {
        r->misuse = EVAL_SAE_TARGETS_UNUSED;
        rc = err_set(ERR_ARG, "%s is not a transcoder: targets are for transcoders", o->sae);
    }
    if (!rc && (rc = sae_load_config(o->sae, &r->trained)) == OK) {
        r->sae = m->cfg;
        r->done |= EVAL_SAE_LOADED;
    }
    if (!rc && o->truth && !(rc = stopped(o))) rc = truth_part(o, m, r);
    if (!rc && o->synth && !(rc = stopped(o))) rc = synth_part(o, m, r);
    if (!rc && o->acts && !(rc = stopped(o))) rc = recon_part(o, m, r);
    sae_free(m);
    return rc;
}
