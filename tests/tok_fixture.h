/* tok_fixture.h - test fixtures shared by test binaries: a byte-level GPT-2 tokenizer directory
 * and a byte-for-byte file comparison (header-only). */
#ifndef SAELITE_TOK_FIXTURE_H
#define SAELITE_TOK_FIXTURE_H
#include <stdio.h>

#include "common/err.h"
#include "common/fileio.h"
#include "model/tokenizer.h"

/* dir/encoder.json + dir/vocab.bpe: the 256 byte tokens (id = byte value), no merges. */
static inline int fixture_byte_tokenizer(const char *dir)
{
    char p[4096];
    int rc = path_join(p, sizeof p, dir, "encoder.json");
    FILE *fp = rc ? NULL : fopen(p, "w");
    if (!fp) return rc ? rc : err_set(ERR_IO, "%s: cannot create", p);
    fputc('{', fp);
    for (int i = 0; i < 256; i++)
        fprintf(fp, "%s\"\\u%04x\": %d", i ? ", " : "", tok_byte_to_unicode((unsigned char)i), i);
    fputs("}\n", fp);
    fclose(fp);
    if ((rc = path_join(p, sizeof p, dir, "vocab.bpe"))) return rc;
    if (!(fp = fopen(p, "w"))) return err_set(ERR_IO, "%s: cannot create", p);
    fputs("#version: 0.2\n", fp);
    fclose(fp);
    return OK;
}

/* 1 when both files can be read and are byte-identical. */
static inline int fixture_files_equal(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) same = 0;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

#endif
