/* checked.h - overflow-checked size arithmetic for sizes that come from files or arguments.
 *
 * Every element count, byte count or parameter count computed from a header, a config or a
 * flag goes through these, so a hostile size is an error instead of a wrapped (or, for signed
 * types, undefined) product. Each returns 1 when the exact result does not fit (or an input is
 * negative, for the int64 forms), else 0 and stores the result; callers turn 1 into one err_set
 * naming the file and the field. Header-only, no state, thread-safe.
 *   ck_mul_i64 / ck_add_i64   a*b, a+b in int64_t (inputs must be >= 0)
 *   ck_mul_size               a*b in size_t
 *   ck_numel                  the product of n dims (>= 0 each), optionally times an element
 *                             size, bounded by limit (INT64_MAX for "anything that fits")
 *   ck_first_nonfinite        index of the first NaN or +-Inf of n floats, or -1: loaders use
 *                             it to refuse non-finite weights, naming the tensor and index
 *   ck_first_negative         index of the first negative float, or -1 (Adam's second moment)
 */
#ifndef SAELITE_CHECKED_H
#define SAELITE_CHECKED_H
#include <stddef.h>
#include <math.h>
#include <stdint.h>

static inline int ck_mul_i64(int64_t a, int64_t b, int64_t *out)
{
    if (a < 0 || b < 0) return 1;
    return __builtin_mul_overflow(a, b, out);
}

static inline int ck_add_i64(int64_t a, int64_t b, int64_t *out)
{
    if (a < 0 || b < 0) return 1;
    return __builtin_add_overflow(a, b, out);
}

static inline int ck_mul_size(size_t a, size_t b, size_t *out)
{
    return __builtin_mul_overflow(a, b, out);
}

/* prod(dims[0..n)) * elem <= limit; elem 1 for a plain element count. */
static inline int ck_numel(const int64_t *dims, int n, int64_t elem, int64_t limit, int64_t *out)
{
    int64_t p = elem;
    for (int i = 0; i < n; i++)
        if (ck_mul_i64(p, dims[i], &p)) return 1;
    if (p > limit) return 1;
    *out = p;
    return 0;
}

static inline int64_t ck_first_nonfinite(const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return i;
    return -1;
}

/* Index of the first negative value of x[0..n), or -1: loaders of Adam's second moment, which
 * is never negative in a file that is not damaged. */
static inline int64_t ck_first_negative(const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (x[i] < 0) return i;
    return -1;
}

#endif
