/* test_common.c - err, mem fault injection, npy round trip, rng, f16/bf16, tensor helpers. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/half.h"
#include "common/mem.h"
#include "common/npy.h"
#include "common/rng.h"
#include "common/tensor.h"
#include "harness.h"

static void test_err(void)
{
    int rc = err_set(ERR_IO, "open %s: %s", "x.db", "No such file");
    CHECK(rc == ERR_IO);
    CHECK(!strcmp(err_msg(), "open x.db: No such file"), "%s", err_msg());
    err_wrap(ERR_IO, "loading model");
    CHECK(!strcmp(err_msg(), "loading model: open x.db: No such file"), "%s", err_msg());
    CHECK(!strcmp(err_str(ERR_SQL), "database error"));
    CHECK(!strcmp(err_str(999), "unknown error"));
    /* control characters from file contents are escaped: every message stays one line (finding 3) */
    err_set(ERR_FORMAT, "f: tensor '%s' bad", "a\nb\rc\td\x01" "e\x7f\x1b");
    CHECK(!strcmp(err_msg(), "f: tensor 'a\\nb\\rc\\td\\x01e\\x7f\\x1b' bad"), "%s", err_msg());
    err_wrap(ERR_FORMAT, "loading %s", "x\ny");
    CHECK(!strcmp(err_msg(), "loading x\\ny: f: tensor 'a\\nb\\rc\\td\\x01e\\x7f\\x1b' bad"), "%s",
          err_msg());
    /* re-setting a message from err_msg() does not escape twice; UTF-8 and backslashes pass */
    char copy[1100];
    snprintf(copy, sizeof copy, "%s", err_msg());
    err_set(ERR_FORMAT, "%s", copy);
    CHECK(!strcmp(err_msg(), copy), "%s", err_msg());
    err_set(ERR_FORMAT, "C:\\dir \xc3\xa9");
    CHECK(!strcmp(err_msg(), "C:\\dir \xc3\xa9"), "%s", err_msg());
    /* a long message of newlines is truncated without splitting an escape */
    char many[1500];
    memset(many, '\n', sizeof many - 1);
    many[sizeof many - 1] = 0;
    err_set(ERR_FORMAT, "%s", many);
    size_t ml = strlen(err_msg());
    CHECK(ml > 1000 && ml < 1024 && ml % 2 == 0 && !strchr(err_msg(), '\n'), "%zu", ml);
}

static void test_mem(void)
{
    mem_fail_at(2);
    void *a = mem_alloc(16), *b = mem_alloc(16), *c = mem_alloc(16);
    CHECK(a && !b && c, "second allocation must fail");
    CHECK(mem_alloc_count() == 3);
    mem_free(a);
    mem_free(c);
    mem_fail_at(0);
    void *p = mem_alloc_aligned(100);
    CHECK(p && ((uintptr_t)p % 64) == 0);
    mem_free_aligned(p);
}

/* A version-1 .npy header around dict (for hand-made malformed files). */
static void put_npy_header(FILE *f, const char *dict)
{
    size_t n = strlen(dict) + 1;
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc((int)(n & 255), f);
    fputc((int)(n >> 8), f);
    fputs(dict, f);
    fputc('\n', f);
}

static void test_npy(void)
{
    char path[] = "/tmp/saelite_test_npyXXXXXX";
    int fd = mkstemp(path);
    close(fd);
    float x[6] = {1, -2, 3.5f, 0, 1e-8f, -7};
    int64_t shape[2] = {2, 3}, got_shape[NPY_MAX_DIMS];
    CHECK(npy_write(path, x, 2, shape) == OK, "%s", err_msg());
    float *y = NULL;
    int nd = 0;
    CHECK(npy_read(path, &y, &nd, got_shape) == OK, "%s", err_msg());
    CHECK(nd == 2 && got_shape[0] == 2 && got_shape[1] == 3);
    if (y) CHECK_TENSOR(y, x, 6, 0, 0, "npy roundtrip");
    mem_free(y);

    /* header must be 64-byte aligned as numpy writes it */
    FILE *f = fopen(path, "rb");
    unsigned char pre[10];
    CHECK(f && fread(pre, 1, 10, f) == 10);
    if (f) fclose(f);
    CHECK((10 + (pre[8] | pre[9] << 8)) % 64 == 0);

    int32_t iv[3] = {5, -1, 50256};
    int64_t s1[1] = {3};
    CHECK(npy_write_i32(path, iv, 1, s1) == OK);
    int64_t *l = NULL;
    CHECK(npy_read_i64(path, &l, &nd, got_shape) == OK, "%s", err_msg());
    CHECK(nd == 1 && got_shape[0] == 3 && l && l[2] == 50256 && l[1] == -1);
    mem_free(l);

    /* garbage and truncation are refused, never read out of bounds */
    f = fopen(path, "wb");
    fputs("\x93NUMPY\x01\x00\x40\x00{'descr': '<f4', 'fortran_order': False, 'shape': (1000,), }", f);
    fclose(f);
    CHECK(npy_read(path, &y, &nd, got_shape) == ERR_FORMAT);
    f = fopen(path, "wb");
    fputs("hello", f);
    fclose(f);
    CHECK(npy_read(path, &y, &nd, got_shape) == ERR_FORMAT);
    CHECK(strstr(err_msg(), path) != NULL, "message names the file: %s", err_msg());
    CHECK(npy_read("/nonexistent/x.npy", &y, &nd, got_shape) == ERR_IO);
    /* a header claiming 1.8e9 doubles in a tiny file: "truncated" before any data allocation
     * (finding 2: it used to allocate 2 x 14 GB first) */
    f = fopen(path, "wb");
    put_npy_header(f, "{'descr': '<f8', 'fortran_order': False, 'shape': (1800000000,), }");
    fputs("12345678", f);
    fclose(f);
    mem_fail_at(0);
    int64_t *li = NULL;
    CHECK(npy_read_i64(path, &li, &nd, got_shape) == ERR_FORMAT && strstr(err_msg(), "truncated") &&
          strstr(err_msg(), path), "%s", err_msg());
    CHECK(mem_alloc_count() == 1, "only the header is allocated, got %ld", mem_alloc_count());
    /* a float element outside the int64 range is refused, not cast (finding 1: UB) */
    double big[2] = {3, 1e30};
    f = fopen(path, "wb");
    put_npy_header(f, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }");
    fwrite(big, 8, 2, f);
    fclose(f);
    CHECK(npy_read_i64(path, &li, &nd, got_shape) == ERR_FORMAT && strstr(err_msg(), "int64 range"),
          "%s", err_msg());
    unlink(path);
}

