/* cmd_embed.c - `saelite embed`: nearest tokens to an arithmetic expression of embeddings. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/err.h"
#include "common/mem.h"
#include "common/utf8.h"
#include "model/gpt2.h"
#include "model/tokenizer.h"
#include "toy/toy.h"

CLI_COMMAND(embed, "Nearest tokens (cosine) to an expression like \"king - man + woman\"",
            "saelite embed --model DIR [--tokenizer DIR] [--unembed] [--top N] [--no-space] "
            "\"king - man + woman\"")

#define MAX_TERMS 64

typedef struct {
    int sign;
    char text[256];
} term;

/* "king - man + woman" -> terms; '+'/'-' separate terms, the first may carry a sign. */
static int parse_expr(const char *s, term *t, int *nt)
{
    int n = 0, sign = 1, pending = 0; /* an operator waiting for its term */
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '+' || *p == '-') {
            sign = *p == '-' ? -sign : sign;
            pending = 1;
            p++;
            continue;
        }
        if (!*p) break;
        pending = 0;
        const char *e = p;
        while (*e && *e != '+' && *e != '-') e++;
        const char *q = e;
        while (q > p && (q[-1] == ' ' || q[-1] == '\t')) q--;
        if (n == MAX_TERMS || (size_t)(q - p) >= sizeof t[0].text)
            return err_set(ERR_ARG, "expression: too many or too long terms");
        t[n].sign = sign;
        memcpy(t[n].text, p, (size_t)(q - p));
        t[n].text[q - p] = 0;
        n++;
        sign = 1;
        p = e;
        if (!*p) break;
    }
    if (n == 0) return err_set(ERR_ARG, "expression '%s' has no terms", s);
    /* "king -" answered for "king" as if the operator were not there (audit) */
    if (pending) return err_set(ERR_ARG, "expression '%s' ends with an operator", s);
    *nt = n;
    return OK;
}

/* Token bytes as a printable quoted string: escapes for control bytes and for bytes that are
 * not valid UTF-8 (byte-level tokens often hold part of a character). */
