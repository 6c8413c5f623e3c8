/* sweep_internal.h - shared by sweep.c (the runner) and frontier.c (the pictures): the family
 * table and the drawing entry point. */
#ifndef SAELITE_SWEEP_INTERNAL_H
#define SAELITE_SWEEP_INTERNAL_H
#include "sae/sae.h"
#include "sweep/sweep.h"

typedef struct {
    const char *name; /* the family's name in the grid (--families) */
    sae_arch arch;    /* transcoders: the activation */
    int transcoder;   /* SAE_NOT_TRANSCODER / SAE_TRANSCODER / SAE_SKIP_TRANSCODER */
    int target;       /* 1: an SAE on the transcoders' target hook */
    int param_k;      /* 1: the sparsity setting is k; 0: the l1 coefficient */
} sweep_family;

int sweep_family_count(void);
const sweep_family *sweep_family_at(int i);
/* Index of the family a row's label belongs to ("topk@HOOK" is target_topk), -1 if none. */
int sweep_family_index(const char *label);

/* Draws the frontiers of res->rows into o->out (res->png[] lists what was written). */
int sweep_draw(const sweep_opts *o, sweep_result *res);

#endif
