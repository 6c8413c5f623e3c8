/* corpus.c - corpus reader (JSONL or blank-line separated text, optional tags file). */
#include "corpus/corpus.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"

typedef struct {
    char *id;
    long doc;
    long off;    /* byte offset of the line in the tags file */
    long lineno;
} tag_index;

struct corpus_reader {
    FILE *f;
    char *path;
    int jsonl;
    long lineno;
    long ordinal;      /* documents returned so far */
    char *line;        /* getline buffer */
    size_t cap;
    ssize_t pending;   /* length of a line read ahead but not consumed, -1 if none */
    long pending_lineno;
    FILE *tf;
    char *tpath;
    tag_index *tix;   /* built on first need: only when the tags are not in corpus order */
    size_t ntix, tcur;
    int indexed;
    long seq_off, seq_lineno; /* the next line in file order, for the in-order fast path */
    char *tline;
    size_t tcap;
};

static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return 0;
    return 1;
}

/* Next line into r->line (newline stripped); returns its length, -1 at EOF, -2 on error. */
static ssize_t next_line(corpus_reader *r)
{
    if (r->pending >= 0) {
        ssize_t n = r->pending;
        r->pending = -1;
        r->lineno = r->pending_lineno;
        return n;
    }
    errno = 0;
    ssize_t n = getline(&r->line, &r->cap, r->f);
    if (n < 0) {
        if (ferror(r->f)) {
            err_set(ERR_IO, "%s: read error: %s", r->path, strerror(errno ? errno : EIO));
            return -2;
        }
        return -1;
    }
    r->lineno++;
    if (n > 0 && r->line[n - 1] == '\n') r->line[--n] = 0;
    return n;
}

static char *dup_n(const char *s, size_t n)
{
    char *d = mem_alloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

/* A string id as it is; a number only when it is an integer a JSON reader keeps exactly (within
 * 2^53), written as one ("%.17g" turned 9007199254740993 into ...992 and 1e19 into
 * 1.2345678901234567e+19, so a tags file keyed by the true id no longer matched). */
static int json_id(const cJSON *v, char **out)
{
    char buf[64];
    if (cJSON_IsString(v)) *out = mem_strdup(v->valuestring);
    else if (cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) &&
             fabs(v->valuedouble) < 9007199254740992.0) { /* 2^53 and beyond may be rounded */
        snprintf(buf, sizeof buf, "%lld", (long long)v->valuedouble);
        *out = mem_strdup(buf);
    } else return ERR_FORMAT;
    return *out ? OK : ERR_NOMEM;
}

/* One line as one JSON object, as strictly as Python's json.loads takes it: nothing but white
 * space after the object (cJSON stops at its end, so a second object on the line was dropped),
 * no \u0000 escape (cJSON's strings end at a NUL: the text was cut there), no key twice among
 * the ones saelite reads (cJSON keeps the first, json.loads and JSON.parse the last). NULL and
 * *why on failure. */
static cJSON *parse_line(const char *line, size_t n, const char **why)
{
    static const char *const keys[] = {"text", "id", "genre", "spans"};
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(line, n, &end, 0);
    *why = "not a JSON object";
    if (!j || !cJSON_IsObject(j)) goto bad;
    for (const char *p = end; p && p < line + n; p++)
        if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') {
            *why = "text after the JSON object (one object per line)";
            goto bad;
        }
    for (size_t i = 0; i + 5 < n; i++) /* a \u0000 escape: an odd run of backslashes before u */
        if (line[i] == '\\' && line[i + 1] == 'u' && !memcmp(line + i + 2, "0000", 4)) {
            size_t k = i;
            while (k > 0 && line[k - 1] == '\\') k--;
            if ((i - k) % 2 == 0) {
                *why = "\\u0000 (a NUL character) in a string, which would cut it there";
                goto bad;
            }
        }
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        int seen = 0;
        for (const cJSON *c = j->child; c; c = c->next) seen += c->string && !strcmp(c->string, keys[k]);
        if (seen > 1) {
            *why = k == 0 ? "the key \"text\" twice" : k == 1 ? "the key \"id\" twice"
                 : k == 2 ? "the key \"genre\" twice" : "the key \"spans\" twice";
            goto bad;
        }
    }
    return j;