static void print_token(const tok_tokenizer *tok, int id)
{
    size_t len;
    const unsigned char *b = (const unsigned char *)tok_token_bytes(tok, id, &len);
    putchar('\'');
    for (size_t i = 0; b && i < len;) {
        unsigned char ch = b[i];
        size_t k = utf8_len(b + i, len - i);
        if (ch == '\n') fputs("\\n", stdout);
        else if (ch == '\'' || ch == '\\') printf("\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f || k == 0) printf("\\x%02x", ch);
        else {
            fwrite(b + i, 1, k, stdout);
            i += k;
            continue;
        }
        i++;
    }
    putchar('\'');
}

int cmd_embed(int argc, char **argv)
{
    const char *model = NULL, *tokdir = NULL, *pos[1];
    int unembed = 0, top = 10, no_space = 0, npos = 0;
    arg_spec spec[] = {
        {"--model", ARG_STR, &model, "model directory", ARG_REQUIRED},
        {"--tokenizer", ARG_STR, &tokdir, "tokenizer directory", ARG_DEFAULT("the model directory")},
        {"--unembed", ARG_FLAG, &unembed, "use unembedding rows (lm_head) instead of wte"},
        {"--top", ARG_INT, &top, "how many nearest tokens", ARG_MIN(1)},
        {"--no-space", ARG_FLAG, &no_space, "do not prefix each word with a space (GPT-2 words "
                                            "inside a sentence start with one)"},
        {NULL},
    };
    int rc = args_parse("embed", argc, argv, spec, pos, 1, &npos);
    if (rc) return rc;
    if (npos != 1) return cli_usage_error("embed", "give one expression, e.g. \"king - man + woman\"");
    term terms[MAX_TERMS];
    int nt = 0;
    if (parse_expr(pos[0], terms, &nt)) return cli_usage_error("embed", "%s", err_msg());

    gpt2_model *m = NULL;
    tok_tokenizer *tok = NULL;
    float *q = NULL;
    unsigned char *excl = NULL;
    int *nid = NULL;
    float *ncos = NULL;
    int *tids[MAX_TERMS] = {0};
    size_t tn_ids[MAX_TERMS] = {0};
    if (gpt2_load(&m, model) || tok_load(&tok, tokdir ? tokdir : model)) goto fail;
    int nd;
    int64_t sh[2];
    const float *E = gpt2_param(m, unembed ? "lm_head.weight" : "wte.weight", &nd, sh);
    if (!E || nd != 2) {
        err_set(ERR_NOTFOUND, "%s: no %s matrix", model, unembed ? "lm_head" : "wte");
        goto fail;
    }
    int V = (int)sh[0], C = (int)sh[1], Vt = tok_vocab_size(tok);
    if (Vt < V) V = Vt; /* rows past the tokenizer's ids have no text */
    q = mem_calloc((size_t)C, sizeof(float));
    excl = mem_calloc((size_t)V, 1);
    nid = mem_alloc(sizeof(int) * (size_t)top);
    ncos = mem_alloc(sizeof(float) * (size_t)top);
    if (!q || !excl || !nid || !ncos) {
        err_set(ERR_NOMEM, "out of memory");
        goto fail;
    }
    double scale = 0; /* sum of the input vectors' norms, to tell a cancelled query */
    /* every term encoded and checked before anything is printed: an error leaves stdout empty */
    for (int k = 0; k < nt; k++) {
        char buf[300];
        snprintf(buf, sizeof buf, "%s%s", no_space ? "" : " ", terms[k].text);
        if (tok_encode(tok, buf, strlen(buf), 0, &tids[k], NULL, &tn_ids[k])) goto fail;
        int *ids = tids[k];
        size_t n = tn_ids[k];
        if (n == 0) {
            err_set(ERR_ARG, "term '%s' encodes to no tokens", terms[k].text);
            goto fail;
        }
        double tn = 0;
        /* a word of several tokens contributes the mean of their vectors */
        for (size_t i = 0; i < n; i++) {
            if (ids[i] >= V) {
                err_set(ERR_SHAPE, "token %d of '%s' is outside the model's vocabulary (%d rows; "
                        "the tokenizer %s has %d tokens: wrong --tokenizer?)", ids[i], terms[k].text,
                        (int)sh[0], tokdir ? tokdir : model, Vt);
                goto fail;
            }
            excl[ids[i]] = 1;
            const float *e = E + (size_t)ids[i] * C;
            for (int j = 0; j < C; j++) {
                q[j] += (float)terms[k].sign * e[j] / (float)n;
                tn += (double)e[j] * e[j];
            }
        }
        scale += sqrt(tn);
    }
    double qn = 0;
    for (int j = 0; j < C; j++) qn += (double)q[j] * q[j];
    qn = sqrt(qn);
    if (qn <= 1e-6 * scale) {
        err_set(ERR_ARG, "the expression's vector is zero (terms cancel)");
        goto fail;
    }
    printf("query:");
    for (int k = 0; k < nt; k++) {
        printf(" %c ", terms[k].sign > 0 ? '+' : '-');
        if (tn_ids[k] > 1) printf("mean(");
        for (size_t i = 0; i < tn_ids[k]; i++) {
            print_token(tok, tids[k][i]);
            printf("%s", i + 1 < tn_ids[k] ? " " : "");
        }
        if (tn_ids[k] > 1) printf(")");
    }
    printf("   (%s rows, cosine, inputs excluded)\n", unembed ? "unembedding" : "embedding");
    int found;
    if (toy_nearest(E, V, C, q, excl, top, nid, ncos, &found)) goto fail;
    printf("%4s %7s %8s  %s\n", "rank", "id", "cosine", "token");
    for (int i = 0; i < found; i++) {
        printf("%4d %7d %8.4f  ", i + 1, nid[i], ncos[i]);
        print_token(tok, nid[i]);
        printf("\n");
    }
    rc = 0;
    goto done;
fail:
    rc = cli_fail("embed");
done:
    mem_free(q);
    mem_free(excl);
    mem_free(nid);
    mem_free(ncos);
    for (int k = 0; k < nt; k++) mem_free(tids[k]);
    tok_free(tok);
    gpt2_free(m);
    return rc;
}
