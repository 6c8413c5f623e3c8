/* fuzz_corpus - corpus_open/corpus_next on an arbitrary corpus file and optional tags file.
 * Input: corpus bytes, optionally followed by "\n#TAGS#\n" and the tags file's bytes.
 * Invariants: no crash or sanitizer report; errors carry a one-line message; every document has
 * id, genre and text (text[len] == 0), and its tag spans lie inside the text with start < end. */
#include "common/mem.h"
#include "corpus/corpus.h"
#include "fuzz/fuzz.h"

static int fuzz_corpus(const uint8_t *data, size_t n)
{
    static const char mark[] = "\n#TAGS#\n";
    size_t cut = n, ml = sizeof mark - 1;
    for (size_t i = 0; i + ml <= n; i++)
        if (!memcmp(data + i, mark, ml)) { cut = i; break; }
    char path[64], tpath[64];
    int fd = fuzz_memfd(data, cut, path), tfd = -1;
    if (cut < n) tfd = fuzz_memfd(data + cut + ml, n - cut - ml, tpath);
    corpus_reader *r = NULL;
    int rc = corpus_open(&r, path, tfd >= 0 ? tpath : NULL);
    fuzz_check_err(rc, "corpus_open");
    for (long docs = 0; !rc; docs++) {
        corpus_doc *d = NULL;
        rc = corpus_next(r, &d);
        fuzz_check_err(rc, "corpus_next");
        if (rc || !d) break;
        if (!d->id || !d->genre || !d->text) fuzz_fail("document %ld lacks id, genre or text", docs);
        if (d->text[d->len] != 0) fuzz_fail("document %ld: text[len] is not NUL", docs);
        if (d->len > n) fuzz_fail("document %ld: %zu bytes from a %zu-byte input", docs, d->len, n);
        if (d->ntags && !d->tags) fuzz_fail("document %ld: ntags %zu but no tags", docs, d->ntags);
        for (size_t i = 0; i < d->ntags; i++) {
            const corpus_tag *t = &d->tags[i];
            if (t->start >= t->end || t->end > d->len)
                fuzz_fail("document %ld: tag %zu span [%zu, %zu) outside text of %zu bytes", docs, i,
                          t->start, t->end, d->len);
            if (!memchr(t->tag, 0, sizeof t->tag) || !memchr(t->full_tag, 0, sizeof t->full_tag))
                fuzz_fail("document %ld: tag %zu is not NUL-terminated", docs, i);
        }
        corpus_doc_free(d);
    }
    corpus_close(r);
    close(fd);
    if (tfd >= 0) close(tfd);
    return 0;
}

#ifndef FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) { return fuzz_corpus(data, n); }
#endif
