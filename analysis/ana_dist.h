/* ana_dist.h - the distributed side of `analyze` (ana_run under mpirun -np N): who computes
 * which sequences, the float sums in a tree that does not depend on N, agreement on failure, and
 * the exact gather of the per-feature statistics on rank 0.
 *
 * The split: the evaluated sequences [0, n) are cut into ANA_BLOCKS blocks of consecutive
 * sequences (block b is [n b / ANA_BLOCKS, n (b+1) / ANA_BLOCKS), some empty when n is small);
 * rank r of N computes blocks [r B/N, (r+1) B/N). N must be a power of two <= ANA_BLOCKS
 * (ana_dist_check_world). One process is N = 1: the same blocks, the same tree.
 * Float sums: a caller accumulates each block's sums from zero into tree->leaf and calls
 * ana_tree_push once per block (empty ones too); the blocks are added in one fixed binary tree by
 * block index, left + right (a rank's blocks are a complete subtree; dist_sum_f64 adds the top
 * log2 N levels the same way), so the totals have the same bits for every N.
 * Ownership: ana_tree owns its buffers (ana_tree_free). Errors: err.h codes. Threads: the main
 * thread (MPI_THREAD_FUNNELED). Every function but ana_tree_push/_init/_free and
 * ana_dist_blocks is collective: all ranks call it, in the same order.
 */
#ifndef SAELITE_ANA_DIST_H
#define SAELITE_ANA_DIST_H
#include <stddef.h>
#include <stdint.h>

#include "analysis/ana.h"

enum { ANA_BLOCKS = 256 };

/* ERR_ARG (the same message on every rank) when the world size is not a power of two <=
 * ANA_BLOCKS. */
int ana_dist_check_world(void);
/* This rank's blocks [*b0, *b1). */
void ana_dist_blocks(int *b0, int *b1);
/* First sequence of block b of [0, n). */
size_t ana_block_start(size_t n, int b);

typedef struct {
    int64_t n;        /* doubles per block */
    int depth;        /* partial sums on the stack */
    int level[16];
    double *stk[16];  /* sums of complete subtrees, left to right */
    double *leaf;     /* [n] the block being accumulated; zeroed by each push */
} ana_tree;
int ana_tree_init(ana_tree *t, int64_t n);
void ana_tree_free(ana_tree *t);
/* The block in t->leaf is complete: fold it into the tree. */
void ana_tree_push(ana_tree *t);
/* Collective, after this rank's last block: the total over all blocks of all ranks, into *out
 * (t's buffer, valid until ana_tree_free). */
int ana_tree_total(ana_tree *t, const double **out);

/* Collective: rc of every rank -> the lowest failing rank's code and message on every rank
 * (dist_check), after a rendezvous that sleeps while it waits (OpenMPI's collectives spin, and a
 * spinning rank takes the core of one still working when ranks outnumber cores). One rank: rc. */
int ana_agree(int rc);
/* Collective: every rank arrives before any leaves (no error agreement: an error already agreed
 * keeps its mark). OK, or the MPI failure. */
int ana_barrier(void);
/* Collective: every other rank's accumulator merged into rank 0's (exact; the sums excluded, see
 * ana_feat_acc_merge_packed). Rank 0 learns the sizes and allocates first, and the ranks agree
 * before the bulk moves, so a failure on either side stops everyone, nobody left in a send. */
int ana_gather_acc(ana_feat_acc *acc);

#endif
