#include "common/mem.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Atomic: worker threads (extract's compute thread, SAE kernels, report writers) allocate too. */
static _Atomic long mem_countdown; /* 0 = disarmed */
static _Atomic long mem_counted;

static int mem_should_fail(void)
{
    atomic_fetch_add_explicit(&mem_counted, 1, memory_order_relaxed);
    if (atomic_load_explicit(&mem_countdown, memory_order_relaxed) > 0 &&
        atomic_fetch_sub_explicit(&mem_countdown, 1, memory_order_relaxed) == 1)
        return 1;
    return 0;
}

void mem_fail_at(long n)
{
    mem_countdown = n > 0 ? n : 0;
    mem_counted = 0;
}

long mem_alloc_count(void) { return mem_counted; }

void *mem_alloc(size_t n)
{
    if (mem_should_fail()) return NULL;
    return malloc(n ? n : 1);
}

void *mem_calloc(size_t count, size_t size)
{
    if (mem_should_fail()) return NULL;
    return calloc(count ? count : 1, size ? size : 1);
}

void *mem_realloc(void *p, size_t n)
{
    if (mem_should_fail()) return NULL;
    return realloc(p, n ? n : 1);
}

void mem_free(void *p) { free(p); }

char *mem_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = mem_alloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

void *mem_alloc_aligned(size_t n)
{
    if (mem_should_fail()) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? (n + 63) / 64 * 64 : 64) != 0) return NULL;
    return p;
}

void mem_free_aligned(void *p) { free(p); }
