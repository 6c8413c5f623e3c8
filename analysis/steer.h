/* steer.h - interventions on SAE features at the SAE's hook: steering, clamping, ablation, and
 * steered generation.
 *
 * All methods act on the hook's rows x [N, d_in] in place, with v = W_dec[F] (the decoder row,
 * not renormalised) and u = v / |v|:
 *   ANA_STEER_ADD    x += S * v                              (SAELens / Neuronpedia SIMPLE_ADDITIVE)
 *   ANA_STEER_CLAMP  x += (S - f_F(x)) * v                   the delta clamp: the SAE's error term
 *                    x - xhat is kept, S = 0 ablates the feature, S = f_F(x) changes nothing;
 *                    f_F(x) is the SAE's own encoding of the unmodified row (every term of one
 *                    call reads the same codes)
 *   ANA_STEER_ORTHO  x += (S - 1) * (x.u) u                  Neuronpedia ORTHOGONAL_DECOMP:
 *                    (I - P) x + S P x with P = v v^T / |v|^2 (S = 1: unchanged, S = 0: the
 *                    component along v is removed)
 *   ANA_STEER_CAP    x -= max(0, x.u - S) u                  projection cap: x.u <= S afterwards
 * Several terms of add/ortho/cap apply one after the other in the order given. Every change is a
 * delta added to x, so with no terms (or S = f_F for clamp) the row is bit-for-bit unchanged:
 * this is "the SAE spliced in with its error term" without the rounding of xhat + (x - xhat).
 * Positions: every row the hook sees. The generation loop (model/sample.h) reruns the whole
 * window each step (no KV cache), so prompt and generated positions are all steered, unlike a
 * cached loop that steers only the prompt.
 * Ownership: ana_steer borrows the SAE and copies the terms; it owns its code scratch.
 * Hook: the SAE's (cfg.json hook_name) or another of the same width (ana_steer_attach), except
 * for clamp, which encodes the rows and so runs at the SAE's hook only.
 * Errors: ERR_ARG (bad spec, feature out of range, clamp at another hook), ERR_SHAPE (hook
 * width), ERR_NOMEM.
 * Threads: one ana_steer per model (it owns scratch).
 */
#ifndef SAELITE_ANA_STEER_H
#define SAELITE_ANA_STEER_H
#include <stddef.h>
#include <stdint.h>

#include "model/gpt2.h"
#include "model/sample.h"
#include "model/tokenizer.h"
#include "sae/sae.h"

typedef enum { ANA_STEER_ADD, ANA_STEER_CLAMP, ANA_STEER_ORTHO, ANA_STEER_CAP } ana_steer_method;

typedef struct {
    int feature; /* latent index in [0, d_sae) */
    float value; /* S */
} ana_steer_term;

const char *ana_steer_method_name(ana_steer_method m); /* "add", "clamp", "ortho", "cap" */
/* Whether model_dir is the model the SAE (or transcoder) in sae_dir was trained on: ERR_ARG
 * naming both checksums when its cfg.json records one (sae-train --db) and the directory's
 * (gpt2_dir_checksum) differs; OK when the SAE records none. For every command that runs an SAE
 * on a --model: generate --steer, serve, attribute, graph. */
int ana_check_sae_model(const sae_model *s, const char *sae_dir, const char *model_dir);
int ana_steer_method_parse(const char *s, ana_steer_method *out); /* ERR_ARG for others */
/* "F:S[,F:S...]" into *out (mem_alloc'd, *n terms); features must be < d_sae (d_sae <= 0: not
 * checked). */
int ana_steer_parse(const char *spec, int d_sae, ana_steer_term **out, int *n);
/* The largest |strength| accepted (parse and new): far beyond any activation, and below what
 * overflows the model's float arithmetic downstream (3e38 did). */
#define ANA_STEER_MAX 1e6

/* Apply the terms to rows x [N, d_in]. f [N, d_sae] is scratch for the codes (needed for clamp
 * only; may be NULL otherwise). */
