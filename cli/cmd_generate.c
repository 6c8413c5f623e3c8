/* cmd_generate.c - `saelite generate`: sample a continuation of a prompt, streamed. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/err.h"
#include "common/mem.h"
#include "common/progress.h"
#include "model/gpt2.h"
#include "model/sample.h"
#include "model/tokenizer.h"

CLI_COMMAND(generate, "Generate text from a prompt (temperature, top-k; T=0 is greedy)",
            "saelite generate --model DIR --prompt STR [--tokenizer DIR] [--temperature T] "
            "[--top-k K] [--max-tokens N] [--seed S]")

typedef struct {
    tok_tokenizer *tok;
    int eot, no_stop, made, stopped;
} stream;

/* Print each token's bytes as it comes (a character split over tokens completes later). */
static int on_token(int id, void *user)
{
    stream *s = user;
    s->made++;
    if (id == s->eot && !s->no_stop) {
        s->stopped = 1;
        return 0;
    }
    size_t bl;
    const char *b = tok_token_bytes(s->tok, id, &bl);
    if (b) fwrite(b, 1, bl, stdout);
    fflush(stdout);
    return cli_interrupted();
}

int cmd_generate(int argc, char **argv)
{
    const char *model = NULL, *tokdir = NULL, *prompt = NULL;
    double temperature = 1.0;
    int top_k = 0, max_tokens = 50, no_stop = 0;
    int64_t seed = 0;
    arg_spec spec[] = {
        {"--model", ARG_STR, &model, "model directory (config.json + model.safetensors)",
         ARG_REQUIRED},
        {"--tokenizer", ARG_STR, &tokdir, "tokenizer directory", ARG_DEFAULT("the model directory")},
        {"--prompt", ARG_STR, &prompt, "prompt text (\"\" starts from <|endoftext|>)", ARG_REQUIRED},
        {"--temperature", ARG_FLOAT, &temperature, "softmax temperature; 0 = greedy", ARG_MIN(0)},
        {"--top-k", ARG_INT, &top_k, "sample among the K most likely tokens (0: all)", ARG_MIN(0)},
        {"--max-tokens", ARG_INT, &max_tokens, "tokens to generate", ARG_MIN(0)},
        {"--seed", ARG_I64, &seed, "random seed"},
        {"--no-stop", ARG_FLAG, &no_stop, "keep going after <|endoftext|>"},
        {NULL},
    };
    int rc = args_parse("generate", argc, argv, spec, NULL, 0, NULL);
    if (rc) return rc;
    cli_catch_signals();

    gpt2_model *m = NULL;
    tok_tokenizer *tok = NULL;
    int *ids = NULL, *ctx = NULL;
    size_t n = 0;
    if (gpt2_load(&m, model) || tok_load(&tok, tokdir ? tokdir : model)) goto fail;
    const gpt2_config *cfg = gpt2_cfg(m);
    int V = cfg->vocab_size, Vt = tok_vocab_size(tok), eot = tok_eot(tok);
    if (Vt > V) {
        err_set(ERR_SHAPE, "tokenizer has %d tokens but the model only %d (wrong --tokenizer?)",
                Vt, V);
        goto fail;
    }
    if (tok_encode(tok, prompt, strlen(prompt), 1, &ids, NULL, &n)) goto fail;
    /* the running sequence: prompt (or <|endoftext|>) then the generated tokens */
    size_t cap = n + (size_t)max_tokens + 1;
    ctx = mem_alloc(sizeof(int) * cap);
    if (!ctx) {
        err_set(ERR_NOMEM, "out of memory");
        goto fail;
    }
    size_t len = 0;
    if (n == 0) {
        if (eot < 0) {
            err_set(ERR_ARG, "empty prompt and the tokenizer has no <|endoftext|> to start from");
            goto fail;
        }
        ctx[len++] = eot;
    }
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= V) {
            err_set(ERR_SHAPE, "prompt token %d is outside the model's vocabulary (%d)", ids[i], V);
            goto fail;
        }
        ctx[len++] = ids[i];
    }
    fwrite(prompt, 1, strlen(prompt), stdout);
    fflush(stdout);
    rng_state rng;
    rng_seed(&rng, (uint64_t)seed);
    double t0 = now_seconds();
    stream st = {tok, eot, no_stop, 0, 0};
    if (smp_generate(m, ctx, &len, max_tokens, temperature, top_k, Vt, no_stop ? -1 : eot, &rng,
                     on_token, &st))
        goto fail;
    int made = st.made, stopped = st.stopped;
    double secs = now_seconds() - t0;
    printf("\n");
    fflush(stdout);
    fprintf(stderr, "generated %d token%s in %.2f s (%.1f tok/s)%s\n", made, made == 1 ? "" : "s",
            secs, secs > 0 ? made / secs : 0.0, stopped ? ", stopped at <|endoftext|>" : "");
    rc = cli_interrupted() ? 130 : 0;
    goto done;
fail:
    rc = cli_fail("generate");
done:
    mem_free(ids);
    mem_free(ctx);
    tok_free(tok);
    gpt2_free(m);
    return rc;
}
