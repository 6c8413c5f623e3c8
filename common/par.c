/* par.c - see par.h. */
#include "common/par.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int par_threads(void)
{
    /* atomic: the first calls may come from several threads at once (serve runs a forward per
       connection thread); each computes the same value, so relaxed loads and stores suffice */
    static _Atomic int nt = 0;
    int v = atomic_load_explicit(&nt, memory_order_relaxed);
    if (!v) {
        const char *e = getenv("SAELITE_THREADS");
        long n = e ? strtol(e, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
        v = n < 1 ? 1 : n > PAR_MAX ? PAR_MAX : (int)n;
        atomic_store_explicit(&nt, v, memory_order_relaxed);
    }
    return v;
}

typedef struct {
    void (*fn)(void *arg, int tid, int nt);
    void *arg;
    int tid, nt;
} job;

static void *job_main(void *p)
{
    job *j = p;
    j->fn(j->arg, j->tid, j->nt);
    return NULL;
}

static int fail_after = -1;

void par_fail_threads_after(int n) { fail_after = n; }

static int start_thread(pthread_t *th, job *j)
{
    if (fail_after == 0) return -1;
    if (fail_after > 0) fail_after--;
    return pthread_create(th, NULL, job_main, j);
}

void par_run(void (*fn)(void *, int, int), void *arg, int nt)
{
    job jobs[PAR_MAX];
    pthread_t th[PAR_MAX];
    int started = 0;
    nt = nt < 1 ? 1 : nt > PAR_MAX ? PAR_MAX : nt;
    for (int t = 1; t < nt; t++) {
        jobs[t] = (job){fn, arg, t, nt};
        if (start_thread(&th[t], &jobs[t]) != 0) break;
        started = t;
    }
    /* the parts of threads that could not start run here, after part 0: every part runs once,
       with the same nt, so the result is the one all threads give (an audit: the old fallback,
       fn(arg, 0, 1), left sae_k_csr_transpose's per-thread offsets of parts 1.. unwritten) */
    fn(arg, 0, nt);
    for (int t = started + 1; t < nt; t++) fn(arg, t, nt);
    for (int t = 1; t <= started; t++) pthread_join(th[t], NULL);
}

typedef struct {
    void (*fn)(void *arg, int tid, int64_t i0, int64_t i1);
    void *arg;
    int64_t n, grain;
    atomic_int_fast64_t next; /* the first index not yet handed out */
} for_job;

static void for_part(void *p, int tid, int nt)
{
    for_job *j = p;
    for (;;) {
        /* relaxed: the ranges only need to be distinct; par_run's join publishes the results */
        int64_t i0 = atomic_fetch_add_explicit(&j->next, j->grain, memory_order_relaxed);
        if (i0 >= j->n) return;
        j->fn(j->arg, tid, i0, j->n - i0 < j->grain ? j->n : i0 + j->grain);
    }
}

void par_for(void (*fn)(void *, int, int64_t, int64_t), void *arg, int64_t n, int64_t grain, int nt)
{
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t chunks = (n - 1) / grain + 1;
    if (nt > chunks) nt = (int)chunks;
    for_job j = {.fn = fn, .arg = arg, .n = n, .grain = grain};
    atomic_init(&j.next, 0);
    par_run(for_part, &j, nt);
}

int par_passive_setenv(void)
{
    return !getenv("OMP_WAIT_POLICY") && !setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
}

void par_restart(char **argv)
{
    fflush(NULL);
    execv("/proc/self/exe", argv); /* returns only on failure: then run on as we are */
}
