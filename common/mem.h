/* mem.h - allocation wrapper with fault injection.
 *
 * All large or fallible allocations go through mem_alloc/mem_calloc/mem_realloc so tests can
 * make the N-th allocation fail (mem_fail_at) and check that every error path cleans up.
 * They return NULL on failure and never print or abort; callers turn NULL into
 * err_set(ERR_NOMEM, ...). mem_free(NULL) is a no-op. Not thread-safe while fault injection
 * is armed (tests only).
 */
#ifndef SAELITE_MEM_H
#define SAELITE_MEM_H
#include <stddef.h>

void *mem_alloc(size_t n);
void *mem_calloc(size_t count, size_t size);
void *mem_realloc(void *p, size_t n);
void mem_free(void *p);
char *mem_strdup(const char *s);
/* 64-byte aligned allocation for kernels; free with mem_free_aligned. From 2 MiB on, 2 MiB
 * aligned and advised as transparent huge pages (fewer, cheaper first-touch faults), as the
 * 2 MiB-aligned interior of mem_alloc's and mem_realloc's buffers of that size is (mem_calloc's
 * is not: a large zeroed table may be touched sparsely, and a huge page commits 2 MiB at the
 * first touch). */
void *mem_alloc_aligned(size_t n);
void mem_free_aligned(void *p);

/* The machine's physical memory in bytes (0 when the system does not say). Allocations are
 * lazy (overcommit): a job whose buffers add up to more than this is killed by the kernel when
 * it touches them, so callers that size buffers from user flags compare against it first. */
long long mem_physical_bytes(void);

/* Fault injection: the n-th allocation from now fails (n >= 1); 0 disarms. */
void mem_fail_at(long n);
/* Number of allocations counted since the last mem_fail_at call. */
long mem_alloc_count(void);

#endif
