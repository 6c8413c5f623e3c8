/* dist.h - the distributed layer: MPI when saelite was launched by mpirun, nothing otherwise.
 *
 * Purpose: rank/size, rank-0-only output (progress lines, summaries, files: the caller asks
 * dist_is_root()), a broadcast from rank 0, exact integer/min/max reductions, and a
 * DETERMINISTIC sum of float/double vectors whose bits do not depend on the number of ranks
 * (dist_sum_f32/f64): the top log2(N) levels of one fixed binary tree over a power-of-two world
 * (level l pairs rank r with r ^ 2^l through MPI_Sendrecv and adds lower-block + upper-block),
 * run as a recursive-halving reduce-scatter + recursive-doubling allgather (Rabenseifner:
 * 2 (N-1)/N of the vector sent per rank, the same bits as a plain recursive doubling). A caller that splits work into a
 * fixed number of leaves (a power of two), sums each rank's consecutive leaves in the same binary
 * tree locally and then calls dist_sum_*, gets one result for any world size dividing the leaves.
 * Why common/: every pipeline module (sae/, analysis/, extract/) needs it, and progress.c prints
 * on rank 0 only through it; it has no saelite dependency beyond err.h.
 * Launch detection: dist_init calls MPI_Init only when the environment shows an MPI launcher
 * (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK); otherwise no MPI call is ever made and every
 * function below is a one-rank no-op, so a plain `saelite ...` behaves exactly as without MPI.
 * Errors: err.h codes; MPI errors are returned (MPI_ERRORS_RETURN), not fatal, and name the call
 * (a peer that died shows up here or ends the job through mpirun). dist_check agrees on failure:
 * every rank returns the code and the message of the lowest failing rank ("rank R: ...").
 * Threads: call from the main thread only (MPI_THREAD_FUNNELED).
 */
#ifndef SAELITE_DIST_H
#define SAELITE_DIST_H
#include <stddef.h>
#include <stdint.h>

/* MPI_Init when launched by an MPI launcher (else nothing). ERR_IO when MPI fails to start. */
int dist_init(int *argc, char ***argv);
void dist_finalize(void);
int dist_active(void);    /* MPI was initialised (launched by mpirun, even with -np 1) */
int dist_rank(void);      /* 0 without MPI */
int dist_size(void);      /* 1 without MPI */
int dist_is_root(void);   /* rank 0 */
/* bytes of buf from rank 0 to every rank */
int dist_bcast(void *buf, size_t bytes);
/* Deterministic in-place sums across ranks (see above); the world size must be a power of two
 * (ERR_ARG otherwise). One rank: nothing to do. A rank that cannot allocate the exchange buffer
 * fails every rank alike (agreed as dist_check does) instead of leaving them in a send. */
int dist_sum_f32(float *buf, int64_t n);
int dist_sum_f64(double *buf, int64_t n);
/* The same sum in two halves, for data parallel training that shards its optimiser (ZeRO-1):
 * buf is [units, unit_len]; dist_sum_part_f32 leaves this rank with the finished sums of its
 * part of the units, [lo, hi) = dist_tree_part(units, dist_rank()) (the rest of buf is left
 * partial), the same bits there as dist_sum_f32; dist_gather_part_f32 then copies every rank's
 * part to every rank (each rank's part must hold its final values). Together they send what
 * dist_sum_f32 sends. Parts are contiguous units, in the tree's (bit-reversed rank) order. One
 * rank: nothing to do, the part is everything. */