bad:
    cJSON_Delete(j);
    return NULL;
}

/* The next non-blank line of the tags file from the current position, parsed as a JSON object
 * (*x NULL at the end of the file). *lineno counts every line read; *off is where it starts. */
static int next_tags_line(corpus_reader *r, long *lineno, long *off, cJSON **x)
{
    *x = NULL;
    ssize_t n;
    for (;;) {
        *off = ftell(r->tf);
        errno = 0;
        n = getline(&r->tline, &r->tcap, r->tf);
        if (n < 0) {
            if (ferror(r->tf))
                return err_set(ERR_IO, "%s: read error: %s", r->tpath, strerror(errno ? errno : EIO));
            return OK;
        }
        ++*lineno;
        if (!is_blank(r->tline, (size_t)n)) break;
    }
    const char *why;
    if (!(*x = parse_line(r->tline, (size_t)n, &why)))
        return err_set(ERR_FORMAT, "%s:%ld: %s", r->tpath, *lineno, why);
    return OK;
}

static int build_tag_index(corpus_reader *r)
{
    size_t cap = 0;
    long lineno = 0;
    r->indexed = 1;
    if (fseek(r->tf, 0, SEEK_SET) != 0)
        return err_set(ERR_IO, "%s: seek failed: %s", r->tpath, strerror(errno));
    for (;;) {
        long off;
        cJSON *j;
        int rc = next_tags_line(r, &lineno, &off, &j);
        if (rc || !j) return rc;
        if (r->ntix == cap) {
            size_t nc = cap ? cap * 2 : 256;
            tag_index *t = mem_realloc(r->tix, nc * sizeof *t);
            if (!t) {
                cJSON_Delete(j);
                return err_set(ERR_NOMEM, "out of memory");
            }
            r->tix = t;
            cap = nc;
        }
        tag_index *ti = &r->tix[r->ntix];
        memset(ti, 0, sizeof *ti);
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
        const cJSON *doc = cJSON_GetObjectItemCaseSensitive(j, "doc");
        if (id) rc = json_id(id, &ti->id);
        /* a document number: a whole number that fits (casting 1e100 to long is undefined) */
        int doc_ok = 1;
        ti->doc = -1;
        if (cJSON_IsNumber(doc)) {
            double dv = doc->valuedouble;
            doc_ok = dv >= 0 && dv <= 0x1p53 && dv == floor(dv);
            if (doc_ok) ti->doc = (long)dv;
        }
        ti->off = off;
        ti->lineno = lineno;
        cJSON_Delete(j);
        if (rc == ERR_NOMEM) return err_set(ERR_NOMEM, "out of memory");
        if (rc) return err_set(ERR_FORMAT, "%s:%ld: \"id\" must be a string or number", r->tpath, lineno);
        if (!doc_ok) {
            mem_free(ti->id); /* not counted in ntix: corpus_close would not free it */
            ti->id = NULL;
            return err_set(ERR_FORMAT,
                           "%s:%ld: \"doc\" must be a document position (a whole number, 0 to 2^53)",
                           r->tpath, lineno);
        }
        if (!ti->id && ti->doc < 0)
            return err_set(ERR_FORMAT, "%s:%ld: tags line has neither \"id\" nor \"doc\"", r->tpath, lineno);
        r->ntix++;
    }
}

