/* test_common.c - err, mem fault injection, par_for's dynamic split, npy round trip, rng, f16/bf16, tensor helpers,
 * UTF-8, files and paths, hashes, quickselect, byte buffers, progress lines. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/half.h"
#include "common/hash.h"
#include "common/json.h"
#include "common/mem.h"
#include "common/npy.h"
#include "common/par.h"
#include "common/progress.h"
#include "common/rng.h"
#include "common/select.h"
#include "common/tensor.h"
#include "common/utf8.h"
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
    /* bytes that are not UTF-8 (a stray 0xff, a cut sequence) and C1 controls (CSI 0x9b as
       U+009B) are escaped; valid multi-byte characters pass whole */
    err_set(ERR_FORMAT, "t '%s'", "a\xff\xc3\xc2\x9b\xe2\x82\xac\xf0\x9f");
    CHECK(!strcmp(err_msg(), "t 'a\\xff\\xc3\\xc2\\x9b\xe2\x82\xac\\xf0\\x9f'"), "%s", err_msg());
    /* a long message of newlines keeps its head and tail without splitting an escape */
    static char many[6000], big[30000];
    memset(many, '\n', sizeof many - 1);
    many[sizeof many - 1] = 0;
    err_set(ERR_FORMAT, "%s", many);
    const char *m = err_msg(), *cut = strstr(m, " ... ");
    size_t ml = strlen(m);
    CHECK(ml > ERR_MSG_MAX - 16 && ml < ERR_MSG_MAX && cut && (cut - m) % 2 == 0 &&
              (ml - (size_t)(cut - m) - 5) % 2 == 0 && !strchr(m, '\n') && m[ml - 1] == 'n',
          "%zu", ml);
    /* a path of PATH_MAX bytes and the problem fit whole; a longer one keeps the file's head and
       the problem (it kept 1 KiB of the path: "open /long/.../nonexi") */
    memset(big, 'a', 4095);
    big[0] = '/';
    big[4095] = 0;
    err_set(ERR_IO, "open %s: No such file or directory", big);
    CHECK(strlen(err_msg()) == 5 + 4095 + 27 && !strstr(err_msg(), " ... "), "%zu", strlen(err_msg()));
    memset(big, 'a', sizeof big - 1);
    big[0] = '/';
    big[sizeof big - 1] = 0;
    err_set(ERR_IO, "open %s: No such file or directory", big);
    m = err_msg();
    ml = strlen(m);
    CHECK(ml < ERR_MSG_MAX && !strncmp(m, "open /aaa", 9) && strstr(m, "a ... a") &&
              !strcmp(m + ml - 27, ": No such file or directory"),
          "%zu %.20s", ml, m + ml - 20);
    /* err_wrap and err_replace keep the end too */
    err_set(ERR_IO, "%s: bad header", big + 20000);
    err_wrap(ERR_IO, "loading %s", big);
    m = err_msg();
    ml = strlen(m);
    CHECK(ml < ERR_MSG_MAX && !strncmp(m, "loading /aaa", 12) && !strcmp(m + ml - 12, ": bad header"),
          "%zu", ml);
    /* ... and the end of a prefix of over 8 KiB: it was escaped into 8 KiB, cut there without
       " ... ", and what followed the long name in the prefix was lost */
    static const char suf[] = " (the hook's model): bad header";
    err_set(ERR_IO, "bad header");
    err_wrap(ERR_IO, "loading %s (the hook's model)", big);
    m = err_msg();
    ml = strlen(m);
    CHECK(ml < ERR_MSG_MAX && !strncmp(m, "loading /aaa", 12) && strstr(m, "a ... a") &&
              ml > sizeof suf && !strcmp(m + ml - (sizeof suf - 1), suf),
          "%zu ...%s", ml, m + (ml > 40 ? ml - 40 : 0));
    err_set(ERR_IO, "write stage.tmp: disk full");
    err_replace("stage.tmp", big);
    m = err_msg();
    ml = strlen(m);
    CHECK(ml < ERR_MSG_MAX && !strncmp(m, "write /aaa", 10) && !strcmp(m + ml - 11, ": disk full"), "%zu", ml);
    /* multi-byte characters are not cut at the seam */
    for (int i = 0; i + 2 < (int)sizeof big; i += 2) {
        big[i] = (char)0xc3;
        big[i + 1] = (char)0xa9;
    }
    big[sizeof big - 2] = 0;
    err_set(ERR_FORMAT, "%s!", big);
    m = err_msg();
    cut = strstr(m, " ... ");
    ml = strlen(m);
    CHECK(cut && (cut - m) % 2 == 0 && (unsigned char)cut[5] == 0xc3 && m[ml - 1] == '!' &&
              (ml - (size_t)(cut - m) - 5) % 2 == 1,
          "%zu", ml);
}

static char tdir[256]; /* the scratch directory main makes (defined again below, tentatively) */

