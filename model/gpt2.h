/* gpt2.h - GPT-2 model: Hugging Face checkpoint loading, hooked batched forward, training.
 *
 * Checkpoint: a directory with config.json (n_layer, n_head, n_embd, n_positions, vocab_size,
 * n_inner (null = 4*n_embd), layer_norm_epsilon, activation_function gelu_new|gelu_pytorch_tanh|
 * gelu, tie_word_embeddings, default true) and model.safetensors with the hub's GPT-2 tensor
 * names (optionally prefixed "transformer.", lm_head.weight with or without it), F32/F16/BF16/F64,
 * converted to float32 on load. tie_word_embeddings decides the unembedding, as HF's
 * tie_weights(): true is wte (a stored lm_head.weight is then unused, only its shape checked),
 * false is lm_head.weight (required). Buffers h.{i}.attn.bias / h.{i}.attn.masked_bias are
 * skipped; any other unknown tensor, a missing tensor or a shape that does not fit the config is
 * ERR_FORMAT/ERR_SHAPE with the file and tensor named.
 *
 * Parameters live in one float32 buffer (HF Conv1D layout, y = x W + b) so the optimizer sees a
 * flat vector; gpt2_param_table() lists the tensors in that buffer.
 *
 * Hook points (TransformerLens names, fired in this order):
 *   hook_embed [B,T,C], hook_pos_embed [B,T,C], then per block l:
 *   blocks.l.hook_resid_pre, blocks.l.ln1.hook_normalized, blocks.l.attn.hook_q/_k/_v [B,T,H,dh],
 *   blocks.l.attn.hook_attn_scores [B,H,T,T] (scaled, masked entries -inf),
 *   blocks.l.attn.hook_pattern [B,H,T,T], blocks.l.attn.hook_z [B,T,H,dh],
 *   blocks.l.hook_attn_out, blocks.l.hook_resid_mid, blocks.l.ln2.hook_normalized,
 *   blocks.l.mlp.hook_pre [B,T,F], blocks.l.mlp.hook_post [B,T,F], blocks.l.hook_mlp_out,
 *   blocks.l.hook_resid_post, and ln_final.hook_normalized.  Values are TransformerLens's
 *   HookedTransformer.from_pretrained_no_processing (no fold_ln, center_writing_weights,
 *   center_unembed or fold_value_biases; hook_normalized includes the LayerNorm weight and bias),
 *   not its default from_pretrained (which centres the residual stream and logits, drops the LN
 *   affine at hook_normalized and b_V from hook_v/hook_z; docs/model.md).
 * Views are contiguous row-major float32 owned by the model, valid during the callback; a hook may
 * overwrite the data and later computation uses the new values, except that the softmax after
 * hook_attn_scores reads only the causal entries of each row (query t: keys 0..t), so edits above
 * the diagonal are ignored and attention stays causal (an all -inf row gives a zero pattern row).
 *
 * Thread safety: a gpt2_model is used by one thread at a time (it owns its activation buffers).
 * Buffers persist across calls and grow to the largest B*T seen.
 */
#ifndef SAELITE_GPT2_H
#define SAELITE_GPT2_H
#include <stddef.h>
#include <stdint.h>

#include "common/rng.h" /* rng_state: init and training data order */
#include "common/tensor.h"
#include "model/safetensors.h"

/* The shapes a model may have (config.json and init-model's flags alike): each field 1..its max */
#define GPT2_MAX_LAYERS 1000
#define GPT2_MAX_EMBD 65536
#define GPT2_MAX_HEADS 65536
#define GPT2_MAX_CTX (1 << 20)
#define GPT2_MAX_VOCAB (1 << 24)
#define GPT2_MAX_INNER (1 << 20)

typedef struct {
    int n_layer, n_head, n_embd, n_ctx, vocab_size, n_inner;
    float ln_eps;
} gpt2_config;

typedef struct gpt2_model gpt2_model;

int gpt2_load(gpt2_model **out, const char *dir); /* HF layout: config.json + model.safetensors */
void gpt2_free(gpt2_model *m);
const gpt2_config *gpt2_cfg(const gpt2_model *m);

/* Random GPT-2 initialisation (normal std 0.02, residual projections 0.02/sqrt(2L), biases 0,
 * LayerNorm 1/0), tied unembedding, GELU tanh. Deterministic for a seed. */
