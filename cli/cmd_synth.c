/* cmd_synth.c - `saelite synth`: synthetic superposition data with known features. */
#include <inttypes.h>
#include <stdio.h>

#include "cli/cli.h"
#include "common/err.h"
#include "sae/synth.h"

CLI_COMMAND(synth, "Generate synthetic superposition activations with known true features",
            "saelite synth --out ACTS.npy --truth TRUE.npy [--db FILE [--hook synth]] [--d 256] [--features 512] "
            "[--active 5] [--tokens N] [--seed 1] [--parents P --children C [--child-p 0.4]] [--spec GEN.json]")

int cmd_synth(int argc, char **argv)
{
    const char *cmd = "synth", *out = NULL, *truth = NULL, *db = NULL, *hook = "synth", *spec_out = NULL;
    int seq_len = 128;
    synth_config c;
    synth_defaults(&c);
    int64_t tokens = 100000, seed = 1;
    double decay = c.decay, corr = c.corr, child_p = c.child_p;
    arg_spec spec[] = {
        {"--out", ARG_STR, &out, "activations [tokens, d] float32 .npy", ARG_REQUIRED},
        {"--truth", ARG_STR, &truth, "true feature directions [features, d] .npy", ARG_REQUIRED},
        {"--db", ARG_STR, &db, "also store the activations in this store (model 'import')"},
        {"--hook", ARG_STR, &hook, "hook name in the store"},
        {"--seq-len", ARG_INT, &seq_len, "tokens per stored sequence", ARG_MIN(1), ARG_MAX(1 << 24)},
        {"--d", ARG_INT, &c.d, "dimension", ARG_MIN(1)},
        {"--features", ARG_INT, &c.n_features, "number of true features", ARG_MIN(1)},
        {"--active", ARG_FLOAT, &c.active, "mean active features per sample (at most --features; with --parents the children fire only with their parent, so fewer: the mean is printed)",
         ARG_ABOVE(0)},
        {"--tokens", ARG_I64, &tokens, "samples", ARG_RANGE(1, (double)((int64_t)1 << 31))},
        {"--decay", ARG_FLOAT, &decay, "feature probability decay", ARG_ABOVE(0), ARG_MAX(1)},
        {"--rank", ARG_INT, &c.rank, "rank of the firing-correlation factor (0: independent)",
         ARG_MIN(0)},
        {"--corr", ARG_FLOAT, &corr, "max squared loading on the shared factor", ARG_MIN(0),
         ARG_BELOW(1)},
        {"--seed", ARG_I64, &seed, "seed", ARG_MIN(0)},
        {"--parents", ARG_INT, &c.parents,
         "hierarchy: parent features, each followed by --children features that fire only with it",
         ARG_MIN(0)},
        {"--children", ARG_INT, &c.children, "hierarchy: children per parent", ARG_MIN(0)},
        {"--child-p", ARG_FLOAT, &child_p, "hierarchy: a child's firing probability given its parent",
         ARG_MIN(0), ARG_MAX(1)},
        {"--spec", ARG_STR, &spec_out,
         "also write the generator's configuration here (JSON; `sae-eval --synth` rebuilds it)"},
        {NULL, 0, NULL, NULL},
    };
    int np = 0;
    int prc = args_parse(cmd, argc, argv, spec, NULL, 0, &np);
    if (prc) return prc < 0 ? 0 : prc;
    c.decay = decay;
    c.corr = corr;
    c.child_p = child_p;
    c.seed = (uint64_t)seed;
    if ((c.parents > 0) != (c.children > 0))
        return cli_usage_error(cmd, "a hierarchy needs both --parents and --children");
    if (spec_out && (seed < 0 || (uint64_t)seed > SAE_SYNTH_SPEC_MAX_SEED)) /* before any file */
        return cli_usage_error(cmd, "--spec keeps seeds 0..2^53 (JSON numbers); this one is %lld",
                               (long long)seed);
    if ((int64_t)c.d * tokens > ((int64_t)1 << 32))
        return cli_usage_error(cmd, "--tokens x --d over 4G floats; generate less");
    /* every output checked before the first is written: two of them on one file (the store
       overwritten by the array, the array by the truth) and unwritable paths fail here */
    const char *outs[4] = {out, truth, spec_out, db};
    static const char *const flag[4] = {"--out", "--truth", "--spec", "--db"};
    int orc = cli_check_outputs(cmd, 4, outs, flag);
    if (orc) return orc;
    if (db && !hook[0]) return cli_usage_error(cmd, "--hook needs a name");
    cli_catch_signals(); /* before the generator's setup, which can take seconds */
    sae_synth_run_opts o = {.c = c, .tokens = tokens, .out = out, .truth = truth,
                            .spec_out = spec_out, .db = db, .hook = hook, .seq_len = seq_len,
                            .stop = &cli_stop_flag};
    sae_synth_run_result r;
    if (sae_synth_run(&o, &r)) return cli_fail(cmd);
    if (db) printf("synth: stored %" PRId64 " tokens in %" PRId64 " sequences as hook %s in %s\n",
                   r.rows, r.seqs, hook, db);
    if (db && r.held > r.rows)
        printf("synth: hook %s now holds %" PRId64 " tokens: rows imported from other files stay "
               "(a new --hook or --db keeps this generator's alone)\n", hook, r.held);
    printf("synth: %" PRId64 " samples of d %d from %d features (mean %.2f active) -> %s, truth -> %s\n",
           tokens, c.d, c.n_features, r.mean_active, out, truth);
    if (c.parents)
        printf("synth: hierarchy: features 0..%d are %d parents, each followed by %d children "
               "(child_p %g)\n", c.parents * (1 + c.children) - 1, c.parents, c.children, c.child_p);
    if (spec_out) printf("synth: generator spec -> %s\n", spec_out);
    return 0;
}
