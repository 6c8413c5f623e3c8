/* utf8.c - see utf8.h. */
#include "common/utf8.h"

#include <stdio.h>
#include <string.h>

size_t utf8_decode(const unsigned char *p, size_t n, uint32_t *cp)
{
    if (n == 0) return 0;
    unsigned c = p[0];
    if (c < 0x80) {
        if (cp) *cp = c;
        return 1;
    }
    size_t k;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    uint32_t v;
    if (c < 0xC2) return 0; /* a continuation byte, or C0/C1 (overlong) */
    if (c < 0xE0) {
        k = 2;
        v = c & 0x1F;
    } else if (c < 0xF0) {
        k = 3;
        v = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;      /* overlong below U+0800 */
        else if (c == 0xED) hi = 0x9F; /* surrogates U+D800..U+DFFF */
    } else if (c < 0xF5) {
        k = 4;
        v = c & 0x07;
        if (c == 0xF0) lo = 0x90;      /* overlong below U+10000 */
        else if (c == 0xF4) hi = 0x8F; /* above U+10FFFF */
    } else return 0; /* F5..FF: above U+10FFFF, 5- and 6-byte forms */
    if (n < k || p[1] < lo || p[1] > hi) return 0;
    v = v << 6 | (p[1] & 0x3Fu);
    for (size_t i = 2; i < k; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        v = v << 6 | (p[i] & 0x3Fu);
    }
    if (cp) *cp = v;
    return k;
}

size_t utf8_len(const unsigned char *p, size_t n) { return utf8_decode(p, n, NULL); }

size_t utf8_valid_prefix(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = utf8_decode(p + i, n - i, NULL);
        if (!k) break;
        i += k;
    }
    return i;
}

size_t utf8_encode(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp > 0x10FFFF) return 0;
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

#define REPLACEMENT 0xFFFDu

/* What one code point of the input becomes (valid 0: the invalid byte src[0] alone), at most
 * 16 bytes into dst; the sanitisers differ only in it. */
typedef size_t (*cp_out)(const unsigned char *src, size_t n, int valid, uint32_t cp, char *dst);

/* The sanitisers' loop: decode, map, copy while the whole mapping fits (room for the NUL kept). */
static size_t sanitize(const char *in, size_t len, char *out, size_t cap, cp_out f)
{
    if (cap == 0) return 0;
    const unsigned char *u = (const unsigned char *)in;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t n = utf8_decode(u + i, len - i, &cp);
        int valid = n != 0;
        if (!valid) n = 1;
        char buf[16];
        size_t k = f(u + i, n, valid, cp, buf);
        if (o + k + 1 > cap) break;
        memcpy(out + o, buf, k);
        o += k;
        i += n;
    }
    out[o] = 0;
    return o;
}

/* invalid bytes and NUL -> U+FFFD one by one */
static size_t out_clean(const unsigned char *src, size_t n, int valid, uint32_t cp, char *dst)
{
    (void)src, (void)n;
    return utf8_encode(!valid || cp == 0 ? REPLACEMENT : cp, dst);
}

/* Bytes that no installed font draws distinctly become their hex escape: the control
 * pictures (U+2400...) and U+FFFD drew as the same box or the same U+FFFD for every byte, and
 * NUL ended the string (audit). Tokenizer viewers show bytes the same way. Newline and tab show
 * as U+21B5 and U+21E5. */
/* "\xHH" for each of src[0..n) (lower-case hex) */
static size_t hex_escapes(const unsigned char *src, size_t n, char *dst)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t k = 0; k < n; k++) {
        dst[4 * k] = '\\';
        dst[4 * k + 1] = 'x';
        dst[4 * k + 2] = hex[src[k] >> 4];
        dst[4 * k + 3] = hex[src[k] & 15];
    }
    return 4 * n;
}

static int is_control(uint32_t cp) { return cp < 0x20 || (cp >= 0x7F && cp < 0xA0); }

static size_t out_display(const unsigned char *src, size_t n, int valid, uint32_t cp, char *dst)
{
    if (valid && cp == '\n') return utf8_encode(0x21B5, dst);
    if (valid && cp == '\t') return utf8_encode(0x21E5, dst);
    if (valid && !is_control(cp)) {
        memcpy(dst, src, n);
        return n;
    }
    return hex_escapes(src, n, dst); /* an invalid byte alone, a control whole */
}

/* Bidirectional controls (embeddings, overrides, isolates, marks): they reorder the text
 * around them on a terminal */
static int is_bidi(uint32_t cp)
{
    return (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200E ||
           cp == 0x200F || cp == 0x061C;
}

static size_t out_terminal(const unsigned char *src, size_t n, int valid, uint32_t cp, char *dst)
{
    if (valid && (cp == '\n' || cp == '\t' || cp == '\r')) {
        dst[0] = '\\';
        dst[1] = cp == '\n' ? 'n' : cp == '\t' ? 't' : 'r';
        return 2;
    }
    if (!valid || is_control(cp)) return hex_escapes(src, n, dst);
    if (is_bidi(cp)) return (size_t)sprintf(dst, "\\u%04x", (unsigned)cp);
    memcpy(dst, src, n);
    return n;
}

size_t utf8_clean(const char *in, size_t len, char *out, size_t cap)
{
    return sanitize(in, len, out, cap, out_clean);
}

size_t utf8_for_display(const char *in, size_t len, char *out, size_t cap)
{
    return sanitize(in, len, out, cap, out_display);
}

size_t utf8_for_terminal(const char *in, size_t len, char *out, size_t cap)
{
    return sanitize(in, len, out, cap, out_terminal);
}