int gpt2_create(gpt2_model **out, const gpt2_config *cfg, uint64_t seed);
/* A second model with m's configuration, tying and a copy of its weights, but no hooks and no
 * training state: each model owns its activations, so two threads can run forwards at once,
 * one model each, with the same results. */
int gpt2_clone(gpt2_model **out, const gpt2_model *m);
/* Write config.json + model.safetensors into dir (created if missing), all or none: both are
 * staged beside their targets and renamed into place once both are written (file_group).
 * dtype ST_F32/ST_F16/ST_BF16; prefix != 0 names tensors "transformer.*". */
int gpt2_save(const gpt2_model *m, const char *dir, st_dtype dtype, int prefix);
/* The same, and a stop (*stop set by a signal, may be NULL) seen before the rename writes
 * nothing: ERR_ABORTED, the staged files removed and dir too where this call created it. */
int gpt2_save_stop(const gpt2_model *m, const char *dir, st_dtype dtype, int prefix,
                   volatile int *stop);

/* float32 parameter by HF name without prefix; "lm_head.weight" gives wte when tied.
 * NULL when unknown. Shapes in HF layout. */
const float *gpt2_param(const gpt2_model *m, const char *name, int *ndim, int64_t shape[2]);

typedef struct {
    char name[64];
    size_t offset, numel; /* into the flat parameter buffer */
    int ndim;
    int64_t shape[2];
    int decay; /* 1 for matrices (weight decay applies), 0 for biases and LayerNorm */
} gpt2_tensor;
/* The parameter tensors in buffer order; *n receives the count. */
const gpt2_tensor *gpt2_param_table(const gpt2_model *m, int *n);
float *gpt2_params(gpt2_model *m, size_t *n); /* the flat buffer (writable) */
int gpt2_tied(const gpt2_model *m);
/* Give a tied model its own lm_head.weight (a copy of wte). Call before adding hooks or
 * enabling training (those are reset). */
int gpt2_untie(gpt2_model *m);

/* `saelite init-model` as one call: a random-weight checkpoint (gpt2_create with seed, its own
 * lm_head.weight with untied, gpt2_save as dtype, "transformer.*" names with prefix) into out.
 * A train-lm run there (its train_state.safetensors) is refused (ERR_ARG) unless force, which
 * then removes that state once the new model is written. config.json and model.safetensors are
 * written as one (gpt2_save). stop (optional): non-zero once the weights are drawn ends the run
 * with ERR_ABORTED, nothing written; a write already begun is finished. */
typedef struct {
    gpt2_config cfg;
    uint64_t seed;
    st_dtype dtype;
    int prefix, untied, force;
    const char *out;
    volatile int *stop;
} gpt2_init_opts;
int gpt2_init_run(const gpt2_init_opts *o, size_t *nparams);

/* ---- hooks ------------------------------------------------------------------------------ */
typedef int (*gpt2_hook_fn)(const tensor_view *t, void *user); /* read or overwrite t->data; !=0 aborts */
/* pattern: exact name or a prefix ending in '*'. ERR_NOTFOUND (listing valid names) if nothing
 * matches. Several hooks may share a point; they run in the order added. */
int gpt2_hook_add(gpt2_model *m, const char *pattern, gpt2_hook_fn fn, void *user);
void gpt2_hook_clear(gpt2_model *m);
/* layer (-1 outside blocks) and per-token width: n_embd for resid/ln/attn_out/mlp_out/embed,
 * n_inner for mlp pre/post, n_head*d_head for q/k/v/z, n_head for attn_scores/pattern (whose
 * tensor is [B,H,T,T]). ERR_NOTFOUND for unknown names. */
int gpt2_hook_info(const gpt2_model *m, const char *name, int *layer, int *width);
/* gpt2_hook_info for a reader of one vector per token (extract, an SAE's steering, attribution,
 * effects): ERR_ARG for attn_scores and pattern, whose [B,H,T,T] has none. */
