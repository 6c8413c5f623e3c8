/* buf.h - a growable byte buffer, for text and files assembled in memory.
 *
 * buf holds n bytes at p, always followed by a NUL (so p is a C string when the bytes hold no
 * NUL), in a mem_alloc'd block of cap bytes. A zeroed buf is empty and valid; the owner frees
 * it with buf_free (p may be taken over instead: it is mem_free'd). Appends return OK or
 * ERR_NOMEM (message set) and leave the buffer unchanged on failure. Not thread-safe per buf.
 *
 * buf_json appends s as a JSON string literal with quotes: '"' and '\\' backslashed, \n \t \r
 * as those escapes and other bytes < 0x20 as \u00XX (BUF_JSON_CTRL_U: every byte < 0x20 as
 * \u00XX, the form extract's stored run parameters use); bytes >= 0x20, UTF-8 included, pass
 * through unchanged.
 *
 * buf_double writes x into out (cap bytes, 32 is enough) in the fewest significant digits,
 * 15 to 17, that read back (strtod) as exactly x: 0.4 stays "0.4", where %.17g would write
 * 0.40000000000000002, and no value is rounded, which cJSON's own printing does (it keeps 15
 * digits whenever they compare equal within a relative 2^-52: seed 9000000000000001 became 9e+15).
 *
 * buf_read_double is the one reader of a number a user or a client wrote in decimal: it returns
 * how many bytes of s spell one, [+-]?(DIGITS[.DIGITS*] | .DIGITS)([eE][+-]?DIGITS)?, and sets
 * *x; 0 (x untouched) when s does not start with one or its value is not finite. strtod alone
 * also takes leading blanks, hex (0x10, 0x1p4), "inf", "nan" and "infinity": CLI flags, steering
 * strengths and serve's arguments took them. BUF_DECIMAL_JSON narrows it to JSON's spelling
 * (no '+', digits on both sides of the point). An underflow reads as the nearest double;
 * BUF_DECIMAL_OVERFLOW reads a decimal beyond the range (1e309) as an infinity, so that the
 * caller can name its range rather than the syntax.
 */
#ifndef SAELITE_BUF_H
#define SAELITE_BUF_H
#include <stddef.h>

typedef struct {
    char *p;    /* the bytes, NUL-terminated (NULL while empty and never grown) */
    size_t n;   /* bytes used, without the NUL */
    size_t cap; /* bytes allocated */
} buf;

#define BUF_JSON_CTRL_U 1

int buf_put(buf *b, const void *s, size_t n);
int buf_str(buf *b, const char *s);
int buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_json(buf *b, const char *s, size_t n, int flags);
/* Empty the buffer, keeping its memory. */
void buf_reset(buf *b);
void buf_free(buf *b);
const char *buf_double(char *out, size_t cap, double x);
#define BUF_DECIMAL_JSON 1
#define BUF_DECIMAL_OVERFLOW 2
size_t buf_read_double(const char *s, int flags, double *x);

#endif