int dist_sum_part_f32(float *buf, int64_t units, int64_t unit_len);
int dist_gather_part_f32(float *buf, int64_t units, int64_t unit_len);
void dist_tree_part(int64_t units, int rank, int64_t *lo, int64_t *hi);
/* Node-shared memory (an MPI-3 shared window over MPI_COMM_WORLD), for ranks that all run on
 * one node: each rank's segment of `bytes` (zeroed; ranks may ask for different sizes) is
 * addressable by every rank, so a sum can read the other ranks' copies instead of receiving
 * them. Collective. *out stays NULL (and OK is returned) where there is nothing to share: one
 * rank, ranks on several nodes, a world size that is not a power of two, SAELITE_NO_SHM set, or
 * a node without room for the window (then the caller uses the message path above). Windows are
 * freed by dist_finalize; dist_shm_release (local) lets a later dist_shm_new of the same size
 * and key (the caller's name for what it holds) reuse one, when every rank finds the same
 * released window (agreed; otherwise a new one is allocated). dist_shm_sync: a memory fence (on one or two windows) and
 * a barrier (what one rank wrote before it, every rank reads after it). dist_shm_sum_part: elements
 * [a, b) of every segment (as floats) summed in dist_sum_f32's tree into this rank's segment,
 * the other ranks' copies there set to zero (call between two syncs, ranges disjoint across
 * ranks). */
typedef struct dist_shm dist_shm;
int dist_shm_new(dist_shm **out, size_t bytes, int key);
float *dist_shm_seg(dist_shm *w, int rank);
void dist_shm_sync(dist_shm *w, dist_shm *w2 /* may be NULL */);
void dist_shm_sum_part(dist_shm *w, int64_t a, int64_t b);
void dist_shm_release(dist_shm *w);
/* recv [size * bytes] = every rank's send [bytes], in rank order (exact: a copy). One rank: a
 * copy. Any size (more than 2^28 bytes per rank go in chunks). */
int dist_allgather(const void *send, void *recv, size_t bytes);
/* Exact reductions (integers, min, max): order cannot change their result. */
int dist_sum_i64(int64_t *buf, int n);
int dist_max_i64(int64_t *buf, int n);
int dist_max_u8(unsigned char *buf, int64_t n);
int dist_min_f32(float *buf, int n);
/* Collective: every rank passes its rc; returns OK when all are OK, else the code of the lowest
 * failing rank with its message on every rank (prefixed "rank R: " unless every rank failed). */
int dist_check(int rc);
/* Collective: dist_check(rc), then the n (<= 256) bytes of v must be rank 0's on every rank
 * (shapes, checksums of the files each rank read): else ERR_ARG "WHAT: not the same as on rank 0"
 * on every rank, prefixed by the first differing rank (a different file behind an equal path
 * trained, analysed or extracted with exit 0, and a different width hung the job, an audit). */
int dist_same(int rc, const void *v, size_t n, const char *what);
/* Set by dist_check when the current error is one every rank holds (then only rank 0 needs to
 * print it); cleared by dist_check on success. */
int dist_error_shared(void);
/* The shared error's code (OK when dist_error_shared is 0): every rank's, so all exit alike. */
int dist_error_shared_code(void);
/* Point to point (extract's batches to and from rank 0): bytes of buf to / from one peer, with
 * a tag; messages between a pair with the same tag arrive in order. dist_recv accepts a message
 * of at most bytes (*got, may be NULL: the bytes that came). dist_isend starts a send that
 * completes in dist_wait (buf must stay as it is until then; *req is NULL when done; it sleeps
 * between polls like dist_await); at most
 * 2^31-1 bytes per message. One rank: ERR_ARG (there is no peer). */
typedef struct dist_req dist_req;
int dist_send(const void *buf, size_t bytes, int peer, int tag);
int dist_recv(void *buf, size_t bytes, int peer, int tag, size_t *got);
int dist_isend(const void *buf, size_t bytes, int peer, int tag, dist_req **req);
int dist_wait(dist_req **req);
/* Lets a started send progress (a large message moves only while its sender is inside MPI);
 * *req becomes NULL when it is done. */
int dist_test(dist_req **req);
/* Waits until a message from peer with tag has arrived (dist_recv then takes it), sleeping
 * between polls (20 us growing to 1 ms) instead of spinning as a blocking MPI_Recv does: a rank
 * that waits long (for a forward pass, for the next batch) leaves its core to the ranks that
 * work, which matters when there are more ranks than free cores. */
int dist_await(int peer, int tag);
/* *ready = whether a message from peer with tag has arrived (no waiting). */
int dist_probe(int peer, int tag, int *ready);
/* A world size the deterministic sums accept (power of two). */
int dist_pow2(int64_t n);

#endif
