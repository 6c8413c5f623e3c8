/* attention.c - `saelite attention` as a library call: one text through the model, the attention
 * pattern of one layer captured at blocks.L.attn.hook_pattern and drawn as labelled heat maps
 * (see report_run.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "common/npy.h"
#include "model/gpt2.h"
#include "model/tokenizer.h"
#include "reports/report.h"
#include "reports/report_run.h"

typedef struct {
    float *pat; /* [H,T,T] */
    int H, T;
} capture;

static int grab(const tensor_view *t, void *user)
{
    capture *c = user;
    /* [B=1,H,T,T] contiguous */
    c->H = (int)t->shape[1];
    c->T = (int)t->shape[2];
    size_t n = (size_t)c->H * c->T * c->T;
    c->pat = mem_alloc(sizeof(float) * n);
    if (!c->pat) return err_set(ERR_NOMEM, "out of memory");
    memcpy(c->pat, t->data, sizeof(float) * n);
    return 0;
}

/* --layer and --head against the model, then the text's tokens against its context and
 * vocabulary; the tokens into *ids[*n]. */
static int tokens(const rep_attention_opts *o, gpt2_model *m, tok_tokenizer *tok, int **ids,
                  size_t *n)
{
    const gpt2_config *cfg = gpt2_cfg(m);
    if (o->layer >= cfg->n_layer)
        return err_set(ERR_ARG, "--layer %d: the model has layers 0..%d", o->layer,
                       cfg->n_layer - 1);
    if (o->head >= cfg->n_head)
        return err_set(ERR_ARG, "--head %d: the model has heads 0..%d", o->head, cfg->n_head - 1);
    int rc = tok_encode(tok, o->text, strlen(o->text), 1, ids, NULL, n);
    if (rc) return rc;
    if (*n == 0 || *n > (size_t)cfg->n_ctx)
        return err_set(ERR_ARG, "--text is %zu tokens; need 1..%d (the model's context)", *n,
                       cfg->n_ctx);
    return OK;
}

/* Each token's bytes as a NUL-terminated label: labels[T] (the caller frees every one). */
static int make_labels(tok_tokenizer *tok, const int *ids, int T, char **labels)
{
    for (int i = 0; i < T; i++) {
        size_t bl;
        const char *b = tok_token_bytes(tok, ids[i], &bl);
        labels[i] = mem_alloc(bl + 1);
        if (!labels[i]) return err_set(ERR_NOMEM, "out of memory");
        memcpy(labels[i], b ? b : "", b ? bl : 0);
        labels[i][b ? bl : 0] = 0;
    }
    return OK;
}

/* The title and a grid of heads (or one) into *out: each cell a T x T map, v[T*T] scratch. */
static int draw(const rep_attention_opts *o, const capture *cap, const char *const *labels,
                double *v, int nh, rep_canvas **out)
{
    int T = cap->T, h0 = o->head >= 0 ? o->head : 0;
    /* labels need room, so cells grow with T */
    int cols = nh < 4 ? nh : 4, rows = (nh + cols - 1) / cols;
    int cell = 260 + 16 * T;
    if (cell > 1400) cell = 1400;
    int rc = rep_canvas_new(out, cols * cell + 20, rows * cell + 50, rep_rgb(0xffffff));
    if (rc) return rc;
    rep_canvas *c = *out;
    char title[300];
    snprintf(title, sizeof title, "Attention pattern, layer %d (rows: query, columns: key; grey: "
             "masked future)", o->layer);
    rep_font hf = rep_font_make(16, 1, rep_rgb(0x222222), REP_LEFT, REP_TOP);
    rep_text(c, 10, 10, title, &hf, cols * cell);
    for (int k = 0; k < nh; k++) {
        int h = h0 + k;
        const float *p = cap->pat + (size_t)h * T * T;
        /* masked (future) keys are NaN so they show grey, distinct from a zero weight */
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) v[(size_t)i * T + j] = j > i ? NAN : p[(size_t)i * T + j];
        char t[32];
        snprintf(t, sizeof t, "head %d", h);
        if ((rc = rep_heatmap(c, 10 + (k % cols) * cell, 40 + (k / cols) * cell, cell - 10,
                              cell - 10, t, v, T, T, labels, labels, 0, 1, REP_CMAP_VIRIDIS,
                              "weight")))
            return rc;
    }
    return OK;
}

int rep_attention_run(const rep_attention_opts *o, rep_attention_result *r)
{
    memset(r, 0, sizeof *r);
    gpt2_model *m = NULL;
    tok_tokenizer *tok = NULL;
    int *ids = NULL;
    size_t n = 0;
    capture cap = {0};
    char **labels = NULL;
    double *v = NULL;
    rep_canvas *c = NULL;
    file_group g = {0}; /* the PNG and the .npy, both or neither (a failed .npy left the PNG) */
    int rc;
    if ((rc = gpt2_load(&m, o->model)) ||
        (rc = tok_load(&tok, o->tokenizer ? o->tokenizer : o->model)) ||
        (rc = tok_check_model(tok, o->tokenizer ? o->tokenizer : o->model, gpt2_cfg(m)->vocab_size,
                              o->model)) ||
        (rc = tokens(o, m, tok, &ids, &n)))
        goto done;
    char hook[64];
    snprintf(hook, sizeof hook, "blocks.%d.attn.hook_pattern", o->layer);
    if ((rc = gpt2_hook_add(m, hook, grab, &cap)) || (rc = gpt2_forward(m, ids, 1, (int)n, 0)))
        goto done;
    if (!cap.pat) {
        rc = err_set(ERR_NOTFOUND, "%s did not fire", hook);
        goto done;
    }
    int T = cap.T, H = cap.H, nh = o->head >= 0 ? 1 : H;
    labels = mem_calloc((size_t)T, sizeof *labels);
    v = mem_alloc(sizeof(double) * (size_t)T * T);
    if (!labels || !v) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = make_labels(tok, ids, T, labels)) ||
        (rc = draw(o, &cap, (const char *const *)labels, v, nh, &c)))
        goto done;
    char lb[16];
    snprintf(lb, sizeof lb, "%d", o->layer);
    rep_kv meta[3] = {{"Software", "saelite attention"}, {"layer", lb}, {"text", o->text}};
    const char *out_w = file_group_add(&g, o->out), *npy_w = file_group_add(&g, o->npy);
    if ((rc = rep_canvas_status(c)) || (rc = rep_png_write(c, out_w, meta, 3))) goto done;
    if (o->npy) {
        int64_t sh[3] = {H, T, T};
        if ((rc = npy_write(npy_w, cap.pat, 3, sh))) goto done;
    }
    if ((rc = file_group_commit(&g))) goto done;
    *r = (rep_attention_result){.layer = o->layer, .heads = nh, .tokens = T};
done:
    if (rc) file_group_abort(&g);
    for (int i = 0; labels && i < cap.T; i++) mem_free(labels[i]);
    mem_free(labels);
    mem_free(v);
    mem_free(cap.pat);
    mem_free(ids);
    rep_canvas_free(c);
    tok_free(tok);
    gpt2_free(m);
    return rc;
}
