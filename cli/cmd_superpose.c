/* cmd_superpose.c - `saelite superpose`: Toy Models of Superposition, swept over sparsity. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/buf.h"
#include "common/err.h"
#include "toy/toy.h"

CLI_COMMAND(superpose, "Toy models of superposition: n sparse features in m dimensions",
            "saelite superpose [--n 20 --m 5] [--sparsity 0,0.7,0.9,...] [--importance R] "
            "[--steps N] [-o DIR]")

#define MAX_SPARSITIES 64

static void notice(const char *msg, void *user)
{
    (void)user;
    fprintf(stderr, "saelite superpose: %s\n", msg);
}

/* The table's row for model k, as it is done. */
static void row(void *user, int k, const sup_model *s, const sup_feature *f, int resumed)
{
    const sup_run_opts *o = user;
    int n = o->c.n_features;
    printf("%-9s %9.4g %11.6f %14.3f %9d/%-3d", o->names[k], 1 / (1 - o->sparsity[k]), s->final_loss,
           sup_dims_per_feature(s), sup_represented(s), n);
    /* every represented feature's D_i up to 32 (features.csv has all of them) */
    int shown = 0, rep_n = sup_represented(s);
    for (int i = 0; i < n; i++)
        if (f[i].norm > 0.5 && shown++ < 32) printf("%s%.2f", shown > 1 ? " " : "  ", f[i].dimensionality);
    if (rep_n > 32) printf(" (+%d more in features.csv)", rep_n - 32);
    printf("%s\n", resumed ? "  (from the checkpoint)" : "");
    fflush(stdout);
}

int cmd_superpose(int argc, char **argv)
{
    sup_run_opts o;
    sup_run_defaults(&o);
    sup_config *c = &o.c;
    int no_ckpt = 0;
    int64_t seed = 0;
    const char *sp = "0,0.7,0.9,0.97,0.99,0.997,0.999", *out = NULL;
    arg_spec spec[] = {
        {"--n", ARG_INT, &c->n_features, "number of features", ARG_RANGE(1, 10000)},
        {"--m", ARG_INT, &c->n_hidden, "hidden dimensions", ARG_RANGE(1, 10000)},
        {"--sparsity", ARG_STR, &sp, "comma-separated S values in [0,1)"},
        {"--importance", ARG_FLOAT, &c->importance_decay, "importance decay r: I_i = r^i", ARG_ABOVE(0),
         ARG_MAX(1)},
        {"--steps", ARG_INT, &c->steps, "Adam steps per model", ARG_MIN(0)},
        {"--batch", ARG_INT, &c->batch, "batch size", ARG_MIN(1)},
        {"--lr", ARG_FLOAT, &c->lr, "Adam learning rate", ARG_ABOVE(0)},
        {"--instances", ARG_INT, &c->instances, "runs per sparsity, lowest loss kept", ARG_MIN(1)},
        {"--seed", ARG_I64, &seed, "random seed", ARG_MIN(0)},
        {"-o", ARG_STR, &out, "output directory for .npy/.csv (and pictures)"},
        {"--out", ARG_STR, &out, "same as -o"},
        {"--no-checkpoint", ARG_FLAG, &no_ckpt,
         "do not keep finished models in OUT.superpose-ckpt (a killed run then starts over)"},
        {NULL},
    };
    int rc = args_parse("superpose", argc, argv, spec, NULL, 0, NULL);
    if (rc) return rc;
    double S[MAX_SPARSITIES];
    int ns;
    int bad = args_float_list(sp, S, MAX_SPARSITIES, &ns) != OK;
    for (int k = 0; !bad && k < ns; k++) bad = !(S[k] >= 0 && S[k] < 1) || signbit(S[k]);
    if (bad)
        return cli_usage_error("superpose", "--sparsity wants up to %d comma-separated values in "
                                            "[0,1), got '%s'", MAX_SPARSITIES, sp);
    char Sname[MAX_SPARSITIES][32];
    for (int k = 0; k < ns; k++) {
        /* the fewest digits that read back: %.4g wrote 0.99991 and 0.99992 to one
           W_S0.9999.npy, the second over the first (an audit) */
        buf_double(Sname[k], sizeof Sname[k], S[k]);
        for (int j = 0; j < k; j++)
            if (S[j] == S[k])
                return cli_usage_error("superpose", "--sparsity: %s is given twice", Sname[k]);
    }
    /* outputs that cannot be written are refused before training, not after some files were
       (an audit); the directory is made after training, so Ctrl-C leaves none */
    if (out) {
        char names[MAX_SPARSITIES * 3 + 4][64];
        const char *np[MAX_SPARSITIES * 3 + 4];
        static const char *const fixed[] = {"features.csv", "summary.csv", "superpose.png",
                                            "dimensionality.png"};
        int nn = 0;
        for (int k = 0; k < ns; k++) {
            snprintf(names[nn++], sizeof names[0], "W_S%.31s.npy", Sname[k]);
            snprintf(names[nn++], sizeof names[0], "b_S%.31s.npy", Sname[k]);
            snprintf(names[nn++], sizeof names[0], "gram_S%.31s.npy", Sname[k]);
        }
        for (int i = 0; i < 4; i++) snprintf(names[nn++], sizeof names[0], "%s", fixed[i]);
        for (int i = 0; i < nn; i++) np[i] = names[i];
        if ((rc = cli_check_dir_outputs("superpose", out, nn, np))) return rc;
    }
    cli_catch_signals();
    const char *np_names[MAX_SPARSITIES];
    for (int k = 0; k < ns; k++) np_names[k] = Sname[k];
    c->seed = (uint64_t)seed;
    o.sparsity = S;
    o.names = np_names;
    o.ns = ns;
    o.out_dir = out;
    o.ckpt = !no_ckpt;
    o.stop = &cli_stop_flag;
    o.row = row;
    o.notice = notice;
    o.user = &o;
    printf("toy model: %d features (importance %g^i) in %d dimensions, %d steps x batch %d, "
           "lr %g, %d instance%s, seed %lld\n\n",
           c->n_features, c->importance_decay, c->n_hidden, c->steps, c->batch, c->lr, c->instances,
           c->instances == 1 ? "" : "s", (long long)seed);
    printf("%-9s %9s %11s %14s %12s %s\n", "sparsity", "1/(1-S)", "loss", "dims/feature",
           "represented", "dimensionality of represented features");
    sup_run_result res;
    if (sup_run(&o, &res)) return cli_fail("superpose");
    printf("\ntrained %d model%s in %.1f s%s%s", ns - res.resumed, ns - res.resumed == 1 ? "" : "s",
           res.seconds, out ? "; wrote " : "", out ? out : "");
    if (res.resumed) printf(" (%d more from a killed run's checkpoint)", res.resumed);
    printf("\n");
    sup_run_result_free(&res);
    return 0;
}
