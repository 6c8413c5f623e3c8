/* cmd_pack.c - `saelite pack`: how many nearly orthogonal directions fit in D dimensions. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "common/npy.h"
#include "common/progress.h"
#include "toy/toy.h"

CLI_COMMAND(pack, "Pack N nearly orthogonal unit vectors in D dimensions, compare with random",
            "saelite pack --dim D --count N [--steps 300] [--range 89,91] [-o DIR]")

#define NBINS 1800 /* 0.1 degree bins over [0, 180] */

static int on_step(int step, int total, double best, void *user)
{
    progress_update(user, step, "max |cos| %.4f", best);
    return cli_interrupted();
}

/* The measuring passes over every pair: progress in rows and Ctrl-C (they ran minutes silent
   and deaf to SIGTERM, an audit). */
static int on_rows(int rows, int total, double mx, void *user)
{
    progress_update(user, rows, "max |cos| so far %.4f", mx);
    return cli_interrupted();
}

static int measure(const char *what, const float *V, int count, int dim, pack_stats *st,
                   int64_t *hist)
{
    progress p;
    progress_begin(&p, what, count, "row");
    int rc = pack_measure_cb(V, count, dim, st, hist, NBINS, on_rows, &p);
    progress_end(&p);
    return rc;
}

/* Fraction of pairs whose angle lies in [lo, hi] degrees (bin resolution 0.1 degree). */
static double frac_in(const int64_t *h, int64_t pairs, double lo, double hi)
{
    int b0 = (int)floor(lo * NBINS / 180.0 + 1e-9), b1 = (int)ceil(hi * NBINS / 180.0 - 1e-9);
    int64_t k = 0;
    for (int b = b0 < 0 ? 0 : b0; b < b1 && b < NBINS; b++) k += h[b];
    return (double)k / pairs;
}

static void row(const char *name, const pack_stats *s, const int64_t *h, double lo, double hi)
{
    printf("%-10s %10.4f %8.2f..%-8.2f %12.4f %10.4f %13.4f%%\n", name, s->max_abs_cos,
           s->min_angle_deg, s->max_angle_deg, s->mean_abs_cos, s->rms_cos,
           100 * frac_in(h, s->pairs, lo, hi));
}

