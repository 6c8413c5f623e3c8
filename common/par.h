/* par.h - fork-join over a few threads for the kernels that are not BLAS calls.
 *
 * Purpose: the sparse SAE kernels and the model's attention, softmax, GELU and LayerNorm loops
 * run on all cores while OpenBLAS or oneDNN is idle between calls. par_run(fn, arg, nt) calls
 * fn(arg, tid, nt) for tid 0..nt-1, tid 0 on the calling thread, the others on fresh pthreads,
 * and returns when all are done; the part of a thread that cannot be started runs on the caller
 * after part 0, still as (arg, tid, nt): every part runs exactly once, so parts must not wait for
 * each other. fn should give the same result for any nt (split work by index, never reduce
 * across threads in a thread-count-dependent order). No pool: no idle thread ever spins
 * against OpenBLAS's or OpenMP's workers (docs/sae.md, docs/model.md).
 * par_for splits [0, n) dynamically instead: ranges of `grain` indices go, in order, to whichever
 * thread asks next, so a thread that starts late or runs slow (a loaded machine, a VM whose
 * second vCPU the host has descheduled) takes fewer and the others do not wait for it at the
 * join. Which thread runs a range is timing: fn(arg, tid, i0, i1) must give the same result
 * whichever does (tid only picks per-thread scratch); every index is in exactly one call.
 * Threads: par_run may be called from any thread; fn must not call par_run.
 */
#ifndef SAELITE_PAR_H
#define SAELITE_PAR_H

#include <stdint.h>

enum { PAR_MAX = 16 };

/* SAELITE_THREADS when set (1..16), else the online cores (at most 16); read once. */
int par_threads(void);
void par_run(void (*fn)(void *arg, int tid, int nt), void *arg, int nt);
/* Fault injection for the tests: after n more threads start, par_run's pthread_create fails (as
 * with EAGAIN at a process or cgroup limit); n < 0 disarms. Not thread-safe while armed. */
void par_fail_threads_after(int n);
void par_for(void (*fn)(void *arg, int tid, int64_t i0, int64_t i1), void *arg, int64_t n,
             int64_t grain, int nt);
/* oneDNN's bf16 matmuls thread with GNU OpenMP, whose idle workers spin after every call unless
 * OMP_WAIT_POLICY=PASSIVE, and take the cores from par_run's threads, OpenBLAS's and the storage
 * thread. The runtime reads the variable when it loads, before main, so a program that will run
 * bf16 work sets it first and restarts: par_passive_setenv sets PASSIVE when no policy is set
 * and returns 1 when it did. */
int par_passive_setenv(void);
/* Starts this program again (/proc/self/exe, same argv, the current environment) so that
 * variables read when a library loads take effect; returns only if the restart failed (then
 * the caller runs on as it is). */
void par_restart(char **argv);

#endif
