/* sae.h - a trained sparse autoencoder: weights, inference, SAELens-layout files.
 *
 * Model (SAELens conventions, raw activation units: any training-time input normalisation is
 * folded into the weights before a model is handed out or saved):
 *   pre = (x - b_dec) @ W_enc + b_enc            x [N,d_in], W_enc [d_in,d_sae]
 *   f   = relu(pre)                  SAE_RELU
 *         relu(top-k of pre per row) SAE_TOPK
 *         pre * (pre > threshold)    SAE_JUMPRELU, and SAE_BATCHTOPK at inference (its learned
 *                                    global threshold is stored per latent, as SAELens does)
 *   xhat = f @ W_dec + b_dec                     W_dec [d_sae,d_in], rows unit norm after training
 * Ownership: sae_model owns its five arrays (mem_alloc'd; threshold NULL for relu/topk);
 * sae_free releases everything.
 * Files (sae_save/sae_load, directory DIR): DIR/sae_weights.safetensors (W_enc, b_enc, W_dec,
 * b_dec[, threshold]), DIR/cfg.json, DIR/sparsity.safetensors (log10 feature density, when known).
 * Writes are atomic per file (temp + rename). See docs/sae.md for the honoured cfg.json keys.
 * Errors: ERR_IO/ERR_FORMAT/ERR_SHAPE/ERR_NOMEM with a message naming the file.
 * Thread safety: a model is read-only during encode/decode; calls on one model may run in
 * parallel.
 */
#ifndef SAELITE_SAE_H
#define SAELITE_SAE_H
#include <stdint.h>

typedef enum { SAE_RELU, SAE_TOPK, SAE_BATCHTOPK, SAE_JUMPRELU } sae_arch;

typedef struct {
    sae_arch arch;
    int d_in, d_sae, k; /* k: TopK/BatchTopK only (0 otherwise) */
    char hook_name[128];
    char model_name[256];
    int context_size;
} sae_config;

typedef struct {
    sae_config cfg;
    float *W_enc;     /* [d_in,d_sae] */
    float *b_enc;     /* [d_sae] */
    float *W_dec;     /* [d_sae,d_in] */
    float *b_dec;     /* [d_in] */
    float *threshold; /* [d_sae] or NULL */
} sae_model;

/* "relu", "topk", "batchtopk", "jumprelu" (SAELens also says "standard" for relu). */
const char *sae_arch_name(sae_arch a);
int sae_arch_parse(const char *s, sae_arch *out); /* ERR_ARG for unknown names */

/* Zero-filled model of cfg's shape (threshold allocated for JumpReLU/BatchTopK). */
int sae_model_new(sae_model **out, const sae_config *cfg);
void sae_free(sae_model *s);

int sae_load(sae_model **out, const char *dir); /* SAELens layout */
int sae_save(const sae_model *s, const char *dir);
/* sae_save plus extras: train_json (a JSON object's text, stored under cfg.json "training" and
 * merged into the top level for keys SAELens knows, may be NULL) and log10_density [d_sae]
 * (written as sparsity.safetensors "sparsity", may be NULL). */
int sae_save_ex(const sae_model *s, const char *dir, const char *train_json,
                const float *log10_density);
/* Read DIR/sparsity.safetensors into *out [d_sae] (mem_alloc'd); ERR_NOTFOUND when absent. */
int sae_load_sparsity(const char *dir, int d_sae, float **out);

/* Inference on raw activations. Dense f [N,d_sae]. */
int sae_encode(const sae_model *s, const float *x /*[N,d_in]*/, int N, float *f /*[N,d_sae]*/);
int sae_decode(const sae_model *s, const float *f /*[N,d_sae]*/, int N, float *xhat /*[N,d_in]*/);

#endif
