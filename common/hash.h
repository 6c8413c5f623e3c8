/* hash.h - the small integer and byte hashes of saelite. Header-only, no state, no errors.
 *
 * Stored data depends on every constant here (validation splits, shuffles, RNG seeds, cache
 * keys): never change one, add a new function instead.
 *   hash_slot        murmur3's 64-bit finaliser, for open-addressing tables (tokenizer, BPE
 *                    trainer): every input bit reaches the low bits used as a slot index.
 *   hash_mix64       splitmix64's output function of z (z + golden gamma, then the Stafford
 *                    variant 13 finaliser): a stateless 64-bit mix.
 *   hash_splitmix64  the splitmix64 stream: returns hash_mix64(*x) and advances *x by the gamma.
 *   hash_fnv1a       64-bit FNV-1a over n bytes, continuing from h (start at HASH_FNV1A_INIT;
 *                    the tokenizer's tables start at HASH_FNV1A_INIT_TOK, see there).
 *   hash_absorb128   one 64-bit word into a 128-bit content key of two independent lanes (a
 *                    chained hash_mix64, and FNV-1a's multiply on whole words): the memos'
 *                    keys (analysis/eval_probe.c, analysis/ana_run.c) and the checkpoints'
 *                    (analyze, eval), where a collision would return another problem's result;
 *                    hash_absorb128_str a string's length and FNV-1a the same way.
 */
#ifndef SAELITE_HASH_H
#define SAELITE_HASH_H
#include <stddef.h>
#include <stdint.h>

#define HASH_FNV1A_INIT 0xcbf29ce484222325ULL /* 14695981039346656037, the offset basis */
/* The start the tokenizer's cache and the BPE trainer's string tables have always used: the
 * decimal offset basis with its last digit lost. Kept so their slot layout (and any order that
 * follows from it) does not move. */
#define HASH_FNV1A_INIT_TOK 1469598103934665603ULL
#define HASH_GOLDEN_GAMMA 0x9e3779b97f4a7c15ULL

/* Slot of key k in a table of mask + 1 entries (a power of two). */
static inline size_t hash_slot(uint64_t k, size_t mask)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return (size_t)k & mask;
}

static inline uint64_t hash_mix64(uint64_t z)
{
    z += HASH_GOLDEN_GAMMA;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t hash_splitmix64(uint64_t *x)
{
    uint64_t z = hash_mix64(*x);
    *x += HASH_GOLDEN_GAMMA;
    return z;
}

static inline uint64_t hash_fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

static inline void hash_absorb128(uint64_t h[2], uint64_t w)
{
    h[0] = hash_mix64(h[0] ^ w);
    h[1] = (h[1] ^ w) * 0x100000001b3ULL;
}

/* A string into such a key: its length, then its FNV-1a (so "ab","c" and "a","bc" differ). */
static inline void hash_absorb128_str(uint64_t h[2], const char *s)
{
    size_t n = 0;
    while (s[n]) n++;
    hash_absorb128(h, n);
    hash_absorb128(h, hash_fnv1a(HASH_FNV1A_INIT, s, n));
}

#endif
