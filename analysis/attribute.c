/* attribute.c - gradient x activation and integrated-gradients attribution to SAE features, and
 * the `attribute` runner (see attribute.h). The gradients come from gpt2_hook_grad, i.e. the
 * training backward pass. */
#include "analysis/attribute.h"
#include "analysis/steer.h"

#include <cblas.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "common/npy.h"
#include "common/progress.h"
#include "common/utf8.h"
#include "model/tokenizer.h"

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
    /* a transcoder reads one hook and writes another: its features are graph's nodes, not a
       reconstruction of one hook (the sum of attributions read -49.76 for -0.18, audit) */
    if (s->cfg.transcoder)
        return err_set(ERR_ARG, "the SAE is a transcoder (%s -> %s); attribute to an SAE "
                       "of one hook, or use saelite graph for transcoders", s->cfg.hook_name,
                       s->cfg.hook_name_out);
    const int pos = o->pos < 0 ? T - 1 : o->pos;
    if (T < 1 || T > cfg->n_ctx)
        return err_set(ERR_ARG, "%d tokens (the model takes 1 to %d)", T, cfg->n_ctx);
    if (pos >= T) return err_set(ERR_ARG, "position %d is past the %d tokens", pos, T);
    if (o->target_b >= 0 && o->target_b == o->target) /* a logit minus itself: 0 everywhere */
        return err_set(ERR_ARG, "the logit difference names token %d twice (A - B needs two "
                       "tokens)", o->target);
    if (o->target < 0 || o->target >= V || o->target_b >= V)
        return err_set(ERR_ARG, "target tokens %d, %d (vocabulary %d)", o->target,
                       o->target_b, V);
    if (o->ig_steps < 0) return err_set(ERR_ARG, "--ig-steps %d", o->ig_steps);
    int layer, width;
    int rc = gpt2_hook_token_info(m, hook, &layer, &width);
    if (rc) return rc;
    if (width != d) return err_set(ERR_SHAPE, "%s is %d wide but the SAE reads %d", hook, width, d);
    if ((rc = gpt2_train_enable(m))) return rc;

    float *x = mem_alloc((size_t)T * d * sizeof *x), *xhat = mem_alloc((size_t)T * d * sizeof *xhat);
    float *g = mem_alloc((size_t)T * d * sizeof *g), *G = mem_calloc((size_t)T * d, sizeof *G);
    float *dl = mem_calloc((size_t)T * V, sizeof *dl), *lg = mem_alloc((size_t)T * V * sizeof *lg);
    float *proj = mem_alloc((size_t)T * D * sizeof *proj);
    r->f = mem_alloc((size_t)T * D * sizeof *r->f);
    r->attr = mem_alloc((size_t)T * D * sizeof *r->attr);
    r->err = mem_alloc((size_t)T * sizeof *r->err);
    if (!x || !xhat || !g || !G || !dl || !lg || !proj || !r->f || !r->attr || !r->err) {
        rc = err_set(ERR_NOMEM, "attribution: out of memory");
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
    if ((rc = sae_forward(s, x, T, r->f, xhat))) goto out;
    if (o->ig_steps == 0) memcpy(G, g, (size_t)T * d * sizeof *G);
    else {
        h.capture = 0;
        progress pr; /* a backward pass per step: --ig-steps 10000 ran 53 s in silence */
        progress_begin(&pr, "attribute: integrated gradients", (double)o->ig_steps, "step");
        for (int k = 0; k < o->ig_steps; k++) {
            h.alpha = (k + 0.5) / o->ig_steps;
            if ((rc = gpt2_hook_grad(m, o->tokens, 1, T, dl, hook, g, NULL))) break;
            for (size_t i = 0; i < (size_t)T * d; i++) G[i] += g[i] / (float)o->ig_steps;
            progress_update(&pr, (double)(k + 1), NULL);
        }
        progress_end(&pr);
        if (rc) goto out;
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

/* ---- the runner ------------------------------------------------------------------------------ */
void ana_attr_run_free(ana_attr_run_result *res)
{
    if (!res) return;
    ana_attr_result_free(&res->r);
    if (res->tok_text)
        for (int t = 0; t < res->T; t++) mem_free(res->tok_text[t]);
    mem_free(res->tok_text);
    mem_free(res->tokens);
    mem_free(res->row_feature);
    mem_free(res->rows);
    memset(res, 0, sizeof *res);
}

static void token_label(const tok_tokenizer *tk, int id, char *out, size_t cap)
{
    size_t n;
    const char *b = tok_token_bytes(tk, id, &n);
    if (!b) snprintf(out, cap, "#%d", id);
    else snprintf(out, cap, "%.*s", (int)(n < cap - 1 ? n : cap - 1), b);
}

/* "#ID" or text that encodes to one token */
static int resolve_token(tok_tokenizer *tk, const char *s, int V, int *id)
{
    if (s[0] == '#' && s[1]) {
        char *end;
        long v = strtol(s + 1, &end, 10);
        /* digits only: strtol also took "# 5" and "#+5" for 5 */
        if (!isdigit((unsigned char)s[1]) || *end || v < 0 || v >= V)
            return err_set(ERR_ARG, "target '%s': not a token id below %d", s, V);
        *id = (int)v;
        return OK;
    }
    int *ids = NULL;
    size_t n = 0;
    int rc = tok_encode(tk, s, strlen(s), 1, &ids, NULL, &n);
    if (rc) return rc;
    if (n != 1) {
        mem_free(ids);
        return err_set(ERR_ARG, "target '%s' is %zu tokens, not one (give '#ID' for a token id)", s, n);
    }
    *id = ids[0];
    mem_free(ids);
    if (*id >= V) return err_set(ERR_ARG, "target '%s' is token %d, outside the model's %d", s, *id, V);
    return OK;
}

typedef struct { double v; int j; } scored;
static int cmp_scored(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->j - y->j;
}

static int write_csv(const char *path, const ana_attr_run_result *res)
{
    const ana_attr_result *r = &res->r;
    file_atomic fa = {0};
    int rc = file_atomic_open(&fa, path);
    if (rc) return rc;
    buf b = {0};
    fprintf(fa.f, "position,token,token_text,feature,activation,attribution\n");
    for (int t = 0; t < r->T && !rc; t++) {
        buf_reset(&b);
        /* CSV quoting: double the quotes inside a quoted field */
        /* valid UTF-8, as the tokens table and graph.json (U+FFFD for a split character's
           bytes): a CSV reader decoding UTF-8 failed on them */
        char ct[4 * 64 + 1];
        utf8_clean(res->tok_text[t], strlen(res->tok_text[t]), ct, sizeof ct);
        rc = buf_str(&b, "\"");
        for (const char *p = ct; *p && !rc; p++) rc = *p == '"' ? buf_str(&b, "\"\"") : buf_put(&b, p, 1);
        if (!rc) rc = buf_str(&b, "\"");
        if (rc) break;
        for (int i = 0; i < r->d_sae; i++) {
            size_t at = (size_t)t * r->d_sae + i;
            if (r->f[at] != 0)
                fprintf(fa.f, "%d,%d,%s,%d,%.9g,%.9g\n", t, res->tokens[t], b.p, i, r->f[at], r->attr[at]);
        }
        fprintf(fa.f, "%d,%d,%s,-1,,%.9g\n", t, res->tokens[t], b.p, r->err[t]);
    }
    buf_free(&b);
    if (rc) {
        file_atomic_abort(&fa);
        return rc;
    }
    return file_atomic_commit(&fa);
}

static int write_npy(const char *path, const ana_attr_result *r)
{
    const int W = r->d_sae + 1;
    float *a = mem_alloc((size_t)r->T * W * sizeof *a);
    if (!a) return err_set(ERR_NOMEM, "out of memory");
    for (int t = 0; t < r->T; t++) {
        memcpy(a + (size_t)t * W, r->attr + (size_t)t * r->d_sae, (size_t)r->d_sae * sizeof *a);
        a[(size_t)t * W + r->d_sae] = r->err[t];
    }
    int64_t shape[2] = {r->T, W};
    int rc = npy_write(path, a, 2, shape);
    mem_free(a);
    return rc;
}

int ana_attr_run(const ana_attr_run_opts *o, ana_attr_run_result *res)
{
    memset(res, 0, sizeof *res);
    gpt2_model *m = NULL;
    tok_tokenizer *tk = NULL;
    sae_model *s = NULL;
    int rc = gpt2_load(&m, o->model_dir);
    const char *tok_dir = o->tok_dir ? o->tok_dir : o->model_dir;
    if (!rc) rc = tok_load(&tk, tok_dir);
    if (!rc) rc = tok_check_model(tk, tok_dir, gpt2_cfg(m)->vocab_size, o->model_dir);
    if (!rc) rc = sae_load(&s, o->sae_dir);
    if (!rc) rc = ana_check_sae_model(s, o->sae_dir, o->model_dir);
    if (rc) goto out;
    const char *hook = o->hook ? o->hook : s->cfg.hook_name;
    if (!hook[0]) {
        rc = err_set(ERR_ARG, "%s: the SAE names no hook_name; give --hook NAME", o->sae_dir);
        goto out;
    }
    /* the features live at the SAE's hook: another hook's rows through its encoder are no
       features of it, and their attributions came out with exit 0 (analyze refuses the same) */
    if (o->hook && s->cfg.hook_name[0] && strcmp(o->hook, s->cfg.hook_name)) {
        rc = err_set(ERR_ARG, "%s: the SAE was trained on %s, not --hook %s", o->sae_dir,
                     s->cfg.hook_name, o->hook);
        goto out;
    }
    snprintf(res->hook, sizeof res->hook, "%s", hook);
    const int V = gpt2_cfg(m)->vocab_size;
    size_t n = 0;
    if ((rc = tok_encode(tk, o->text, strlen(o->text), 1, &res->tokens, NULL, &n))) goto out;
    if (n == 0) {
        rc = err_set(ERR_ARG, "the text has no tokens");
        goto out;
    }
    res->T = (int)n;
    res->tok_text = mem_calloc(n, sizeof *res->tok_text);
    if (!res->tok_text) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t t = 0; t < n; t++) {
        char lab[64];
        token_label(tk, res->tokens[t], lab, sizeof lab);
        if (!(res->tok_text[t] = mem_strdup(lab))) {
            rc = err_set(ERR_NOMEM, "out of memory");
            goto out;
        }
    }
    int pos = o->pos < 0 ? res->T - 1 : o->pos;
    if (pos >= res->T) {
        rc = err_set(ERR_ARG, "--pos %d is past the text's %d tokens", pos, res->T);
        goto out;
    }
    res->target_b = -1;
    if (o->target_diff) {
        const char *comma = strchr(o->target_diff, ',');
        if (!comma || comma == o->target_diff || !comma[1]) {
            rc = err_set(ERR_ARG, "--target-diff '%s' is not A,B", o->target_diff);
            goto out;
        }
        char a[128];
        snprintf(a, sizeof a, "%.*s", (int)(comma - o->target_diff), o->target_diff);
        if ((rc = resolve_token(tk, a, V, &res->target)) || (rc = resolve_token(tk, comma + 1, V, &res->target_b)))
            goto out;
    } else if (o->target) {
        if ((rc = resolve_token(tk, o->target, V, &res->target))) goto out;
    } else { /* the model's top prediction at pos */
        if ((rc = gpt2_forward(m, res->tokens, 1, res->T, 1))) goto out;
        const float *l = gpt2_logits(m) + (size_t)pos * V;
        for (int v = 1; v < tok_vocab_size(tk); v++)
            if (l[v] > l[res->target]) res->target = v;
    }
    token_label(tk, res->target, res->target_text, sizeof res->target_text);
    if (res->target_b >= 0) token_label(tk, res->target_b, res->target_b_text, sizeof res->target_b_text);
    ana_attr_opts ao = {.tokens = res->tokens, .T = res->T, .pos = pos, .target = res->target,
                        .target_b = res->target_b, .ig_steps = o->ig_steps, .hook = hook};
    if ((rc = ana_attribute(m, s, &ao, &res->r))) goto out;
    /* heat-map rows */
    const int D = res->r.d_sae, T = res->T;
    int top = o->top_rows > 0 ? o->top_rows : 12;
    scored *sc = mem_alloc((size_t)D * sizeof *sc);
    if (!sc) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto out;
    }
    int live = 0;
    for (int j = 0; j < D; j++) {
        double a = 0;
        for (int t = 0; t < T; t++) a += fabs(res->r.attr[(size_t)t * D + j]);
        sc[j] = (scored){a, j};
        live += a > 0;
    }
    qsort(sc, (size_t)D, sizeof *sc, cmp_scored);
    if (top > live) top = live;
    res->n_rows = top + 1;
    res->row_feature = mem_alloc((size_t)res->n_rows * sizeof *res->row_feature);
    res->rows = mem_alloc((size_t)res->n_rows * T * sizeof *res->rows);
    if (!res->row_feature || !res->rows) rc = err_set(ERR_NOMEM, "out of memory");
    for (int k = 0; k < top && !rc; k++) {
        res->row_feature[k] = sc[k].j;
        for (int t = 0; t < T; t++) res->rows[(size_t)k * T + t] = res->r.attr[(size_t)t * D + sc[k].j];
    }
    mem_free(sc);
    if (rc) goto out;
    res->row_feature[top] = -1;
    for (int t = 0; t < T; t++) res->rows[(size_t)top * T + t] = res->r.err[t];
    if (o->csv && (rc = write_csv(o->csv, res))) goto out;
    if (o->npy && (rc = write_npy(o->npy, &res->r))) goto out;
out:
    gpt2_free(m);
    tok_free(tk);
    sae_free(s);
    if (rc) ana_attr_run_free(res);
    return rc;
}
