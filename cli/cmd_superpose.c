/* cmd_superpose.c - `saelite superpose`: Toy Models of Superposition, swept over sparsity. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "common/npy.h"
#include "common/progress.h"
#include "toy/toy.h"

CLI_COMMAND(superpose, "Toy models of superposition: n sparse features in m dimensions",
            "saelite superpose [--n 20 --m 5] [--sparsity 0,0.7,0.9,...] [--importance R] "
            "[--steps N] [-o DIR]")

#define MAX_SPARSITIES 64

/* "0,0.7,0.9" -> values in [0,1): plain decimals (no hex, no blanks), no empty item */
static int parse_list(const char *s, double *v, int max, int *n)
{
    int k = 0;
    const char *p = s;
    while (*p) {
        double x = 0;
        size_t len = *p == '+' || *p == '-' ? 0 : buf_read_double(p, 0, &x);
        if (!len || !(x >= 0 && x < 1) || k == max) return -1;
        v[k++] = x;
        p += len;
        if (*p == ',' && p[1]) p++;
        else if (*p) return -1;
    }
    *n = k;
    return k ? 0 : -1;
}

/* One progress line over every sparsity (a reporter per sparsity printed nothing when each
   model took less than the first line's delay: 7 models of 2.5 s, 17 s in silence) */
typedef struct {
    progress p;
    double S, base; /* steps of the sparsities before this one */
} prog_state;

static int on_step(int step, int total, double loss, void *user)
{
    prog_state *ps = user;
    /* every step (progress_update draws only every few seconds): every 50th step left a wide
       model silent for its first 17 minutes (an audit) */
    progress_update(&ps->p, ps->base + step, "S=%.4g loss %.5f", ps->S, loss);
    return cli_interrupted();
}

