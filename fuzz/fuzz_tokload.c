/* fuzz_tokload - tok_load on fuzzed tokenizer files, then a round trip with what loaded.
 * Input: encoder.json bytes, "\n#MERGES#\n", then vocab.bpe bytes.
 * Invariants: no crash or sanitizer report; errors carry a one-line message; a tokenizer that
 * loads encodes and decodes a fixed text (with invalid UTF-8 and <|endoftext|>) back exactly. */
#include "common/mem.h"
#include "fuzz/fuzz.h"
#include "model/tokenizer.h"

static void tokload_put(const char *dir, const char *name, const uint8_t *p, size_t n)
{
    char path[300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) fuzz_fail("cannot write %s", path);
}

static int fuzz_tokload(const uint8_t *data, size_t n)
{
    static const char mark[] = "\n#MERGES#\n";
    size_t cut = n, ml = sizeof mark - 1;
    for (size_t i = 0; i + ml <= n; i++)
        if (!memcmp(data + i, mark, ml)) { cut = i; break; }
    char dir[256], p[300];
    snprintf(dir, sizeof dir, "%s/tok", fuzz_tmpdir());
    mkdir(dir, 0700);
    tokload_put(dir, "encoder.json", data, cut);
    tokload_put(dir, "vocab.bpe", cut < n ? data + cut + ml : data, cut < n ? n - cut - ml : 0);
    tok_tokenizer *t = NULL;
    int rc = tok_load(&t, dir);
    fuzz_check_err(rc, "tok_load");
    if (!rc) {
        static const char text[] = "Hello world, it's 2024!\n\xff\xc3 caf\xc3\xa9 <|endoftext|> \xe2\x80\xa8x";
        size_t len = sizeof text - 1, nt = 0, dl = 0;
        int *ids = NULL;
        char *back = NULL;
        for (int special = 0; special < 2; special++) {
            rc = tok_encode(t, text, len, special, &ids, NULL, &nt);
            if (rc) fuzz_fail("tok_encode with a loaded vocabulary failed: %s", err_msg());
            for (size_t i = 0; i < nt; i++)
                if (ids[i] < 0 || ids[i] >= tok_vocab_size(t)) fuzz_fail("id %d outside the vocabulary", ids[i]);
            rc = tok_decode(t, ids, nt, &back, &dl);
            if (rc) fuzz_fail("tok_decode of its own ids failed: %s", err_msg());
            if (dl != len || memcmp(back, text, len)) fuzz_fail("round trip changed the text (special %d)", special);
            mem_free(ids);
            mem_free(back);
            ids = NULL;
            back = NULL;
        }
        tok_free(t);
    }
    snprintf(p, sizeof p, "%s/encoder.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/vocab.bpe", dir);
    unlink(p);
    rmdir(dir);
    fuzz_guard();
    return 0;
}

#ifndef FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) { return fuzz_tokload(data, n); }
#endif
