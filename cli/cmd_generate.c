/* cmd_generate.c - `saelite generate`: sample a continuation of a prompt, streamed. */
#include <stdio.h>
#include <string.h>

#include "analysis/steer.h"
#include "cli/cli.h"
#include "common/err.h"
#include "common/mem.h"
#include "common/progress.h"
#include "model/gpt2.h"
#include "model/ops.h"
#include "model/sample.h"
#include "model/tokenizer.h"
#include "sae/sae.h"

CLI_COMMAND(generate, "Generate text from a prompt (temperature, top-k; T=0 is greedy)",
            "saelite generate --model DIR --prompt STR [--tokenizer DIR] [--temperature T] "
            "[--top-k K] [--max-tokens N] [--seed S] [--sae DIR [--hook NAME] --steer F:S[,F:S...] "
            "[--steer-method add|clamp|ortho|cap] [--compare]]")

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
    const char *model = NULL, *tokdir = NULL, *prompt = NULL, *sae_dir = NULL, *steer = NULL;
    const char *hook = NULL;
    const char *method_name = "add", *prec = "fp32";
    double temperature = 1.0;
    int top_k = 0, max_tokens = 50, no_stop = 0, compare = 0;
    int64_t seed = 0;
    arg_spec spec[] = {
        {"--model", ARG_STR, &model, "model directory (config.json + model.safetensors)",
         ARG_REQUIRED},
        {"--tokenizer", ARG_STR, &tokdir, "tokenizer directory", ARG_DEFAULT("the model directory")},
        {"--prompt", ARG_STR, &prompt, "prompt text (\"\" starts from <|endoftext|>)", ARG_REQUIRED},
        {"--temperature", ARG_FLOAT, &temperature, "softmax temperature; 0 = greedy", ARG_MIN(0)},
        {"--top-k", ARG_INT, &top_k, "sample among the K most likely tokens (0: all)", ARG_MIN(0)},
        {"--max-tokens", ARG_INT, &max_tokens, "tokens to generate", ARG_MIN(0)},
        {"--seed", ARG_I64, &seed, "random seed", ARG_MIN(0)},
        {"--no-stop", ARG_FLAG, &no_stop, "keep going after <|endoftext|>"},
        {"--sae", ARG_STR, &sae_dir, "SAE directory whose features --steer names (steered at its hook)"},
        {"--hook", ARG_STR, &hook, "hook to steer at", ARG_DEFAULT("the SAE's hook_name")},
        {"--steer", ARG_STR, &steer, "FEATURE:STRENGTH[,FEATURE:STRENGTH...] (needs --sae)"},
        {"--steer-method", ARG_STR, &method_name,
         "add: + S*W_dec[F]; clamp: set the feature to S keeping the SAE error (0 ablates); "
         "ortho: scale the component along W_dec[F] by S; cap: projection on W_dec[F] at most S",
         ARG_CHOICES("add|clamp|ortho|cap")},
        {"--compare", ARG_FLAG, &compare, "print the steered and the unsteered continuation (same seed)"},
        {"--precision", ARG_STR, &prec,
         "the model's matmuls: fp32, bf16 (matrix engine via oneDNN; needs AVX512-BF16 or AMX), "
         "auto", ARG_CHOICES("fp32|bf16|auto")},
        {NULL},
    };
    int rc = args_parse("generate", argc, argv, spec, NULL, 0, NULL);
    if (rc) return rc;
    if (!!sae_dir != !!steer) return cli_usage_error("generate", "--sae and --steer go together");
    if (compare && !steer) return cli_usage_error("generate", "--compare needs --sae and --steer");
    cli_catch_signals();

    gpt2_model *m = NULL;
    tok_tokenizer *tok = NULL;
    sae_model *sae = NULL;
    ana_steer *st = NULL;
    ana_steer_term *terms = NULL;
    int *ctx = NULL, nterms = 0;
    ana_steer_method method = ANA_STEER_ADD;
    if (op_set_precision(!strcmp(prec, "bf16")   ? OP_PRECISION_BF16
                         : !strcmp(prec, "auto") ? OP_PRECISION_AUTO
                                                 : OP_PRECISION_FP32))
        goto fail;
    if (gpt2_load(&m, model) || tok_load(&tok, tokdir ? tokdir : model)) goto fail;
    if (sae_dir) {
        if (sae_load(&sae, sae_dir) || ana_check_sae_model(sae, sae_dir, model) ||
            ana_steer_method_parse(method_name, &method) ||
            ana_steer_parse(steer, sae->cfg.d_sae, &terms, &nterms) ||
            ana_steer_new(&st, sae, method, terms, nterms))
            goto fail;
    }
    int Vt = tok_vocab_size(tok), eot = tok_eot(tok);
    size_t len = 0;
    if (ana_gen_context(tok, gpt2_cfg(m)->vocab_size, prompt, strlen(prompt), max_tokens, &ctx,
                        &len))
        goto fail;
    if (st) { /* the hook must exist and fit before anything is printed */
        int arc = ana_steer_attach(st, m, hook);
        gpt2_hook_clear(m);
        if (arc) goto fail;
    }
    /* one run, or with --compare the steered run then the unsteered one from the same seed */
    size_t len0 = len;
    for (int pass = 0; pass < 1 + compare && !cli_interrupted(); pass++) {
        int steered = st && pass == 0;
        if (compare) {
            printf("%s=== %s", pass ? "\n" : "", steered ? "steered (" : "unsteered ===\n");
            for (int k = 0; steered && k < nterms; k++)
                printf("%s%d:%g", k ? "," : "", terms[k].feature, terms[k].value);
            if (steered) printf(", %s) ===\n", ana_steer_method_name(method));
        }
        fwrite(prompt, 1, strlen(prompt), stdout);
        fflush(stdout);
        len = len0;
        double t0 = now_seconds();
        stream ss = {tok, eot, no_stop, 0, 0};
        ana_gen_opts go = {.max_new = max_tokens, .top_k = top_k, .vocab_limit = Vt,
                           .stop_id = no_stop ? -1 : eot, .temperature = temperature,
                           .seed = (uint64_t)seed, .hook = hook, .on_token = on_token, .user = &ss};
        if (ana_steer_generate(m, st, steered, &go, ctx, &len)) goto fail;
        int made = ss.made, stopped = ss.stopped;
        double secs = now_seconds() - t0;
        printf("\n");
        fflush(stdout);
        char mm[200] = "", why[160];
        if (strcmp(prec, "fp32")) /* which precision ran, as extract and analyze say */
            snprintf(mm, sizeof mm, "; matmuls %s", op_precision_bf16() ? "bf16 (oneDNN)" : "fp32");
        if (strcmp(prec, "fp32") && !op_precision_bf16())
            snprintf(mm + strlen(mm), sizeof mm - strlen(mm), " (no bf16: %s)", op_bf16_why_not(why, sizeof why));
        fprintf(stderr, "generated %d token%s in %.2f s (%.1f tok/s)%s%s\n", made, made == 1 ? "" : "s",
                secs, secs > 0 ? made / secs : 0.0, stopped ? ", stopped at <|endoftext|>" : "", mm);
    }
    rc = cli_interrupted() ? 130 : 0;
    goto done;
fail:
    rc = cli_fail("generate");
done:
    mem_free(ctx);
    mem_free(terms);
    ana_steer_free(st);
    sae_free(sae);
    tok_free(tok);
    gpt2_free(m);
    return rc;
}
