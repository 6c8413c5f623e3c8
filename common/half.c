/* half.c - the array conversions of half.h (stores of f16/bf16 activations convert millions of
 * values a second): the scalar code inlined, and O3 so that GCC vectorises the loops (-O2 leaves
 * loops of unknown trip count scalar); results are identical to the scalar functions. */
#include "common/half.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("O3")
#endif
void half_f32_to_bf16_n(uint16_t *out, const float *in, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &in[i], 4);
        out[i] = half_bf16_from_bits(u);
    }
}

void half_bf16_to_f32_n(float *out, const uint16_t *in, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)in[i] << 16;
        memcpy(&out[i], &u, 4);
    }
}

void half_f32_to_f16_n(uint16_t *out, const float *in, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &in[i], 4);
        out[i] = half_f16_from_bits(u);
    }
}

void half_f16_to_f32_n(float *out, const uint16_t *in, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = half_f16_to_f32(in[i]);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif
