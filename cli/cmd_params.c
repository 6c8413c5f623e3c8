/* cmd_params.c - `saelite params`: parameter counts by matrix for a model or a preset. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/err.h"
#include "model/params.h"

CLI_COMMAND(params, "Count a GPT's parameters by matrix (model directory or preset)",
            "saelite params (DIR | --preset gpt2|gpt2-medium|gpt2-large|gpt2-xl|gpt3)")

/* 175181291520 -> "175,181,291,520" */
static const char *commas(char *buf, long long v)
{
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%lld", v < 0 ? -v : v);
    size_t n = strlen(tmp), o = 0;
    if (v < 0) buf[o++] = '-';
    for (size_t i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = 0;
    return buf;
}

int cmd_params(int argc, char **argv)
{
    const char *preset = NULL, *pos[1];
    int npos = 0;
    char names[256] = ""; /* "gpt2|gpt2-medium|...", from the library's list */
    for (int i = 0; params_presets[i]; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? "|" : "",
                 params_presets[i]);
    arg_spec spec[] = {
        {"--preset", ARG_STR, &preset, "a published model's shape",
         ARG_CHOICES(names)},
        {NULL},
    };
    int rc = args_parse("params", argc, argv, spec, pos, 1, &npos);
    if (rc) return rc;
    if ((preset != NULL) == (npos == 1))
        return cli_usage_error("params", "give a model directory or --preset NAME (one of them)");
    params_shape s;
    if (preset ? params_preset(preset, &s) : params_from_dir(pos[0], &s)) return cli_fail("params");
    params_count c;
    if (params_compute(&s, &c)) return cli_fail("params");
    char a[32], b[32], d[32];
    printf("%s: %lld layers, d_model %lld, %lld heads of %lld, d_mlp %lld, vocab %lld, "
           "context %lld, unembedding %s\n\n",
           s.name, (long long)s.n_layer, (long long)s.n_embd, (long long)s.n_head,
           (long long)(s.n_embd / s.n_head), (long long)s.n_inner, (long long)s.vocab,
           (long long)s.n_ctx, s.tied ? "tied to the embedding" : "separate");
    printf("%-28s %-15s %15s %19s\n", "tensor", "shape", "per layer", "total");
    static const char *cat_name[PARAMS_NCAT] = {"weight matrices", "biases",
                                                "LayerNorm gains+biases", "position embeddings"};
    for (int cat = 0; cat < PARAMS_NCAT; cat++) {
        for (int i = 0; i < c.nrows; i++) {
            const params_row *r = &c.rows[i];
            if (r->category != cat) continue;
            char shape[40];
            if (r->cols > 1) snprintf(shape, sizeof shape, "%lld x %lld", (long long)r->rows,
                                      (long long)r->cols);
            else snprintf(shape, sizeof shape, "%lld", (long long)r->rows);
            printf("%-28s %-15s %15s %19s\n", r->label, shape,
                   r->per_layer ? commas(a, r->per_layer) : "-", commas(b, r->total));
        }
        printf("%-28s %-15s %15s %19s\n\n", cat_name[cat], "", "", commas(d, c.by_category[cat]));
    }
    if (s.tied) printf("unembedding: tied to the token embedding, no extra parameters\n");
    printf("weight matrices %s + biases %s + LayerNorm %s + position embeddings %s\n",
           commas(a, c.by_category[PARAMS_MATRIX]), commas(b, c.by_category[PARAMS_BIAS]),
           commas(d, c.by_category[PARAMS_NORM]), commas((char[32]){0}, c.by_category[PARAMS_POS]));
    printf("total parameters: %s\n", commas(a, c.total));
    if (s.stored >= 0)
        printf("model.safetensors stores %s parameters (%s)\n", commas(a, s.stored),
               s.stored == c.total ? "matches" : "DIFFERS from the count above");
    if (s.stored >= 0 && s.unused_head)
        printf("model.safetensors also holds an lm_head.weight of %s values, unused: the config "
               "ties the head to the embedding\n", commas(a, s.unused_head));
    return 0;
}