int cmd_pack(int argc, char **argv)
{
    int dim = 0, count = 0;
    pack_config c;
    pack_config_default(&c, 0, 0);
    int64_t seed = 0;
    const char *range = "89,91", *out = NULL;
    arg_spec spec[] = {
        {"--dim", ARG_INT, &dim, "dimensions D", ARG_REQUIRED, ARG_MIN(1)},
        {"--count", ARG_INT, &count, "number of vectors N", ARG_REQUIRED, ARG_MIN(2)},
        {"--steps", ARG_INT, &c.steps, "optimizer steps", ARG_MIN(0)},
        {"--lr", ARG_FLOAT, &c.lr, "initial step in radians (decays to 0.1% of it)", ARG_ABOVE(0),
         ARG_MAX(3)},
        {"--sharpness", ARG_FLOAT, &c.sharpness, "soft-max sharpness", ARG_ABOVE(0)},
        {"--seed", ARG_I64, &seed, "random seed", ARG_MIN(0)},
        {"--range", ARG_STR, &range, "angle range LO,HI in degrees to report (0 <= LO < HI <= 180)"},
        {"-o", ARG_STR, &out, "output directory: histogram CSV, vectors .npy (and picture)"},
        {"--out", ARG_STR, &out, "same as -o"},
        {NULL},
    };
    int rc = args_parse("pack", argc, argv, spec, NULL, 0, NULL);
    if (rc) return rc;
    double lo, hi;
    char tail;
    if (sscanf(range, "%lf,%lf%c", &lo, &hi, &tail) != 2 || !(lo >= 0 && lo < hi && hi <= 180))
        return cli_usage_error("pack", "--range wants LO,HI with 0 <= LO < HI <= 180, got '%s'",
                               range);
    if ((int64_t)dim * count > (1L << 30))
        return cli_usage_error("pack", "--dim x --count must be at most 2^30");
    if ((double)count * count * dim > PACK_MAX_WORK)
        return cli_usage_error("pack", "--count^2 x --dim must be at most %.3g (each pass multiplies "
                               "every pair); got %.3g", PACK_MAX_WORK, (double)count * count * dim);
    c.dim = dim;
    c.count = count;
    c.seed = (uint64_t)seed;
    /* an output that cannot be written is refused before the work, not after some files were
       (an audit) */
    static const char *const outs[] = {"vectors.npy", "angles.csv", "angles.png"};
    if (out && (rc = cli_check_dir_outputs("pack", out, 3, outs))) return rc;
    cli_catch_signals();
    size_t nv = (size_t)dim * count;
    float *R = mem_alloc(sizeof(float) * nv), *V = mem_alloc(sizeof(float) * nv);
    int64_t *hr = mem_alloc(sizeof(int64_t) * NBINS), *ho = mem_alloc(sizeof(int64_t) * NBINS);
    pack_stats sr, so;
    if (!R || !V || !hr || !ho) {
        err_set(ERR_NOMEM, "out of memory for %d x %d vectors", count, dim);
        goto fail;
    }
    pack_random(R, count, dim, c.seed);
    if (measure("pack: random set", R, count, dim, &sr, hr)) goto fail;
    memcpy(V, R, sizeof(float) * nv);
    progress p;
    progress_begin(&p, "pack", c.steps, "step");
    double t0 = now_seconds();
    rc = pack_optimize(&c, V, 1, on_step, &p);
    progress_end(&p);
    double secs = now_seconds() - t0;
    if (rc || measure("pack: optimised set", V, count, dim, &so, ho)) goto fail;

    double welch = pack_welch_bound(count, dim), jl = pack_jl_eps(count, dim);
    printf("%d unit vectors in %d dimensions (%lld pairs)\n\n", count, dim, (long long)sr.pairs);
    printf("%-10s %10s %18s %12s %10s %14s\n", "vectors", "max |cos|", "angle range (deg)",
           "mean |cos|", "rms cos", "in range");
    row("random", &sr, hr, lo, hi);
    row("optimized", &so, ho, lo, hi);
    printf("\n(in range = pairs with angle in [%g, %g] degrees; %d steps in %.1f s)\n", lo, hi,
           c.steps, secs);
    printf("random vectors, typical |cos| ~ 1/sqrt(D) = %.4f\n", 1 / sqrt((double)dim));
    if (welch >= 1)
        printf("Welch bound: every set of %d unit vectors in %d dimension has |cos| = 1 for some "
               "pair (at 0 or 180 degrees)\n", count, dim);
    else if (welch > 0)
        printf("Welch bound: every set of %d unit vectors in %d dimensions has some |cos| >= "
               "%.4f,\n  i.e. some pair outside %.2f..%.2f degrees\n",
               count, dim, welch, acos(welch) * 180 / M_PI, 180 - acos(welch) * 180 / M_PI);
    else printf("Welch bound: %d <= %d, so exactly orthogonal vectors exist (max |cos| 0)\n",
                count, dim);
    if (jl < 1)
        printf("Johnson-Lindenstrauss (random vectors, union bound): all |cos| < sqrt(4 ln N / D)"
               " = %.4f (%.2f..%.2f degrees)\n",
               jl, acos(jl) * 180 / M_PI, 180 - acos(jl) * 180 / M_PI);
    else printf("Johnson-Lindenstrauss (random vectors, union bound): sqrt(4 ln N / D) = %.4f "
                ">= 1, no guarantee at this size\n", jl);
    /* |cos| <= eps puts angles in [acos eps, 180 - acos eps]: inside lo..hi needs eps at most
       both cos lo and -cos hi (the larger of the two printed 703 dimensions for 80..95 where the
       bound gives 2786, an audit); a range without 90 degrees has no such eps */
    double eps = fmin(cos(lo * M_PI / 180), -cos(hi * M_PI / 180));
    if (count > dim && eps > 0)
        printf("  the same bound needs D >= 4 ln N / eps^2 = %.0f dimensions for all %d vectors "
               "within %g..%g degrees (|cos| <= %.4f)\n",
               ceil(pack_jl_dim(count, eps)), count, lo, hi, eps);
    else if (count > dim)
        printf("  %g..%g degrees does not contain 90: no bound on |cos| puts every pair in it\n",
               lo, hi);
    if (out && file_mkdir_p(out)) goto fail; /* after the work: an interrupted run leaves none */
    if (out) {
        char path[4096];
        int64_t sh[2] = {count, dim};
        if (path_join(path, sizeof path, out, "vectors.npy") || npy_write(path, V, 2, sh))
            goto fail;
        file_atomic a;
        if (path_join(path, sizeof path, out, "angles.csv") || file_atomic_open(&a, path))
            goto fail;
        fprintf(a.f, "angle_lo_deg,angle_hi_deg,random_pairs,optimized_pairs\n");
        for (int b = 0; b < NBINS; b++)
            if (hr[b] || ho[b])
                fprintf(a.f, "%.1f,%.1f,%lld,%lld\n", b * 0.1, (b + 1) * 0.1, (long long)hr[b],
                        (long long)ho[b]);
        if (file_atomic_commit(&a)) goto fail;
        if (path_join(path, sizeof path, out, "angles.png") ||
            pack_render(path, count, dim, hr, ho, NBINS, lo, hi))
            goto fail;
        printf("wrote %s/vectors.npy, %s/angles.csv, %s/angles.png\n", out, out, out);
    }
    rc = 0;
    goto done;
fail:
    rc = cli_fail("pack");
done:
    mem_free(R);
    mem_free(V);
    mem_free(hr);
    mem_free(ho);
    return rc;
}
