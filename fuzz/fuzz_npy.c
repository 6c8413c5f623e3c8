/* fuzz_npy - npy_read and npy_read_i64 on arbitrary bytes.
 * Invariants: no crash or sanitizer report; errors carry a one-line message; a float array that
 * reads back is written with npy_write and read again bit-identically (shape and values); the
 * same bytes with one byte appended are refused (the data must be exactly what the shape needs),
 * naming the problem rather than a fragment of the header. */
#include "common/mem.h"
#include "common/npy.h"
#include "fuzz/fuzz.h"

static int fuzz_npy(const uint8_t *data, size_t n)
{
    char path[64];
    int fd = fuzz_memfd(data, n, path);
    float *x = NULL;
    int64_t *iv = NULL, shape[NPY_MAX_DIMS], shape2[NPY_MAX_DIMS];
    int ndim = 0, ndim2 = 0;
    int rc = npy_read(path, &x, &ndim, shape);
    fuzz_check_err(rc, "npy_read");
    int rc2 = npy_read_i64(path, &iv, &ndim2, shape2);
    fuzz_check_err(rc2, "npy_read_i64");
    close(fd);
    if (!rc) {
        uint8_t *more = malloc(n + 1);
        if (!more) abort();
        memcpy(more, data, n);
        more[n] = 0;
        char p2[64];
        int fd2 = fuzz_memfd(more, n + 1, p2);
        float *z = NULL;
        int64_t s4[NPY_MAX_DIMS];
        int nd4 = 0, rc4 = npy_read(p2, &z, &nd4, s4);
        close(fd2);
        free(more);
        mem_free(z);
        if (!rc4) fuzz_fail("a trailing byte after the data was accepted");
        if (!strstr(err_msg(), "after the .npy data"))
            fuzz_fail("a trailing byte is reported as: %s", err_msg());
    }
    if (!rc) {
        int64_t numel = 1;
        for (int i = 0; i < ndim; i++) numel *= shape[i];
        if ((uint64_t)numel * 2 > n) fuzz_fail("%lld elements from a %zu-byte file", (long long)numel, n);
        char out[256];
        snprintf(out, sizeof out, "%s/rt.npy", fuzz_tmpdir());
        rc = npy_write(out, x, ndim, shape);
        fuzz_check_err(rc, "npy_write");
        if (!rc) {
            float *y = NULL;
            int64_t s3[NPY_MAX_DIMS];
            int nd3 = 0;
            rc = npy_read(out, &y, &nd3, s3);
            if (rc) fuzz_fail("npy_read of our own npy_write output failed: %s", err_msg());
            if (nd3 != ndim || memcmp(s3, shape, sizeof(int64_t) * (size_t)ndim))
                fuzz_fail("round trip changed the shape (ndim %d -> %d)", ndim, nd3);
            if (numel && memcmp(x, y, (size_t)numel * 4)) fuzz_fail("round trip changed the values");
            mem_free(y);
            unlink(out);
        }
    }
    mem_free(x);
    mem_free(iv);
    fuzz_guard();
    return 0;
}

#ifndef FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) { return fuzz_npy(data, n); }
#endif
