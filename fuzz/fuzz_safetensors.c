/* fuzz_safetensors - st_open on arbitrary bytes, then every accessor on every tensor.
 * Invariants: no crash or sanitizer report; errors carry a one-line message; a file that opens
 * has tensors whose data lies inside it; float tensors convert; all-float files written back
 * with st_write (as F32) read back bit-identical. */
#include <math.h>

#include "common/mem.h"
#include "fuzz/fuzz.h"
#include "model/safetensors.h"

static int fuzz_safetensors(const uint8_t *data, size_t n)
{
    char path[64];
    int fd = fuzz_memfd(data, n, path);
    st_file *f = NULL;
    int rc = st_open(&f, path);
    fuzz_check_err(rc, "st_open");
    if (rc) { close(fd); fuzz_guard(); return 0; }
    int count = st_count(f), all_float = 1;
    float **vals = calloc((size_t)count + 1, sizeof *vals);
    st_out *outs = calloc((size_t)count + 1, sizeof *outs);
    for (int i = 0; i < count; i++) {
        const st_tensor *t = st_at(f, i);
        if (!t || !t->name) fuzz_fail("st_at(%d) of %d returned nothing", i, count);
        if (st_find(f, t->name) != t) fuzz_fail("st_find('%s') is not st_at(%d)", t->name, i);
        int64_t numel = st_numel(t);
        if (numel < 0) fuzz_fail("negative numel");
        if (t->nbytes > n)
            fuzz_fail("tensor '%s' claims %zu bytes of a %zu-byte file", t->name, t->nbytes, n);
        (void)st_dtype_name(t->dtype);
        float *dst = malloc((size_t)numel * sizeof(float) + 1);
        rc = st_read_f32(f, t, dst);
        fuzz_check_err(rc, "st_read_f32");
        if (rc) { free(dst); all_float = 0; continue; }
        float s = 0; /* touch every value so sanitizers see reads of uninitialised data */
        for (int64_t j = 0; j < numel; j++) s += isnan(dst[j]) ? 0 : 1;
        (void)s;
        rc = st_load_f32(f, t->name, t->ndim, t->shape, dst);
        fuzz_check_err(rc, "st_load_f32");
        if (rc) fuzz_fail("st_load_f32('%s') with its own shape failed: %s", t->name, err_msg());
        vals[i] = dst;
        outs[i] = (st_out){.name = t->name, .dtype = ST_F32, .ndim = t->ndim, .data = dst};
        memcpy(outs[i].shape, t->shape, sizeof t->shape);
    }
    (void)st_metadata(f, "format");
    (void)st_find(f, "no such tensor");
    if (all_float && count > 0) {
        char out[256];
        snprintf(out, sizeof out, "%s/rt.safetensors", fuzz_tmpdir());
        rc = st_write(out, outs, count, NULL);
        fuzz_check_err(rc, "st_write");
        if (rc) fuzz_fail("st_write of a file st_open accepted failed: %s", err_msg());
        st_file *g = NULL;
        rc = st_open(&g, out);
        if (rc) fuzz_fail("st_open of our own output failed: %s", err_msg());
        if (st_count(g) != count) fuzz_fail("round trip: %d tensors, want %d", st_count(g), count);
        for (int i = 0; i < count; i++) {
            const st_tensor *t = st_find(g, outs[i].name);
            if (!t || t->ndim != outs[i].ndim || memcmp(t->shape, outs[i].shape, sizeof(int64_t) * (size_t)t->ndim))
                fuzz_fail("round trip: tensor '%s' lost or reshaped", outs[i].name);
            if (memcmp(t->data, vals[i], (size_t)st_numel(t) * 4))
                fuzz_fail("round trip: tensor '%s' values differ", outs[i].name);
        }
        st_close(g);
        unlink(out);
    }
    for (int i = 0; i < count; i++) free(vals[i]);
    free(vals);
    free(outs);
    st_close(f);
    close(fd);
    fuzz_guard();
    return 0;
}

#ifndef FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) { return fuzz_safetensors(data, n); }
#endif
