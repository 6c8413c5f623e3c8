/* sae.h - a trained sparse autoencoder: weights, inference, SAELens-layout files.
 *
 * Model (SAELens conventions, raw activation units: any training-time input normalisation is
 * folded into the weights before a model is handed out or saved):
 *   pre = (x - b_dec) @ W_enc + b_enc            x [N,d_in], W_enc [d_in,d_sae]
 *   f   = relu(pre)                  SAE_RELU
 *         relu(top-k of pre per row) SAE_TOPK
 *         pre * (pre > threshold)    SAE_JUMPRELU, and SAE_BATCHTOPK at inference (its learned
 *                                    global threshold is stored per latent, as SAELens does)
 *         SAE_MATRYOSHKA as JumpReLU (saved with architecture "jumprelu", as SAELens saves it)
 *   gated: u = (x - b_dec) @ W_enc; f = 1[u + b_gate > 0] * relu(exp(r_mag) * u + b_mag)
 *          (b_enc holds b_gate; b_mag, r_mag [d_sae]; SAELens "gated" layout, no b_enc tensor)
 *   xhat = f @ W_dec + b_dec                     W_dec [d_sae,d_in], rows unit norm after training
 * Transcoders (cfg.transcoder, Dunefsky et al. 2024; arch is their activation: relu, topk,
 * batchtopk or jumprelu) map the input hook x [N,d_in] to another hook y [N,d_out]: no b_dec
 * subtraction on the input, pre = x @ W_enc + b_enc, yhat = f @ W_dec + b_dec (W_dec
 * [d_sae,d_out], b_dec [d_out]), and for skip transcoders (Paulo et al. 2025) + x @ W_skip^T
 * (W_skip [d_out,d_in]). SAELens layouts "transcoder", "jumprelu_transcoder", "skip_transcoder",
 * "jumprelu_skip_transcoder" with cfg d_out and metadata.hook_name_out.
 * Ownership: sae_model owns its arrays (mem_alloc'd; threshold NULL for relu/topk/gated,
 * b_mag/r_mag NULL except for gated, W_skip NULL except for skip transcoders);
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

typedef enum {
    SAE_RELU,
    SAE_TOPK,
    SAE_BATCHTOPK,
    SAE_JUMPRELU,
    SAE_GATED,      /* Rajamanoharan et al. 2024: gate and magnitude paths sharing W_enc */
    SAE_MATRYOSHKA, /* Matryoshka BatchTopK: trains like BatchTopK with nested prefix losses,
                       infers like JumpReLU (its global threshold per latent) */
    SAE_NARCH
} sae_arch;

enum { SAE_MAX_WIDTHS = 16 };
enum { SAE_NOT_TRANSCODER, SAE_TRANSCODER, SAE_SKIP_TRANSCODER };

typedef struct {
    sae_arch arch;
    int d_in, d_sae, k; /* k: TopK/BatchTopK/Matryoshka only (0 otherwise) */
    char hook_name[128];
    char model_name[256];
    /* the checksum of the model whose activations trained it (saelite's cfg.json metadata
       "model_checksum", written by sae-train --db); "" when unknown (other tools' files) */
    char model_checksum[32];
    int context_size;
    int n_widths;                /* matryoshka: nested prefix widths, increasing, last = d_sae */
    int widths[SAE_MAX_WIDTHS];  /* (0 for the other architectures; kept in cfg.json) */
    int transcoder;              /* SAE_NOT_TRANSCODER / SAE_TRANSCODER / SAE_SKIP_TRANSCODER */
    int d_out;                   /* transcoders: output width; SAEs: 0 (= d_in) */
    char hook_name_out[128];     /* transcoders: the hook they reconstruct */
    /* trained on residual values centred along d_in (a SAELens file whose
       model_from_pretrained_kwargs sets TransformerLens' center_writing_weights): W_enc is
       centred at load, so the code reads C x; the reconstruction adds x's mean back to every
       component (sae_forward), so x - xhat is SAELens' error on C x */
    int center_input;
} sae_config;

typedef struct {
    sae_config cfg;
    float *W_enc;     /* [d_in,d_sae] */
    float *b_enc;     /* [d_sae] */
    float *W_dec;     /* [d_sae,d_in] */
    float *b_dec;     /* [d_in] */
    float *threshold; /* [d_sae] or NULL */
    float *b_mag;     /* gated: [d_sae], else NULL */
    float *r_mag;     /* gated: [d_sae], else NULL */
    float *W_skip;    /* skip transcoders: [d_out,d_in], else NULL */
} sae_model;