/* json_parse_object: one object, no key twice, nothing after it, no NUL; errors placed and named */
static void test_json(void)
{
    cJSON *j = NULL;
    const char *ok = " {\"a\": 1, \"b\": {\"a\": [1, {\"a\": 2}]}}\r\n\t ";
    CHECK(json_parse_object("f.json", NULL, ok, strlen(ok), &j) == OK && j, "%s", err_msg());
    CHECK(j && cJSON_GetObjectItemCaseSensitive(j, "a")->valueint == 1);
    cJSON_Delete(j);
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"{\"a\": 1} {\"b\": 2}", "f.json: text after the JSON object at line 1, column 10"},
        {"{\"a\": 1}\n\nx", "f.json: text after the JSON object at line 3, column 1"},
        {"{\"a\": 1, \"a\": 2}", "f.json: key \"a\" appears twice in one object (which one is meant?)"},
        {"{\"x\": [{\"k\": 1, \"m\": 0, \"k\": 2}]}", "f.json: key \"k\" appears twice in one object (which one is meant?)"},
        {"{\"a\": 1,\n \"b\" 2}", "f.json: not valid JSON at line 2, column 6 (a config)"},
        {"[1, 2]", "f.json: not a JSON object (a config)"},
        {"", "f.json: not valid JSON at line 1, column 1 (a config)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        j = (cJSON *)1;
        int rc = json_parse_object("f.json", i >= 4 ? "a config" : NULL, bad[i].text,
                                   strlen(bad[i].text), &j);
        CHECK(rc == ERR_FORMAT && !j && !strcmp(err_msg(), bad[i].msg), "%zu: %d %s", i, rc, err_msg());
    }
    /* a NUL byte: cJSON stops at it, so what follows went unread ({"a": 1}\0{"n_layer": 99} was
       a config of one key to one reader, an error to another: a review) */
    static const char nul[] = "{\"a\":\n 1}\0{\"b\": 2}";
    CHECK(json_parse_object("f.json", NULL, nul, sizeof nul - 1, &j) == ERR_FORMAT &&
              !strcmp(err_msg(), "f.json: a NUL byte at line 2, column 4"), "%s", err_msg());
    /* the \u0000 escape: a NUL inside the decoded string, which cuts it (a hook_name
       "...hook_post\u0000junk" was read as "...hook_post"); an escaped backslash before "u0000"
       is text, and a last "\u000" is not the escape */
    static const char *const esc[] = {"{\"h\": \"ab\\u0000cd\"}", "{\"h\\u0000\": 1}",
                                      "{\"h\": \"\\\\\\u0000\"}"};
    for (size_t i = 0; i < sizeof esc / sizeof esc[0]; i++)
        CHECK(json_parse_object("f.json", NULL, esc[i], strlen(esc[i]), &j) == ERR_FORMAT &&
                  strstr(err_msg(), "f.json: a \\u0000 (NUL) escape at line 1, column "),
              "%s: %s", esc[i], err_msg());
    static const char *const text_u[] = {"{\"h\": \"a\\\\u0000\"}", "{\"h\": \"\\u0001\"}"};
    for (size_t i = 0; i < sizeof text_u / sizeof text_u[0]; i++) {
        CHECK(json_parse_object("f.json", NULL, text_u[i], strlen(text_u[i]), &j) == OK, "%s: %s",
              text_u[i], err_msg());
        cJSON_Delete(j);
    }
    /* nesting past cJSON's limit is named as such, not "not valid JSON" at a bracket; brackets
       inside strings do not count, and 1000 levels (the object and 999 arrays) still parse */
    for (int deep = 999; deep <= 1001; deep++) {
        size_t n = 0;
        char *t = malloc(2 * (size_t)deep + 64);
        n += (size_t)sprintf(t + n, "{\"s\": \"[[[{{\", \"a\": ");
        for (int k = 0; k < deep; k++) t[n++] = '[';
        for (int k = 0; k < deep; k++) t[n++] = ']';
        t[n++] = '}';
        int rc = json_parse_object("f.json", NULL, t, n, &j);
        if (deep == 999) CHECK(rc == OK, "%d levels: %s", deep + 1, err_msg());
        else CHECK(rc == ERR_FORMAT && strstr(err_msg(), "f.json: nested more than 1000 levels deep at line 1, column "),
                   "%d levels: %s", deep + 1, err_msg());
        if (rc == OK) cJSON_Delete(j);
        free(t);
    }
    /* the file reader passes the file's length, not strlen's */
    char jp[600];
    snprintf(jp, sizeof jp, "%s/nul.json", tdir);
    FILE *jf = fopen(jp, "wb");
    if (jf) {
        fwrite(nul, 1, sizeof nul - 1, jf);
        fclose(jf);
    }
    CHECK(json_read_object_file(jp, NULL, 1 << 20, &j) == ERR_FORMAT && strstr(err_msg(), "a NUL byte"),
          "%s", err_msg());
    /* the length bounds the text: a value cut by it is an error, bytes past it are not read */
    const char *cut = "{\"a\": 1}garbage";
    CHECK(json_parse_object("f.json", NULL, cut, 7, &j) == ERR_FORMAT);
    CHECK(json_parse_object("f.json", NULL, cut, 8, &j) == OK, "%s", err_msg());
    cJSON_Delete(j);
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
    /* large buffers: 2 MiB aligned and advised as huge pages; their contents behave as any */
    size_t n = (5u << 20) + 100;
    unsigned char *q = mem_alloc_aligned(n);
    CHECK(q && ((uintptr_t)q % (2u << 20)) == 0, "%p", (void *)q);
    for (size_t i = 0; q && i < n; i += 4093) q[i] = (unsigned char)(i * 7);
    int same = 1;
    for (size_t i = 0; q && i < n; i += 4093) same &= q[i] == (unsigned char)(i * 7);
    CHECK(same);
    mem_free_aligned(q);
    mem_fail_at(1);
    CHECK(mem_alloc_aligned(8u << 20) == NULL, "fault injection covers large buffers");
    mem_fail_at(0);
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

    /* the header dict as strictly as NumPy reads it: a key twice (NumPy keeps the last, a
       first-match search kept the first: another dtype), an unknown key, text after the dict,
       a shape number with a leading zero are refused; a Python 2 writer's 2L and double
       quotes are read */
    static const char *const hdrs[] = {
        "{'descr': '<f4', 'descr': '<f8', 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1, }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (02,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (+2,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }",
        "{\"descr\": '<f4', \"fortran_order\": False, \"shape\": (2,)}"};
    static const char *const why[] = {"key 'descr' twice", "unexpected key 'extra'",
                                      "bytes after the .npy header dict", "bad shape", "bad shape",
                                      NULL, NULL};
    for (int i = 0; i < 7; i++) {
        char h[256];
        int n = snprintf(h, sizeof h, "%s", hdrs[i]);
        while ((10 + n + 1) % 64) h[n++] = ' ';
        h[n++] = '\n';
        f = fopen(path, "wb");
        unsigned char pre2[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)n, 0};
        float two[2] = {1.5f, -2};
        fwrite(pre2, 1, 10, f);
        fwrite(h, 1, (size_t)n, f);
        fwrite(two, sizeof two, 1, f);
        fclose(f);
        y = NULL;
        int rc = npy_read(path, &y, &nd, got_shape);
        if (why[i])
            CHECK(rc == ERR_FORMAT && strstr(err_msg(), why[i]), "header %d: %d %s", i, rc, err_msg());
        else
            CHECK(rc == OK && nd == 1 && got_shape[0] == 2 && y[1] == -2, "header %d: %s", i, err_msg());
        mem_free(y);
    }

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
    /* float64 read for a bf16/f16 store: one rounding. 1 + 2^-8 + 2^-30 is nearest-even 1 + 2^-7
       in bf16, but float32 rounds it to the tie 1 + 2^-8 first, which bf16 then breaks to 1;
       1 + 2^-11 + 2^-40 the same for f16. Both, and exact values, ties and their neighbours
       against a double-precision rounding of the double. */
    double dv[8] = {1 + 0x1p-8 + 0x1p-30, 1 + 0x1p-11 + 0x1p-40, 1 + 0x1p-8, -(1 + 0x1p-8 + 0x1p-30),
                    3 + 0x1p-7 - 0x1p-35, 0x1p-130 * (1 + 0x1p-9), 65504.0 + 0x1p-20, 0.1};
    f = fopen(path, "wb");
    put_npy_header(f, "{'descr': '<f8', 'fortran_order': False, 'shape': (8,), }");
    fwrite(dv, 8, 8, f);
    fclose(f);
    float *nr = NULL, *ne = NULL;
    CHECK(npy_read_narrow(path, &nr, &nd, got_shape) == OK && npy_read(path, &ne, &nd, got_shape) == OK,
          "%s", err_msg());
    for (int i = 0; nr && ne && i < 8; i++) {
        /* the nearest-even bf16 of the double: bits of the double's float32 truncation, the
           rest of the significand compared with half a bf16 ulp exactly in double */
        float t = (float)dv[i];
        if (fabs((double)t) > fabs(dv[i])) t = nextafterf(t, 0.0f);
        uint32_t u;
        memcpy(&u, &t, 4);
        uint32_t lo = u & ~0xffffu, hi = lo + 0x10000u;
        float flo, fhi;
        memcpy(&flo, &lo, 4);
        memcpy(&fhi, &hi, 4);
        double dlo = fabs(dv[i] - flo), dhi = fabs(fhi - dv[i]);
        uint16_t want = (uint16_t)((dlo < dhi || (dlo == dhi && !((lo >> 16) & 1))) ? lo >> 16 : hi >> 16);
        CHECK(half_f32_to_bf16(nr[i]) == want, "bf16 of %a: %04x, want %04x", dv[i],
              half_f32_to_bf16(nr[i]), want);
        CHECK(ne[i] == (float)dv[i], "npy_read of %a rounds to nearest", dv[i]);
    }
    if (nr) CHECK(half_f32_to_bf16(nr[0]) == 0x3f81 && half_f32_to_f16(nr[1]) == 0x3c01,
                  "the two double roundings: bf16 %04x f16 %04x", half_f32_to_bf16(nr[0]),
                  half_f32_to_f16(nr[1]));
    if (ne) CHECK(half_f32_to_bf16(ne[0]) == 0x3f80, "two roundings break the tie to even (1.0)");
    mem_free(nr);
    mem_free(ne);
    /* what float32 cannot hold is refused: a finite 1e300, an int64 2^40 + 1 (its own message) */
    double huge[2] = {1, 1e300};
    f = fopen(path, "wb");
    put_npy_header(f, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }");
    fwrite(huge, 8, 2, f);
    fclose(f);
    CHECK(npy_read(path, &y, &nd, got_shape) == ERR_FORMAT && strstr(err_msg(), "element 1 (1e+300)") &&
          strstr(err_msg(), "float32's range"), "%s", err_msg());
    int64_t bigi[2] = {16777216, ((int64_t)1 << 40) + 1};
    f = fopen(path, "wb");
    put_npy_header(f, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }");
    fwrite(bigi, 8, 2, f);
    fclose(f);
    CHECK(npy_read(path, &y, &nd, got_shape) == ERR_FORMAT && strstr(err_msg(), "1099511627777") &&
          strstr(err_msg(), "not exactly a float32"), "%s", err_msg());
    /* double-quoted strings are a Python literal as well (np.load reads them; the dtype was
       refused "unsupported .npy dtype '<f4' (want <f4, ...)", an audit); mixed quotes are not */
    float dq[2] = {1.5f, -2.0f};
    f = fopen(path, "wb");
    put_npy_header(f, "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (1, 2)}");
    fwrite(dq, 4, 2, f);
    fclose(f);
    y = NULL;
    CHECK(npy_read(path, &y, &nd, got_shape) == OK && nd == 2 && got_shape[1] == 2 && y && y[0] == 1.5f &&
          y[1] == -2.0f, "double-quoted header: %s", err_msg());
    mem_free(y);
    f = fopen(path, "wb");
    put_npy_header(f, "{'descr': \"<f4', 'fortran_order': False, 'shape': (1, 2)}");
    fwrite(dq, 4, 2, f);
    fclose(f);
    CHECK(npy_read(path, &y, &nd, got_shape) == ERR_FORMAT, "mixed quotes refused");
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

static char tdir[256];

static const char *tpath(const char *name)
{
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", tdir, name);
    return p[k];
}

static int count_temps(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) n += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return n;
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char b[4096];
    *n = fread(b, 1, sizeof b - 1, f);
    b[*n] = 0;
    fclose(f);
    return b;
}

static int is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static void test_paths(void)
{
    char out[16];
    CHECK(path_join(out, sizeof out, "ab", "cd") == OK && !strcmp(out, "ab/cd"), "%s", out);
    CHECK(path_join(out, sizeof out, "", "cd") == OK && !strcmp(out, "cd"), "%s", out);
    CHECK(path_join(out, sizeof out, NULL, "cd") == OK && !strcmp(out, "cd"), "%s", out);
    /* 15 characters fit in 16 bytes, 16 do not: an error naming the path, never a cut path */
    CHECK(path_join(out, sizeof out, "0123456", "89abcde") == OK && strlen(out) == 15);
    err_clear();
    int rc = path_join(out, sizeof out, "0123456", "89abcdef");
    CHECK(rc == ERR_ARG && strstr(err_msg(), "path too long") && strstr(err_msg(), "0123456/89abcde"),
          "%d %s", rc, err_msg());
    CHECK(out[0] == 0, "a failed join leaves an empty string, not a prefix: '%s'", out);
    CHECK(path_fmt(out, sizeof out, "%s/x_%d.png", "d", 7) == OK && !strcmp(out, "d/x_7.png"));
    CHECK(path_fmt(out, sizeof out, "%s/%0*d", "d", 20, 1) == ERR_ARG);
}

/* file_find_open_fd: finds a descriptor this process holds on the file (by inode, through a
 * second name too), and none for a file nobody has open. */
static void test_find_open_fd(void)
{
    char p[600], q[600], r[600];
    snprintf(p, sizeof p, "%s/fd_a", tdir);
    snprintf(q, sizeof q, "%s/fd_b", tdir);
    snprintf(r, sizeof r, "%s/fd_link", tdir);
    CHECK(file_write_atomic(p, "a", 1) == OK && file_write_atomic(q, "b", 1) == OK, "%s", err_msg());
    unlink(r);
    CHECK(symlink(p, r) == 0);
    CHECK(file_find_open_fd(p) == -1, "nobody has it open");
    int fd = open(p, O_RDONLY);
    CHECK(fd >= 0);
    CHECK(file_find_open_fd(p) == fd, "found %d, opened %d", file_find_open_fd(p), fd);
    CHECK(file_find_open_fd(r) == fd, "through a symlink: %d", file_find_open_fd(r));
    CHECK(file_find_open_fd(q) == -1, "another file: %d", file_find_open_fd(q));
    CHECK(file_find_open_fd("/nonexistent_dir_x/y") == -1);
    file_writeback_start(fd); /* a hint on a clean file: nothing to check but that it returns */
    close(fd);
    CHECK(file_find_open_fd(p) == -1, "closed again");
    unlink(r);
}

