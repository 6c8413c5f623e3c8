/* harness.h - the tiny shared test harness (header-only; one test binary per module).
 *
 * CHECK(cond, fmt, ...)           counts a pass or prints the failure with file:line.
 * CHECK_NEAR(got, want, tol)      |got - want| <= tol.
 * CHECK_TENSOR(got, want, n, atol, rtol, label)
 *                                 elementwise |g - w| <= atol + rtol*|w|; prints first 5 values
 *                                 and the max difference on failure.
 * SKIP(why)                       counts a skipped check.
 * return harness_report("name");  prints "name: N passed, N failed[, N skipped]" and returns
 *                                 non-zero when anything failed.
 * harness_tmpdir(buf, cap, name)  makes a new empty /tmp/saelite_<name>_XXXXXX (mkdtemp) in buf:
 *                                 1, or 0 and a failed check.
 * harness_rmtree(dir)             removes dir and everything below it (links not followed): 0 or -1.
 * Tests are built with -O2 -g and never with fast-math.
 */
#ifndef SAELITE_HARNESS_H
#define SAELITE_HARNESS_H
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int harness_pass, harness_fail, harness_skip;

#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        if (cond) harness_pass++;                                                             \
        else {                                                                                \
            harness_fail++;                                                                   \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                  \
            fprintf(stderr, " " __VA_ARGS__);                                                 \
            fprintf(stderr, "\n");                                                            \
        }                                                                                     \
    } while (0)

#define CHECK_NEAR(got, want, tol)                                                            \
    do {                                                                                      \
        double g_ = (double)(got), w_ = (double)(want);                                       \
        if (fabs(g_ - w_) <= (double)(tol)) harness_pass++;                                   \
        else {                                                                                \
            harness_fail++;                                                                   \
            fprintf(stderr, "FAIL %s:%d: %s = %.9g, want %s = %.9g (tol %g)\n", __FILE__,    \
                    __LINE__, #got, g_, #want, w_, (double)(tol));                            \
        }                                                                                     \
    } while (0)

#define CHECK_TENSOR(got, want, n, atol, rtol, label)                                         \
    harness_check_tensor((got), (want), (long)(n), (atol), (rtol), (label), __FILE__, __LINE__)

#define SKIP(why)                                                                             \
    do {                                                                                      \
        harness_skip++;                                                                       \
        fprintf(stderr, "SKIP %s:%d: %s\n", __FILE__, __LINE__, why);                        \
    } while (0)

static inline int harness_check_tensor(const float *got, const float *want, long n, double atol,
                                       double rtol, const char *label, const char *file, int line)
{
    double maxdiff = 0;
    long bad = -1;
    for (long i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= atol + rtol * fabs((double)want[i]))) {
            if (bad < 0) bad = i;
            if (!isfinite(d)) d = INFINITY;
        }
        if (d > maxdiff || isnan(d)) maxdiff = isnan(d) ? NAN : d;
    }
    if (bad < 0) {
        harness_pass++;
        return 1;
    }
    harness_fail++;
    fprintf(stderr, "FAIL %s:%d: tensor %s (n=%ld): maxdiff %.6g, first bad index %ld\n", file,
            line, label, n, maxdiff, bad);
    for (long i = 0; i < n && i < 5; i++)
        fprintf(stderr, "    [%ld] got %.8g want %.8g\n", i, got[i], want[i]);
    return 0;
}

static inline int harness_tmpdir(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "/tmp/saelite_%s_XXXXXX", name);
    if (mkdtemp(buf)) return 1;
    CHECK(0, "mkdtemp %s: %s", buf, strerror(errno));
    return 0;
}

static inline int harness_rm_entry(const char *path, const struct stat *sb, int type, struct FTW *f)
{
    (void)sb, (void)type, (void)f;
    return remove(path);
}

static inline int harness_rmtree(const char *dir)
{
    return nftw(dir, harness_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static inline int harness_report(const char *name)
{
    if (harness_skip)
        printf("%s: %d passed, %d failed, %d skipped\n", name, harness_pass, harness_fail,
               harness_skip);
    else printf("%s: %d passed, %d failed\n", name, harness_pass, harness_fail);
    fflush(stdout);
    return harness_fail ? 1 : 0;
}

#endif
