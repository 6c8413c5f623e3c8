#include "common/npy.h"
#include "common/progress.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/checked.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"

enum npy_kind { NPY_F4, NPY_F2, NPY_F8, NPY_I4, NPY_I8 };

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, f;
    if (exp == 0) {
        if (man == 0) f = sign;
        else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) { man <<= 1; exp--; }
            man &= 0x3ff;
            f = sign | (exp << 23) | (man << 13);
        }
    } else if (exp == 31) f = sign | 0x7f800000u | (man << 13);
    else f = sign | ((exp + 127 - 15) << 23) | (man << 13);
    float out;
    memcpy(&out, &f, 4);
    return out;
}

/* The header dict, parsed as strictly as NumPy's reader takes it: {'descr': STR,
 * 'fortran_order': True|False, 'shape': (INT, ...)}, each key once and no other (NumPy
 * refuses other keys; with a key twice it keeps the last, where a first-match search kept the
 * first: another dtype than NumPy's), only spaces and a newline after the '}'. *v receives
 * where each value starts. An error message names path and the problem. */
static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

static int parse_dict(const char *path, const char *hdr, const char *v[3])
{
    static const char *const keys[3] = {"descr", "fortran_order", "shape"};
    v[0] = v[1] = v[2] = NULL;
    const char *p = skip_ws(hdr);
    if (*p++ != '{') return err_set(ERR_FORMAT, "%s: the .npy header is not a dict", path);
    for (;;) {
        p = skip_ws(p);
        if (*p == '}') break;
        char q = *p;
        if (q != '\'' && q != '"') return err_set(ERR_FORMAT, "%s: malformed .npy header dict", path);
        const char *k = ++p, *ke = strchr(k, q);
        if (!ke) return err_set(ERR_FORMAT, "%s: malformed .npy header dict", path);
        int i = 0;
        while (i < 3 && ((size_t)(ke - k) != strlen(keys[i]) || strncmp(k, keys[i], (size_t)(ke - k)))) i++;
        if (i == 3)
            return err_set(ERR_FORMAT, "%s: unexpected key '%.*s' in the .npy header", path,
                           (int)(ke - k > 40 ? 40 : ke - k), k);
        if (v[i]) return err_set(ERR_FORMAT, "%s: key '%s' twice in the .npy header", path, keys[i]);
        p = skip_ws(ke + 1);
        if (*p++ != ':') return err_set(ERR_FORMAT, "%s: malformed .npy header dict", path);
        p = skip_ws(p);
        v[i] = p;
        if (*p == '\'' || *p == '"') { /* a string */
            const char *e = strchr(p + 1, *p);
            if (!e) return err_set(ERR_FORMAT, "%s: malformed .npy header dict", path);
            p = e + 1;
        } else if (!strncmp(p, "True", 4) || !strncmp(p, "False", 5)) {
            p += *p == 'T' ? 4 : 5;
        } else if (*p == '(') { /* whole numbers (a Python 2 writer's 3L too), commas */
            for (p++;; ) {
                p = skip_ws(p);
                if (*p == ')') break;
                if (*p < '0' || *p > '9' || (*p == '0' && p[1] >= '0' && p[1] <= '9'))
                    return err_set(ERR_FORMAT, "%s: bad shape in .npy header", path);
                while (*p >= '0' && *p <= '9') p++;
                if (*p == 'L') p++;
                p = skip_ws(p);
                if (*p == ',') p++;
                else if (*p != ')') return err_set(ERR_FORMAT, "%s: bad shape in .npy header", path);
            }
            p++;
        } else if (*p == '[' || *p == '{') { /* a structured dtype: reported by bad_dtype */
            if (i != 0) return err_set(ERR_FORMAT, "%s: malformed .npy header dict", path);
            p += strlen(p); /* nothing after it is read: bad_dtype refuses it */
            break;
        } else {
            return err_set(ERR_FORMAT, "%s: malformed value of '%s' in the .npy header", path, keys[i]);
        }
        p = skip_ws(p);
        if (*p == ',') p++;
        else if (*p != '}') return err_set(ERR_FORMAT, "%s: malformed .npy header dict", path);
    }
    if (*p == '}' && *skip_ws(p + 1))
        return err_set(ERR_FORMAT, "%s: bytes after the .npy header dict", path);
    if (v[0] && (*v[0] == '[' || *v[0] == '{')) return OK; /* bad_dtype names it */
    if (!v[0] || !v[1] || !v[2])
        return err_set(ERR_FORMAT, "%s: .npy header lacks descr/fortran_order/shape", path);
    return OK;
}

