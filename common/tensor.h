/* tensor.h - a borrowed, strided view of float32 data.
 *
 * Used for hook points and for passing named tensors between modules. The view does not own
 * data. Strides are in elements (not bytes); a contiguous row-major tensor has
 * stride[ndim-1] == 1. Unused trailing dims have shape 1.
 */
#ifndef SAELITE_TENSOR_H
#define SAELITE_TENSOR_H
#include <stdint.h>

typedef struct {
    const char *name; /* e.g. "blocks.0.mlp.hook_post" */
    int layer;        /* block index, or -1 for points outside blocks */
    float *data;      /* first element; may be written by hooks */
    int ndim;         /* 1..4 */
    int64_t shape[4];
    int64_t stride[4]; /* in elements */
} tensor_view;

static inline int64_t tensor_numel(const tensor_view *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

/* Fill strides for a contiguous row-major tensor. */
static inline void tensor_set_contiguous(tensor_view *t)
{
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        t->stride[i] = s;
        s *= t->shape[i];
    }
}

#endif
