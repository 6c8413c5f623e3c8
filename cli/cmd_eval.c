/* cmd_eval.c - `saelite eval`: flags for eval_run (analysis/eval.h) and its summary table. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "analysis/eval.h"
#include "cli/cli.h"
#include "common/err.h"

CLI_COMMAND(eval, "SAEBench-style evaluations on Brown: sparse probing, absorption, SCR, TPP",
            "saelite eval --db FILE --sae DIR|ID [--suite all|LIST] [--seed N] "
            "[--test-frac F] [--seqs-per-genre N] [--train-per-class N] [--test-per-class N] [--C C] [--no-random]")

/* One cell of the N-ablated table: NULL where the number was left out (stored NULL). */
static void cell(double v)
{
    if (isnan(v)) printf(" %7s", "NULL");
    else printf(" %7.4f", v);
}

/* The standard errors under a row of values ("NULL" where not known). */
static void se_row(const double *se, int n)
{
    printf("\n    \u00b1 se      "); /* as wide as "%-12s" (the sign is two bytes) */
    for (int i = 0; i < n; i++) cell(se[i]);
}

/* " ± se" after a value (nothing where the se is not known). */
static const char *pm(double se, char *b, size_t n)
{
    if (isnan(se)) b[0] = 0;
    else snprintf(b, n, " \u00b1 %.4f", se);
    return b;
}

static void notice(const char *msg, void *user)
{
    (void)user;
    fprintf(stderr, "saelite eval: %s\n", msg);
}

static void print_result(const eval_result *r)
{
    printf("eval: SAE id %lld%s at %s: %zu sequences (%d train / %d test documents) in %.1f s "
           "(read %.1f s, probes %.1f s, absorption %.1f s, scr/tpp %.1f s)\n",
           (long long)r->sae_id, r->registered ? " (registered now)" : "", r->hook, r->n_seqs,
           r->n_train_docs, r->n_test_docs, r->seconds, r->t_read, r->t_probe, r->t_absorb,
           r->t_ablate);
    if (r->resumed_seqs)
        printf("  (continued from a checkpoint that held %d of the sequences read)\n", r->resumed_seqs);
    if (r->resumed_probes)
        printf("  (continued the suites with %d probes an earlier run had fitted)\n", r->resumed_probes);
    if (r->skipped)
        printf("skipped (the database has no or too little data for them): %s%s%s%s\n",
               r->skipped & EVAL_SUITE_SPARSE_PROBING ? "sparse_probing " : "",
               r->skipped & EVAL_SUITE_ABSORPTION ? "absorption (no POS tags) " : "",
               r->skipped & EVAL_SUITE_SCR ? "scr (needs POS tags for the tense and Brown genres of both prose "
                                              "kinds, with enough sequences in each kind x tense cell) " : "",
               r->skipped & EVAL_SUITE_TPP ? "tpp" : "");
    if (r->suites & EVAL_SUITE_SPARSE_PROBING) {
        printf("sparse probing: %d tasks (%d POS, %d genre), mean test accuracy (\u00b1 its "
               "standard error over test documents)\n", r->n_tasks, r->n_pos_tasks, r->n_genre_tasks);
        printf("  %-12s", "k");
        for (int i = 0; i < EVAL_NK; i++) printf(" %7d", eval_k_values[i]);
        printf("\n  %-12s", "sae");
        for (int i = 0; i < EVAL_NK; i++) printf(" %7.4f", r->sae_acc[i]);
        se_row(r->sae_acc_se, EVAL_NK);
        if (!isnan(r->rnd_acc[0])) {
            printf("\n  %-12s", "random sae");
            for (int i = 0; i < EVAL_NK; i++) printf(" %7.4f", r->rnd_acc[i]);
            se_row(r->rnd_acc_se, EVAL_NK);
        }
        printf("\n  %-12s", "neurons");
        for (int i = 0; i < EVAL_NK; i++) printf(" %7.4f", r->neuron_acc[i]);
        se_row(r->neuron_acc_se, EVAL_NK);
        char b1[32], b2[32];
        printf("\n  %-12s %7.4f%s (every hook unit); every SAE latent %.4f%s\n", "full probe",
               r->full_acc, pm(r->full_acc_se, b1, sizeof b1), r->sae_full_acc,
               pm(r->sae_full_acc_se, b2, sizeof b2));
    }
    if (r->suites & EVAL_SUITE_ABSORPTION) {
        char b1[32], b2[32], b3[32];
        printf("absorption: %d POS parents (%d with GT-probe F1 > 0.6): mean absorption fraction "
               "%.4f%s (%.4f%s without the 40%% gate), full-absorption rate %.4f%s, split features %.2f\n",
               r->abs_parents, r->abs_included, r->abs_mean_frac, pm(r->abs_mean_frac_se, b1, sizeof b1),
               r->abs_mean_frac_nogate, pm(r->abs_mean_frac_nogate_se, b2, sizeof b2),
               r->abs_full_rate, pm(r->abs_full_rate_se, b3, sizeof b3), r->abs_mean_split);
    }
    if (r->suites & (EVAL_SUITE_SCR | EVAL_SUITE_TPP)) {
        printf("  %-12s", "N ablated");
        for (int i = 0; i < EVAL_NN; i++) printf(" %7d", eval_n_values[i]);
    }
    if (r->suites & EVAL_SUITE_SCR) {
        printf("\n  %-12s", "scr");
        for (int i = 0; i < EVAL_NN; i++) cell(r->scr[i]);
        printf("   (direction %d; prose kind x tense, phi %.3f over %d/%d/%d/%d sequences)", r->scr_dir,
               r->scr_phi, r->scr_cells[0], r->scr_cells[1], r->scr_cells[2], r->scr_cells[3]);
    }
    if (r->suites & EVAL_SUITE_TPP) {
        printf("\n  %-12s", "tpp");
        for (int i = 0; i < EVAL_NN; i++) cell(r->tpp[i]);
        printf("   (mean of the per-dataset means; %d classes)", r->tpp_classes);
    }
    if (r->suites & (EVAL_SUITE_SCR | EVAL_SUITE_TPP)) printf("\n");
    for (const char *p = r->notes; *p;) { /* what the numbers leave out */
        size_t n = strcspn(p, "\n");
        printf("note: %.*s\n", (int)n, p);
        p += n + (p[n] == '\n');
    }
}