/* The descr value as written ('>f4', '|O', or a structured dtype's list), and what is wrong
 * with it: the message quotes the whole value, never a cut fragment of the header. */
static int bad_dtype(const char *path, const char *d)
{
    char q = *d;
    const char *why = "want <f4, <f2, <f8, <i4 or <i8";
    if (q == '\'' || q == '"') {
        const char *e = strchr(d + 1, q);
        int n = e ? (int)(e - d - 1) : -1;
        if (n < 0 || n > 64)
            return err_set(ERR_FORMAT, "%s: malformed dtype in the .npy header", path);
        if (n >= 2 && d[1] == '>') why = "big-endian; want little-endian <f4, <f2, <f8, <i4 or <i8";
        else if (n >= 2 && d[2] == 'O') why = "an object array; want <f4, <f2, <f8, <i4 or <i8";
        return err_set(ERR_FORMAT, "%s: unsupported .npy dtype '%.*s' (%s)", path, n, d + 1, why);
    }
    if (q == '[')
        return err_set(ERR_FORMAT, "%s: structured .npy dtype (a record array; %s)", path, why);
    return err_set(ERR_FORMAT, "%s: malformed dtype in the .npy header", path);
}

/* The descr value d is the 3-character string name, in either quote (the header is a Python
 * literal: {"descr": "<f4", ...} is as valid as NumPy's own single quotes, an audit) */
static int dtype_is(const char *d, const char *name)
{
    return (d[0] == '\'' || d[0] == '"') && !strncmp(d + 1, name, 3) && d[4] == d[0];
}

