/* cmd_attribute.c - `saelite attribute`: flags for ana_attr_run (analysis/attribute.h), the
 * top nodes printed, the heat map drawn with reports/dashboard.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analysis/attribute.h"
#include "cli/cli.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "reports/dashboard.h"

CLI_COMMAND(attribute, "Attribute a logit (or logit difference) to SAE features and error nodes",
            "saelite attribute --model DIR --sae DIR --text S [--target TOKEN | --target-diff A,B] "
            "[--pos N] [--ig-steps N] [--top K] [--csv FILE] [--npy FILE] [--png FILE]")

typedef struct { double a; int t, j; } node;
static int cmp_node(const void *x, const void *y)
{
    const node *p = x, *q = y;
    if (fabs(p->a) != fabs(q->a)) return fabs(p->a) > fabs(q->a) ? -1 : 1;
    return p->t != q->t ? p->t - q->t : p->j - q->j;
}

int cmd_attribute(int argc, char **argv)
{
    ana_attr_run_opts o = {.pos = -1, .top_rows = 12};
    const char *png = NULL;
    int top = 20;
    arg_spec spec[] = {
        {"--model", ARG_STR, &o.model_dir, "model directory", ARG_REQUIRED},
        {"--sae", ARG_STR, &o.sae_dir, "SAE directory (its hook_name is where features live)", ARG_REQUIRED},
        {"--text", ARG_STR, &o.text, "the prompt", ARG_REQUIRED},
        {"--tokenizer", ARG_STR, &o.tok_dir, "tokenizer directory", ARG_DEFAULT("the model directory")},
        {"--hook", ARG_STR, &o.hook, "hook of the SAE", ARG_DEFAULT("the SAE's hook_name")},
        {"--target", ARG_STR, &o.target, "token whose logit is explained (text of one token, or #ID)",
         ARG_DEFAULT("the model's top prediction")},
        {"--target-diff", ARG_STR, &o.target_diff, "A,B: explain logit[A] - logit[B]"},
        {"--pos", ARG_INT, &o.pos, "position whose logits are read (-1: the last)", ARG_MIN(-1)},
        {"--ig-steps", ARG_INT, &o.ig_steps,
         "integrated gradients with N steps from the baseline (hook = b_dec); 0: gradient x activation",
         ARG_RANGE(0, 10000)},
        {"--top", ARG_INT, &top, "nodes printed", ARG_MIN(0)},
        {"--rows", ARG_INT, &o.top_rows, "features drawn in the heat map", ARG_MIN(1)},
        {"--csv", ARG_STR, &o.csv, "every active node: position,token,token_text,feature,activation,attribution"},
        {"--npy", ARG_STR, &o.npy, "[T, d_sae + 1] attributions, the last column the error nodes"},
        {"--png", ARG_STR, &png, "heat map of the top features (and the error nodes) over the tokens"},
        {NULL},
    };
    int rc = args_parse("attribute", argc, argv, spec, NULL, 0, NULL);
    if (rc) return rc;
    if (o.target && o.target_diff) return cli_usage_error("attribute", "give --target or --target-diff, not both");
    const char *outs[3] = {o.csv, o.npy, png};
    static const char *const oflags[3] = {"--csv", "--npy", "--png"};
    const char *in_dirs[3] = {o.model_dir, o.tok_dir, o.sae_dir};
    if ((rc = cli_check_outputs("attribute", 3, outs, oflags)) ||
        (rc = cli_check_not_inputs("attribute", 3, outs, oflags, 0, NULL, 3, in_dirs)))
        return rc;
    /* the CSV, the .npy and the PNG: all or none (a failing PNG left the other two, an audit) */
    file_group g = {0};
    o.csv = file_group_add(&g, o.csv);
    o.npy = file_group_add(&g, o.npy);
    const char *png_final = png;
    png = file_group_add(&g, png);
    ana_attr_run_result res;
    if (ana_attr_run(&o, &res)) {
        file_group_abort(&g);
        return cli_fail("attribute");
    }
    const ana_attr_result *r = &res.r;
    const int T = res.T, D = r->d_sae;
    if (res.target_b >= 0)
        printf("metric: logit[\"%s\"] - logit[\"%s\"] at position %d = %.6f\n", res.target_text,
               res.target_b_text, r->pos, r->metric);
    else printf("metric: logit[\"%s\"] (token %d) at position %d = %.6f\n", res.target_text,
                res.target, r->pos, r->metric);
    if (o.ig_steps)
        printf("integrated gradients, %d steps: baseline (hook = b_dec) %.6f, change %.6f, "
               "sum of attributions + error nodes %.6f\n", o.ig_steps, r->metric_base,
               r->metric - r->metric_base, r->total);
    else printf("gradient x activation at %s: sum of attributions + error nodes %.6f\n", res.hook, r->total);
    int nn = 0;
    node *nodes = mem_alloc(((size_t)T * D + T) * sizeof *nodes);
    if (!nodes) {
        ana_attr_run_free(&res);
        err_set(ERR_NOMEM, "out of memory");
        file_group_abort(&g);
        return cli_fail("attribute");
    }
    for (int t = 0; t < T; t++) {
        for (int j = 0; j < D; j++)
            if (r->attr[(size_t)t * D + j] != 0) nodes[nn++] = (node){r->attr[(size_t)t * D + j], t, j};
        if (r->err[t] != 0) nodes[nn++] = (node){r->err[t], t, -1};
    }
    qsort(nodes, (size_t)nn, sizeof *nodes, cmp_node);
    if (top > 0) printf("%5s  %-16s %8s %12s %12s\n", "pos", "token", "feature", "activation", "attribution");
    for (int k = 0; k < nn && k < top; k++) {
        const node *q = &nodes[k];
        if (q->j < 0) printf("%5d  %-16.16s %8s %12s %12.5f\n", q->t, res.tok_text[q->t], "error", "", q->a);
        else printf("%5d  %-16.16s %8d %12.4f %12.5f\n", q->t, res.tok_text[q->t], q->j,
                    r->f[(size_t)q->t * D + q->j], q->a);
    }
    mem_free(nodes);
    rc = 0;
    if (png) {
        char **labels = mem_calloc((size_t)res.n_rows, sizeof *labels);
        for (int k = 0; labels && k < res.n_rows; k++) {
            char s[32];
            if (res.row_feature[k] < 0) snprintf(s, sizeof s, "error");
            else snprintf(s, sizeof s, "f%d", res.row_feature[k]);
            labels[k] = mem_strdup(s);
        }
        char title[256];
        snprintf(title, sizeof title, "attribution to \"%s\"%s%s%s at position %d (%s)", res.target_text,
                 res.target_b >= 0 ? " - \"" : "", res.target_b >= 0 ? res.target_b_text : "",
                 res.target_b >= 0 ? "\"" : "", r->pos,
                 o.ig_steps ? "integrated gradients" : "gradient x activation");
        rep_kv meta[] = {{"Software", "saelite attribute"}, {"Title", title}};
        if (!labels || rep_plot_attribution(png, meta, 2, title, res.rows, res.n_rows, T,
                                            (const char *const *)labels,
                                            (const char *const *)res.tok_text)) {
            if (!labels) err_set(ERR_NOMEM, "out of memory");
            rc = 1;
        }
        for (int k = 0; labels && k < res.n_rows; k++) mem_free(labels[k]);
        mem_free(labels);
    }
    ana_attr_run_free(&res);
    if (!rc && file_group_commit(&g)) rc = 1;
    if (rc) {
        file_group_abort(&g);
        return cli_fail("attribute");
    }
    if (png_final) fprintf(stderr, "wrote %s\n", png_final);
    return rc;
}