int corpus_open(corpus_reader **out, const char *path, const char *tags_path)
{
    *out = NULL;
    corpus_reader *r = mem_calloc(1, sizeof *r);
    if (!r) return err_set(ERR_NOMEM, "out of memory");
    r->pending = -1;
    int rc = OK;
    r->path = mem_strdup(path);
    if (!r->path) { rc = err_set(ERR_NOMEM, "out of memory"); goto fail; }
    r->f = fopen(path, "rb");
    if (!r->f) { rc = err_set(ERR_IO, "%s: cannot open: %s", path, strerror(errno)); goto fail; }
    /* Detect the format from the first non-blank line, which is kept for corpus_next. */
    for (;;) {
        ssize_t n = next_line(r);
        if (n == -2) { rc = ERR_IO; goto fail; }
        if (n == -1) break;
        if (is_blank(r->line, (size_t)n)) continue;
        size_t i = 0;
        while (r->line[i] == ' ' || r->line[i] == '\t') i++;
        if (r->line[i] == '{') {
            /* JSONL when the first line is an object with a string "text"; one that names "text"
               but is not valid JSONL is an error, not plain text (a lone surrogate on line 1 made
               the file's raw JSON the training text) */
            const char *why;
            cJSON *j = parse_line(r->line, (size_t)n, &why);
            r->jsonl = j && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "text"));
            cJSON_Delete(j);
            if (!j && strstr(r->line, "\"text\"")) {
                rc = err_set(ERR_FORMAT, "%s:%ld: %s (a JSONL corpus?)", path, r->lineno, why);
                goto fail;
            }
        }
        r->pending = n;
        r->pending_lineno = r->lineno;
        break;
    }
    if (tags_path) {
        r->tpath = mem_strdup(tags_path);
        if (!r->tpath) { rc = err_set(ERR_NOMEM, "out of memory"); goto fail; }
        r->tf = fopen(tags_path, "rb");
        if (!r->tf) {
            rc = err_set(ERR_IO, "%s: cannot open: %s", tags_path, strerror(errno));
            goto fail;
        }
    }
    *out = r;
    return OK;
fail:
    corpus_close(r);
    return rc;
}

void corpus_doc_free(corpus_doc *d)
{
    if (!d) return;
    mem_free(d->id);
    mem_free(d->genre);
    mem_free(d->text);
    mem_free(d->tags);
    mem_free(d);
}

void corpus_close(corpus_reader *r)
{
    if (!r) return;
    if (r->f) fclose(r->f);
    if (r->tf) fclose(r->tf);
    for (size_t i = 0; i < r->ntix; i++) mem_free(r->tix[i].id);
    mem_free(r->tix);
    mem_free(r->path);
    mem_free(r->tpath);
    free(r->line);  /* getline buffers come from malloc */
    free(r->tline);
    mem_free(r);
}