void npy_shape_str(char *out, size_t cap, int ndim, const int64_t *shape)
{
    size_t u = (size_t)snprintf(out, cap, "(");
    for (int i = 0; i < ndim && u < cap; i++)
        u += (size_t)snprintf(out + u, cap - u, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (u < cap) snprintf(out + u, cap - u, ndim == 1 ? ",)" : ")");
}

/* Parse the header; leaves f positioned at the data. */
static int npy_open(const char *path, FILE **fp, enum npy_kind *kind, int *ndim, int64_t *shape,
                    int64_t *count)
{
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(f);
        return err_set(ERR_IO, "%s: is a directory, not a .npy file", path);
    }
    unsigned char pre[10];
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        fclose(f);
        return err_set(ERR_FORMAT, "%s: not a .npy file (bad magic)", path);
    }
    uint32_t hlen;
    if (pre[6] == 1) hlen = pre[8] | (uint32_t)pre[9] << 8;
    else if (pre[6] == 2 || pre[6] == 3) {
        unsigned char ext[2];
        if (fread(ext, 1, 2, f) != 2) { fclose(f); return err_set(ERR_FORMAT, "%s: truncated .npy header", path); }
        hlen = pre[8] | (uint32_t)pre[9] << 8 | (uint32_t)ext[0] << 16 | (uint32_t)ext[1] << 24;
    } else {
        fclose(f);
        return err_set(ERR_VERSION, "%s: unsupported .npy version %d", path, pre[6]);
    }
    if (hlen > (1u << 20)) { fclose(f); return err_set(ERR_FORMAT, "%s: .npy header too long", path); }
    char *hdr = mem_alloc(hlen + 1);
    if (!hdr) { fclose(f); return err_set(ERR_NOMEM, "%s: out of memory", path); }
    if (fread(hdr, 1, hlen, f) != hlen) {
        mem_free(hdr); fclose(f);
        return err_set(ERR_FORMAT, "%s: truncated .npy header", path);
    }
    hdr[hlen] = 0;
    int rc = OK;
    const char *v[3];
    if ((rc = parse_dict(path, hdr, v))) goto out;
    const char *d = v[0], *fo = v[1], *sh = v[2];
    if (dtype_is(d, "<f4")) *kind = NPY_F4;
    else if (dtype_is(d, "<f2")) *kind = NPY_F2;
    else if (dtype_is(d, "<f8")) *kind = NPY_F8;
    else if (dtype_is(d, "<i4")) *kind = NPY_I4;
    else if (dtype_is(d, "<i8")) *kind = NPY_I8;
    else { rc = bad_dtype(path, d); goto out; }
    if (strncmp(fo, "False", 5) != 0) { rc = err_set(ERR_FORMAT, "%s: Fortran-order .npy arrays are not supported", path); goto out; }
    if (*sh != '(') { rc = err_set(ERR_FORMAT, "%s: bad shape in .npy header", path); goto out; }
    sh++;
    *ndim = 0;
    int64_t n = 1;
    for (;;) {
        while (*sh == ' ' || *sh == ',') sh++;
        if (*sh == ')') break;
        char *end;
        errno = 0;
        long long v = strtoll(sh, &end, 10);
        if (end == sh || v < 0 || errno || *ndim >= NPY_MAX_DIMS) { rc = err_set(ERR_FORMAT, "%s: bad shape in .npy header", path); goto out; }
        shape[(*ndim)++] = v;
        if (*end == 'L') end++; /* a Python 2 writer's long */
        /* the byte count (8-byte elements at most) must fit in int64 */
        if (ck_mul_i64(n, v, &n) || n > INT64_MAX / 8) {
            rc = err_set(ERR_FORMAT, "%s: .npy shape too large (its element count overflows 64 bits at "
                                     "dimension %d)", path, *ndim - 1);
            goto out;
        }
        sh = end;
    }
    *count = n;
    *fp = f;
out:
    mem_free(hdr);
    if (rc) fclose(f);
    return rc;
}

static int elem_size(enum npy_kind k)
{
    return k == NPY_F2 ? 2 : (k == NPY_F4 || k == NPY_I4) ? 4 : 8;
}

/* float64 to float32 rounded to odd: truncated toward zero, the last significand bit set when
 * that was inexact. Rounding the result again to a format with at least two bits fewer (bf16's
 * 8, f16's 11 against 24) then gives the float64 value's own round-to-nearest-even: one rounding,
 * where two nearest-even ones can break a tie the first one made (1 + 2^-8 + 2^-30 went to 1, not
 * 1 + 2^-7, in bf16). */
static float f64_to_f32_odd(double v)
{
    float f = (float)v;
    if (isnan(v) || (double)f == v || isinf(f)) return f;
    if (fabs((double)f) > fabs(v)) f = nextafterf(f, 0.0f);
    uint32_t u;
    memcpy(&u, &f, 4);
    u |= 1;
    memcpy(&f, &u, 4);
    return f;
}

