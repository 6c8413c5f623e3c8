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
#include "common/utf8.h"

typedef struct {
    char *id;
    long doc;
    long off;    /* byte offset of the line in the tags file */
    long lineno;
    long used_by; /* ordinal of the document given this line, 0 if none yet */
    long doc_twin; /* line of another tags line with the same "doc", 0 if none */
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
    tag_index *tix;   /* every tags line, built on the first document (duplicates checked) */
    size_t ntix, tcur;
    int indexed;
    char *tline;
    size_t tcap;
};

static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return 0;
    return 1;
}

/* getline's -1 also reports a failed allocation (errno ENOMEM, with no error flag on the stream):
 * a review found a 2 GB line under ulimit -v read as the end of the input, exit 0 on the lines
 * before it. -1 is the end only when neither happened. OK at the end, else ERR_NOMEM / ERR_IO
 * naming the file and the line that could not be read. */
static int getline_end(FILE *f, const char *path, long lineno, int e)
{
    if (e == ENOMEM) return err_set(ERR_NOMEM, "%s: out of memory reading line %ld", path, lineno);
    if (ferror(f) || !feof(f))
        return err_set(ERR_IO, "%s: read error at line %ld: %s", path, lineno, strerror(e ? e : EIO));
    return OK;
}

/* A UTF-8 byte order mark starting a file is not text: skipped in the corpus and the tags file
 * alike (a review: cJSON skipped it in a tags file, but a JSONL corpus starting with one was read
 * as plain text, its raw JSON becoming the document text). */