int cmd_superpose(int argc, char **argv)
{
    int n = 20, m = 5, steps = 10000, batch = 1024, instances = 1;
    int64_t seed = 0;
    double imp = 0.7, lr = 1e-3;
    const char *sp = "0,0.7,0.9,0.97,0.99,0.997,0.999", *out = NULL;
    arg_spec spec[] = {
        {"--n", ARG_INT, &n, "number of features", ARG_RANGE(1, 10000)},
        {"--m", ARG_INT, &m, "hidden dimensions", ARG_RANGE(1, 10000)},
        {"--sparsity", ARG_STR, &sp, "comma-separated S values in [0,1)"},
        {"--importance", ARG_FLOAT, &imp, "importance decay r: I_i = r^i", ARG_ABOVE(0), ARG_MAX(1)},
        {"--steps", ARG_INT, &steps, "Adam steps per model", ARG_MIN(0)},
        {"--batch", ARG_INT, &batch, "batch size", ARG_MIN(1)},
        {"--lr", ARG_FLOAT, &lr, "Adam learning rate", ARG_ABOVE(0)},
        {"--instances", ARG_INT, &instances, "runs per sparsity, lowest loss kept", ARG_MIN(1)},
        {"--seed", ARG_I64, &seed, "random seed", ARG_MIN(0)},
        {"-o", ARG_STR, &out, "output directory for .npy/.csv (and pictures)"},
        {"--out", ARG_STR, &out, "same as -o"},
        {NULL},
    };
    int rc = args_parse("superpose", argc, argv, spec, NULL, 0, NULL);
    if (rc) return rc;
    double S[MAX_SPARSITIES];
    int ns;
    if (parse_list(sp, S, MAX_SPARSITIES, &ns))
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

    sup_model **models = mem_calloc((size_t)ns, sizeof *models);
    sup_feature *feat = mem_alloc(sizeof *feat * (size_t)n * ns);
    float *G = mem_alloc(sizeof(float) * (size_t)n * n);
    if (!models || !feat || !G) {
        err_set(ERR_NOMEM, "out of memory");
        rc = cli_fail("superpose");
        goto done;
    }
    printf("toy model: %d features (importance %g^i) in %d dimensions, %d steps x batch %d, "
           "lr %g, %d instance%s, seed %lld\n\n",
           n, imp, m, steps, batch, lr, instances, instances == 1 ? "" : "s", (long long)seed);
    printf("%-9s %9s %11s %14s %12s %s\n", "sparsity", "1/(1-S)", "loss", "dims/feature",
           "represented", "dimensionality of represented features");
    double t0 = now_seconds();
    prog_state ps = {0};
    progress_begin(&ps.p, "superpose", (double)steps * instances * ns, "step");
    for (int k = 0; k < ns; k++) {
        sup_config c;
        sup_config_default(&c, n, m);
        c.sparsity = S[k];
        c.importance_decay = imp;
        c.steps = steps;
        c.batch = batch;
        c.lr = lr;
        c.instances = instances;
        c.seed = (uint64_t)seed;
        ps.S = S[k];
        ps.base = (double)k * steps * instances;
        int e = sup_train(&c, &models[k], on_step, &ps);
        progress_end(&ps.p); /* clears a terminal's line for the row below; the count goes on */
        if (e) {
            rc = cli_fail("superpose");
            goto done;
        }
        sup_model *s = models[k];
        sup_feature *f = feat + (size_t)k * n;
        sup_features(s, f);
        printf("%-9s %9.4g %11.6f %14.3f %9d/%-3d", Sname[k], 1 / (1 - S[k]), s->final_loss,
               sup_dims_per_feature(s), sup_represented(s), n);
        /* every represented feature's D_i up to 32 (features.csv has all of them) */
        int shown = 0, rep_n = sup_represented(s);
        for (int i = 0; i < n; i++)
            if (f[i].norm > 0.5 && shown++ < 32) printf("%s%.2f", shown > 1 ? " " : "  ", f[i].dimensionality);
        if (rep_n > 32) printf(" (+%d more in features.csv)", rep_n - 32);
        printf("\n");
        fflush(stdout);
    }
    if (out && file_mkdir_p(out)) goto fail;
    if (out) {
        char path[4096];
        for (int k = 0; k < ns; k++) {
            sup_model *s = models[k];
            int64_t shw[2] = {n, m}, shb[1] = {n}, shg[2] = {n, n};
            sup_gram(s, G);
            if (path_fmt(path, sizeof path, "%s/W_S%s.npy", out, Sname[k]) ||
                npy_write(path, s->W, 2, shw))
                goto fail;
            if (path_fmt(path, sizeof path, "%s/b_S%s.npy", out, Sname[k]) ||
                npy_write(path, s->b, 1, shb))
                goto fail;
            if (path_fmt(path, sizeof path, "%s/gram_S%s.npy", out, Sname[k]) ||
                npy_write(path, G, 2, shg))
                goto fail;
        }
        file_atomic a;
        if (path_join(path, sizeof path, out, "features.csv") || file_atomic_open(&a, path))
            goto fail;
        fprintf(a.f, "sparsity,feature,importance,norm,superposition,dimensionality,bias\n");
        for (int k = 0; k < ns; k++)
            for (int i = 0; i < n; i++) {
                const sup_feature *x = &feat[(size_t)k * n + i];
                fprintf(a.f, "%s,%d,%.6g,%.6f,%.6f,%.6f,%.6f\n", Sname[k], i, pow(imp, i), x->norm,
                        x->superposition, x->dimensionality, models[k]->b[i]);
            }
        if (file_atomic_commit(&a)) goto fail;
        if (path_join(path, sizeof path, out, "summary.csv") || file_atomic_open(&a, path))
            goto fail;
        fprintf(a.f, "sparsity,loss,dims_per_feature,represented\n");
        for (int k = 0; k < ns; k++)
            fprintf(a.f, "%s,%.8f,%.6f,%d\n", Sname[k], models[k]->final_loss,
                    sup_dims_per_feature(models[k]), sup_represented(models[k]));
        if (file_atomic_commit(&a)) goto fail;
        if (path_join(path, sizeof path, out, "superpose.png") ||
            sup_render(path, models, S, ns, imp))
            goto fail;
        if (path_join(path, sizeof path, out, "dimensionality.png") ||
            sup_render_dimensionality(path, models, S, ns))
            goto fail;
    }
    printf("\ntrained %d model%s in %.1f s%s%s\n", ns, ns == 1 ? "" : "s", now_seconds() - t0,
           out ? "; wrote " : "", out ? out : "");
    goto done;
fail:
    rc = cli_fail("superpose");
done:
    for (int k = 0; models && k < ns; k++) sup_model_free(models[k]);
    mem_free(models);
    mem_free(feat);
    mem_free(G);
    return rc;
}
