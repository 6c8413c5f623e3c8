/* sample.h - next-token sampling and autoregressive generation.
 *
 * Randomness comes from common/rng.h (rng_state: xoshiro256** seeded through splitmix64, the
 * same stream on every platform).
 *
 * smp_pick chooses a token from logits[V] (left unmodified):
 *   temperature <= 0 -> greedy argmax (lowest index on ties), no random number is drawn;
 *   otherwise softmax(logits / temperature), optionally restricted to the top_k largest logits
 *   (top_k <= 0 or >= V: no restriction; ties at the k-th value are broken by lower index).
 * work must hold V floats (scratch for top-k selection). Errors: ERR_ARG for V < 1 or a NaN
 * logit (message names the token index).
 * Ownership: smp_generate allocates its scratch internally (mem_alloc) and frees it.
 */
#ifndef SAELITE_SAMPLE_H
#define SAELITE_SAMPLE_H
#include <stddef.h>
#include <stdint.h>

#include "common/rng.h"
#include "model/gpt2.h"

int smp_pick(const float *logits, int V, double temperature, int top_k, rng_state *rng,
             float *work /*[V]*/, int *token);

/* Autoregressive generation with a gpt2 model (no KV cache: each step reruns the last n_ctx
 * tokens, which is fine for the small models this tool trains).
 * seq[0..*len) is the context (at least one token); up to max_new sampled tokens are appended
 * (seq must hold *len + max_new ints) and *len grows. Tokens are drawn from the first
 * `vocab_limit` logits (<= 0: all; a tokenizer may know fewer ids than a padded model).
 * Generation stops after emitting stop_id (>= 0), when on_token returns non-zero, or after
 * max_new tokens. on_token (may be NULL) sees each new token as it is produced (streaming).
 * Errors: ERR_ARG (empty context, bad ids), and whatever the forward pass reports. */
typedef int (*smp_token_fn)(int token, void *user);
int smp_generate(gpt2_model *m, int *seq, size_t *len, int max_new, double temperature,
                 int top_k, int vocab_limit, int stop_id, rng_state *rng, smp_token_fn on_token,
                 void *user);

#endif