static void strip_bom(char *s, ssize_t *n)
{
    if (*n >= 3 && !memcmp(s, "\xef\xbb\xbf", 3)) {
        memmove(s, s + 3, (size_t)*n - 3 + 1);
        *n -= 3;
    }
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
    if (n < 0) return getline_end(r->f, r->path, r->lineno + 1, errno) ? -2 : -1;
    r->lineno++;
    if (r->lineno == 1) strip_bom(r->line, &n);
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

/* One line as one JSON object, as strictly as Python's json.loads takes it: valid UTF-8 (cJSON
 * copies any bytes: overlong forms, CESU surrogates and \xff reached the database, a review),
 * no raw control character inside a string (cJSON took TAB and \x01 there, a review), nothing
 * but white space after the object (cJSON stops at its end, so a second object on the line was
 * dropped), no \u0000 escape (cJSON's strings end at a NUL: the text was cut there), no key twice
 * among the ones saelite reads (cJSON keeps the first, json.loads and JSON.parse the last). NULL,
 * *why and *col (1-based byte column of the fault, 0 when it has none) on failure. */
static cJSON *parse_line(const char *line, size_t n, const char **why, size_t *col)
{
    static const char *const keys[] = {"text", "id", "genre", "spans"};
    const char *end = NULL;
    cJSON *j = NULL;
    *col = 0;
    size_t ok = utf8_valid_prefix((const unsigned char *)line, n);
    if (ok < n) {
        *why = "invalid UTF-8";
        *col = ok + 1;
        return NULL;
    }
    j = cJSON_ParseWithLengthOpts(line, n, &end, 0);
    if (!j) {
        *why = "not valid JSON";
        if (end && end >= line && end <= line + n) *col = (size_t)(end - line) + 1;
        return NULL;
    }
    *why = "not a JSON object (one object per line)";
    if (!cJSON_IsObject(j)) goto bad;
    for (const char *p = end; p && p < line + n; p++)
        if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') {
            *why = "text after the JSON object (one object per line)";
            *col = (size_t)(p - line) + 1;
            goto bad;
        }
    /* the line parsed, so quotes outside strings delimit them: walk them for raw control bytes */
    for (size_t i = 0, in_str = 0; i < n; i++) {
        unsigned char c = (unsigned char)line[i];
        if (!in_str) in_str = c == '"';
        else if (c == '\\') i++;
        else if (c == '"') in_str = 0;
        else if (c < 0x20) {
            *why = "a raw control character in a string (write it as an escape such as \\t)";
            *col = i + 1;
            goto bad;
        }
    }
    for (size_t i = 0; i + 5 < n; i++) /* a \u0000 escape: an odd run of backslashes before u */
        if (line[i] == '\\' && line[i + 1] == 'u' && !memcmp(line + i + 2, "0000", 4)) {
            size_t k = i;
            while (k > 0 && line[k - 1] == '\\') k--;
            if ((i - k) % 2 == 0) {
                *why = "\\u0000 (a NUL character) in a string, which would cut it there";
                *col = i + 1;
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

/* ERR_FORMAT "path:line[:col]: why[hint]" (col 0 for none) for a line parse_line refused: every
 * JSON line's error; hint "" or, where the file was taken for a JSONL corpus by its first line,
 * " (a JSONL corpus?)". */
static int line_error(const char *path, long lineno, size_t col, const char *why, const char *hint)
{
    if (col) return err_set(ERR_FORMAT, "%s:%ld:%zu: %s%s", path, lineno, col, why, hint);
    return err_set(ERR_FORMAT, "%s:%ld: %s%s", path, lineno, why, hint);
}

/* The next non-blank line of the tags file from the current position into r->tline (*n its
 * length without the newline; -1 at the end of the file). *lineno counts every line read; *off
 * is where it starts. */
static int next_tags_line(corpus_reader *r, long *lineno, long *off, ssize_t *len)
{
    ssize_t n;
    for (;;) {
        *off = ftell(r->tf);
        errno = 0;
        n = getline(&r->tline, &r->tcap, r->tf);
        if (n < 0) {
            *len = -1;
            return getline_end(r->tf, r->tpath, *lineno + 1, errno);
        }
        ++*lineno;
        if (*lineno == 1) strip_bom(r->tline, &n);
        if (!is_blank(r->tline, (size_t)n)) break;
    }
    if (n > 0 && r->tline[n - 1] == '\n') n--;
    *len = n;
    return OK;
}

/* The index pass reads every tags line before the first document; a full cJSON parse of each
 * (a node and a malloc per span field, 5.8 million on Brown) doubled the demo's corpus reading
 * (0.58 s to 1.66 s). scan_line walks a line once without allocating and answers 1 only where
 * parse_line would certainly accept it: RFC 8259 JSON (a subset of what cJSON takes) with the
 * same extra rules (valid UTF-8, no raw control character, white space only after the object,
 * no top-level key of parse_line's twice) and a top-level "id"/"doc" in a plain form (an id
 * string without escapes or a whole number of at most 15 digits; a "doc" such a number, not
 * negative). Anything else (a \u escape, an escaped key, a long number, deep nesting, cJSON's
 * wider white space, "doc" twice, another form of id or doc) answers 0, and the caller parses
 * the line in full as before: the verdicts and messages stay parse_line's. */
typedef struct {
    const char *p, *end;
    const char *id;     /* the id's bytes (a string's without quotes), NULL if absent */
    size_t id_len;
    long doc;           /* -1 if absent */
} line_scan;

enum { SCAN_DEPTH = 64 };

static void scan_ws(line_scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\r' || *s->p == '\n')) s->p++;
}

/* A string at s->p (its opening quote); *plain: no escape in it. */
static int scan_string(line_scan *s, int *plain)
{
    *plain = 1;
    for (s->p++; s->p < s->end; s->p++) {
        unsigned char c = (unsigned char)*s->p;
        if (c == '"') {
            s->p++;
            return 1;
        }
        if (c < 0x20) return 0;
        if (c == '\\') {
            if (++s->p == s->end || !strchr("\"\\/bfnrt", *s->p) || !*s->p) return 0; /* \u: unsure */
            *plain = 0;
        }
    }
    return 0;
}

/* A number at s->p (RFC 8259's grammar). One over 63 characters is left to cJSON: releases
 * before Debian's fix of CVE-2023-26819 refuse it, and the verdict must be the full parse's on
 * every cJSON (a review). */
static int scan_number(line_scan *s)
{
    const char *q = s->p;
    if (q < s->end && *q == '-') q++;
    if (q == s->end || *q < '0' || *q > '9') return 0;
    if (*q == '0') q++;
    else while (q < s->end && *q >= '0' && *q <= '9') q++;
    if (q < s->end && *q == '.') {
        if (++q == s->end || *q < '0' || *q > '9') return 0;
        while (q < s->end && *q >= '0' && *q <= '9') q++;
    }
    if (q < s->end && (*q == 'e' || *q == 'E')) {
        if (++q < s->end && (*q == '+' || *q == '-')) q++;
        if (q == s->end || *q < '0' || *q > '9') return 0;
        while (q < s->end && *q >= '0' && *q <= '9') q++;
    }
    if (q - s->p > 63) return 0;
    s->p = q;
    return 1;
}

static int scan_value(line_scan *s, int depth)
{
    int flag;
    if (s->p == s->end) return 0;
    char c = *s->p;
    if (c == '"') return scan_string(s, &flag);
    if (c == '-' || (c >= '0' && c <= '9')) return scan_number(s);
    if (c == '{' || c == '[') {
        if (depth >= SCAN_DEPTH) return 0;
        char close = c == '{' ? '}' : ']';
        s->p++;
        scan_ws(s);
        if (s->p < s->end && *s->p == close) {
            s->p++;
            return 1;
        }
        for (;;) {
            if (c == '{') {
                if (s->p == s->end || *s->p != '"' || !scan_string(s, &flag)) return 0;
                scan_ws(s);
                if (s->p == s->end || *s->p++ != ':') return 0;
                scan_ws(s);
            }
            if (!scan_value(s, depth + 1)) return 0;
            scan_ws(s);
            if (s->p == s->end) return 0;
            if (*s->p == close) {
                s->p++;
                return 1;
            }
            if (*s->p++ != ',') return 0;
            scan_ws(s);
        }
    }
    static const char *const lit[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(lit[k]);
        if ((size_t)(s->end - s->p) >= n && !memcmp(s->p, lit[k], n)) {
            s->p += n;
            return 1;
        }
    }
    return 0;
}

/* A whole number written plainly, at most 15 digits (below 2^53, so cJSON's double holds it and
 * json_id writes it back the same), at v[0..n). -0 is not plain: json_id writes it "0". */
static int plain_integer(const char *v, size_t n, long *out)
{
    size_t i = v[0] == '-';
    if (n == i || n - i > 15 || (v[i] == '0' && n - i > 1) || (i && v[i] == '0')) return 0;
    long x = 0;
    for (size_t k = i; k < n; k++) {
        if (v[k] < '0' || v[k] > '9') return 0;
        x = x * 10 + (v[k] - '0');
    }
    *out = i ? -x : x;
    return 1;
}

static int scan_line(const char *line, size_t n, line_scan *s)
{
    static const char *const keys[] = {"text", "id", "genre", "spans", "doc"};
    int seen[5] = {0};
    memset(s, 0, sizeof *s);
    s->doc = -1;
    if (utf8_valid_prefix((const unsigned char *)line, n) < n) return 0;
    s->p = line;
    s->end = line + n;
    scan_ws(s);
    if (s->p == s->end || *s->p++ != '{') return 0;
    scan_ws(s);
    if (s->p < s->end && *s->p == '}') s->p++;
    else for (;;) {
        int plain;
        const char *key = s->p + 1;
        if (s->p == s->end || *s->p != '"' || !scan_string(s, &plain) || !plain) return 0;
        size_t key_len = (size_t)(s->p - 1 - key);
        scan_ws(s);
        if (s->p == s->end || *s->p++ != ':') return 0;
        scan_ws(s);
        const char *v = s->p;
        int v_plain = 1; /* a string value without escapes (only a string can have one) */
        if (!(*v == '"' ? scan_string(s, &v_plain) : scan_value(s, 1))) return 0;
        size_t v_len = (size_t)(s->p - v);
        for (int k = 0; k < 5; k++)
            if (strlen(keys[k]) == key_len && !memcmp(key, keys[k], key_len)) {
                if (seen[k]++) return 0;
                long x;
                if (k == 1 && *v == '"') {
                    if (!v_plain) return 0;
                    s->id = v + 1;
                    s->id_len = v_len - 2;
                } else if (k == 1) {
                    if (!plain_integer(v, v_len, &x)) return 0;
                    s->id = v;
                    s->id_len = v_len;
                } else if (k == 4) {
                    if (!plain_integer(v, v_len, &x) || x < 0) return 0;
                    s->doc = x;
                }
            }
        scan_ws(s);
        if (s->p == s->end) return 0;
        if (*s->p == '}') {
            s->p++;
            break;
        }
        if (*s->p++ != ',') return 0;
        scan_ws(s);
    }
    scan_ws(s);
    return s->p == s->end;
}

static int cmp_tix_id(const void *a, const void *b)
{
    const tag_index *x = *(tag_index *const *)a, *y = *(tag_index *const *)b;
    int c = strcmp(x->id ? x->id : "", y->id ? y->id : "");
    return c ? c : (x->lineno > y->lineno) - (x->lineno < y->lineno);
}

static int cmp_tix_doc(const void *a, const void *b)
{
    const tag_index *x = *(tag_index *const *)a, *y = *(tag_index *const *)b;
    if (x->doc != y->doc) return (x->doc > y->doc) - (x->doc < y->doc);
    return (x->lineno > y->lineno) - (x->lineno < y->lineno);
}

/* Two tags lines for one id: the first was used and the other dropped without a word (a
 * review). Refused, naming the later line and the earlier one. A repeated "doc" is only marked
 * (doc_twin): tags files of two corpora, concatenated for their joined JSONL, repeat the numbers
 * but are keyed by id; it is refused when a numbered document looks it up. */
static int check_tix_unique(corpus_reader *r)
{
    if (r->ntix < 2) return OK;
    tag_index **v = mem_alloc(r->ntix * sizeof *v);
    if (!v) return err_set(ERR_NOMEM, "out of memory");
    int rc = OK;
    for (int by_doc = 0; by_doc < 2 && !rc; by_doc++) {
        size_t m = 0;
        for (size_t i = 0; i < r->ntix; i++)
            if (by_doc ? r->tix[i].doc >= 0 : r->tix[i].id != NULL) v[m++] = &r->tix[i];
        qsort(v, m, sizeof *v, by_doc ? cmp_tix_doc : cmp_tix_id);
        for (size_t i = 1; i < m && !rc; i++) {
            if (!by_doc && !strcmp(v[i]->id, v[i - 1]->id))
                rc = err_set(ERR_FORMAT, "%s:%ld: a second tags line for id '%s' (the first is line "
                             "%ld): one line per document", r->tpath, v[i]->lineno, v[i]->id, v[i - 1]->lineno);
            else if (by_doc && v[i]->doc == v[i - 1]->doc) {
                v[i]->doc_twin = v[i - 1]->lineno;
                if (!v[i - 1]->doc_twin) v[i - 1]->doc_twin = v[i]->lineno;
            }
        }
    }
    mem_free(v);
    return rc;
}

/* Every line of the tags file, read once before the first document (so a repeated id is found
 * wherever it is, not only when a lookup happens to pass it). */
static int build_tag_index(corpus_reader *r)
{
    size_t cap = 0;
    long lineno = 0;
    r->indexed = 1;
    if (fseek(r->tf, 0, SEEK_SET) != 0)
        return err_set(ERR_IO, "%s: seek failed: %s", r->tpath, strerror(errno));
    for (;;) {
        long off;
        ssize_t n;
        int rc = next_tags_line(r, &lineno, &off, &n);
        if (rc) return rc;
        if (n < 0) return check_tix_unique(r);
        if (r->ntix == cap) {
            size_t nc = cap ? cap * 2 : 256;
            tag_index *t = mem_realloc(r->tix, nc * sizeof *t);
            if (!t) return err_set(ERR_NOMEM, "out of memory");
            r->tix = t;
            cap = nc;
        }
        tag_index *ti = &r->tix[r->ntix];
        memset(ti, 0, sizeof *ti);
        ti->doc = -1;
        line_scan sc;
        int doc_ok = 1;
        if (scan_line(r->tline, (size_t)n, &sc)) {
            if (sc.id && !(ti->id = dup_n(sc.id, sc.id_len))) return err_set(ERR_NOMEM, "out of memory");
            ti->doc = sc.doc;
        } else {
            const char *why;
            size_t col;
            cJSON *j = parse_line(r->tline, (size_t)n, &why, &col);
            if (!j) return line_error(r->tpath, lineno, col, why, "");
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
            const cJSON *doc = cJSON_GetObjectItemCaseSensitive(j, "doc");
            if (id) rc = json_id(id, &ti->id);
            /* a document number: a whole number that fits (casting 1e100 to long is undefined) */
            if (cJSON_IsNumber(doc)) {
                double dv = doc->valuedouble;
                doc_ok = dv >= 0 && dv <= 0x1p53 && dv == floor(dv);
                if (doc_ok) ti->doc = (long)dv;
            }
            cJSON_Delete(j);
        }
        ti->off = off;
        ti->lineno = lineno;
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
            /* JSONL when the first line is an object with a string "text". An object without
               one, or a line that names "text" but is not valid JSONL, is an error, not plain
               text (a lone surrogate on line 1, or {"text":5}, made the file's raw JSON the
               training text; a review) */
            const char *why;
            size_t col;
            cJSON *j = parse_line(r->line, (size_t)n, &why, &col);
            const cJSON *t = j ? cJSON_GetObjectItemCaseSensitive(j, "text") : NULL;
            r->jsonl = cJSON_IsString(t);
            if (j && !r->jsonl) {
                why = t ? "\"text\" is not a string" : "a JSON object without a \"text\" field";
                col = 0;
            }
            cJSON_Delete(j);
            if (!r->jsonl && (j || strstr(r->line, "\"text\""))) {
                rc = line_error(path, r->lineno, col, why, " (a JSONL corpus?)");
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

/* A tag into its fixed field. One that does not fit was cut (mid-character too, leaving invalid
 * UTF-8 in the database; a review): refused, naming the tags line and the limit. */
static int copy_tag(const corpus_reader *r, long lineno, size_t k, const char *what, char *dst,
                    size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        return err_set(ERR_FORMAT, "%s:%ld: span %zu: the %s '%.40s%s' is %zu bytes, longer than the "
                       "%zu the reader keeps", r->tpath, lineno, k, what, src, n > 40 ? "..." : "", n,
                       cap - 1);
    memcpy(dst, src, n + 1);
    return OK;
}

/* A document given an id by the corpus takes only the tags line with that id; a numbered one
 * (plain text, a JSONL line without "id") the line with its number as id, failing that the one
 * whose "doc" is its number, so a tags file written for brown.jsonl also serves brown.txt. The
 * fallback used to apply to every document: one whose id has no tags line took another
 * document's by position (a review: "mine" after ca01 got ca02's 5,664 tags). Cursor first:
 * tags files are normally in corpus order. */
static tag_index *find_tags(corpus_reader *r, const corpus_doc *d, long ordinal, int numbered,
                            int *by_doc)
{
    for (int pass = 0; pass < 1 + numbered; pass++)
        for (size_t k = 0; k < r->ntix; k++) {
            size_t i = (r->tcur + k) % r->ntix;
            tag_index *t = &r->tix[i];
            if (pass == 0 ? (t->id && !strcmp(t->id, d->id)) : t->doc == ordinal) {
                r->tcur = i + 1;
                *by_doc = pass;
                return t;
            }
        }
    return NULL;
}

/* A whole-number byte offset (0.5 was taken as 0, a review). */
static int is_offset(const cJSON *v)
{
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 0x1p53 &&
           v->valuedouble == floor(v->valuedouble);
}

static int load_tags(corpus_reader *r, corpus_doc *d, long ordinal, int numbered)
{
    int rc;
    if (!r->indexed && (rc = build_tag_index(r))) return rc;
    int by_doc = 0;
    tag_index *t = find_tags(r, d, ordinal, numbered, &by_doc);
    if (!t) return OK;
    if (by_doc && t->doc_twin)
        return err_set(ERR_FORMAT, "%s:%ld: a second tags line for \"doc\" %ld (the first is line %ld): "
                       "document %ld of %s has no id to tell them apart", r->tpath,
                       t->lineno > t->doc_twin ? t->lineno : t->doc_twin, t->doc,
                       t->lineno < t->doc_twin ? t->lineno : t->doc_twin, ordinal, r->path);
    /* two corpus documents with one id would both take its line: the tags were meant for one */
    if (t->used_by)
        return err_set(ERR_FORMAT, "%s:%ld: documents %ld and %ld of %s both have the id '%s': its "
                       "tags line cannot tell them apart (give them distinct ids)", r->tpath,
                       t->lineno, t->used_by, ordinal, r->path, d->id);
    t->used_by = ordinal;
    if (fseek(r->tf, t->off, SEEK_SET) != 0)
        return err_set(ERR_IO, "%s: seek failed: %s", r->tpath, strerror(errno));
    long lineno = t->lineno - 1, off;
    ssize_t n;
    if ((rc = next_tags_line(r, &lineno, &off, &n))) return rc;
    if (n < 0 || lineno != t->lineno)
        return err_set(ERR_IO, "%s:%ld: cannot re-read line (file changed?)", r->tpath, t->lineno);
    const char *why;
    size_t col;
    cJSON *j = parse_line(r->tline, (size_t)n, &why, &col);
    if (!j) return line_error(r->tpath, lineno, col, why, "");
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
        /* exactly [start, end, "tag", "full_tag"]: 3 and 5 elements were taken (a review) */
        if (!cJSON_IsArray(s) || cJSON_GetArraySize(s) != 4 || !is_offset(a) || !is_offset(b) ||
            !cJSON_IsString(tg) || !cJSON_IsString(ft) || b->valuedouble <= a->valuedouble ||
            b->valuedouble > (double)d->len || (k && a->valuedouble < (double)d->tags[k - 1].end)) {
            rc = err_set(ERR_FORMAT, "%s:%ld: span %zu of document '%s' is not [start,end,\"tag\","
                         "\"full_tag\"] (whole-number byte offsets, two strings) within its %zu-byte "
                         "text, after the previous span", r->tpath, lineno, k, d->id, d->len);
            goto done;
        }
        corpus_tag *ct = &d->tags[k];
        ct->start = (size_t)a->valuedouble;
        ct->end = (size_t)b->valuedouble;
        if ((rc = copy_tag(r, lineno, k, "tag", ct->tag, sizeof ct->tag, tg->valuestring)) ||
            (rc = copy_tag(r, lineno, k, "full tag", ct->full_tag, sizeof ct->full_tag, ft->valuestring)))
            goto done;
        k++;
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
    size_t col;
    cJSON *j = parse_line(r->line, (size_t)n, &why, &col);
    if (!j) return line_error(r->path, r->lineno, col, why, "");
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
    if (d->id && !d->id[0]) { /* "id": "" is no id: extract named it doc4, 0-based (a review) */
        mem_free(d->id);
        d->id = NULL;
    }
    int numbered = !d->id;
    if (!d->id) {
        char buf[32];
        snprintf(buf, sizeof buf, "%ld", ordinal);
        if (!(d->id = mem_strdup(buf))) { corpus_doc_free(d); return err_set(ERR_NOMEM, "out of memory"); }
    }
    if (r->tf && (rc = load_tags(r, d, ordinal, numbered))) { corpus_doc_free(d); return rc; }
    *doc = d;
    return OK;
}