int gpt2_hook_token_info(const gpt2_model *m, const char *name, int *layer, int *width);
/* The linear map from a hook's space to the residual stream along the direct path (what the
 * logit-effect analysis multiplies a dictionary direction by before ln_f and lm_head): NULL with
 * *ok = 1 for residual-space points (hook_embed, hook_pos_embed, resid_pre/mid/post, attn_out,
 * mlp_out) when d_in == n_embd; the block's c_proj weight [d_in, n_embd] for mlp.hook_post and
 * attn.hook_z; NULL with *ok = 0 when the hook is not on a linear direct path (e.g.
 * mlp.hook_pre: a GELU follows) or the widths do not match. */
const float *gpt2_hook_direct_proj(const gpt2_model *m, const char *hook, int d_in, int *ok);
/* 1 when a change at position t of this hook can only change the outputs (logits) at position t:
 * the point comes after the last block's attention mixes positions (that block's attn.hook_z
 * and later, and ln_final). 0 for earlier or unknown points. */
int gpt2_hook_position_local(const gpt2_model *m, const char *hook);
/* A hook point's place in the firing order from its name alone (no model): *pos grows along the
 * forward (hook_embed 0, hook_pos_embed 1, then each block's points, ln_final last). 0 when the
 * name is one of GPT-2's points, ERR_NOTFOUND (no message) otherwise (an imported hook). */
int gpt2_hook_order(const char *name, long long *pos);
/* Number of hook points and the i-th name, in firing order. */
int gpt2_hook_count(const gpt2_model *m);
const char *gpt2_hook_name(const gpt2_model *m, int i);

/* ---- forward ---------------------------------------------------------------------------- */
/* tokens [B,T], T <= n_ctx, ids in [0, vocab). want_logits 0: stop after the last layer a hook
 * needs (nothing runs without hooks). A hook returning non-zero stops the pass (ERR_ABORTED). */
int gpt2_forward(gpt2_model *m, const int *tokens, int B, int T, int want_logits);
/* The one check of ids given directly (the passes run it): every id in [0, vocab), or ERR_ARG
 * naming the first that is not and its position. Ids from a tokenizer need tok_check_model once. */
int gpt2_check_ids(const gpt2_config *c, const int *ids, size_t n);
const float *gpt2_logits(const gpt2_model *m); /* [B,T,V] of the last forward with logits */
int gpt2_layers_run(const gpt2_model *m); /* blocks the last forward computed (early stop) */
/* Forward with logits (hooks fire) and per-token cross-entropy of targets [B,T] (target < 0 =
 * ignored). loss_per_token [B,T] may be NULL; *mean over counted targets (0 when none). */
int gpt2_loss(gpt2_model *m, const int *tokens, const int *targets, int B, int T,
              float *loss_per_token, double *mean);

/* ---- training --------------------------------------------------------------------------- */
/* Allocate gradients and per-layer activation storage (forward then keeps what backward needs). */
int gpt2_train_enable(gpt2_model *m);
/* Forward + mean cross-entropy + backward: gradients (gpt2_grads) are overwritten with
 * d(mean loss)/d(params). Needs gpt2_train_enable. */
int gpt2_forward_backward(gpt2_model *m, const int *tokens, const int *targets, int B, int T,
                          double *mean);
float *gpt2_grads(gpt2_model *m); /* same layout as gpt2_params; NULL before train_enable */
/* Gradient at a hook point of a metric linear in the logits: forward (hooks fire; a hook that
 * overwrites its point is differentiated at the value it wrote), then dhook [B,T,width] =
 * d(sum dlogits * logits)/d(activation at hook), through the ordinary backward pass (stopped
 * once the hook is reached). logits_out [B,T,V] (may be NULL) receives the forward's logits.
 * Supported hooks: blocks.l.hook_resid_pre/mid/post, attn.hook_z, hook_attn_out, mlp.hook_post,
 * hook_mlp_out, ln_final.hook_normalized (ERR_ARG for the others). Needs gpt2_train_enable;
 * clobbers gpt2_grads, and gpt2_logits is NULL afterwards. */
int gpt2_hook_grad(gpt2_model *m, const int *tokens, int B, int T, const float *dlogits,
                   const char *hook, float *dhook, float *logits_out);

/* A model directory's identity: FNV-1a 64 over its config.json and model.safetensors, as 16 hex
 * digits (what extract records in models.checksum, and analyze checks a --model against). */
int gpt2_dir_checksum(const char *dir, char out[17]);

#endif
