#include "common/mem.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

/* Buffers of 2 MiB and more (model weights, activations, SAE parameters and Adam moments, data
 * batches) are advised as transparent huge pages (mem_alloc_aligned's also start on a 2 MiB
 * boundary; mem_alloc's and mem_realloc's get them on their 2 MiB-aligned interior), where the
 * kernel offers them only on request ("madvise" in /sys/kernel/mm/transparent_hugepage/enabled,
 * Debian's default).
 * Their first touch then costs one fault per 2 MiB instead of one per 4 KiB: on the VMs we run on
 * a fault is expensive, and the first forward of GPT-2 small in bf16 spent more time faulting in
 * fresh buffers than computing (docs/model.md). Advice only: contents, alignment promises and
 * mem_free_aligned are unchanged, and a kernel without THP ignores it. */
enum { HUGE_MIN = 2 << 20, HUGE_ALIGN = 2 << 20 };

static void advise_huge(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
    uintptr_t a = ((uintptr_t)p + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1);
    uintptr_t e = ((uintptr_t)p + n) & ~(uintptr_t)(HUGE_ALIGN - 1);
    if (n >= HUGE_MIN && e > a) madvise((void *)a, e - a, MADV_HUGEPAGE);
#else
    (void)p, (void)n;
#endif
}

void *mem_alloc(size_t n)
{
    if (mem_should_fail()) return NULL;
    void *p = malloc(n ? n : 1);
    if (p) advise_huge(p, n);
    return p;
}

void *mem_calloc(size_t count, size_t size)
{
    if (mem_should_fail()) return NULL;
    return calloc(count ? count : 1, size ? size : 1);
}

void *mem_realloc(void *p, size_t n)
{
    if (mem_should_fail()) return NULL;
    void *q = realloc(p, n ? n : 1);
    if (q) advise_huge(q, n);
    return q;
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
    size_t al = n >= HUGE_MIN ? HUGE_ALIGN : 64;
    if (posix_memalign(&p, al, n ? (n + 63) / 64 * 64 : 64) != 0) return NULL;
    advise_huge(p, n);
    return p;
}

void mem_free_aligned(void *p) { free(p); }

long long mem_physical_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && size > 0 ? (long long)pages * size : 0;
}
