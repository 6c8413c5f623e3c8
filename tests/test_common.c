/* test_common.c - err, mem fault injection, npy round trip, tensor helpers. */
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "common/err.h"
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
    test_tensor();
    return harness_report("test_common");
}
