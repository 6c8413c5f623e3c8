/* sample.h - a seeded random number generator and next-token sampling.
 *
 * smp_rng is xoshiro256** seeded through splitmix64: the same seed gives the same stream on
 * every platform (no libc rand). It is a plain value type; copy it to fork a stream. Not
 * thread-safe per instance (use one per thread).
 *
 * smp_pick chooses a token from logits[V] (left unmodified):
 *   temperature <= 0 -> greedy argmax (lowest index on ties), no random number is drawn;
 *   otherwise softmax(logits / temperature), optionally restricted to the top_k largest logits
 *   (top_k <= 0 or >= V: no restriction; ties at the k-th value are broken by lower index).
 * work must hold V floats (scratch for top-k selection). Errors: ERR_ARG for V < 1 or a NaN
 * logit (message names the token index).
 */
#ifndef SAELITE_SAMPLE_H
#define SAELITE_SAMPLE_H
#include <stdint.h>

typedef struct {
    uint64_t s[4];
} smp_rng;

void smp_seed(smp_rng *r, uint64_t seed);
uint64_t smp_next(smp_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double smp_uniform(smp_rng *r);
/* Standard normal (Box-Muller; one value per call, deterministic for a seed). */
double smp_normal(smp_rng *r);
/* Uniform integer in [0, n), n >= 1, without modulo bias. */
uint64_t smp_below(smp_rng *r, uint64_t n);

int smp_pick(const float *logits, int V, double temperature, int top_k, smp_rng *rng,
             float *work /*[V]*/, int *token);

#endif
