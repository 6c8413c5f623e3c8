/* bpe.h - byte-level BPE vocabulary training and the GPT-2 file format (encoder.json, vocab.bpe).
 *
 * Training: every document of every input (read with corpus_open, so JSONL or plain text) is
 * pre-tokenized with the GPT-2 pattern (tok_split); pieces are counted once per distinct piece.
 * Starting from the 256 byte tokens, the most frequent adjacent pair is merged until the
 * vocabulary (256 bytes + merges + <|endoftext|>) reaches vocab_size or no pair occurs at least
 * min_freq times. Pair counts are updated incrementally (only the pieces that contain the merged
 * pair are revisited; a lazy max-heap finds the next best pair), so the cost per merge follows
 * the pieces it touches, not the whole corpus. Ties: the highest count wins; among equal counts
 * the pair whose left token is older wins, then the one whose right token is older (byte tokens
 * are ordered by byte value and are older than every merged token). Deterministic.
 * A merge whose bytes equal an existing token (possible: "a"+"bc" after "ab"+"c") is kept in
 * vocab.bpe but adds no token.
 *
 * Files (exactly GPT-2's layout, so tok_load reads them and GPT-2's own vocab.bpe gives back
 * its encoder.json byte for byte): vocab.bpe = "#version: 0.2" then one "a b" line per merge,
 * tokens in GPT-2's byte->unicode alphabet; encoder.json = JSON object (Python json.dumps
 * style: ", " / ": " separators, non-ASCII as \uXXXX) of the 256 byte tokens in GPT-2's order,
 * then each merge's new token in merge order, then "<|endoftext|>".
 *
 * Ownership: merge lists are owned by the caller (bpe_merges_free). Errors: ERR_IO, ERR_FORMAT,
 * ERR_NOMEM, ERR_ARG. Thread safety: no shared state; functions are reentrant.
 */
#ifndef SAELITE_BPE_H
#define SAELITE_BPE_H
#include <stddef.h>

typedef struct {
    char *a, *b;      /* raw bytes of the left and right token (not NUL-terminated) */
    size_t alen, blen;
} bpe_merge;

typedef struct {
    int vocab_size;   /* total tokens including 256 bytes and <|endoftext|>; >= 257 */
    long min_freq;    /* stop when the best pair occurs fewer times (>= 1) */
    volatile int *stop; /* optional: non-zero ends the run with ERR_ABORTED (nothing written) */
} bpe_train_opts;

typedef struct {
    long docs;
    size_t bytes, pieces, distinct_pieces;
    size_t merges;
    long last_count;  /* count of the last merged pair */
    double read_s, train_s;
    double cpu_s;     /* bpe_train_run: the process's CPU seconds when training ended */
} bpe_train_stats;

/* Train on the corpora at paths[0..npaths-1]; *merges is a new list of *nmerges merges. */
int bpe_train(const char *const *paths, int npaths, const bpe_train_opts *opt, bpe_merge **merges,
              size_t *nmerges, bpe_train_stats *st);
/* Write dir/encoder.json and dir/vocab.bpe (dir created if missing; atomic per file). */
int bpe_write(const char *dir, const bpe_merge *merges, size_t n);
/* `saelite bpe-train` as one call: train on paths (bpe_train) and write the vocabulary into out
 * (bpe_write). A tokenizer already in out (either file) is refused (ERR_ARG) unless force: a
 * model trained on it would read other ids without a word. A stop writes nothing. */
typedef struct {
    const char *const *paths;
    int npaths;
    bpe_train_opts train;
    const char *out;
    int force;
} bpe_run_opts;
int bpe_train_run(const bpe_run_opts *o, bpe_train_stats *st);
/* Read the merges of a vocab.bpe / merges.txt file, in file order (tok_merges_read's rules,
 * tokenizer.h: the same reader tok_load uses). */
int bpe_read_merges(const char *path, bpe_merge **merges, size_t *n);
void bpe_merges_free(bpe_merge *merges, size_t n);

#endif