/* file_read_text: the whole file, NUL-terminated; missing, a directory, a FIFO or a file over
 * the limit are errors naming the path, with nothing returned. */
static void test_read_text(void)
{
    char p[600], big[600], fifo[600];
    snprintf(p, sizeof p, "%s/rt", tdir);
    snprintf(big, sizeof big, "%s/rt_big", tdir);
    snprintf(fifo, sizeof fifo, "%s/rt_fifo", tdir);
    char *t = (char *)1;
    size_t n = 7;
    CHECK(file_write_atomic(p, "ab\0c", 4) == OK, "%s", err_msg());
    CHECK(file_read_text(p, 4, &t, &n) == OK && n == 4 && t && !memcmp(t, "ab\0c", 5), "n %zu", n);
    mem_free(t);
    CHECK(file_read_text(p, 3, &t, &n) == ERR_IO && !t && n == 0 && strstr(err_msg(), "rt: 4 bytes"),
          "%s", err_msg());
    CHECK(file_write_atomic(big, "", 0) == OK);
    CHECK(file_read_text(big, 0, &t, NULL) == OK && t && t[0] == 0);
    mem_free(t);
    CHECK(file_read_text(tdir, 100, &t, NULL) == ERR_IO && !t &&
              strstr(err_msg(), "is a directory, not a regular file"),
          "%s", err_msg());
    char missing[700];
    snprintf(missing, sizeof missing, "%s/none", tdir);
    CHECK(file_read_text(missing, 100, &t, NULL) == ERR_NOTFOUND && !t && strstr(err_msg(), "/none: cannot open"),
          "%s", err_msg());
    unlink(fifo);
    if (mkfifo(fifo, 0600) == 0) { /* no writer: refused at once, not waited on */
        CHECK(file_read_text(fifo, 100, &t, NULL) == ERR_IO && !t && strstr(err_msg(), "not a regular file"),
              "%s", err_msg());
        unlink(fifo);
    }
}

static void test_mkdir_p(void)
{
    char deep[600], created[600];
    snprintf(deep, sizeof deep, "%s/a/b//c/", tdir);
    CHECK(file_mkdir_p(deep) == OK && is_dir(tpath("a/b/c")), "%s", err_msg());
    CHECK(file_mkdir_p(deep) == OK, "existing directories are fine: %s", err_msg());
    /* created names the outermost new directory */
    snprintf(deep, sizeof deep, "%s/a/n1/n2", tdir);
    CHECK(file_mkdir_p_created(deep, created, sizeof created) == OK &&
              !strcmp(created, tpath("a/n1")), "created '%s'", created);
    CHECK(file_mkdir_p_created(deep, created, sizeof created) == OK && created[0] == 0);
    file_rmdir_upto(deep, tpath("a/n1"));
    CHECK(!is_dir(tpath("a/n1")) && is_dir(tpath("a")), "rmdir_upto removes n2 and n1 only");
    /* a component that is a file: ERR_IO naming that component; nothing new is left behind */
    FILE *f = fopen(tpath("a/file"), "w");
    if (f) fclose(f);
    snprintf(deep, sizeof deep, "%s/a/new/x", tdir);
    CHECK(file_mkdir_p(deep) == OK);
    snprintf(deep, sizeof deep, "%s/a/m1/m2/../../file/sub", tdir);
    int rc = file_mkdir_p_created(deep, created, sizeof created);
    CHECK(rc == ERR_IO && strstr(err_msg(), "cannot create directory") &&
              strstr(err_msg(), "a/m1/m2/../../file/sub"), "%d %s", rc, err_msg());
    CHECK(!is_dir(tpath("a/m1")) && created[0] == 0, "the failed call removed what it created");
    CHECK(file_mkdir_p(tpath("a/file")) == ERR_IO && strstr(err_msg(), "not a directory"),
          "%s", err_msg());
    CHECK(file_mkdir_p("") == ERR_ARG);
}

/* Outputs refused before anything is written: file_same (an output over an input) and
 * file_check_writable (what a later atomic write would fail on). */
static void test_same_writable(void)
{
    char a[700], b[700], via[700], rel[700], cwd[4096];
    snprintf(a, sizeof a, "%s", tpath("same_a"));
    snprintf(b, sizeof b, "%s", tpath("same_b"));
    CHECK(file_write_atomic(a, "x", 1) == OK);
    CHECK(file_same(a, a) && !file_same(a, b) && !file_same(b, a), "a file; a missing one");
    CHECK(file_same(b, b), "the same missing path");
    snprintf(via, sizeof via, "%s/a/../same_b", tdir);
    CHECK(file_same(b, via), "a missing file through another spelling of its directory");
    CHECK(symlink(a, tpath("same_link")) == 0 && file_same(a, tpath("same_link")), "a symlink");
    CHECK(link(a, tpath("same_hard")) == 0 && file_same(tpath("same_hard"), a), "a hard link");
    CHECK(getcwd(cwd, sizeof cwd) && chdir(tdir) == 0, "chdir");
    snprintf(rel, sizeof rel, "./same_a");
    CHECK(file_same(rel, a) && file_same("same_b", b), "relative and absolute");
    CHECK(chdir(cwd) == 0, "chdir back");
    CHECK(!file_same(NULL, a) && !file_same(a, NULL) && !file_same("", ""), "NULL and empty");
    /* writable: a new file, an existing one; refused: a missing directory (named as given), a
       directory, a dangling link; nothing is created either way */
    CHECK(file_check_writable(b) == OK && access(b, F_OK) != 0, "%s", err_msg());
    CHECK(file_check_writable(a) == OK, "%s", err_msg());
    CHECK(file_check_writable(tpath("nodir/x.json")) == ERR_IO &&
              strstr(err_msg(), "nodir/x.json: cannot create: directory ") && !strstr(err_msg(), ".tmp."),
          "%s", err_msg());
    CHECK(file_check_writable(tdir) == ERR_IO && strstr(err_msg(), "is a directory"), "%s", err_msg());
    CHECK(symlink(tpath("nowhere"), tpath("same_dangling")) == 0 &&
              file_check_writable(tpath("same_dangling")) == ERR_IO && strstr(err_msg(), "dangling"),
          "%s", err_msg());
    CHECK(file_check_writable("/dev/null") == OK, "a device is written through: %s", err_msg());
    /* an empty output directory: "." was its ancestor and it passed (bpe-train -o '' trained) */
    CHECK(file_check_creatable_dir("") == ERR_IO && strstr(err_msg(), "directory '': empty path"),
          "%s", err_msg());
    CHECK(file_check_creatable_dir(tpath("newdir")) == OK, "%s", err_msg());
    /* free space: of the file's filesystem, of its directory's where it does not exist yet */
    int64_t fb = 0;
    CHECK(file_free_bytes(a, &fb) == OK && fb > 0, "%s", err_msg());
    fb = 0;
    CHECK(file_free_bytes(tpath("nothere.db"), &fb) == OK && fb > 0, "%s", err_msg());
    CHECK(file_free_bytes(tpath("nodir/y.db"), &fb) == ERR_IO && strstr(err_msg(), "nodir: cannot check free space"),
          "%s", err_msg());
    /* the atomic writer's own failure names the path given, not its temp file */
    CHECK(file_write_atomic(tpath("nodir/y"), "x", 1) == ERR_IO && strstr(err_msg(), "nodir/y: cannot create") &&
              !strstr(err_msg(), ".tmp."), "%s", err_msg());
}