int cmd_eval(int argc, char **argv)
{
    eval_opts o;
    eval_defaults(&o);
    int64_t seed = (int64_t)o.seed;
    arg_spec spec[] = {
        {"--db", ARG_STR, &o.db, "database with stored activations (written: eval tables, the "
         "SAE registry)", ARG_REQUIRED},
        {"--sae", ARG_STR, &o.sae, "SAE directory (SAELens layout) or sae_registry id", ARG_REQUIRED},
        {"--suite", ARG_STR, &o.suites, "comma-separated suites: sparse_probing, absorption, scr, tpp, all"},
        {"--seed", ARG_I64, &seed, "document split, sampling, the random SAE and the standard errors' resamples", ARG_MIN(0)},
        {"--test-frac", ARG_FLOAT, &o.test_frac, "fraction of each genre's documents held out",
         ARG_ABOVE(0), ARG_BELOW(1)},
        {"--seqs-per-genre", ARG_INT, &o.seqs_per_genre, "sequences sampled per genre", ARG_MIN(1)},
        {"--train-per-class", ARG_INT, &o.train_per_class,
         "train rows per class (POS tokens; genre sequences at most); a task needs 20 positives",
         ARG_MIN(EVAL_MIN_TRAIN_POS)},
        {"--test-per-class", ARG_INT, &o.test_per_class, "test rows per class; a task needs 5 positives",
         ARG_MIN(EVAL_MIN_TEST_POS)},
        {"--C", ARG_FLOAT, &o.C, "inverse L2 strength of the logistic-regression probes, in "
         "[1e-6, 1e6]", ARG_ABOVE(0)},
        {"--no-random", ARG_FLAG, &o.no_random, "skip the random-weight SAE baseline (about 40% of the time)"},
        {"--checkpoint-secs", ARG_FLOAT, &o.ckpt_secs, "save the rows read this often beside the "
         "database; the same command run again after a kill continues from them (0: never)",
         ARG_MIN(0)},
        {NULL, 0, NULL, NULL},
    };
    const char *pos[1];
    int npos = 0;
    int rc = args_parse("eval", argc, argv, spec, pos, 0, &npos);
    if (rc) return rc < 0 ? 0 : rc;
    o.seed = (uint64_t)seed;
    /* checked here, not by ARG_RANGE, whose message would print 1e-6 as 9.9999999999999995e-07 */
    if (!(o.C >= EVAL_C_MIN && o.C <= EVAL_C_MAX))
        return cli_usage_error("eval", "--C must be in [%g, %g], got %g", EVAL_C_MIN, EVAL_C_MAX, o.C);
    if (!o.sae[0]) return cli_usage_error("eval", "--sae is empty: give an SAE directory or a registry id");
    int suite_bits, suite_all; /* a bad --suite is a usage error (exit 2), as other bad values */
    if (eval_parse_suites(o.suites, &suite_bits, &suite_all))
        return cli_usage_error("eval", "--suite: %s", err_msg());
    cli_catch_signals();
    o.stop = &cli_stop_flag;
    o.notice = notice;
    eval_result res;
    if (eval_run(&o, &res)) return cli_fail("eval");
    print_result(&res);
    return 0;
}
