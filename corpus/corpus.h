/* corpus.h - one reader for every text corpus saelite consumes (extract, train-lm, bpe-train).
 *
 * Input formats (auto-detected from the first non-blank line; see docs/corpus.md):
 *   JSONL  one JSON object per line: {"text": "...", "id": "...", "genre": "..."}; "text" is
 *          required, "id" (string or integer) and "genre" are optional. Blank lines are skipped.
 *   text   plain UTF-8; documents are separated by one or more blank lines (a line that is empty
 *          or holds only spaces, tabs and '\r'). A document's text is its lines joined with '\n'
 *          (no trailing newline); lines are kept byte for byte.
 * Documents without an id (or with "id": "") get their 1-based ordinal in the file ("1", "2",
 * ...); genre is ""
 * when absent (never NULL).
 *
 * Tags (optional): the JSONL tags file written by `saelite corpus brown`, one line per document:
 *   {"id": "ca01", "doc": 1, "spans": [[start, end, "tag", "full_tag"], ...]}
 * Each span is exactly 4 elements: start/end are whole-number byte offsets into that document's
 * text (end exclusive), tags are strings; spans are in text order and do not overlap (callers
 * walk them with one cursor). A document with an id from the corpus is given only the tags line
 * with that id; a numbered one (no id in the corpus) the line with its number as id, failing
 * that the line whose "doc" equals its ordinal. A repeated id in the tags file (a repeated "doc"
 * when a numbered document looks it up), two
 * documents with one id that has a tags line, and spans that are out of bounds, unordered or
 * malformed are ERR_FORMAT naming the tags file and line. A leading UTF-8 BOM is skipped in both
 * files; JSONL lines must be valid UTF-8 without raw control characters in strings.
 *
 * Ownership: corpus_next hands out a doc the caller frees with corpus_doc_free. A tag longer
 * than its fixed field (15 / 31 bytes) is ERR_FORMAT, never truncated (Brown's longest full tag
 * is 11 bytes).
 * Errors: ERR_IO (cannot open/read), ERR_FORMAT ("path:line[:column]: what"), ERR_NOMEM (also
 * a line too long for memory, naming the file and line).
 * Thread safety: a reader is used by one thread at a time; distinct readers are independent.
 */
#ifndef SAELITE_CORPUS_H
#define SAELITE_CORPUS_H
#include <stddef.h>

typedef struct {
    size_t start, end;  /* byte span in the document text, end exclusive */
    char tag[16];       /* tag without -tl/-hl/-nc suffixes, e.g. "nn" */
    char full_tag[32];  /* tag as in the source, e.g. "nn-tl" */
} corpus_tag;

typedef struct {
    char *id;
    char *genre;        /* "" when unknown */
    char *text;         /* NUL-terminated, len bytes (may contain any bytes but NUL) */
    size_t len;
    corpus_tag *tags;   /* NULL when no tags file or no tags for this document */
    size_t ntags;
} corpus_doc;

typedef struct corpus_reader corpus_reader;

int corpus_open(corpus_reader **out, const char *path, const char *tags_path);
/* OK and *doc == NULL at the end of the corpus. */
int corpus_next(corpus_reader *r, corpus_doc **doc);
void corpus_doc_free(corpus_doc *d);
void corpus_close(corpus_reader *r);

/* ---- Brown Corpus conversion (used by `saelite corpus brown`) --------------------------- */
typedef struct {
    long docs, paragraphs, words;
    size_t text_bytes;
} corpus_brown_stats;

/* Convert the tagged Brown files in dir (cats.txt + c[a-r]NN) into out_dir/brown.txt (plain
 * text), out_dir/brown.jsonl (same documents with id and genre) and out_dir/brown.tags.jsonl.
 * out_dir is created (with missing parents, like mkdir -p) only once the whole input has been
 * read and validated (a NUL byte, invalid UTF-8 or a tag longer than corpus_tag holds in a
 * source file is ERR_FORMAT "path:line"; a cats.txt entry that is not a plain file name in dir,
 * or is listed twice, is ERR_FORMAT; cats.txt or a listed file that is not a regular file, or a
 * link to one, is ERR_IO naming it). Files are written
 * under temporary names and renamed when complete; if a write fails, the outputs already
 * written and the directories this call created are removed. */
int corpus_brown_convert(const char *dir, const char *out_dir, corpus_brown_stats *st);

/* Strip Brown tag suffixes -tl, -hl, -nc (repeatedly) from full into out (size outsz). */
void corpus_brown_base_tag(const char *full, char *out, size_t outsz);

#endif