/* "relu", "topk", "batchtopk", "jumprelu", "gated", "matryoshka" (SAELens also says "standard"
 * for relu and "matryoshka_batchtopk" for matryoshka). */
const char *sae_arch_name(sae_arch a);
int sae_arch_parse(const char *s, sae_arch *out); /* ERR_ARG for unknown names */
/* Matryoshka's prefix widths "W1,W2,..." appended to widths[*n..SAE_MAX_WIDTHS); ERR_ARG for
 * anything but up to SAE_MAX_WIDTHS integers in 1..2^30 in all. */
int sae_widths_parse(const char *s, int *widths, int *n);

/* Zero-filled model of cfg's shape (threshold allocated for JumpReLU/BatchTopK/Matryoshka,
 * b_mag and r_mag for gated). */
int sae_model_new(sae_model **out, const sae_config *cfg);
void sae_free(sae_model *s);

int sae_load(sae_model **out, const char *dir); /* SAELens layout */
int sae_save(const sae_model *s, const char *dir);
/* sae_save plus extras: train_json (a JSON object's text, stored under cfg.json "training" and
 * merged into the top level for keys SAELens knows, may be NULL) and log10_density [d_sae]
 * (written as sparsity.safetensors "sparsity", may be NULL). */
int sae_save_ex(const sae_model *s, const char *dir, const char *train_json,
                const float *log10_density);
/* DIR/cfg.json alone, read and checked as sae_load reads it (no weights; a BatchTopK SAE without
 * a threshold tensor, which sae_load reads as TopK, stays BatchTopK here), with the architecture
 * as trained: one that sae-train saved as JumpReLU is BatchTopK again (cfg.json's "training"
 * object names it), and a BatchTopK or Matryoshka SAE gets that object's k. */
int sae_load_config(const char *dir, sae_config *out);
/* Read DIR/sparsity.safetensors into *out [d_sae] (mem_alloc'd); ERR_NOTFOUND when absent. */
int sae_load_sparsity(const char *dir, int d_sae, float **out);
/* out = hex FNV-1a 64 of dir/sae_weights.safetensors (16 digits): what the registry records, so
 * that an SAE retrained or replaced in place is not taken for the registered one. */
int sae_weights_checksum(const char *dir, char out[17]);
/* out = hex FNV-1a 64 of dir/cfg.json then dir/sae_weights.safetensors: everything sae_load
 * reads, so a cache of the SAE's results (analyze's and eval's checkpoints) is not taken for
 * another k, architecture or normalisation with the same weights (an audit). */
int sae_files_checksum(const char *dir, char out[17]);

/* Output width: d_out for transcoders, d_in for SAEs. */
int sae_out_dim(const sae_config *c);
/* A transcoder's rows, the layout its training sources and sae_metrics_eval read: *x (mem_alloc'd,
 * at least n rows of D) becomes [n, D + Do], row i = x row i then y row i, grown in place (no
 * second copy of x: a file of pairs may be most of the machine's memory). ERR_NOMEM leaves *x as
 * it was. */
int sae_pairs_join(float **x /*[n,D] -> [n,D+Do]*/, int D, const float *y /*[n,Do]*/, int Do,
                   int64_t n);

/* Inference on raw activations. Dense f [N,d_sae]. sae_decode's output is [N,sae_out_dim]; a
 * skip transcoder or a centred SAE (cfg.center_input) also needs the input: sae_decode refuses it
 * (ERR_ARG), sae_forward does both. */
int sae_encode(const sae_model *s, const float *x /*[N,d_in]*/, int N, float *f /*[N,d_sae]*/);
int sae_decode(const sae_model *s, const float *f /*[N,d_sae]*/, int N, float *xhat /*[N,d_out]*/);
/* Fold the centring of the input along d_in (cfg.center_input; an SAE that SAELens applies to
 * C x) into W_enc and the encoder biases: apply_b_dec says whether its pre-activation subtracts
 * b_dec first (SAELens' apply_b_dec_to_input). sae_load calls it; idempotent. */
void sae_center_encoder(sae_model *s, int apply_b_dec);
/* encode + decode (+ the skip path): f [N,d_sae], out [N,sae_out_dim]. */
int sae_forward(const sae_model *s, const float *x /*[N,d_in]*/, int N, float *f, float *out);

#endif
