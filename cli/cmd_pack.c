/* cmd_pack.c - `saelite pack`: how many nearly orthogonal directions fit in D dimensions. */
#include <math.h>
#include <stdio.h>

#include "cli/cli.h"
#include "toy/toy.h"

CLI_COMMAND(pack, "Pack N nearly orthogonal unit vectors in D dimensions, compare with random",
            "saelite pack --dim D --count N [--steps 300] [--range 89,91] [-o DIR]")

#define NBINS PACK_NBINS /* 0.1 degree bins over [0, 180] */

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
        {"--range", ARG_STR, &range, "angle range LO,HI in degrees to report (0 <= LO < HI <= 180, multiples of 0.1)"},
        {"-o", ARG_STR, &out, "output directory: histogram CSV, vectors .npy (and picture)"},
        {"--out", ARG_STR, &out, "same as -o"},
        {NULL},
    };
    int rc = args_parse("pack", argc, argv, spec, NULL, 0, NULL);
    if (rc) return rc;
    double lohi[2];
    int nr = 0;
    if (args_float_list(range, lohi, 2, &nr) || nr != 2 ||
        !(lohi[0] >= 0 && lohi[0] < lohi[1] && lohi[1] <= 180))
        return cli_usage_error("pack", "--range wants LO,HI with 0 <= LO < HI <= 180, got '%s'",
                               range);
    double lo = lohi[0], hi = lohi[1];
    /* "in range" counts whole 0.1-degree bins: --range 89.05,89.15 printed the pairs of
       [89.0, 89.2), twice numpy's count over [89.05, 89.15], under a label saying the latter (an
       audit) */
    if (fabs(lo * 10 - round(lo * 10)) > 1e-6 || fabs(hi * 10 - round(hi * 10)) > 1e-6)
        return cli_usage_error("pack", "--range wants multiples of 0.1 degree (the histogram's "
                               "bins), got '%s'", range);
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
    pack_run_opts po = {.c = c, .range_lo = lo, .range_hi = hi, .out_dir = out, .stop = &cli_stop_flag};
    pack_run_result r;
    if (pack_run(&po, &r)) return cli_fail("pack");
    const pack_stats *sr = &r.random, *so = &r.opt;
    const int64_t *hr = r.hist_random, *ho = r.hist_opt;
    double secs = r.seconds;

    double welch = pack_welch_bound(count, dim), jl = pack_jl_eps(count, dim);
    printf("%d unit vectors in %d dimensions (%lld pairs)\n\n", count, dim, (long long)sr->pairs);
    printf("%-10s %10s %18s %12s %10s %14s\n", "vectors", "max |cos|", "angle range (deg)",
           "mean |cos|", "rms cos", "in range");
    row("random", sr, hr, lo, hi);
    row("optimized", so, ho, lo, hi);
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
    if (out) printf("wrote %s/vectors.npy, %s/angles.csv, %s/angles.png\n", out, out, out);
    pack_run_result_free(&r);
    return 0;
}
