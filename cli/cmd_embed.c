/* cmd_embed.c - `saelite embed`: nearest tokens to an arithmetic expression of embeddings. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/err.h"
#include "common/utf8.h"
#include "model/gpt2.h"
#include "model/tokenizer.h"
#include "toy/toy.h"

CLI_COMMAND(embed, "Nearest tokens (cosine) to an expression like \"king - man + woman\"",
            "saelite embed --model DIR [--tokenizer DIR] [--unembed] [--top N] [--no-space] "
            "\"king - man + woman\"")

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

/* toy_embed_run's lookup: the term's tokens, special tokens read as text */
static int lookup(const char *text, int **ids, size_t *n, void *user)
{
    return tok_encode(user, text, strlen(text), 0, ids, NULL, n);
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
    /* the expression's syntax is a usage error, before anything loads */
    toy_embed_term terms[TOY_EMBED_MAX_TERMS];
    int nt = 0;
    if (toy_embed_parse(pos[0], terms, &nt)) return cli_usage_error("embed", "%s", err_msg());

    gpt2_model *m = NULL;
    tok_tokenizer *tok = NULL;
    toy_embed_result r = {0};
    if (gpt2_load(&m, model) || tok_load(&tok, tokdir ? tokdir : model)) goto fail;
    int nd;
    int64_t sh[2];
    const float *E = gpt2_param(m, unembed ? "lm_head.weight" : "wte.weight", &nd, sh);
    if (!E || nd != 2) {
        err_set(ERR_NOTFOUND, "%s: no %s matrix", model, unembed ? "lm_head" : "wte");
        goto fail;
    }
    toy_embed_opts o = {.expr = pos[0], .E = E, .rows = (int)sh[0], .dim = (int)sh[1],
                        .vocab = tok_vocab_size(tok), .top = top, .no_space = no_space,
                        .lookup = lookup, .user = tok, .lookup_name = tokdir ? tokdir : model};
    if (toy_embed_run(&o, &r)) goto fail;
    printf("query:");
    for (int k = 0; k < r.nterms; k++) {
        const toy_embed_term *t = &r.terms[k];
        printf(" %c ", t->sign > 0 ? '+' : '-');
        if (t->nids > 1) printf("mean(");
        for (size_t i = 0; i < t->nids; i++) {
            print_token(tok, t->ids[i]);
            printf("%s", i + 1 < t->nids ? " " : "");
        }
        if (t->nids > 1) printf(")");
    }
    printf("   (%s rows, cosine, inputs excluded)\n", unembed ? "unembedding" : "embedding");
    printf("%4s %7s %8s  %s\n", "rank", "id", "cosine", "token");
    for (int i = 0; i < r.found; i++) {
        printf("%4d %7d %8.4f  ", i + 1, r.ids[i], r.cos[i]);
        print_token(tok, r.ids[i]);
        printf("\n");
    }
    rc = 0;
    goto done;
fail:
    rc = cli_fail("embed");
done:
    toy_embed_result_free(&r);
    tok_free(tok);
    gpt2_free(m);
    return rc;
}
