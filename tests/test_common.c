/* test_common.c - err, mem fault injection, npy round trip, tensor helpers. */
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "common/err.h"
#include "common/mem.h"
#include "common/npy.h"
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
    unlink(path);
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
    test_tensor();
    return harness_report("test_common");
}