static void copy_tag(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* By id first (cursor first: tags files are normally in corpus order), then by ordinal, so a
 * tags file written for brown.jsonl also serves brown.txt, whose documents are numbered. */
static tag_index *find_tags(corpus_reader *r, const corpus_doc *d, long ordinal)
{
    for (int pass = 0; pass < 2; pass++)
        for (size_t k = 0; k < r->ntix; k++) {
            size_t i = (r->tcur + k) % r->ntix;
            tag_index *t = &r->tix[i];
            if (pass == 0 ? (t->id && !strcmp(t->id, d->id)) : t->doc == ordinal) {
                r->tcur = i + 1;
                return t;
            }
        }
    return NULL;
}

/* In-order fast path: the next non-blank tags line after the last one used, when its "id" is the
 * document's; *j stays NULL otherwise (or at the end of the file). */
static int next_tags_in_order(corpus_reader *r, const corpus_doc *d, cJSON **j, long *lineno)
{
    *j = NULL;
    if (fseek(r->tf, r->seq_off, SEEK_SET) != 0)
        return err_set(ERR_IO, "%s: seek failed: %s", r->tpath, strerror(errno));
    long ln = r->seq_lineno, off;
    cJSON *x;
    int rc = next_tags_line(r, &ln, &off, &x);
    if (rc || !x) return rc;
    char *id = NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(x, "id");
    rc = v ? json_id(v, &id) : ERR_FORMAT;
    if (rc == ERR_NOMEM) {
        cJSON_Delete(x);
        return err_set(ERR_NOMEM, "out of memory");
    }
    if (!rc && d->id && !strcmp(id, d->id)) {
        *j = x;
        *lineno = ln;
        r->seq_off = ftell(r->tf);
        r->seq_lineno = ln;
    } else cJSON_Delete(x);
    mem_free(id);
    return OK;
}

static int load_tags(corpus_reader *r, corpus_doc *d, long ordinal)
{
    cJSON *j = NULL;
    long lineno = 0;
    int rc = r->indexed ? OK : next_tags_in_order(r, d, &j, &lineno);
    if (rc) return rc;
    if (!j) {
        /* out of order, missing or numbered by ordinal: look it up in an index of the file */
        if (!r->indexed && (rc = build_tag_index(r))) return rc;
        tag_index *t = find_tags(r, d, ordinal);
        if (!t) return OK;
        if (fseek(r->tf, t->off, SEEK_SET) != 0)
            return err_set(ERR_IO, "%s: seek failed: %s", r->tpath, strerror(errno));
        ssize_t n = getline(&r->tline, &r->tcap, r->tf);
        if (n < 0) return err_set(ERR_IO, "%s:%ld: cannot re-read line", r->tpath, t->lineno);
        lineno = t->lineno;
        const char *why;
        if (!(j = parse_line(r->tline, (size_t)n, &why)))
            return err_set(ERR_FORMAT, "%s:%ld: %s", r->tpath, lineno, why);
    }
    const cJSON *spans = cJSON_GetObjectItemCaseSensitive(j, "spans");
    if (!cJSON_IsArray(spans)) {
        rc = err_set(ERR_FORMAT, "%s:%ld: missing \"spans\" array", r->tpath, lineno);
        goto done;
    }
    int ns = cJSON_GetArraySize(spans);
    d->tags = mem_calloc(ns ? (size_t)ns : 1, sizeof *d->tags);
    if (!d->tags) { rc = err_set(ERR_NOMEM, "out of memory"); goto done; }
    const cJSON *s;
    size_t k = 0;
    cJSON_ArrayForEach(s, spans)
    {
        const cJSON *a = cJSON_GetArrayItem(s, 0), *b = cJSON_GetArrayItem(s, 1);
        const cJSON *tg = cJSON_GetArrayItem(s, 2), *ft = cJSON_GetArrayItem(s, 3);
        if (!cJSON_IsArray(s) || !cJSON_IsNumber(a) || !cJSON_IsNumber(b) || !cJSON_IsString(tg) ||
            (ft && !cJSON_IsString(ft)) || a->valuedouble < 0 || b->valuedouble <= a->valuedouble ||
            b->valuedouble > (double)d->len || (k && a->valuedouble < (double)d->tags[k - 1].end)) {
            rc = err_set(ERR_FORMAT, "%s:%ld: span %zu of document '%s' is not [start,end,\"tag\","
                         "\"full_tag\"] within its %zu-byte text, after the previous span", r->tpath, lineno, k, d->id, d->len);
            goto done;
        }
        corpus_tag *ct = &d->tags[k++];
        ct->start = (size_t)a->valuedouble;
        ct->end = (size_t)b->valuedouble;
        copy_tag(ct->tag, sizeof ct->tag, tg->valuestring);
        copy_tag(ct->full_tag, sizeof ct->full_tag, ft ? ft->valuestring : tg->valuestring);
    }
    d->ntags = k;
done:
    cJSON_Delete(j);
    return rc;
}

static int next_jsonl(corpus_reader *r, corpus_doc *d)
{
    ssize_t n;
    while ((n = next_line(r)) >= 0 && is_blank(r->line, (size_t)n)) {}
    if (n == -2) return ERR_IO;
    if (n == -1) return ERR_NOTFOUND; /* end */
    const char *why;
    cJSON *j = parse_line(r->line, (size_t)n, &why);
    if (!j) return err_set(ERR_FORMAT, "%s:%ld: %s", r->path, r->lineno, why);
    int rc = OK;
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(j, "text");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
    const cJSON *genre = cJSON_GetObjectItemCaseSensitive(j, "genre");
    if (!cJSON_IsString(text)) {
        rc = err_set(ERR_FORMAT, "%s:%ld: missing string field \"text\"", r->path, r->lineno);
        goto done;
    }
    if (genre && !cJSON_IsString(genre) && !cJSON_IsNull(genre)) {
        rc = err_set(ERR_FORMAT, "%s:%ld: \"genre\" must be a string", r->path, r->lineno);
        goto done;
    }
    d->len = strlen(text->valuestring);
    d->text = dup_n(text->valuestring, d->len);
    d->genre = mem_strdup(cJSON_IsString(genre) ? genre->valuestring : "");
    if (id && !cJSON_IsNull(id)) {
        rc = json_id(id, &d->id);
        if (rc == ERR_FORMAT) {
            rc = err_set(ERR_FORMAT, "%s:%ld: \"id\" must be a string or an integer (within 2^53; a "
                         "larger one as a string)", r->path, r->lineno);
            goto done;
        }
    }
    if (!d->text || !d->genre) rc = ERR_NOMEM;
    if (rc == ERR_NOMEM) rc = err_set(ERR_NOMEM, "out of memory");
done:
    cJSON_Delete(j);
    return rc;
}

static int next_text(corpus_reader *r, corpus_doc *d)
{
    ssize_t n;
    while ((n = next_line(r)) >= 0 && is_blank(r->line, (size_t)n)) {}
    if (n == -2) return ERR_IO;
    if (n == -1) return ERR_NOTFOUND;
    size_t cap = (size_t)n + 256, len = 0;
    char *buf = mem_alloc(cap);
    if (!buf) return err_set(ERR_NOMEM, "out of memory");
    for (;;) {
        if (len + (size_t)n + 2 > cap) {
            size_t nc = (len + (size_t)n + 2) * 2;
            char *b = mem_realloc(buf, nc);
            if (!b) { mem_free(buf); return err_set(ERR_NOMEM, "out of memory"); }
            buf = b;
            cap = nc;
        }
        if (len) buf[len++] = '\n';
        memcpy(buf + len, r->line, (size_t)n);
        len += (size_t)n;
        n = next_line(r);
        if (n == -2) { mem_free(buf); return ERR_IO; }
        if (n == -1 || is_blank(r->line, (size_t)n)) break;
    }
    buf[len] = 0;
    d->text = buf;
    d->len = len;
    d->genre = mem_strdup("");
    if (!d->genre) return err_set(ERR_NOMEM, "out of memory");
    return OK;
}

int corpus_next(corpus_reader *r, corpus_doc **doc)
{
    *doc = NULL;
    corpus_doc *d = mem_calloc(1, sizeof *d);
    if (!d) return err_set(ERR_NOMEM, "out of memory");
    int rc = r->jsonl ? next_jsonl(r, d) : next_text(r, d);
    if (rc == ERR_NOTFOUND) { corpus_doc_free(d); return OK; }
    if (rc) { corpus_doc_free(d); return rc; }
    long ordinal = ++r->ordinal;
    if (!d->id) {
        char buf[32];
        snprintf(buf, sizeof buf, "%ld", ordinal);
        if (!(d->id = mem_strdup(buf))) { corpus_doc_free(d); return err_set(ERR_NOMEM, "out of memory"); }
    }
    if (r->tf && (rc = load_tags(r, d, ordinal))) { corpus_doc_free(d); return rc; }
    *doc = d;
    return OK;
}
