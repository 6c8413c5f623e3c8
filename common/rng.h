/* rng.h - the one seeded random number generator of saelite.
 *
 * xoshiro256** (Blackman & Vigna) seeded through splitmix64: the same seed gives the same stream
 * on every platform (no libc rand), which committed fixtures and bit-identical resumes rely on.
 * rng_state is a plain value type: copy it to fork a stream, store its four words to checkpoint
 * it. Not thread-safe per instance (use one per thread). No allocation, no errors.
 *
 * Two normal samplers exist because two historical copies drew them differently and changing
 * either would change saved results: rng_normal (u1 = uniform clamped away from 0; sampling,
 * toy models) and rng_normal_alt (u = 1 - uniform in (0, 1]; SAE init, synthetic data).
 *
 * rng_xorshift64s is a second, one-word generator (xorshift64*, Vigna 2014) kept because the
 * analysis module's random directions are drawn with it (its quantile samples were too, until
 * they became a hash-keyed bottom-k sample); its state must be nonzero. The splitmix64 stream itself is hash_splitmix64 in common/hash.h.
 */
#ifndef SAELITE_RNG_H
#define SAELITE_RNG_H
#include <stdint.h>

typedef struct {
    uint64_t s[4];
} rng_state;

/* State from a 64-bit seed (four splitmix64 outputs). */
void rng_seed(rng_state *r, uint64_t seed);
/* Next 64 random bits. */
uint64_t rng_next(rng_state *r);
/* Uniform in [0, 1) with 53 random bits. */
double rng_uniform(rng_state *r);
/* Uniform integer in [0, n), n >= 1, without modulo bias (rejection sampling). */
uint64_t rng_below(rng_state *r, uint64_t n);
/* Standard normal, Box-Muller, one value per call (two uniforms: u1 clamped to >= 1e-300, u2). */
double rng_normal(rng_state *r);
/* Standard normal, Box-Muller with u = 1 - uniform (in (0, 1]) then v = uniform: a different
 * stream from rng_normal for the same state. */
double rng_normal_alt(rng_state *r);

/* xorshift64*: next 64 bits of the one-word stream *s (nonzero), advancing it. */
uint64_t rng_xorshift64s(uint64_t *s);

#endif
