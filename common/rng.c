/* rng.c - xoshiro256** + splitmix64 (see rng.h). */
#include "common/rng.h"

#include <math.h>

#include "common/hash.h"

void rng_seed(rng_state *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = hash_splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t rng_next(rng_state *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double rng_uniform(rng_state *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

uint64_t rng_below(rng_state *r, uint64_t n)
{
    /* values in the incomplete top bucket are redrawn */
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = rng_next(r);
    while (x >= lim);
    return x % n;
}

double rng_normal(rng_state *r)
{
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300; /* log(0) guard; probability 2^-53 */
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

double rng_normal_alt(rng_state *r)
{
    double u = 1.0 - rng_uniform(r), v = rng_uniform(r); /* u in (0,1] */
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

uint64_t rng_xorshift64s(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}