/* want_float: 0 int64, 1 float32 (nearest even), 2 float32 with float64 rounded to odd */
static int npy_load(const char *path, void **out, int want_float, int *ndim, int64_t *shape)
{
    FILE *f = NULL;
    enum npy_kind kind = NPY_F4;
    int64_t n = 0;
    int rc = npy_open(path, &f, &kind, ndim, shape, &n);
    if (rc) return rc;
    size_t es = (size_t)elem_size(kind);
    /* The header's shape is untrusted: check it against the bytes actually left in the file
     * before allocating, so a tiny file claiming billions of elements says "truncated". */
    struct stat st;
    long pos = ftell(f);
    if (pos >= 0 && fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode)) {
        int64_t left = (int64_t)st.st_size - pos;
        char sh[200];
        npy_shape_str(sh, sizeof sh, *ndim, shape);
        if (left < 0 || n > left / (int64_t)es) {
            fclose(f);
            return err_set(ERR_FORMAT,
                           "%s: truncated .npy data (shape %s needs %lld elements of %zu bytes, "
                           "file has %lld bytes of data)",
                           path, sh, (long long)n, es, (long long)(left < 0 ? 0 : left));
        }
        if (left > n * (int64_t)es) {
            fclose(f);
            return err_set(ERR_FORMAT,
                           "%s: %lld bytes after the .npy data (shape %s needs %lld bytes): not one "
                           "array, or the header's shape is wrong",
                           path, (long long)(left - n * (int64_t)es), sh, (long long)(n * (int64_t)es));
        }
    }
    /* float32 wanted from float32: read straight into the result (one copy of the array in
     * memory, not two: a file of activations may be most of the machine's memory) */
    int direct = want_float && kind == NPY_F4;
    double need = (double)n * (want_float ? 4 : 8) + (direct ? 0 : (double)n * (double)es);
    long long phys = mem_physical_bytes();
    if (phys > 0 && need > (double)phys) {
        fclose(f);
        return err_set(ERR_NOMEM, "%s: loading %lld elements needs %.1f GB, more than this machine's "
                                  "%.1f GB of memory", path, (long long)n, need / 1e9, (double)phys / 1e9);
    }
    void *res = mem_alloc((size_t)(n ? n : 1) * (want_float ? 4 : 8));
    unsigned char *raw = direct ? res : mem_alloc((size_t)(n ? n : 1) * es);
    if (!raw || !res) { rc = err_set(ERR_NOMEM, "%s: out of memory for %lld elements", path, (long long)n); goto out; }
    /* in 64 MB pieces with a progress line: a file of activations can be tens of GB */
    size_t total = (size_t)n * es, got = 0;
    progress pr;
    progress_begin(&pr, "reading .npy", (double)total, "B");
    while (got < total) {
        size_t want = total - got < ((size_t)64 << 20) ? total - got : ((size_t)64 << 20);
        size_t r = fread(raw + got, 1, want, f);
        got += r;
        progress_update(&pr, (double)got, NULL);
        if (r < want) break;
    }
    progress_end(&pr);
    if (got != total) {
        rc = err_set(ERR_FORMAT, "%s: truncated .npy data (expected %lld elements)", path, (long long)n);
        goto out;
    }
    if (fgetc(f) != EOF) { /* a pipe or device: the stat check above could not see this */
        rc = err_set(ERR_FORMAT, "%s: bytes after the .npy data (shape needs %lld elements)", path,
                     (long long)n);
        goto out;
    }
    for (int64_t i = 0; !direct && i < n; i++) {
        const unsigned char *p = raw + (size_t)i * es;
        double v = 0;
        int64_t iv = 0;
        switch (kind) {
        case NPY_F4: { float x; memcpy(&x, p, 4); v = x; break; }
        case NPY_F2: { uint16_t h; memcpy(&h, p, 2); v = half_to_float(h); break; }
        case NPY_F8: { memcpy(&v, p, 8); break; }
        case NPY_I4: { int32_t x; memcpy(&x, p, 4); iv = x; v = x; break; }
        case NPY_I8: { memcpy(&iv, p, 8); v = (double)iv; break; }
        }
        if (want_float) {
            /* what float32 cannot hold is refused, not changed: an overflow read as "non-finite
               value (inf)" for a finite 1e300, and int64 2^40 + 1 was stored as 2^40 */
            if ((kind == NPY_I4 || kind == NPY_I8) && (double)(float)iv != (double)iv) {
                rc = err_set(ERR_FORMAT, "%s: element %lld (%lld) of the integer array is not "
                             "exactly a float32 value", path, (long long)i, (long long)iv);
                goto out;
            }
            if (kind == NPY_F8 && isfinite(v) && fabs(v) > FLT_MAX) {
                rc = err_set(ERR_FORMAT, "%s: element %lld (%g) is outside float32's range", path,
                             (long long)i, v);
                goto out;
            }
            ((float *)res)[i] = kind == NPY_F8 && want_float == 2 ? f64_to_f32_odd(v) : (float)v;
        } else {
            if (kind != NPY_I4 && kind != NPY_I8) {
                if (v != floor(v) || !isfinite(v)) { rc = err_set(ERR_FORMAT, "%s: element %lld is not an integer", path, (long long)i); goto out; }
                /* casting a double outside the int64 range is undefined behaviour */
                if (!(fabs(v) < 9.2e18)) { rc = err_set(ERR_FORMAT, "%s: element %lld (%g) is outside the int64 range", path, (long long)i, v); goto out; }
                iv = (int64_t)v;
            }
            ((int64_t *)res)[i] = iv;
        }
    }
    *out = res;
    res = NULL;
