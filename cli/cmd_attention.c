/* cmd_attention.c - `saelite attention`: attention patterns of one layer as labelled heat maps. */
#include <stdio.h>

#include "cli/cli.h"
#include "reports/report_run.h"

CLI_COMMAND(attention, "Attention patterns of a layer, per head, as a labelled heat map PNG",
            "saelite attention --model DIR --text STR --layer L [--head H] [--tokenizer DIR] "
            "--out FILE.png [--npy FILE.npy]")

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
    rep_attention_opts o = {.model = model, .tokenizer = tokdir, .text = text, .layer = layer,
                            .head = head, .out = out, .npy = npy};
    rep_attention_result r;
    if (rep_attention_run(&o, &r)) return cli_fail("attention");
    printf("wrote %s: layer %d, %d head%s, %d tokens%s%s\n", out, r.layer, r.heads,
           r.heads == 1 ? "" : "s", r.tokens, npy ? "; " : "", npy ? npy : "");
    return 0;
}