int ana_steer_rows(const sae_model *s, ana_steer_method m, const ana_steer_term *t, int n,
                   float *x /*[N,d_in]*/, int N, float *f /*[N,d_sae] or NULL*/);

/* A hook that steers every row at the SAE's hook (cfg.hook_name, or `hook` when given). */
typedef struct ana_steer ana_steer;
int ana_steer_new(ana_steer **out, const sae_model *s, ana_steer_method m,
                  const ana_steer_term *t, int n);
void ana_steer_free(ana_steer *st);
/* gpt2_hook_add at hook (NULL: the SAE's hook_name). A failure inside the hook aborts the
 * forward pass; ana_steer_error returns its code (OK when none). */
int ana_steer_attach(ana_steer *st, gpt2_model *m, const char *hook);
int ana_steer_error(const ana_steer *st);

/* Generation with the hook attached (steered != 0) or without (the unsteered baseline): the
 * model's hooks are cleared first and after. rng is seeded from seed for each call, so a steered
 * and an unsteered call with the same seed draw the same random numbers. seq/len/max_new/...: as
 * smp_generate. */
typedef struct {
    int max_new, top_k, vocab_limit, stop_id;
    double temperature;
    uint64_t seed;
    const char *hook;      /* NULL: the SAE's hook_name */
    smp_token_fn on_token; /* may be NULL */
    void *user;
} ana_gen_opts;
int ana_steer_generate(gpt2_model *m, ana_steer *st, int steered, const ana_gen_opts *o,
                       int *seq, size_t *len);

/* The context `generate` starts from: the tokens of prompt[0..n) (special tokens allowed), or
 * <|endoftext|> alone when it has none. vocab: the model's vocabulary size; the tokenizer may
 * not know more ids than that (ERR_SHAPE) and every prompt id must be below it. *seq is
 * mem_alloc'd with room for max_new more tokens (free with mem_free); *len its tokens.
 * ERR_ARG: an empty prompt and no <|endoftext|> to start from. */
int ana_gen_context(tok_tokenizer *tok, int vocab, const char *prompt, size_t n, int max_new,
                    int **seq, size_t *len);

/* ---- `saelite generate` as a library call (generate_run.c) ------------------------------- */
/* Loads the model (and tokenizer: tokenizer_dir, else model_dir), and with sae_dir the SAE (which
 * must be the model's, ana_check_sae_model) and the steer spec ("F:S[,F:S...]", method); checks
 * that the hook exists and fits before anything is generated; then generates from prompt
 * (ana_gen_context): one pass, steered when an SAE is given, or with compare the steered pass then
 * the unsteered one from the same seed. The model's matmuls run at precision (OP_PRECISION_*).
 * Callbacks (each optional): pass_begin before a pass (terms/nterms: the steer terms on a steered
 * pass, else none), token with each sampled token's bytes as it comes (<|endoftext|> ends the pass
 * unless no_stop, and is not shown), pass_end after it (tokens sampled, whether <|endoftext|>
 * ended it, seconds). A set *stop ends the pass after the current token and starts no other: OK,
 * with fewer passes. Errors: err.h codes, from loading, the steer spec, the hook, the prompt. */
typedef struct {
    const char *model_dir, *tokenizer_dir; /* tokenizer_dir NULL: model_dir */
    const char *prompt;                    /* "" starts from <|endoftext|> */
    const char *sae_dir, *steer;           /* both or neither */
    const char *hook;                      /* NULL: the SAE's hook_name */
    ana_steer_method method;
    int compare, no_stop, max_tokens, top_k;
    double temperature;                    /* 0: greedy */
    uint64_t seed;
    int precision;                         /* OP_PRECISION_* (model/ops.h) */
    volatile int *stop;                    /* optional */
    void (*pass_begin)(void *user, int pass, int steered, const ana_steer_term *terms, int nterms);
    void (*token)(void *user, const char *bytes, size_t n);
    void (*pass_end)(void *user, int made, int stopped, double seconds);
    void *user;
} ana_generate_opts;

typedef struct {
    int passes; /* passes finished */
} ana_generate_result;

int ana_generate_run(const ana_generate_opts *o, ana_generate_result *r);

#endif
