/* cmd_attribute.c - `saelite attribute`: flags for rep_attr_run (reports/report_run.h:
 * ana_attr_run and the heat map), the metric and the top nodes printed. */
#include <stdio.h>

#include "analysis/attribute.h"
#include "cli/cli.h"
#include "reports/report_run.h"

CLI_COMMAND(attribute, "Attribute a logit (or logit difference) to SAE features and error nodes",
            "saelite attribute --model DIR --sae DIR --text S [--target TOKEN | --target-diff A,B] "
            "[--pos N] [--ig-steps N] [--top K] [--csv FILE] [--npy FILE] [--png FILE]")

/* The metric, the method's sum and the top nodes, on stdout. */
static void print_attr(const rep_attr_opts *o, const rep_attr_result *ar, int top)
{
    const ana_attr_run_result *res = &ar->run;
    const ana_attr_result *r = &res->r;
    if (res->target_b >= 0)
        printf("metric: logit[\"%s\"] - logit[\"%s\"] at position %d = %.6f\n", res->target_text,
               res->target_b_text, r->pos, r->metric);
    else printf("metric: logit[\"%s\"] (token %d) at position %d = %.6f\n", res->target_text,
                res->target, r->pos, r->metric);
    if (o->run.ig_steps)
        printf("integrated gradients, %d steps: baseline (hook = b_dec) %.6f, change %.6f, "
               "sum of attributions + error nodes %.6f\n", o->run.ig_steps, r->metric_base,
               r->metric - r->metric_base, r->total);
    else printf("gradient x activation at %s: sum of attributions + error nodes %.6f\n", res->hook, r->total);
    if (!ar->nodes) return; /* their ranking failed (out of memory) */
    if (top > 0) printf("%5s  %-16s %8s %12s %12s\n", "pos", "token", "feature", "activation", "attribution");
    for (int k = 0; k < ar->n_nodes && k < top; k++) {
        const rep_attr_node *q = &ar->nodes[k];
        if (q->feature < 0)
            printf("%5d  %-16.16s %8s %12s %12.5f\n", q->pos, res->tok_text[q->pos], "error", "", q->attr);
        else printf("%5d  %-16.16s %8d %12.4f %12.5f\n", q->pos, res->tok_text[q->pos], q->feature,
                    r->f[(size_t)q->pos * r->d_sae + q->feature], q->attr);
    }
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
        {"--hook", ARG_STR, &o.hook, "hook of an SAE whose cfg.json names none", ARG_DEFAULT("the SAE's hook_name")},
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
    rep_attr_opts ao = {.run = o, .png = png};
    rep_attr_result res;
    rc = rep_attr_run(&ao, &res);
    /* printed also when the heat map or the file group fails after the analysis (as before) */
    if (res.analysed) print_attr(&ao, &res, top);
    rep_attr_run_free(&res);
    if (rc) return cli_fail("attribute");
    if (png) fprintf(stderr, "wrote %s\n", png);
    return 0;
}
