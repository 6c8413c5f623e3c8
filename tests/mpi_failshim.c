/* mpi_failshim.c - LD_PRELOAD shim for tests/test_mpi.sh: on the rank FAIL_RANK (default 1,
 * read from OMPI_COMM_WORLD_RANK) every malloc, realloc or posix_memalign of exactly FAIL_SIZE
 * bytes fails after the first FAIL_SKIP of them (default 0), so one rank alone runs out of
 * memory at a chosen allocation (mem.h's mem_fail_at is per process and cannot be armed in one
 * rank of an mpirun job). With CLOSE_DELAY_MS set, every rank but 0 waits that long before each
 * sqlite3_close / sqlite3_close_v2, so a writer that closed before its readers shows every time
 * (analyze left its WAL behind 1 run in 4 without it).
 * Built by test_mpi.sh: cc -shared -fPIC -o shim.so mpi_failshim.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

static int armed = -1;
static size_t fail_size;
static long skip;

static int fails(size_t n)
{
    if (armed < 0) {
        const char *s = getenv("FAIL_SIZE"), *r = getenv("OMPI_COMM_WORLD_RANK");
        const char *w = getenv("FAIL_RANK"), *k = getenv("FAIL_SKIP");
        armed = s && r && atoi(r) == (w ? atoi(w) : 1);
        fail_size = s ? strtoull(s, NULL, 10) : 0;
        skip = k ? atol(k) : 0;
    }
    return armed && n == fail_size && skip-- <= 0;
}

void *malloc(size_t n)
{
    static void *(*real)(size_t);
    if (!real) real = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    return fails(n) ? NULL : real(n);
}

void *realloc(void *p, size_t n)
{
    static void *(*real)(void *, size_t);
    if (!real) real = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    return fails(n) ? NULL : real(p, n);
}

int posix_memalign(void **p, size_t a, size_t n)
{
    static int (*real)(void **, size_t, size_t);
    if (!real) real = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    return fails(n) ? ENOMEM : real(p, a, n);
}

static void close_delay(void)
{
    const char *d = getenv("CLOSE_DELAY_MS"), *r = getenv("OMPI_COMM_WORLD_RANK");
    if (d && r && atoi(r) != 0) usleep((useconds_t)atoi(d) * 1000);
}

int sqlite3_close(void *db)
{
    static int (*real)(void *);
    if (!real) real = (int (*)(void *))dlsym(RTLD_NEXT, "sqlite3_close");
    close_delay();
    return real(db);
}

int sqlite3_close_v2(void *db)
{
    static int (*real)(void *);
    if (!real) real = (int (*)(void *))dlsym(RTLD_NEXT, "sqlite3_close_v2");
    close_delay();
    return real(db);
}