out:
    if (!direct) mem_free(raw);
    mem_free(res);
    fclose(f);
    return rc;
}

int npy_read(const char *path, float **data, int *ndim, int64_t shape[NPY_MAX_DIMS])
{
    return npy_load(path, (void **)data, 1, ndim, shape);
}

int npy_read_narrow(const char *path, float **data, int *ndim, int64_t shape[NPY_MAX_DIMS])
{
    return npy_load(path, (void **)data, 2, ndim, shape);
}

int npy_read_i64(const char *path, int64_t **data, int *ndim, int64_t shape[NPY_MAX_DIMS])
{
    return npy_load(path, (void **)data, 0, ndim, shape);
}

static int npy_save(const char *path, const void *data, const char *descr, int ndim,
                    const int64_t *shape)
{
    char hdr[256], shp[160] = "";
    size_t n = 1, used = 0;
    for (int i = 0; i < ndim; i++) {
        used += (size_t)snprintf(shp + used, sizeof shp - used, "%lld,%s", (long long)shape[i],
                                 (i + 1 < ndim) ? " " : "");
        if (shape[i] < 0 || ck_mul_size(n, (size_t)shape[i], &n) || n > SIZE_MAX / 4)
            return err_set(ERR_ARG, "%s: bad or too large shape (dimension %d: %lld)", path, i,
                           (long long)shape[i]);
        if (used >= sizeof shp) return err_set(ERR_ARG, "%s: too many dimensions", path);
    }
    if (ndim > 1) shp[used - 1] = 0; /* "(3, 4)" not "(3, 4,)"; 1-d keeps "(3,)" */
    int len = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                       descr, shp);
    int total = 10 + len + 1;
    int pad = (64 - total % 64) % 64;
    file_atomic a;
    int rc = file_atomic_open(&a, path);
    if (rc) return rc;
    FILE *f = a.f;
    uint16_t hl = (uint16_t)(len + pad + 1);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 0xff),
                             (unsigned char)(hl >> 8)};
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, (size_t)len, f) == (size_t)len;
    for (int i = 0; ok && i < pad; i++) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    ok = ok && (n == 0 || fwrite(data, 4, n, f) == n);
    if (!ok) {
        int e = errno;
        file_atomic_abort(&a);
        return err_set(ERR_IO, "%s: write failed: %s", path, strerror(e));
    }
    return file_atomic_commit(&a);
}

int npy_check_finite(const char *path, const float *x, int64_t rows, int64_t cols)
{
    int64_t bad = ck_first_nonfinite(x, rows * cols);
    if (bad < 0) return OK;
    return err_set(ERR_FORMAT, "%s: non-finite value (%g) at row %lld, column %lld", path,
                   isnan(x[bad]) ? NAN : (double)x[bad], (long long)(bad / cols), (long long)(bad % cols));
}

int npy_write(const char *path, const float *data, int ndim, const int64_t *shape)
{
    return npy_save(path, data, "<f4", ndim, shape);
}

int npy_write_i32(const char *path, const int32_t *data, int ndim, const int64_t *shape)
{
    return npy_save(path, data, "<i4", ndim, shape);
}
