/* hash.h - murmur3's 64-bit finaliser, for the open-addressing tables of the tokenizer and the
 * BPE trainer: every input bit reaches the low bits used as a slot index. Header-only. */
#ifndef SAELITE_HASH_H
#define SAELITE_HASH_H
#include <stddef.h>
#include <stdint.h>

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

#endif
