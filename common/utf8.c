/* utf8.c - see utf8.h. */
#include "common/utf8.h"

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

/* The sanitisers' loop: invalid bytes -> U+FFFD one by one, valid code points through map. */
static size_t sanitize(const char *in, size_t len, char *out, size_t cap, uint32_t (*map)(uint32_t))
{
    if (cap == 0) return 0;
    const unsigned char *u = (const unsigned char *)in;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t n = utf8_decode(u + i, len - i, &cp);
        if (n == 0) {
            cp = REPLACEMENT;
            n = 1;
        } else cp = map(cp);
        char buf[4];
        size_t k = utf8_encode(cp, buf);
        if (o + k + 1 > cap) break;
        memcpy(out + o, buf, k);
        o += k;
        i += n;
    }
    out[o] = 0;
    return o;
}

static uint32_t map_clean(uint32_t cp) { return cp == 0 ? REPLACEMENT : cp; }

/* Bytes that no installed font draws distinctly become their hex escape: the control
 * pictures (U+2400...) and U+FFFD drew as the same box or the same U+FFFD for every byte, and
 * NUL ended the string (audit). Tokenizer viewers show bytes the same way. */
static int display_escaped(uint32_t cp)
{
    return (cp < 0x20 && cp != '\n' && cp != '\t') || (cp >= 0x7F && cp < 0xA0);
}

/* "\xHH" for each of in[0..n) at out + *o, all or nothing (room for the NUL kept). */
static int put_escapes(const unsigned char *in, size_t n, char *out, size_t cap, size_t *o)
{
    static const char hex[] = "0123456789abcdef";
    if (*o + 4 * n + 1 > cap) return 0;
    for (size_t k = 0; k < n; k++) {
        char *d = out + *o + 4 * k;
        d[0] = '\\';
        d[1] = 'x';
        d[2] = hex[in[k] >> 4];
        d[3] = hex[in[k] & 15];
    }
    *o += 4 * n;
    return 1;
}

size_t utf8_clean(const char *in, size_t len, char *out, size_t cap)
{
    return sanitize(in, len, out, cap, map_clean);
}

size_t utf8_for_display(const char *in, size_t len, char *out, size_t cap)
{
    if (cap == 0) return 0;
    const unsigned char *u = (const unsigned char *)in;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t n = utf8_decode(u + i, len - i, &cp);
        if (n == 0 || display_escaped(cp)) { /* an invalid byte alone, a control whole */
            n = n ? n : 1;
            if (!put_escapes(u + i, n, out, cap, &o)) break;
            i += n;
            continue;
        }
        char buf[4];
        size_t k = cp == '\n' ? utf8_encode(0x21B5, buf) : cp == '\t' ? utf8_encode(0x21E5, buf) : n;
        if (o + k + 1 > cap) break;
        memcpy(out + o, cp == '\n' || cp == '\t' ? buf : in + i, k);
        o += k;
        i += n;
    }
    out[o] = 0;
    return o;
}
