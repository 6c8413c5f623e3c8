/* cmd_forward.c - `saelite forward`: run one sequence and write a hook's tensor (or logits). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/err.h"
#include "common/mem.h"
#include "common/npy.h"
#include "model/gpt2.h"
#include "model/tokenizer.h"

CLI_COMMAND(forward, "Run the model on one sequence and save a hook point or the logits as .npy",
            "saelite forward --model DIR (--text STR [--tokenizer DIR] [--bos] | --tokens 1,2,3) "
            "(--hook NAME | --logits) --npy OUT.npy")

typedef struct {
    float *copy;
    int ndim;
    int64_t shape[4];
} capture;

static int grab(const tensor_view *t, void *user)
{
    capture *c = user;
    int64_t n = tensor_numel(t);
    c->copy = mem_alloc(sizeof(float) * (size_t)n);
    if (!c->copy) return err_set(ERR_NOMEM, "out of memory");
    memcpy(c->copy, t->data, sizeof(float) * (size_t)n);
    /* drop the batch axis (B = 1) */
    c->ndim = t->ndim - 1;
    for (int i = 1; i < t->ndim; i++) c->shape[i - 1] = t->shape[i];
    return 0;
}

int cmd_forward(int argc, char **argv)
{
    const char *model = NULL, *toks = NULL, *hook = NULL, *npy = NULL, *text = NULL,
               *tokdir = NULL;
    int logits = 0, bos = 0;
    arg_spec spec[] = {
        {"--model", ARG_STR, &model, "model directory (config.json + model.safetensors)",
         ARG_REQUIRED},
        {"--text", ARG_STR, &text, "text to tokenize (tokenizer from --tokenizer or the model dir); "
         "its tokens only: no <|endoftext|> is prepended unless --bos, where TransformerLens's "
         "run_with_cache(str) prepends one by default"},
        {"--tokenizer", ARG_STR, &tokdir, "tokenizer directory", ARG_DEFAULT("the model directory")},
        {"--bos", ARG_FLAG, &bos, "with --text: prepend <|endoftext|> (what extract does by default "
         "and TransformerLens's prepend_bos=True does)"},
        {"--tokens", ARG_STR, &toks, "token ids, e.g. 464,2068,7586"},
        {"--hook", ARG_STR, &hook, "hook point name, e.g. blocks.0.hook_resid_post"},
        {"--logits", ARG_FLAG, &logits, "write the logits [T,V] instead of a hook"},
        {"--npy", ARG_STR, &npy, "output .npy file", ARG_REQUIRED},
        {NULL, 0, NULL, NULL}};
    int rc = args_parse(argv[0], argc, argv, spec, NULL, 0, NULL);
    if (rc) return rc;
    if (!toks == !text) return cli_usage_error(argv[0], "give exactly one of --text or --tokens");
    if (!hook == !logits) return cli_usage_error(argv[0], "give exactly one of --hook NAME or --logits");
    if (bos && !text) return cli_usage_error(argv[0], "--bos needs --text (with --tokens, write the id)");
    int *ids = NULL, n = 0;
    if (toks && args_int_list(toks, &ids, &n)) return cli_usage_error(argv[0], "%s", err_msg());
    gpt2_model *m = NULL;
    capture cap = {0};
    /* the model first: a missing --model directory was reported as "no tokenizer files" */
    if (gpt2_load(&m, model)) goto fail;
    if (text) {
        tok_tokenizer *tk;
        size_t nt = 0;
        if (tok_load(&tk, tokdir ? tokdir : model)) goto fail;
        rc = tok_encode(tk, text, strlen(text), 1, &ids, NULL, &nt);
        int eot = tok_eot(tk);
        tok_free(tk);
        if (rc) goto fail;
        if (nt == 0 && !bos) { /* with --bos the sequence is <|endoftext|> alone (an audit) */
            err_set(ERR_ARG, "--text encodes to no tokens (--bos runs <|endoftext|> alone)");
            goto fail;
        }
        if (bos) {
            if (eot < 0) {
                err_set(ERR_ARG, "--bos: tokenizer %s has no <|endoftext|> token",
                        tokdir ? tokdir : model);
                goto fail;
            }
            int *grown = mem_realloc(ids, sizeof *ids * (nt + 1));
            if (!grown) {
                err_set(ERR_NOMEM, "out of memory");
                goto fail;
            }
            ids = grown;
            if (nt) memmove(ids + 1, ids, sizeof *ids * nt);
            nt++;
            ids[0] = eot;
        }
        n = (int)nt;
    }
    if (hook && strchr(hook, '*')) {
        err_set(ERR_ARG, "--hook takes one exact name, not a pattern");
        goto fail;
    }
    if (hook && gpt2_hook_add(m, hook, grab, &cap)) goto fail;
    if (gpt2_forward(m, ids, 1, n, logits)) goto fail;
    if (logits) {
        int64_t shape[2] = {n, gpt2_cfg(m)->vocab_size};
        if (npy_write(npy, gpt2_logits(m), 2, shape)) goto fail;
        printf("wrote %s: logits [%d, %d]\n", npy, n, gpt2_cfg(m)->vocab_size);
    } else {
        if (npy_write(npy, cap.copy, cap.ndim, cap.shape)) goto fail;
        printf("wrote %s: %s [", npy, hook);
        for (int i = 0; i < cap.ndim; i++) printf("%s%lld", i ? ", " : "", (long long)cap.shape[i]);
        printf("]\n");
    }
    mem_free(cap.copy);
    mem_free(ids);
    gpt2_free(m);
    return 0;
fail:
    rc = cli_fail(argv[0]);
    mem_free(cap.copy);
    mem_free(ids);
    gpt2_free(m);
    return rc;
}