static void test_atomic(void)
{
    size_t n;
    const char *p = tpath("out.txt");
    CHECK(file_write_atomic(p, "old", 3) == OK);
    file_atomic a;
    CHECK(file_atomic_open(&a, p) == OK && a.f);
    fputs("new ", a.f);
    fprintf(a.f, "%d", 42);
    CHECK(count_temps(tdir) == 1, "the temp file exists while writing");
    char *got = slurp(p, &n);
    CHECK(got && !strcmp(got, "old"), "readers see the old file until commit");
    a.sync = 1;
    CHECK(file_atomic_commit(&a) == OK && !a.f && !a.path, "%s", err_msg());
    got = slurp(p, &n);
    CHECK(got && !strcmp(got, "new 42") && count_temps(tdir) == 0, "commit: '%s'", got);
    /* abort leaves the old file and no temp file; abort twice (or on a zeroed struct) is fine */
    CHECK(file_atomic_open(&a, p) == OK);
    fputs("discarded", a.f);
    file_atomic_abort(&a);
    file_atomic_abort(&a);
    file_atomic z = {0};
    file_atomic_abort(&z);
    got = slurp(p, &n);
    CHECK(got && !strcmp(got, "new 42") && count_temps(tdir) == 0, "abort: '%s'", got);
    /* the temp name is PATH.tmp.PID */
    CHECK(file_atomic_open(&a, p) == OK);
    char want[600];
    snprintf(want, sizeof want, "%s.tmp.%ld", p, (long)getpid());
    CHECK(!strcmp(a.tmp, want) && access(want, F_OK) == 0, "%s", a.tmp);
    file_atomic_abort(&a);
    /* a directory is refused at open (it used to fail only at the rename): ERR_IO, no temp */
    CHECK(file_mkdir_p(tpath("isdir/sub")) == OK);
    int rc = file_atomic_open(&a, tpath("isdir"));
    CHECK(rc == ERR_IO && strstr(err_msg(), "isdir: is a directory") && !a.f &&
              count_temps(tdir) == 0, "%d %s", rc, err_msg());
    /* a commit whose rename fails (the directory appeared after open): ERR_IO, no temp left */
    CHECK(file_atomic_open(&a, tpath("late")) == OK);
    CHECK(file_mkdir_p(tpath("late/sub")) == OK);
    fputs("x", a.f);
    rc = file_atomic_commit(&a);
    CHECK(rc == ERR_IO && strstr(err_msg(), "write failed") && count_temps(tdir) == 0, "%d %s", rc,
          err_msg());
    /* open in a missing directory: ERR_IO naming the path given (not the temp file) */
    rc = file_atomic_open(&a, tpath("nodir/x"));
    CHECK(rc == ERR_IO && strstr(err_msg(), "nodir/x: cannot create") && !a.f, "%s", err_msg());
    CHECK(file_write_atomic(tpath("nodir/x"), "a", 1) == ERR_IO);
    /* copies: content, atomic, errors name the file */
    char big[3000];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (char)('a' + i % 26);
    CHECK(file_write_atomic(tpath("src.bin"), big, sizeof big) == OK);
    CHECK(file_copy_atomic(tpath("src.bin"), tpath("dst.bin")) == OK);
    got = slurp(tpath("dst.bin"), &n);
    CHECK(got && n == sizeof big && !memcmp(got, big, n) && count_temps(tdir) == 0);
    CHECK(file_copy_atomic(tpath("missing"), tpath("dst.bin")) == ERR_IO &&
          strstr(err_msg(), "missing: cannot open"), "%s", err_msg());
    got = slurp(tpath("dst.bin"), &n);
    CHECK(got && n == sizeof big, "a failed copy keeps the old destination");
    /* leftovers NAME.tmp.* of the listed names go; other files stay */
    const char *const names[] = {"model.safetensors", "config.json"};
    const char *junk[] = {"model.safetensors.tmp.123", "config.json.tmp.9", "other.tmp.5",
                          "model.safetensors.bak", "config.json"};
    for (int i = 0; i < 5; i++) file_write_atomic(tpath(junk[i]), "j", 1);
    file_remove_temps(tdir, names, 2);
    CHECK(access(tpath(junk[0]), F_OK) != 0 && access(tpath(junk[1]), F_OK) != 0);
    CHECK(access(tpath(junk[2]), F_OK) == 0 && access(tpath(junk[3]), F_OK) == 0 &&
          access(tpath(junk[4]), F_OK) == 0, "unlisted names and finished files stay");
    unlink(tpath(junk[2]));
    file_remove_temps(tpath("nodir"), names, 2); /* a missing directory is ignored */
    /* file_remove_dead_temps(NAME) removes NAME.tmp.PID of a writer that is gone (a killed
       export left its temp for good), not a live writer's, nor another name's; so does a file
       group's add (a killed attribute's staged file) */
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0);
    /* a process id is digits to the end: "123abc" was read as process 123 (an audit) */
    char pt[40];
    snprintf(pt, sizeof pt, "%ld", (long)dead);
    CHECK(file_pid_gone(pt), "a waited-for child is gone");
    snprintf(pt, sizeof pt, "%ldabc", (long)dead);
    CHECK(!file_pid_gone(pt) && !file_pid_gone("") && !file_pid_gone("+5") && !file_pid_gone(" 5") &&
          !file_pid_gone("0") && !file_pid_gone("99999999999999999999"), "not process ids");
    snprintf(pt, sizeof pt, "%ld", (long)getpid());
    CHECK(!file_pid_gone(pt), "this process is not gone");
    /* a child that exited and is not yet waited for (a zombie) is gone: it writes nothing more */
    pid_t zomb = fork();
    if (zomb == 0) _exit(0);
    int zgone = 0;
    snprintf(pt, sizeof pt, "%ld", (long)zomb);
    for (int i = 0; i < 2000 && !(zgone = file_pid_gone(pt)); i++) usleep(1000);
    CHECK(zgone, "a zombie (exited, not yet reaped) is gone");
    waitpid(zomb, NULL, 0);
    pid_t live = fork();
    if (live == 0) { pause(); _exit(0); }
    snprintf(pt, sizeof pt, "%ld", (long)live);
    CHECK(!file_pid_gone(pt), "a live child is not gone");
    kill(live, SIGKILL);
    waitpid(live, NULL, 0);
    char dn[64], ln[64], on[64], nn[64], nl[64];
    snprintf(dn, sizeof dn, "out.npy.tmp.%ld", (long)dead);
    snprintf(ln, sizeof ln, "out.npy.tmp.%ld", (long)getppid());
    snprintf(on, sizeof on, "out2.npy.tmp.%ld", (long)dead);
    /* a group's staged file killed in its own atomic write: STAGED.tmp.PID, never removed */
    snprintf(nn, sizeof nn, "out.npy.tmp.%ld.tmp.%ld", (long)dead, (long)dead);
    snprintf(nl, sizeof nl, "out.npy.tmp.%ld.tmp.%ld", (long)getppid(), (long)getppid());
    FILE *tf;
    const char *tn[5] = {dn, ln, on, nn, nl};
    for (int i = 0; i < 5; i++)
        if ((tf = fopen(tpath(tn[i]), "w"))) fclose(tf);
    CHECK(file_write_atomic(tpath("out.npy"), "x", 1) == OK);
    CHECK(access(tpath(dn), F_OK) == 0, "a plain atomic write scans nothing (a report's pictures)");
    file_remove_dead_temps(tpath("out.npy"));
    CHECK(access(tpath(dn), F_OK) != 0, "a dead writer's temp is removed");
    CHECK(access(tpath(ln), F_OK) == 0 && access(tpath(on), F_OK) == 0,
          "a live writer's temp and another name's stay");
    CHECK(access(tpath(nn), F_OK) != 0, "a dead group's nested temp is removed");
    CHECK(access(tpath(nl), F_OK) == 0, "a live group's nested temp stays");
    unlink(tpath(nl));
    file_group g = {0};
    const char *w = file_group_add(&g, tpath("out2.npy"));
    CHECK(w && access(tpath(on), F_OK) != 0, "a group's add removes its target's dead temps");
    CHECK(w && file_write_atomic(w, "y", 1) == OK && file_group_commit(&g) == OK &&
          access(tpath("out2.npy"), F_OK) == 0, "the group's file in place");
    unlink(tpath(ln));
    unlink(tpath("out.npy"));
    unlink(tpath("out2.npy"));
}

static int is_symlink(const char *p)
{
    struct stat sb;
    return lstat(p, &sb) == 0 && S_ISLNK(sb.st_mode);
}

/* The output rule of fileio.h: symlinks followed to a regular file, devices and FIFOs written
 * through, dangling links and other types refused. The real /dev/full and /dev/null are never
 * touched: a stand-in character device 1,7 (the full device) is made inside tdir. */
static void test_atomic_special(void)
{
    size_t n;
    char *got;
    /* a symlink to a file: the target is replaced, the link stays a link */
    CHECK(file_write_atomic(tpath("t1.txt"), "old", 3) == OK);
    CHECK(symlink("t1.txt", tpath("l1")) == 0);
    CHECK(file_write_atomic(tpath("l1"), "via link", 8) == OK, "%s", err_msg());
    got = slurp(tpath("t1.txt"), &n);
    CHECK(got && n == 8 && !memcmp(got, "via link", 8), "target written through the link");
    CHECK(is_symlink(tpath("l1")) && count_temps(tdir) == 0, "the link is still a link");
    /* a chain l3 -> l2 -> sub/t2 (relative links, the last into another directory): the temp
     * file lives next to the final target, so the rename stays within one directory */
    CHECK(file_mkdir_p(tpath("chain")) == OK);
    CHECK(file_write_atomic(tpath("chain/t2"), "o", 1) == OK);
    CHECK(symlink("chain/t2", tpath("l2")) == 0 && symlink("l2", tpath("l3")) == 0);
    file_atomic a;
    CHECK(file_atomic_open(&a, tpath("l3")) == OK, "%s", err_msg());
    CHECK(a.f && strstr(a.tmp, "/chain/t2.tmp."), "temp beside the target: %s", a.tmp);
    fputs("chained", a.f);
    CHECK(file_atomic_commit(&a) == OK, "%s", err_msg());
    got = slurp(tpath("chain/t2"), &n);
    CHECK(got && n == 7 && !memcmp(got, "chained", 7) && is_symlink(tpath("l2")) &&
              is_symlink(tpath("l3")), "the chain's file written, both links kept");
    CHECK(file_copy_atomic(tpath("t1.txt"), tpath("l3")) == OK, "%s", err_msg());
    got = slurp(tpath("chain/t2"), &n);
    CHECK(got && n == 8 && is_symlink(tpath("l3")), "copies follow the chain too");
    /* a dangling link is refused, nothing created at its target */
    CHECK(symlink("nowhere/missing", tpath("dangle")) == 0);
    int rc = file_write_atomic(tpath("dangle"), "x", 1);
    CHECK(rc == ERR_IO && strstr(err_msg(), "dangle: symlink to a missing file"), "%s",
          err_msg());
    CHECK(is_symlink(tpath("dangle")) && count_temps(tdir) == 0);
    /* a link to a directory is refused as a directory */
    CHECK(symlink("isdir", tpath("ldir")) == 0);
    rc = file_write_atomic(tpath("ldir"), "x", 1);
    CHECK(rc == ERR_IO && strstr(err_msg(), "is a directory (through a symlink)"), "%s",
          err_msg());
    /* a FIFO: written through to a reader (a child), not replaced by a regular file */
    CHECK(mkfifo(tpath("fifo"), 0600) == 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(tpath("fifo"), O_RDONLY);
        char b[64];
        ssize_t k = fd >= 0 ? read(fd, b, sizeof b) : -1;
        _exit(k == 9 && !memcmp(b, "to a fifo", 9) ? 0 : 1);
    }
    CHECK(pid > 0 && file_write_atomic(tpath("fifo"), "to a fifo", 9) == OK, "%s", err_msg());
    int st = -1;
    if (pid > 0) waitpid(pid, &st, 0);
    struct stat sb;
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the reader got the bytes");
    CHECK(lstat(tpath("fifo"), &sb) == 0 && S_ISFIFO(sb.st_mode) && count_temps(tdir) == 0,
          "the FIFO is still a FIFO");
    /* a full device (stand-in char device 1,7 made here; needs root): ENOSPC is an error, and
     * the device node stays a device; a symlink to it is written through as well */
    if (mknod(tpath("full"), S_IFCHR | 0600, makedev(1, 7)) != 0) {
        SKIP("mknod of a stand-in full device refused (not root?)");
    } else {
        char big[100000];
        memset(big, 'x', sizeof big);
        rc = file_write_atomic(tpath("full"), big, sizeof big);
        CHECK(rc == ERR_IO && strstr(err_msg(), "No space left on device"), "%d %s", rc,
              err_msg());
        CHECK(file_atomic_open(&a, tpath("full")) == OK && a.direct, "%s", err_msg());
        fputs("small", a.f); /* buffered: the error shows at commit */
        rc = file_atomic_commit(&a);
        CHECK(rc == ERR_IO && strstr(err_msg(), "full: write failed: No space left"), "%s",
              err_msg());
        CHECK(symlink("full", tpath("lfull")) == 0);
        CHECK(file_write_atomic(tpath("lfull"), "x", 1) == ERR_IO);
        CHECK(file_copy_atomic(tpath("t1.txt"), tpath("full")) == ERR_IO);
        CHECK(lstat(tpath("full"), &sb) == 0 && S_ISCHR(sb.st_mode) && count_temps(tdir) == 0,
              "the device node is still a device");
        /* the stand-in /dev/null (1,3) takes anything */
        CHECK(mknod(tpath("null"), S_IFCHR | 0600, makedev(1, 3)) == 0);
        CHECK(file_write_atomic(tpath("null"), big, sizeof big) == OK, "%s", err_msg());
        CHECK(lstat(tpath("null"), &sb) == 0 && S_ISCHR(sb.st_mode));
    }
}

