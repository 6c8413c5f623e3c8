/* utf8.h - UTF-8, defined once: validation, decoding and encoding of one code point, and the
 * two sanitisers (text for the database, text for a picture).
 *
 * Validity is RFC 3629's (the same as PCRE2's UTF check, WHATWG and cairo): a sequence is 1-4
 * bytes encoding U+0000..U+10FFFF in its shortest form, and not a surrogate (U+D800..U+DFFF).
 * So the lead bytes C0, C1 (overlong 2-byte forms) and F5..FF (above U+10FFFF, or the old 5- and
 * 6-byte forms) never start a sequence, E0 needs A0..BF next (else overlong), ED needs 80..9F
 * (else a surrogate), F0 needs 90..BF (else overlong), F4 needs 80..8F (else above U+10FFFF);
 * a sequence cut off by the end of the buffer is invalid.
 *
 * Sanitisers replace, byte by byte: every byte that does not start a valid sequence becomes one
 * U+FFFD (utf8_clean; so a truncated 3-byte sequence gives two) or one "\xHH" escape
 * (utf8_for_display), and valid code points pass or are mapped as each function says. They
 * write at most cap - 1 bytes and a NUL (cap > 0), stop before a character that would not fit
 * whole (never a cut sequence or escape), and return the bytes written (without the NUL).
 * Output can grow to 4 bytes per input byte: cap = 4 * len + 1 always fits.
 *
 * Errors: none (pure functions). Threads: reentrant, no state.
 */
#ifndef SAELITE_UTF8_H
#define SAELITE_UTF8_H
#include <stddef.h>
#include <stdint.h>

/* Length (1..4) of the valid sequence at p[0..n), 0 when it is invalid, truncated or n == 0;
 * with cp non-NULL, the code point goes to *cp (untouched when invalid). */
size_t utf8_decode(const unsigned char *p, size_t n, uint32_t *cp);
/* Length of the valid sequence at p[0..n) (utf8_decode without the code point). */
size_t utf8_len(const unsigned char *p, size_t n);
/* Length of the longest valid UTF-8 prefix of p[0..n) (n when all of it is valid). */
size_t utf8_valid_prefix(const unsigned char *p, size_t n);
/* Writes cp as UTF-8 into out[0..4) and returns its length; 0 (nothing written) for a
 * surrogate or a value above U+10FFFF. */
size_t utf8_encode(uint32_t cp, char out[4]);

/* Text for the database (what extract stores as token text): invalid bytes and NUL bytes
 * become U+FFFD; everything else is copied. */
size_t utf8_clean(const char *in, size_t len, char *out, size_t cap);
/* Text for a picture (the reports' fonts): '\n' -> U+21B5 (↵), '\t' -> U+21E5 (⇥); each
 * invalid byte (a lone byte of a split character, an overlong form, a surrogate) and each byte
 * of the other C0 controls (NUL included), DEL and the C1 controls (U+0080..U+009F) -> its
 * escape "\xHH" (lower-case hex: "\x1b", "\xe2", "\xc2\x85"), which DejaVu Sans draws, so
 * different bytes look different; everything else is copied. The output is valid UTF-8 with
 * no control characters, so sanitising it again leaves it unchanged. A token whose own text
 * is a backslash, 'x' and two hex digits looks the same as an escaped byte. */
size_t utf8_for_display(const char *in, size_t len, char *out, size_t cap);
/* Text for a terminal (query's tables): '\n', '\t', '\r' -> "\n", "\t", "\r"; invalid bytes and
 * the other controls -> "\xHH" as utf8_for_display; the bidirectional controls (U+202A..202E,
 * U+2066..2069, U+200E, U+200F, U+061C), which reorder what surrounds them -> "\uHHHH";
 * everything else copied. At most 4 output bytes per input byte. */
size_t utf8_for_terminal(const char *in, size_t len, char *out, size_t cap);

#endif
