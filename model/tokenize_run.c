/* tokenize_run.c - `saelite tokenize` as a library call (see tokenizer.h: tok_lines_run). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/err.h"
#include "common/mem.h"
#include "common/progress.h"
#include "model/tokenizer.h"

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One line of space-separated ids, decoded and handed on. */
static int decode_line(const tok_lines_opts *o, const tok_tokenizer *t, const char *path,
                       long lineno, char *line, size_t n)
{
    /* the parse below stops at a NUL: "1 2\0 3" printed the text of 1 2, exit 0 (an audit) */
    const char *nul = memchr(line, 0, n);
    if (nul)
        return err_set(ERR_FORMAT, "%s:%ld: a NUL byte at column %zu (ids are digits separated by "
                       "spaces)", path, lineno, (size_t)(nul - line) + 1);
    size_t nid = 0, idcap = n / 2 + 1;
    int *ids = mem_alloc(idcap * sizeof *ids);
    if (!ids) return err_set(ERR_NOMEM, "out of memory");
    char *p = line, *end;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r') p++;
        if (!*p) break;
        errno = 0;
        /* digits only: strtol also took "+5" and "-0" */
        long v = *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : (end = p, 0);
        if (end == p || errno || v < 0 || v > 0x7fffffff ||
            (*end && *end != ' ' && *end != '\t' && *end != '\r')) {
            mem_free(ids);
            return err_set(ERR_FORMAT, "%s:%ld: '%.20s' is not a token id", path, lineno, p);
        }
        ids[nid++] = (int)v;
        p = end;
    }
    char *txt;
    size_t tl;
    int rc = tok_decode(t, ids, nid, &txt, &tl);
    mem_free(ids);
    if (rc) return err_wrap(ERR_ARG, "%s:%ld", path, lineno);
    if (o->on_text) rc = o->on_text(o->user, txt, tl);
    mem_free(txt);
    return rc;
}

int tok_lines_run(const tok_lines_opts *o, tok_lines_result *r)
{
    memset(r, 0, sizeof *r);
    const char *path = o->path ? o->path : "-";
    FILE *in = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!in) return err_set(ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    tok_tokenizer *t;
    int rc = tok_load(&t, o->tokenizer_dir);
    if (rc) {
        if (in != stdin) fclose(in);
        return rc;
    }
    if (o->special && tok_eot(t) < 0) { /* it encoded the text as plain text, silently */
        if (in != stdin) fclose(in);
        tok_free(t);
        return err_set(ERR_ARG, "--special: the vocabulary in %s has no <|endoftext|> token",
                       o->tokenizer_dir);
    }
    char *line = NULL;
    size_t cap = 0, read = 0, shown = 0;
    ssize_t n;
    double t0 = now_seconds();
    /* a large corpus takes minutes (about 35 MB/s encoding): bytes read against the file's
       size, no ETA from a pipe */
    progress pr = {0};
    if (o->progress) {
        struct stat st;
        double size = fstat(fileno(in), &st) == 0 && S_ISREG(st.st_mode) ? (double)st.st_size : 0;
        progress_begin(&pr, o->decode ? "tokenize --decode" : "tokenize", size, "B");
    }
    while (!rc) {
        errno = 0;
        if ((n = getline(&line, &cap, in)) < 0) {
            /* -1 is also getline's failed allocation (errno ENOMEM, no error flag): a 2 GB line
               under ulimit -v ended the input, exit 0 after line 1's ids (a review) */
            int e = errno;
            if (e == ENOMEM)
                rc = err_set(ERR_NOMEM, "%s: out of memory reading line %ld", path, r->lines + 1);
            else if (ferror(in) || !feof(in))
                rc = err_set(ERR_IO, "%s: read error at line %ld: %s", path, r->lines + 1,
                             strerror(e ? e : EIO));
            break;
        }
        r->lines++;
        read += (size_t)n;
        if (o->progress && read - shown >= ((size_t)1 << 16)) /* not a clock read per short line */
            progress_update(&pr, (double)(shown = read), NULL);
        if (n > 0 && line[n - 1] == '\n') line[--n] = 0;
        if (o->decode) {
            rc = decode_line(o, t, path, r->lines, line, (size_t)n);
            continue;
        }
        int *ids;
        size_t nid;
        double a = now_seconds(), ac = o->timed ? cpu_seconds() : 0;
        if (tok_encode(t, line, (size_t)n, o->special, &ids, NULL, &nid)) {
            rc = err_wrap(ERR_FORMAT, "%s:%ld", path, r->lines);
            break;
        }
        r->encode_s += now_seconds() - a;
        if (o->timed) r->cpu_s += cpu_seconds() - ac;
        r->bytes += (size_t)n;
        r->tokens += nid;
        if (o->on_ids) rc = o->on_ids(o->user, ids, nid);
        mem_free(ids);
    }
    if (o->progress) progress_end(&pr);
    r->total_s = now_seconds() - t0;
    free(line);
    tok_free(t);
    if (in != stdin) fclose(in);
    return rc;
}
