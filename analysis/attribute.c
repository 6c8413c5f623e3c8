/* attribute.c - gradient x activation and integrated-gradients attribution to SAE features
 * (see attribute.h). The gradients come from gpt2_hook_grad, i.e. the training backward pass. */
#include "analysis/attribute.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"

void ana_attr_result_free(ana_attr_result *r)
{
    if (!r) return;
    mem_free(r->f);
    mem_free(r->attr);
    mem_free(r->err);
    memset(r, 0, sizeof *r);
}

/* Hook: capture the rows (x != NULL, alpha < 0) or overwrite them with b_dec + alpha (x - b_dec). */
typedef struct {
    float *x;           /* [T,d] clean rows */
    const float *b_dec; /* [d] */
    int T, d, capture;
    double alpha;
} path_hook;

static int path_fn(const tensor_view *tv, void *user)
{
    path_hook *h = user;
    size_t n = (size_t)h->T * h->d;
    if ((size_t)tensor_numel(tv) != n) return 1;
    if (h->capture) {
        memcpy(h->x, tv->data, n * sizeof *h->x);
        return 0;
    }
    const float a = (float)h->alpha;
    for (size_t k = 0; k < n; k++) {
        float b = h->b_dec[k % h->d];
        tv->data[k] = b + a * (h->x[k] - b);
    }
    return 0;
}

static double metric_of(const float *logits, const ana_attr_opts *o, int pos, int V)
{
    const float *l = logits + (size_t)pos * V;
    return (double)l[o->target] - (o->target_b >= 0 ? (double)l[o->target_b] : 0.0);
}

int ana_attribute(gpt2_model *m, const sae_model *s, const ana_attr_opts *o, ana_attr_result *r)
{
    memset(r, 0, sizeof *r);
    const gpt2_config *cfg = gpt2_cfg(m);
    const int T = o->T, V = cfg->vocab_size, d = s->cfg.d_in, D = s->cfg.d_sae;
    const char *hook = o->hook ? o->hook : s->cfg.hook_name;
    const int pos = o->pos < 0 ? T - 1 : o->pos;
    if (T < 1 || T > cfg->n_ctx)
        return err_set(ERR_ARG, "attribute: %d tokens (the model takes 1 to %d)", T, cfg->n_ctx);
    if (pos >= T) return err_set(ERR_ARG, "attribute: position %d is past the %d tokens", pos, T);
    if (o->target < 0 || o->target >= V || o->target_b >= V || o->target_b == o->target)
        return err_set(ERR_ARG, "attribute: target tokens %d, %d (vocabulary %d)", o->target,
                       o->target_b, V);
    if (o->ig_steps < 0) return err_set(ERR_ARG, "attribute: --ig-steps %d", o->ig_steps);
    int layer, width;
    int rc = gpt2_hook_info(m, hook, &layer, &width);
    if (rc) return rc;
    if (width != d) return err_set(ERR_SHAPE, "attribute: %s is %d wide but the SAE reads %d", hook, width, d);
    if ((rc = gpt2_train_enable(m))) return rc;

    float *x = mem_alloc((size_t)T * d * sizeof *x), *xhat = mem_alloc((size_t)T * d * sizeof *xhat);
    float *g = mem_alloc((size_t)T * d * sizeof *g), *G = mem_calloc((size_t)T * d, sizeof *G);
    float *dl = mem_calloc((size_t)T * V, sizeof *dl), *lg = mem_alloc((size_t)T * V * sizeof *lg);
    float *proj = mem_alloc((size_t)T * D * sizeof *proj);
    r->f = mem_alloc((size_t)T * D * sizeof *r->f);
    r->attr = mem_alloc((size_t)T * D * sizeof *r->attr);
    r->err = mem_alloc((size_t)T * sizeof *r->err);
    if (!x || !xhat || !g || !G || !dl || !lg || !proj || !r->f || !r->attr || !r->err) {
        rc = err_set(ERR_NOMEM, "attribute: out of memory");
        goto out;
    }
    r->T = T;
    r->d_sae = D;
    r->pos = pos;
    r->metric_base = NAN;
    dl[(size_t)pos * V + o->target] = 1;
    if (o->target_b >= 0) dl[(size_t)pos * V + o->target_b] = -1;

    /* clean pass: the hook rows, the metric, the gradient there */
    path_hook h = {.x = x, .b_dec = s->b_dec, .T = T, .d = d, .capture = 1};
    gpt2_hook_clear(m);
    if ((rc = gpt2_hook_add(m, hook, path_fn, &h))) goto out;
    if ((rc = gpt2_hook_grad(m, o->tokens, 1, T, dl, hook, g, lg))) goto out;
    r->metric = metric_of(lg, o, pos, V);
    if ((rc = sae_encode(s, x, T, r->f)) || (rc = sae_decode(s, r->f, T, xhat))) goto out;
    if (o->ig_steps == 0) memcpy(G, g, (size_t)T * d * sizeof *G);
    else {
        h.capture = 0;
        for (int k = 0; k < o->ig_steps; k++) {
            h.alpha = (k + 0.5) / o->ig_steps;
            if ((rc = gpt2_hook_grad(m, o->tokens, 1, T, dl, hook, g, NULL))) goto out;
            for (size_t i = 0; i < (size_t)T * d; i++) G[i] += g[i] / (float)o->ig_steps;
        }
        h.alpha = 0; /* the baseline's metric */
        if ((rc = gpt2_forward(m, o->tokens, 1, T, 1))) goto out;
        r->metric_base = metric_of(gpt2_logits(m), o, pos, V);
    }
    /* attr = f * (G @ W_dec^T), err = (x - xhat) . G */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, D, d, 1.0f, G, d, s->W_dec, d, 0.0f,
                proj, D);
    double total = 0;
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < D; i++) {
            size_t at = (size_t)t * D + i;
            r->attr[at] = r->f[at] != 0 ? r->f[at] * proj[at] : 0.0f;
            total += r->attr[at];
        }
        double e = 0;
        for (int k = 0; k < d; k++)
            e += ((double)x[(size_t)t * d + k] - xhat[(size_t)t * d + k]) * G[(size_t)t * d + k];
        r->err[t] = (float)e;
        total += e;
    }
    r->total = total;
out:
    gpt2_hook_clear(m);
    mem_free(x);
    mem_free(xhat);
    mem_free(g);
    mem_free(G);
    mem_free(dl);
    mem_free(lg);
    mem_free(proj);
    if (rc) ana_attr_result_free(r);
    return rc;
}