/* The shared RNG keeps the streams of the copies it replaced (committed fixtures depend on it). */
static void test_rng(void)
{
    rng_state a, b;
    rng_seed(&a, 0);
    CHECK(rng_next(&a) == 0x99ec5f36cb75f2b4ULL);
    CHECK(rng_next(&a) == 0xbf6e1f784956452aULL);
    rng_seed(&a, 42);
    b = a;
    double u = 1.0 - rng_uniform(&b), v = rng_uniform(&b);
    CHECK(rng_normal_alt(&a) == sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v));
    b = a;
    u = rng_uniform(&b), v = rng_uniform(&b);
    CHECK(rng_normal(&a) == sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v));
    int ok = 1;
    for (int i = 0; i < 1000; i++) ok &= rng_below(&a, 3) < 3 && rng_uniform(&a) < 1.0;
    CHECK(ok);
}

/* f32 <-> f16/bf16 (common/half.h): rounding, overflow, subnormals, NaN. */
static void test_half(void)
{
    CHECK(half_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(half_bf16_to_f32(0xc000) == -2.0f);
    CHECK(half_f32_to_bf16(1.00390625f) == 0x3f80, "tie rounds to even"); /* 1 + 2^-8 */
    CHECK(half_f32_to_bf16(1.01171875f) == 0x3f82, "tie rounds to even, up");
    CHECK(half_f32_to_f16(1.0f) == 0x3c00);
    CHECK(half_f32_to_f16(65504.0f) == 0x7bff);
    CHECK(half_f32_to_f16(70000.0f) == 0x7c00, "overflow to inf");
    CHECK(half_f32_to_f16(5.9604645e-8f) == 0x0001, "smallest subnormal");
    CHECK(half_f32_to_f16(2.0e-8f) == 0x0000);
    CHECK(half_f16_to_f32(0x0001) == 5.9604645e-8f);
    CHECK(isnan(half_f16_to_f32(half_f32_to_f16(NAN))));
    CHECK(isnan(half_bf16_to_f32(half_f32_to_bf16(NAN))));
    /* every finite f16 survives f16 -> f32 -> f16 */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00) continue;
        if (half_f32_to_f16(half_f16_to_f32((uint16_t)h)) != h) bad++;
    }
    CHECK(bad == 0, "%d f16 values do not round trip", bad);
}

/* The array conversions equal the scalar ones bit for bit: every f16/bf16 pattern back to f32,
 * and f32 patterns covering both formats' rounding, subnormal, overflow and NaN ranges. */
static void test_half_arrays(void)
{
    enum { N = 65536 + 2 * 4096 + 13 };
    static float f[N], back[N];
    static uint16_t h[N], a16[N], b16[N];
    uint32_t z = 12345;
    for (int i = 0; i < N; i++) {
        uint32_t u;
        if (i < 65536) u = (uint32_t)i << 16 | (uint32_t)(i * 7919u & 0xffffu); /* every exponent */
        else {
            z = z * 1664525u + 1013904223u;
            u = z;
        }
        memcpy(&f[i], &u, 4);
    }
    int bad = 0;
    half_f32_to_bf16_n(a16, f, N);
    half_f32_to_f16_n(b16, f, N);
    for (int i = 0; i < N; i++) bad += a16[i] != half_f32_to_bf16(f[i]) || b16[i] != half_f32_to_f16(f[i]);
    CHECK(bad == 0, "f32 -> f16/bf16 arrays differ from the scalar code in %d places", bad);
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    bad = 0;
    half_bf16_to_f32_n(back, h, 65536);
    for (int i = 0; i < 65536; i++) {
        float w = half_bf16_to_f32(h[i]);
        bad += memcmp(&w, &back[i], 4) != 0;
    }
    half_f16_to_f32_n(back, h, 65536);
    for (int i = 0; i < 65536; i++) {
        float w = half_f16_to_f32(h[i]);
        bad += memcmp(&w, &back[i], 4) != 0;
    }
    CHECK(bad == 0, "f16/bf16 -> f32 arrays differ from the scalar code in %d places", bad);
}

static void test_tensor(void)
{
    tensor_view t = {.ndim = 3, .shape = {2, 3, 4}};
    tensor_set_contiguous(&t);
    CHECK(t.stride[0] == 12 && t.stride[1] == 4 && t.stride[2] == 1);
    CHECK(tensor_numel(&t) == 24);
}

int main(void)
{
    test_err();
    test_mem();
    test_npy();
    test_rng();
    test_half();
    test_half_arrays();
    test_tensor();
    return harness_report("test_common");
}