/* Each replaced copy's values, computed with the old code (store_seq_is_val's split hash,
 * store_iter_shuffle's stream, train.c's mix64, analysis' xorshift64*, the tokenizer's FNV and
 * the store's checksum FNV): stored splits, shuffles and checksums depend on them. */
static void test_hash(void)
{
    uint64_t x = 0x5ae11e5ae11eULL ^ 42;
    CHECK(hash_splitmix64(&x) == 0xd337d25b62aab21eULL);
    x = 7;
    CHECK(hash_splitmix64(&x) == 0x63cbe1e459320dd7ULL);
    CHECK(hash_splitmix64(&x) == 0x044c3cd7f43c661cULL);
    CHECK(hash_splitmix64(&x) == 0xe6984080bab12a02ULL);
    CHECK(hash_mix64(12345) == 0x22118258a9d111a0ULL);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    CHECK(rng_xorshift64s(&s) == 0x0d83b3e29a21487aULL);
    CHECK(rng_xorshift64s(&s) == 0x54c44c79f1fe9d67ULL);
    CHECK(rng_xorshift64s(&s) == 0xa845f342007a0e78ULL);
    CHECK((hash_fnv1a(HASH_FNV1A_INIT_TOK, "hello", 5) | 1) == 0x005a0d15131ec7a1ULL);
    CHECK(hash_fnv1a(HASH_FNV1A_INIT, "hello", 5) == 0xa430d84680aabd0bULL, "published value");
    CHECK(hash_fnv1a(HASH_FNV1A_INIT, "", 0) == HASH_FNV1A_INIT);
    CHECK(hash_fnv1a(hash_fnv1a(HASH_FNV1A_INIT, "he", 2), "llo", 3) == 0xa430d84680aabd0bULL,
          "chunks continue the hash");
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static void test_select(void)
{
    rng_state r;
    rng_seed(&r, 3);
    float a[257], sorted[257];
    int ok = 1;
    for (int trial = 0; trial < 200; trial++) {
        int n = 1 + (int)rng_below(&r, 257);
        for (int i = 0; i < n; i++) /* many ties: values from a small set, and -inf */
            a[i] = trial % 3 ? (float)rng_below(&r, 7) - 3 : (float)rng_uniform(&r);
        if (n > 3) a[n / 2] = -INFINITY;
        memcpy(sorted, a, sizeof(float) * (size_t)n);
        qsort(sorted, (size_t)n, sizeof(float), cmp_float);
        int64_t k = (int64_t)rng_below(&r, (uint64_t)n);
        ok &= sel_kth_smallest(a, n, k) == sorted[k];
    }
    CHECK(ok, "quickselect agrees with sorting");
}

static void test_buf(void)
{
    /* buf_double: the shortest text that reads back exactly (cJSON rounded 9000000000000001) */
    char num[40];
    static const double xs[] = {0.4, 5, 0.05, 9000000000000001.0, 0x1p53, 1e-300, 0.1 + 0.2,
                                -2.5e-7, 1.0 / 3};
    static const char *const want[] = {"0.4", "5", "0.05", "9000000000000001", "9007199254740992",
                                       "1e-300", "0.30000000000000004", "-2.5e-07",
                                       "0.3333333333333333"};
    for (int i = 0; i < 9; i++)
        CHECK(!strcmp(buf_double(num, sizeof num, xs[i]), want[i]) && strtod(num, NULL) == xs[i],
              "%d: %s", i, num);
    /* buf_read_double: decimals only (strtod took 0x10, " 1", "inf", "nan"), finite values */
    static const struct { const char *s; int flags; size_t n; double x; } rd[] = {
        {"2.5", 0, 3, 2.5}, {"-1e-3,", 0, 5, -1e-3}, {"+3", 0, 2, 3}, {".5", 0, 2, 0.5},
        {"5.", 0, 2, 5}, {"1e", 0, 1, 1}, {"7E+2x", 0, 4, 700}, {"1e-400", 0, 6, 0},
        {"0x10", 0, 0, 0}, {"0X1p4", 0, 0, 0}, {" 1", 0, 0, 0}, {"inf", 0, 0, 0},
        {"nan", 0, 0, 0}, {"-infinity", 0, 0, 0}, {"1e999", 0, 0, 0}, {"", 0, 0, 0},
        {".", 0, 0, 0}, {"-", 0, 0, 0}, {"+", 0, 0, 0}, {"-0.25", BUF_DECIMAL_JSON, 5, -0.25},
        {"+1", BUF_DECIMAL_JSON, 0, 0}, {".5", BUF_DECIMAL_JSON, 0, 0}, {"5.", BUF_DECIMAL_JSON, 0, 0},
        {"1.5e2", BUF_DECIMAL_JSON, 5, 150}};
    for (size_t i = 0; i < sizeof rd / sizeof rd[0]; i++) {
        double x = -7;
        size_t n = buf_read_double(rd[i].s, rd[i].flags, &x);
        CHECK(n == rd[i].n && (n ? x == rd[i].x : x == -7), "buf_read_double('%s', %d): %zu, %g",
              rd[i].s, rd[i].flags, n, x);
    }
    buf b = {0};
    CHECK(buf_put(&b, "", 0) == OK && b.p && b.p[0] == 0 && b.n == 0);
    CHECK(buf_str(&b, "ab") == OK && buf_put(&b, "c\0d", 3) == OK && b.n == 5 &&
          !memcmp(b.p, "abc\0d", 6));
    buf_reset(&b);
    CHECK(b.n == 0 && b.p[0] == 0);
    char big[600];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    CHECK(buf_printf(&b, "%d-%s", 12, "z") == OK && !strcmp(b.p, "12-z"));
    CHECK(buf_printf(&b, "[%s]", big) == OK && b.n == 4 + 601 && b.p[b.n] == 0 &&
          b.p[b.n - 1] == ']', "long printf-append");
    buf_reset(&b);
    /* JSON: the corpus/query form (short \n \t \r) and the stored run-parameter form (\u00XX) */
    const char s[] = "a\"b\\c\n\t\r\x01\x1f \xc3\xa9";
    CHECK(buf_json(&b, s, sizeof s - 1, 0) == OK &&
          !strcmp(b.p, "\"a\\\"b\\\\c\\n\\t\\r\\u0001\\u001f \xc3\xa9\""), "%s", b.p);
    buf_reset(&b);
    CHECK(buf_json(&b, s, sizeof s - 1, BUF_JSON_CTRL_U) == OK &&
          !strcmp(b.p, "\"a\\\"b\\\\c\\u000a\\u0009\\u000d\\u0001\\u001f \xc3\xa9\""), "%s", b.p);
    buf_reset(&b);
    CHECK(buf_json(&b, "x\0y", 3, 0) == OK && !memcmp(b.p, "\"x\\u0000y\"", 11), "NUL inside");
    /* out of memory: an error and the buffer as it was */
    buf_free(&b);
    buf_str(&b, "keep");
    mem_fail_at(1);
    int rc = buf_json(&b, big, strlen(big), 0);
    mem_fail_at(0);
    CHECK(rc == ERR_NOMEM && b.n == 4 && !strcmp(b.p, "keep"), "%d %s", rc, b.p);
    buf_free(&b);
    CHECK(!b.p && !b.n && !b.cap);
}

/* Run a reporter for `secs` seconds with stderr sent to a file; returns what it wrote. */
static char *progress_capture_at(const char *mode, const char *every, double secs, double total,
                                 double base)
{
    static char out[8192];
    const char *path = tpath("progress.txt");
    fflush(stderr);
    int saved = dup(STDERR_FILENO), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    dup2(fd, STDERR_FILENO);
    close(fd);
    setenv("SAELITE_PROGRESS", mode, 1);
    if (every) setenv("SAELITE_PROGRESS_EVERY", every, 1);
    else unsetenv("SAELITE_PROGRESS_EVERY");
    progress p;
    progress_begin_at(&p, "demo", total, "step", base);
    double t0 = now_seconds();
    int i = 0;
    while (now_seconds() - t0 < secs) {
        progress_update(&p, base + ++i, "loss %.3f", 1.5);
        usleep(2000);
    }
    progress_end(&p);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    unsetenv("SAELITE_PROGRESS");
    unsetenv("SAELITE_PROGRESS_EVERY");
    size_t n;
    char *got = slurp(path, &n);
    snprintf(out, sizeof out, "%s", got ? got : "");
    return out;
}

static char *progress_capture(const char *mode, const char *every, double secs, double total)
{
    return progress_capture_at(mode, every, secs, total, 0);
}

static void test_progress(void)
{
    /* not a terminal: plain lines every interval, each a whole line without \r or escapes */
    char *got = progress_capture("lines", "0.05", 0.33, 1e9);
    int lines = 0, ok = 1;
    for (char *l = got; *l; lines++) {
        char *nl = strchr(l, '\n');
        if (!nl) { ok = 0; break; }
        ok &= !strncmp(l, "demo ", 5) && memchr(l, '%', (size_t)(nl - l)) &&
              strstr(l, " step ") && strstr(l, " step/s  ETA ") && nl[-1] != ' ';
        l = nl + 1;
    }
    CHECK(ok && lines >= 3 && lines <= 8 && !strchr(got, '\r') && !strchr(got, '\033'),
          "%d lines: '%s'", lines, got);
    CHECK(strstr(got, "loss 1.500\n"), "the caller's status ends the line: '%s'", got);
    /* a resume (a million steps done before): the percentage counts them, the rate and the ETA
       do not (a resumed sae-train read 676k tok/s, ETA 00:00, for 17.9k tok/s and 3 s to go) */
    got = progress_capture_at("lines", "0.05", 0.12, 2e6, 1e6);
    CHECK(strstr(got, "demo  50.0% 1.00M/2.00M step") && !strstr(got, "M step/s") &&
              !strstr(got, "ETA 00:00 "), "'%s'", got);
    /* unknown total: elapsed instead of ETA */
    got = progress_capture("lines", "0.05", 0.12, 0);
    CHECK(strstr(got, "elapsed") && !strstr(got, "ETA"), "'%s'", got);
    /* the default interval (5 s): a short command prints nothing */
    got = progress_capture("lines", NULL, 0.1, 100);
    CHECK(got[0] == 0, "'%s'", got);
    /* off prints nothing; the forced terminal mode redraws in place and clears at the end */
    got = progress_capture("0", "0.01", 0.05, 100);
    CHECK(got[0] == 0, "'%s'", got);
    got = progress_capture("1", NULL, 0.05, 100);
    size_t n = strlen(got);
    CHECK(!strncmp(got, "\r\033[Kdemo ", 8) && !strchr(got, '\n') && n >= 4 &&
          !strcmp(got + n - 4, "\r\033[K"), "'%s'", got);
    /* slow rates keep their digits (0.2 step/s printed "0", an audit); counts stay whole */
    static const struct { double v; const char *want; } si[] = {
        {0.2, "0.2"}, {0.04567, "0.0457"}, {13.44, "13.4"}, {37, "37"}, {150.3, "150"},
        {999, "999"}, {1500, "1.50k"}, {2.5e6, "2.50M"}, {0, "0"}};
    for (size_t i = 0; i < sizeof si / sizeof si[0]; i++) {
        char b[16];
        CHECK(!strcmp(fmt_si(b, si[i].v), si[i].want), "fmt_si(%g): %s, want %s", si[i].v, b, si[i].want);
    }
}

static void test_tensor(void)
{
    tensor_view t = {.ndim = 3, .shape = {2, 3, 4}};
    tensor_set_contiguous(&t);
    CHECK(t.stride[0] == 12 && t.stride[1] == 4 && t.stride[2] == 1);
    CHECK(tensor_numel(&t) == 24);
}

/* UTF-8 (RFC 3629): the valid boundaries, and every kind of hostile sequence. */
static void test_utf8(void)
{
    static const struct {
        const char *s;
        size_t n, len; /* bytes given, valid length (0: invalid) */
        uint32_t cp;
    } cases[] = {
        {"a", 1, 1, 0x61},
        {"\x00", 1, 1, 0},
        {"\x7f", 1, 1, 0x7F},
        {"\xc2\x80", 2, 2, 0x80},                 /* smallest 2-byte */
        {"\xdf\xbf", 2, 2, 0x7FF},
        {"\xe0\xa0\x80", 3, 3, 0x800},            /* smallest 3-byte */
        {"\xed\x9f\xbf", 3, 3, 0xD7FF},           /* just below the surrogates */
        {"\xee\x80\x80", 3, 3, 0xE000},           /* just above */
        {"\xef\xbf\xbd", 3, 3, 0xFFFD},
        {"\xef\xbf\xbf", 3, 3, 0xFFFF},
        {"\xf0\x90\x80\x80", 4, 4, 0x10000},      /* smallest 4-byte */
        {"\xf4\x8f\xbf\xbf", 4, 4, 0x10FFFF},     /* largest code point */
        {"\xc0\x80", 2, 0, 0},                    /* overlong NUL */
        {"\xc0\xaf", 2, 0, 0},                    /* overlong '/' */
        {"\xc1\xbf", 2, 0, 0},                    /* overlong U+7F */
        {"\xe0\x80\xaf", 3, 0, 0},                /* overlong 3-byte '/' */
        {"\xe0\x9f\xbf", 3, 0, 0},                /* overlong U+7FF */
        {"\xf0\x80\x80\xaf", 4, 0, 0},            /* overlong 4-byte '/' */
        {"\xf0\x8f\xbf\xbf", 4, 0, 0},            /* overlong U+FFFF */
        {"\xed\xa0\x80", 3, 0, 0},                /* U+D800, high surrogate */
        {"\xed\xbf\xbf", 3, 0, 0},                /* U+DFFF, low surrogate */
        {"\xed\xa0\xbd\xed\xb8\x80", 6, 0, 0},    /* a CESU-8 surrogate pair */
        {"\xf4\x90\x80\x80", 4, 0, 0},            /* U+110000 */
        {"\xf5\x80\x80\x80", 4, 0, 0},            /* F5: above U+10FFFF */
        {"\xf7\xbf\xbf\xbf", 4, 0, 0},            /* U+1FFFFF */
        {"\xf8\x88\x80\x80\x80", 5, 0, 0},        /* old 5-byte form */
        {"\xfc\x84\x80\x80\x80\x80", 6, 0, 0},    /* old 6-byte form */
        {"\xfe", 1, 0, 0},
        {"\xff", 1, 0, 0},
        {"\x80", 1, 0, 0},                        /* lone continuation */
        {"\xbf", 1, 0, 0},
        {"\xc3", 1, 0, 0},                        /* truncated 2-byte */
        {"\xe2\x82", 2, 0, 0},                    /* truncated 3-byte */
        {"\xf0\x9f\x98", 3, 0, 0},                /* truncated 4-byte */
        {"\xc3\x28", 2, 0, 0},                    /* bad continuation */
        {"\xe2\x28\xa1", 3, 0, 0},
        {"\xe2\x82\x28", 3, 0, 0},
        {"\xf0\x9f\x98\x28", 4, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint32_t cp = 0xDEADBEEF;
        size_t k = utf8_decode((const unsigned char *)cases[i].s, cases[i].n, &cp);
        CHECK(k == cases[i].len && (!k || cp == cases[i].cp), "case %zu: length %zu (want %zu), U+%04X",
              i, k, cases[i].len, (unsigned)cp);
        CHECK(utf8_len((const unsigned char *)cases[i].s, cases[i].n) == cases[i].len, "utf8_len case %zu", i);
        CHECK(k || cp == 0xDEADBEEF, "case %zu: *cp untouched when invalid", i);
        char e[4];
        if (k) CHECK(utf8_encode(cp, e) == k && !memcmp(e, cases[i].s, k), "case %zu encodes back", i);
    }
    CHECK(utf8_len((const unsigned char *)"", 0) == 0, "nothing to read");
    /* a valid sequence cut short by n */
    CHECK(utf8_len((const unsigned char *)"\xf0\x9f\x98\x80", 3) == 0 &&
          utf8_len((const unsigned char *)"\xf0\x9f\x98\x80", 4) == 4);
    char e[4];
    CHECK(utf8_encode(0xD800, e) == 0 && utf8_encode(0xDFFF, e) == 0 && utf8_encode(0x110000, e) == 0,
          "no surrogates or values above U+10FFFF");
    /* every code point round-trips through encode/decode */
    int bad = 0;
    for (uint32_t c = 0; c <= 0x10FFFF; c++) {
        if (c == 0xD800) c = 0xE000;
        uint32_t back = 0;
        size_t k = utf8_encode(c, e);
        if (!k || utf8_decode((const unsigned char *)e, k, &back) != k || back != c) bad++;
    }
    CHECK(bad == 0, "%d code points do not round-trip", bad);
    /* every 2-byte and 3-byte string: valid iff the canonical ranges (no overlong, no surrogate) */
    int wrong = 0;
    for (unsigned a = 0x80; a < 0x100; a++)
        for (unsigned b = 0; b < 0x100; b++) {
            unsigned char s2[2] = {(unsigned char)a, (unsigned char)b};
            int want = a >= 0xC2 && a <= 0xDF && (b & 0xC0) == 0x80;
            wrong += (utf8_len(s2, 2) == 2) != want;
            for (unsigned c = 0x80; c < 0xC0 && a >= 0xE0 && a < 0xF0; c += 0x3F) {
                unsigned char s3[3] = {(unsigned char)a, (unsigned char)b, (unsigned char)c};
                uint32_t v = (a & 0x0F) << 12 | (b & 0x3F) << 6 | (c & 0x3F);
                int w3 = (b & 0xC0) == 0x80 && v >= 0x800 && !(v >= 0xD800 && v <= 0xDFFF);
                wrong += (utf8_len(s3, 3) == 3) != w3;
            }
        }
    CHECK(wrong == 0, "%d 2/3-byte strings classified wrongly", wrong);
    CHECK(utf8_valid_prefix((const unsigned char *)"ab\xc3\xa9\xed\xa0\x80z", 8) == 4);
    CHECK(utf8_valid_prefix((const unsigned char *)"ab\xc3\xa9", 4) == 4);
    CHECK(utf8_valid_prefix((const unsigned char *)"\xe2\x82", 2) == 0);

    /* sanitisers: one U+FFFD per byte that starts no valid sequence */
    char out[128];
    const char hostile[] = "a\xc0\xaf" "\xed\xa0\x80" "\xf4\x90\x80\x80" "\xf8\x88\x80\x80\x80" "\x00" "\xe2\x82";
    size_t n = utf8_clean(hostile, sizeof hostile - 1, out, sizeof out);
    int repl = 0;
    for (size_t i = 0; i + 2 < n; i++) repl += !memcmp(out + i, "\xef\xbf\xbd", 3);
    CHECK(out[0] == 'a' && repl == 2 + 3 + 4 + 5 + 1 + 2 && n == 1 + 3 * (size_t)repl && strlen(out) == n,
          "clean: %d replacements, %zu bytes", repl, n);
    n = utf8_clean("\xc3\xa9\xc3\xa9", 4, out, 4); /* room for one character and the NUL */
    CHECK(n == 2 && !strcmp(out, "\xc3\xa9"), "clean cuts on a character boundary");
    n = utf8_clean("\xff", 1, out, 3);
    CHECK(n == 0 && out[0] == 0, "no room for U+FFFD: nothing");
    CHECK(utf8_clean("abc", 3, out, 0) == 0, "cap 0 writes nothing");
    n = utf8_for_display("a\n\t\x01\x7f" "\xc2\x85" "\xed\xa0\x80" "\xc3\xa9", 12, out, sizeof out);
    CHECK(!strcmp(out, "a\xe2\x86\xb5\xe2\x87\xa5\\x01\\x7f\\xc2\\x85\\xed\\xa0\\x80\xc3\xa9") &&
          n == strlen(out), "display: controls, C1 and invalid bytes as \\xHH: %s", out);
    n = utf8_for_display("\x00x", 2, out, sizeof out);
    CHECK(n == 5 && !strcmp(out, "\\x00x"), "NUL shown as \\x00, the rest kept: %s", out);
    n = utf8_for_display("\xe2", 1, out, sizeof out);
    CHECK(n == 4 && !strcmp(out, "\\xe2"), "a lone byte of a split character: %s", out);
    n = utf8_for_display("\x1b\x1b", 2, out, 8); /* room for one escape and the NUL */
    CHECK(n == 4 && !strcmp(out, "\\x1b"), "an escape is never cut");
    /* Display text is its own display text (the reports sanitise token text twice). */
    char again[64];
    n = utf8_for_display("\x00\x01\xff\n\t\xc2\x85\xc3\xa9\\", 10, out, sizeof out);
    CHECK(utf8_for_display(out, n, again, sizeof again) == n && !strcmp(out, again), "idempotent");
    /* Each of the 256 bytes alone shows as something different, never blank. */
    char seen[256][8];
    int distinct = 1;
    for (int b = 0; b < 256; b++) {
        char one = (char)b;
        n = utf8_for_display(&one, 1, seen[b], sizeof seen[b]);
        distinct &= n > 0;
        for (int k = 0; k < b; k++) distinct &= strcmp(seen[k], seen[b]) != 0;
    }
    CHECK(distinct, "the 256 single bytes display distinctly");
}

/* par_for: every index in exactly one call, ranges of at most grain, tids in [0, nt); a thread
 * that sleeps in its first range leaves the rest to the other (the split is dynamic). */
typedef struct {
    int *hits, *tid_of;
    int64_t grain;
    int nt, bad, slow_tid;
} for_probe;

static void for_mark(void *p, int tid, int64_t i0, int64_t i1)
{
    for_probe *f = p;
    if (i1 <= i0 || i1 - i0 > f->grain || tid < 0 || tid >= f->nt) f->bad = 1;
    if (tid == f->slow_tid) {
        f->slow_tid = -1; /* once: only this thread touches it while it holds that tid */
        usleep(200000);
    }
    for (int64_t i = i0; i < i1; i++) {
        __atomic_add_fetch(&f->hits[i], 1, __ATOMIC_RELAXED);
        f->tid_of[i] = tid;
    }
}

static void test_par_for(void)
{
    enum { N = 1000 };
    static int hits[N], tid_of[N];
    const int64_t grains[] = {1, 7, 64, 999, 1000, 5000};
    for (int g = 0; g < 6; g++)
        for (int nt = 1; nt <= 4; nt++) {
            memset(hits, 0, sizeof hits);
            for_probe f = {.hits = hits, .tid_of = tid_of, .grain = grains[g], .nt = nt, .slow_tid = -1};
            par_for(for_mark, &f, N, grains[g], nt);
            int once = 1;
            for (int i = 0; i < N; i++) once &= hits[i] == 1;
            CHECK(once && !f.bad, "par_for n %d grain %lld nt %d: each index once, ranges <= grain",
                  N, (long long)grains[g], nt);
        }
    memset(hits, 0, sizeof hits);
    for_probe f = {.hits = hits, .tid_of = tid_of, .grain = 10, .nt = 2, .slow_tid = 0};
    par_for(for_mark, &f, N, 10, 2);
    int by_other = 0;
    for (int i = 0; i < N; i++) by_other += hits[i] == 1 && tid_of[i] == 1;
    CHECK(by_other >= N - 20, "par_for: the thread not held up did %d of %d indices", by_other, N);
    f.nt = 1;
    par_for(for_mark, &f, 0, 10, 2); /* nothing to do: no call */
    par_for(for_mark, &f, -5, 10, 2);
    int total = 0;
    for (int i = 0; i < N; i++) total += hits[i];
    CHECK(total == N, "par_for: n <= 0 calls nothing");
}

/* par_run: every part (tid, nt) runs exactly once, also when threads cannot be started (the
 * parts of those run on the caller with the same nt; before, the caller ran (0, 1) instead) */
typedef struct {
    int calls[8];
    int bad;
} run_probe;

static void run_mark(void *p, int tid, int nt)
{
    run_probe *r = p;
    if (tid < 0 || tid >= 8 || nt != 4) {
        r->bad = 1;
        return;
    }
    __atomic_add_fetch(&r->calls[tid], 1, __ATOMIC_RELAXED);
}

static void test_par_run_fallback(void)
{
    for (int ok = -1; ok <= 3; ok++) { /* ok threads start, then pthread_create fails */
        run_probe r = {{0}, 0};
        par_fail_threads_after(ok);
        par_run(run_mark, &r, 4);
        par_fail_threads_after(-1);
        int once = !r.bad;
        for (int t = 0; t < 4; t++) once &= r.calls[t] == 1;
        CHECK(once, "par_run nt 4 with %d thread(s) started: each part once, as (tid, 4)",
              ok < 0 ? 3 : ok);
    }
}

/* file_sum: what is put comes back, and a changed, cut or longer file is told apart */
static void write_sum_file(const char *path, const double *a, size_t na, int64_t b)
{
    FILE *f = fopen(path, "wb");
    file_sum w = file_sum_start(f);
    file_sum_put(&w, a, na * sizeof *a);
    file_sum_put(&w, &b, sizeof b);
    file_sum_put_end(&w);
    CHECK(!w.bad && fclose(f) == 0, "file_sum: written");
}

/* file_atomic_open_plain replaces what is at the name (a link's target untouched, a FIFO not
 * waited on); file_open_plain_read reads regular files only and says none when missing */
static void test_atomic_plain(void)
{
    char p[512], victim[512], fifo[512];
    snprintf(p, sizeof p, "%s/plain.bin", tdir);
    snprintf(victim, sizeof victim, "%s/victim.txt", tdir);
    snprintf(fifo, sizeof fifo, "%s/plain.fifo", tdir);
    FILE *f = fopen(victim, "w");
    fputs("precious", f);
    fclose(f);
    unlink(p);
    CHECK(symlink(victim, p) == 0);
    FILE *r = NULL;
    int64_t size = -1;
    CHECK(file_open_plain_read(p, &r, &size) == ERR_IO && !r, "a link is not read");
    err_clear();
    file_atomic a;
    CHECK(file_atomic_open_plain(&a, p) == OK);
    fputs("new", a.f);
    CHECK(file_atomic_commit(&a) == OK);
    char buf[32] = "";
    f = fopen(victim, "r");
    CHECK(fgets(buf, sizeof buf, f) && !strcmp(buf, "precious"), "the link's target untouched: %s", buf);
    fclose(f);
    struct stat sb;
    CHECK(lstat(p, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == 3, "the link replaced by the file");
    CHECK(file_open_plain_read(p, &r, &size) == OK && r && size == 3);
    if (r) fclose(r);
    unlink(fifo);
    CHECK(mkfifo(fifo, 0644) == 0);
    CHECK(file_open_plain_read(fifo, &r, &size) == ERR_IO && !r, "a FIFO is refused, not waited on");
    err_clear();
    CHECK(file_atomic_open_plain(&a, fifo) == OK);
    fputs("x", a.f);
    CHECK(file_atomic_commit(&a) == OK);
    CHECK(lstat(fifo, &sb) == 0 && S_ISREG(sb.st_mode), "the FIFO replaced by the file");
    unlink(fifo);
    CHECK(file_open_plain_read(fifo, &r, &size) == OK && !r, "none there: OK, no file");
    unlink(p);
    unlink(victim);
}

static void test_file_sum(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/sum.bin", tdir);
    double a[3] = {1.5, -2, 1e300};
    /* variant 0 as written, 1 a byte changed, 2 cut short, 3 a byte more */
    for (int v = 0; v < 4; v++) {
        write_sum_file(path, a, 3, -7);
        if (v == 1 || v == 3) {
            FILE *g = fopen(path, v == 3 ? "ab" : "r+b");
            if (v == 1) fseek(g, 9, SEEK_SET);
            fputc(v == 1 ? 0x55 : 0, g);
            fclose(g);
        }
        if (v == 2 && truncate(path, 20) != 0) CHECK(0, "truncate");
        FILE *f = fopen(path, "rb");
        file_sum r = file_sum_start(f);
        double a2[3];
        int64_t b2;
        file_sum_get(&r, a2, sizeof a2);
        file_sum_get(&r, &b2, sizeof b2);
        int ok = file_sum_get_end(&r);
        fclose(f);
        if (v == 0) CHECK(ok && !memcmp(a, a2, sizeof a) && b2 == -7, "file_sum: read back");
        else CHECK(!ok, "file_sum: variant %d (changed, cut, longer) fails its check", v);
        if (v == 2) CHECK(r.bad && b2 == 0, "file_sum: a short read is bad and gives zeros");
    }
    file_sum n = file_sum_start(NULL);
    char c = 'x';
    file_sum_get(&n, &c, 1);
    CHECK(n.bad && c == 0, "file_sum: no file is bad");
}

/* The one-writer lock: a second holder is refused with ERR_BUSY naming the directory; a reader's
 * probe (file_dir_lock_held, a shared lock for a moment) does not make a starting writer give up:
 * file_dir_lock waits a probe's moment out. Without the wait a writer starting during a probe
 * was refused as if another writer held the directory. */
static void *unlock_later(void *p)
{
    nanosleep(&(struct timespec){.tv_nsec = 15000000}, NULL);
    flock(*(int *)p, LOCK_UN);
    return NULL;
}

static void test_dir_lock_wait(void)
{
    int fd = -1, fd2 = -1;
    CHECK(!file_dir_lock_held(tdir, "t.lock"), "dir lock: no file, not held");
    CHECK(file_dir_lock(tdir, "t.lock", "test", &fd) == OK && fd >= 0, "dir lock: taken");
    CHECK(file_dir_lock_held(tdir, "t.lock"), "dir lock: held is seen");
    CHECK(file_dir_lock_refuse(tdir, "t.lock", "test") == ERR_BUSY && strstr(err_msg(), "another test is writing"),
          "dir lock: refuse while held (%s)", err_msg());
    int rc = file_dir_lock(tdir, "t.lock", "test", &fd2);
    CHECK(rc == ERR_BUSY && fd2 < 0 && strstr(err_msg(), tdir) && strstr(err_msg(), "another test"),
          "dir lock: a second writer is refused naming the directory (%s)", err_msg());
    file_dir_unlock(fd);
    CHECK(!file_dir_lock_held(tdir, "t.lock"), "dir lock: released");
    /* a probe's shared lock, held 15 ms by another open file description */
    char path[600];
    snprintf(path, sizeof path, "%s/t.lock", tdir);
    int probe = open(path, O_RDONLY);
    CHECK(probe >= 0 && flock(probe, LOCK_SH | LOCK_NB) == 0, "dir lock: a probe's shared lock");
    pthread_t th;
    int started = pthread_create(&th, NULL, unlock_later, &probe) == 0;
    CHECK(started, "dir lock: a thread to release the probe");
    rc = started ? file_dir_lock(tdir, "t.lock", "test", &fd) : ERR_IO;
    if (started) pthread_join(th, NULL);
    CHECK(rc == OK && fd >= 0, "dir lock: a writer waits out a probe's moment (%s)", rc ? err_msg() : "");
    file_dir_unlock(fd);
    /* a shared lock held past the wait is a holder */
    CHECK(flock(probe, LOCK_SH | LOCK_NB) == 0, "dir lock: shared lock again");
    rc = file_dir_lock(tdir, "t.lock", "test", &fd);
    CHECK(rc == ERR_BUSY && fd < 0, "dir lock: a lock held past the wait is busy");
    close(probe);
    err_clear();
}

/* flock(2) for this program: the kernel's, except that, armed with a file and the fd that holds
 * its lock, the next exclusive attempt first finds the holder gone as a failed sae-train goes
 * (sae_run.c's run_discard unlinks the lock file it made, then the process exits) - the moment
 * between another run's open and its flock. file_dir_lock's call resolves here: libsaelite.a is
 * linked into this program. */
static int flock_drop_fd = -1;
static char flock_drop_path[600];
static int flock_errno; /* set: every call fails with it (a filesystem without flock) */

int flock(int fd, int op)
{
    if (flock_errno) {
        errno = flock_errno;
        return -1;
    }
    if (flock_drop_fd >= 0 && (op & LOCK_EX)) {
        unlink(flock_drop_path);
        close(flock_drop_fd);
        flock_drop_fd = -1;
    }
    return (int)syscall(SYS_flock, fd, op);
}

typedef struct {
    char path[600];
    int held; /* 1 while the shared lock is taken, -1: could not take it */
} lock_peek;

/* what report's file_dir_lock_held does (open, LOCK_SH | LOCK_NB, close), stretched to 30 ms */
static void *peek_lock(void *p)
{
    lock_peek *a = p;
    int d = open(a->path, O_RDONLY | O_CLOEXEC);
    int ok = d >= 0 && flock(d, LOCK_SH | LOCK_NB) == 0;
    __atomic_store_n(&a->held, ok ? 1 : -1, __ATOMIC_RELEASE);
    if (ok) usleep(30000);
    if (d >= 0) close(d);
    return NULL;
}

/* file_dir_lock (sae-train's and sweep's one run per directory): a second is refused while the
 * first holds it; a reader's look (file_dir_lock_held, report's) is not a second run; and a lock
 * taken on a file the failing holder unlinked in the meantime does not count (the next run made
 * a new file and locked it too: two sae-trains in one OUT, both exit 0) */
static void test_dir_lock(void)
{
    char dir[400], path[600];
    snprintf(dir, sizeof dir, "%s/dlock", tdir);
    snprintf(path, sizeof path, "%s/t.lock", dir);
    CHECK(mkdir(dir, 0777) == 0);
    int a = -1, b = -1, c = -1;
    CHECK(file_dir_lock(dir, "t.lock", "run", &a) == OK && a >= 0, "%s", err_msg());
    CHECK(file_dir_lock(dir, "t.lock", "run", &b) == ERR_BUSY && b < 0 &&
              strstr(err_msg(), "another run is writing into this directory (it holds t.lock)"),
          "a second lock is refused: %s", err_msg());
    CHECK(file_dir_lock_held(dir, "t.lock") == 1, "held is seen");
    file_dir_unlock(a);
    CHECK(file_dir_lock_held(dir, "t.lock") == 0, "free is seen");
    lock_peek pk = {.held = 0};
    snprintf(pk.path, sizeof pk.path, "%s", path);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, peek_lock, &pk) == 0);
    while (!__atomic_load_n(&pk.held, __ATOMIC_ACQUIRE)) usleep(100);
    int rc = file_dir_lock(dir, "t.lock", "run", &a);
    pthread_join(th, NULL);
    CHECK(pk.held == 1 && rc == OK, "a lock taken while a reader looks (file_dir_lock_held): %s",
          rc ? err_msg() : "taken");
    if (rc && file_dir_lock(dir, "t.lock", "run", &a)) return; /* the look is over */
    snprintf(flock_drop_path, sizeof flock_drop_path, "%s", path);
    flock_drop_fd = a; /* a's holder fails between b's open and b's flock */
    rc = file_dir_lock(dir, "t.lock", "run", &b);
    flock_drop_fd = -1;
    struct stat hs, ps;
    int same = rc == OK && fstat(b, &hs) == 0 && lstat(path, &ps) == 0 && hs.st_dev == ps.st_dev &&
               hs.st_ino == ps.st_ino;
    CHECK(same, "the lock taken after its holder unlinked the file is the directory's file (%s)",
          rc ? err_msg() : "an unlinked file");
    rc = file_dir_lock(dir, "t.lock", "run", &c);
    CHECK(rc == ERR_BUSY, "and a third run is refused while the second holds it (%s)",
          rc ? err_msg() : "it was not");
    file_dir_unlock(c);
    file_dir_unlock(b);
    /* a filesystem without flock: nothing is locked there, and nothing refused (Lustre without
       -o flock returns ENOSYS; sae-train refused to train there at all) */
    static const int no_flock[] = {ENOSYS, ENOLCK, EOPNOTSUPP};
    for (int i = 0; i < 3; i++) {
        flock_errno = no_flock[i];
        rc = file_dir_lock(dir, "t.lock", "run", &a);
        flock_errno = 0;
        CHECK(rc == OK && a == -1, "no flock on the filesystem (%s): unlocked, not refused (%s)",
              strerror(no_flock[i]), rc ? err_msg() : "");
    }
    /* a FIFO where the lock file goes: refused by name, and the reader's look does not hang */
    char fifo_dir[450];
    snprintf(fifo_dir, sizeof fifo_dir, "%s/fifo", dir);
    CHECK(mkdir(fifo_dir, 0777) == 0);
    snprintf(path, sizeof path, "%s/t.lock", fifo_dir);
    CHECK(mkfifo(path, 0644) == 0, "mkfifo");
    CHECK(file_dir_lock_held(fifo_dir, "t.lock") == 0, "a FIFO lock file: not held, no hang");
    rc = file_dir_lock(fifo_dir, "t.lock", "run", &a);
    CHECK(rc == ERR_IO && a == -1 && strstr(err_msg(), "t.lock: the lock file is not a regular file"),
          "a FIFO lock file is refused by name (%s)", rc ? err_msg() : "locked");
    flock_errno = EIO;
    rc = file_dir_lock(dir, "t.lock", "run", &a);
    flock_errno = 0;
    CHECK(rc == ERR_IO && a == -1 && strstr(err_msg(), "t.lock: cannot lock"),
          "another flock error is one naming the file (%s)", err_msg());
    err_clear();
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
    test_utf8();
    test_par_for();
    test_par_run_fallback();
    snprintf(tdir, sizeof tdir, "/tmp/saelite_test_common_%d", (int)getpid());
    if (file_mkdir_p(tdir)) {
        fprintf(stderr, "cannot create %s: %s\n", tdir, err_msg());
        return 1;
    }
    test_json();
    test_paths();
    test_find_open_fd();
    test_read_text();
    test_mkdir_p();
    test_same_writable();
    test_atomic();
    test_atomic_special();
    test_file_sum();
    test_dir_lock();
    test_dir_lock_wait();
    test_atomic_plain();
    test_hash();
    test_select();
    test_buf();
    test_progress();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tdir);
    return harness_report("test_common");
}
