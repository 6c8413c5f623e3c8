/* cmd_attention.c - `saelite attention`: attention patterns of one layer as labelled heat maps. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "common/npy.h"
#include "model/gpt2.h"
#include "model/tokenizer.h"
#include "reports/report.h"

CLI_COMMAND(attention, "Attention patterns of a layer, per head, as a labelled heat map PNG",
            "saelite attention --model DIR --text STR --layer L [--head H] [--tokenizer DIR] "
            "--out FILE.png [--npy FILE.npy]")

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

int cmd_attention(int argc, char **argv)
{
    const char *model = NULL, *tokdir = NULL, *text = NULL, *out = NULL, *npy = NULL;
    int layer = -1, head = -1;
    arg_spec spec[] = {
        {"--model", ARG_STR, &model, "model directory", ARG_REQUIRED},
        {"--tokenizer", ARG_STR, &tokdir, "tokenizer directory", ARG_DEFAULT("the model directory")},
        {"--text", ARG_STR, &text, "the text to run", ARG_REQUIRED},
        {"--layer", ARG_INT, &layer, "block index", ARG_REQUIRED, ARG_MIN(0)},
        {"--head", ARG_INT, &head, "only this head", ARG_MIN(0), ARG_DEFAULT("all heads, in a grid")},
        {"--out", ARG_STR, &out, "output PNG", ARG_REQUIRED},
        {"-o", ARG_STR, &out, "same as --out"},
        {"--npy", ARG_STR, &npy, "also write the pattern [H,T,T] as .npy (every head, whatever --head draws)"},
        {NULL},
    };
    int rc = args_parse("attention", argc, argv, spec, NULL, 0, NULL);
    if (rc) return rc;
    const char *outs[2] = {out, npy};
    static const char *const oflags[2] = {"--out", "--npy"};
    const char *in_dirs[2] = {model, tokdir};
    if ((rc = cli_check_outputs("attention", 2, outs, oflags)) ||
        (rc = cli_check_not_inputs("attention", 2, outs, oflags, 0, NULL, 2, in_dirs)))
        return rc;
    gpt2_model *m = NULL;
    tok_tokenizer *tok = NULL;
    int *ids = NULL;
    size_t n = 0;
    capture cap = {0};
    char **labels = NULL;
    double *v = NULL;
    rep_canvas *c = NULL;
    file_group g = {0}; /* the PNG and the .npy, both or neither (a failed .npy left the PNG) */
    if (gpt2_load(&m, model) || tok_load(&tok, tokdir ? tokdir : model)) goto fail;
    const gpt2_config *cfg = gpt2_cfg(m);
    if (layer >= cfg->n_layer) {
        err_set(ERR_ARG, "--layer %d: the model has layers 0..%d", layer, cfg->n_layer - 1);
        goto fail;
    }
    if (head >= cfg->n_head) {
        err_set(ERR_ARG, "--head %d: the model has heads 0..%d", head, cfg->n_head - 1);
        goto fail;
    }
    if (tok_encode(tok, text, strlen(text), 1, &ids, NULL, &n)) goto fail;
    if (n == 0 || n > (size_t)cfg->n_ctx) {
        err_set(ERR_ARG, "--text is %zu tokens; need 1..%d (the model's context)", n, cfg->n_ctx);
        goto fail;
    }
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= cfg->vocab_size) {
            err_set(ERR_SHAPE, "token %d is outside the model's vocabulary (%d; the tokenizer %s "
                    "has %d tokens: wrong --tokenizer?)", ids[i], cfg->vocab_size,
                    tokdir ? tokdir : model, tok_vocab_size(tok));
            goto fail;
        }
    char hook[64];
    snprintf(hook, sizeof hook, "blocks.%d.attn.hook_pattern", layer);
    if (gpt2_hook_add(m, hook, grab, &cap) || gpt2_forward(m, ids, 1, (int)n, 0)) goto fail;
    if (!cap.pat) {
        err_set(ERR_NOTFOUND, "%s did not fire", hook);
        goto fail;
    }
    int T = cap.T, H = cap.H;
    labels = mem_calloc((size_t)T, sizeof *labels);
    v = mem_alloc(sizeof(double) * (size_t)T * T);
    if (!labels || !v) {
        err_set(ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < T; i++) {
        size_t bl;
        const char *b = tok_token_bytes(tok, ids[i], &bl);
        labels[i] = mem_alloc(bl + 1);
        if (!labels[i]) {
            err_set(ERR_NOMEM, "out of memory");
            goto fail;
        }
        memcpy(labels[i], b ? b : "", b ? bl : 0);
        labels[i][b ? bl : 0] = 0;
    }
    /* grid of heads (or one): each cell a T x T map; labels need room, so cells grow with T */
    int h0 = head >= 0 ? head : 0, nh = head >= 0 ? 1 : H;
    int cols = nh < 4 ? nh : 4, rows = (nh + cols - 1) / cols;
    int cell = 260 + 16 * T;
    if (cell > 1400) cell = 1400;
    if ((rc = rep_canvas_new(&c, cols * cell + 20, rows * cell + 50, rep_rgb(0xffffff)))) goto fail;
    char title[300];
    snprintf(title, sizeof title, "Attention pattern, layer %d (rows: query, columns: key; grey: "
             "masked future)", layer);
    rep_font hf = rep_font_make(16, 1, rep_rgb(0x222222), REP_LEFT, REP_TOP);
    rep_text(c, 10, 10, title, &hf, cols * cell);
    for (int k = 0; k < nh; k++) {
        int h = h0 + k;
        const float *p = cap.pat + (size_t)h * T * T;
        /* masked (future) keys are NaN so they show grey, distinct from a zero weight */
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) v[(size_t)i * T + j] = j > i ? NAN : p[(size_t)i * T + j];
        char t[32];
        snprintf(t, sizeof t, "head %d", h);
        if ((rc = rep_heatmap(c, 10 + (k % cols) * cell, 40 + (k / cols) * cell, cell - 10,
                              cell - 10, t, v, T, T, (const char *const *)labels,
                              (const char *const *)labels, 0, 1, REP_CMAP_VIRIDIS, "weight")))
            goto fail;
    }
    char lb[16];
    snprintf(lb, sizeof lb, "%d", layer);
    rep_kv meta[3] = {{"Software", "saelite attention"}, {"layer", lb}, {"text", text}};
    const char *out_w = file_group_add(&g, out), *npy_w = file_group_add(&g, npy);
    if ((rc = rep_canvas_status(c)) || (rc = rep_png_write(c, out_w, meta, 3))) goto fail;
    if (npy) {
        int64_t sh[3] = {H, T, T};
        if (npy_write(npy_w, cap.pat, 3, sh)) goto fail;
    }
    if (file_group_commit(&g)) goto fail;
    printf("wrote %s: layer %d, %d head%s, %d tokens%s%s\n", out, layer, nh, nh == 1 ? "" : "s", T,
           npy ? "; " : "", npy ? npy : "");
    rc = 0;
    goto done;
fail:
    file_group_abort(&g);
    rc = cli_fail("attention");
done:
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
