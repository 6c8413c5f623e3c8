/* params.h - parameter counts of GPT-2-style transformers, by matrix.
 *
 * A shape (layers, d_model, heads, d_mlp, vocab, context, tied unembedding) comes from a
 * preset (gpt2, gpt2-medium, gpt2-large, gpt2-xl, gpt3) or a model directory's config.json
 * (Hugging Face GPT-2 keys; n_inner null = 4 * n_embd; tie_word_embeddings defaults to true
 * and decides, as in the loader, even when DIR/model.safetensors holds an lm_head.weight; the
 * file's stored parameter count is reported for comparison).
 * params_count breaks the count down into rows (one per kind of tensor, with the per-layer
 * count and the total over layers) and totals by category:
 *   weight matrices: embedding, W_Q, W_K, W_V, W_O, MLP up, MLP down, unembedding (when not
 *     tied; a tied unembedding is the embedding matrix and adds nothing);
 *   biases; LayerNorm gains and biases; position embeddings.
 * The GPT-3 175B preset follows the usual breakdown, which counts embedding and unembedding
 * as two matrices: weight matrices = 2 V C + 12 L C^2 = 175,181,291,520.
 * Errors: ERR_NOTFOUND (unknown preset; message lists the presets), ERR_IO/ERR_FORMAT for
 * config files (message names the file and the key; a config whose counts overflow int64 is
 * refused by params_from_dir, naming the file, its sizes and the first row that overflows).
 * No global state.
 */
#ifndef SAELITE_PARAMS_H
#define SAELITE_PARAMS_H
#include <stdint.h>

typedef struct {
    char name[64];
    int64_t n_layer, n_embd, n_head, n_inner, vocab, n_ctx;
    int tied; /* unembedding shares the embedding matrix */
    /* From a directory with model.safetensors: the number of parameters stored in it (buffers
     * such as attn.bias / attn.masked_bias excluded, and a tied model's unused lm_head.weight,
     * which the loader ignores, counted apart in unused_head), else -1. */
    int64_t stored, unused_head;
} params_shape;

enum { PARAMS_MATRIX, PARAMS_BIAS, PARAMS_NORM, PARAMS_POS, PARAMS_NCAT };

typedef struct {
    const char *label; /* e.g. "attention query W_Q" */
    int64_t rows, cols; /* tensor shape (cols 1 for vectors) */
    int64_t per_layer;  /* count in one block, 0 for tensors outside blocks */
    int64_t total;      /* over all layers (or the single tensor) */
    int category;       /* PARAMS_* */
} params_row;

#define PARAMS_MAX_ROWS 24

typedef struct {
    const char *name; /* the shape's name (borrowed), for messages */
    params_row rows[PARAMS_MAX_ROWS];
    int nrows;
    int64_t by_category[PARAMS_NCAT];
    int64_t total; /* every distinct parameter */
} params_count;

/* Names of the presets, NULL-terminated. */
extern const char *const params_presets[];
int params_preset(const char *name, params_shape *out);
int params_from_dir(const char *dir, params_shape *out);
/* ERR_FORMAT (message naming the shape and the row) when a count does not fit in int64. */
int params_compute(const params_shape *s, params_count *out);

#endif
