/* half.h - float32 <-> IEEE half (f16) and bfloat16 (bf16) conversions, for the safetensors
 * reader/writer (model/) and the activation BLOBs of the store (store/).
 *
 * f32 -> f16/bf16 rounds to nearest, ties to even; overflow gives inf (f16), NaN stays a quiet
 * NaN with the sign kept; f16 subnormals are produced and read exactly. f16/bf16 -> f32 is exact.
 * The scalar functions are inline (kernels call them per element); the array functions over n
 * values are vectorised and give bit for bit the scalar results. Pure functions: no state, no
 * allocation, no errors, safe from any thread.
 */
#ifndef SAELITE_HALF_H
#define SAELITE_HALF_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Branch-free so that the array loops in half.c vectorise. u: the bits of a float32. */
static inline uint16_t half_bf16_from_bits(uint32_t u)
{
    uint32_t nan = (u & 0x7fffffffu) > 0x7f800000u;
    uint32_t quiet = (u >> 16) | 0x40u;                /* quiet NaN */
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16; /* round to nearest even */
    return (uint16_t)(nan ? quiet : r);
}

static inline uint16_t half_f16_from_bits(uint32_t u)
{
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u); /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflow (incl. rounding) -> inf */
    if (a < 0x38800000u) {                                   /* subnormal or zero in f16 */
        if (a < 0x33000000u) return (uint16_t)sign;          /* below half the smallest subnormal */
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)e; /* bits to drop to land on units of 2^-24 */
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((a >> 13) - (112u << 10)); /* rebias exponent 127 -> 15 */
    uint32_t rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) r++;
    return (uint16_t)(sign | r);
}

static inline uint16_t half_f32_to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return half_bf16_from_bits(u);
}

static inline float half_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

static inline uint16_t half_f32_to_f16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return half_f16_from_bits(u);
}

static inline float half_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0) {
        if (m == 0) u = sign;
        else {
            e = 113;
            while (!(m & 0x400u)) { m <<= 1; e--; }
            u = sign | (e << 23) | ((m & 0x3ffu) << 13);
        }
    } else if (e == 31) u = sign | 0x7f800000u | (m << 13);
    else u = sign | ((e + 112) << 23) | (m << 13);
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* The same over arrays of n values: out[i] = conversion of in[i]. */
void half_f32_to_bf16_n(uint16_t *out, const float *in, size_t n);
void half_bf16_to_f32_n(float *out, const uint16_t *in, size_t n);
void half_f32_to_f16_n(uint16_t *out, const float *in, size_t n);
void half_f16_to_f32_n(float *out, const uint16_t *in, size_t n);

#endif
