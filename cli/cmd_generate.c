/* cmd_generate.c - `saelite generate`: sample a continuation of a prompt, streamed. */
#include <stdio.h>
#include <string.h>

#include "analysis/steer.h"
#include "cli/cli.h"
#include "common/err.h"
#include "common/mem.h"
#include "model/ops.h"

CLI_COMMAND(generate, "Generate text from a prompt (temperature, top-k; T=0 is greedy)",
            "saelite generate --model DIR --prompt STR [--tokenizer DIR] [--temperature T] "
            "[--top-k K] [--max-tokens N] [--seed S] [--sae DIR [--hook NAME] --steer F:S[,F:S...] "
            "[--steer-method add|clamp|ortho|cap] [--compare]]")

typedef struct {
    const char *prompt, *prec;
    int compare;
    ana_steer_method method;
} shown;

/* With --compare, a header names each pass; every pass starts with the prompt. */
static void pass_begin(void *user, int pass, int steered, const ana_steer_term *terms, int nterms)
{
    const shown *s = user;
    if (s->compare) {
        printf("%s=== %s", pass ? "\n" : "", steered ? "steered (" : "unsteered ===\n");
        for (int k = 0; k < nterms; k++) printf("%s%d:%g", k ? "," : "", terms[k].feature, terms[k].value);
        if (steered) printf(", %s) ===\n", ana_steer_method_name(s->method));
    }
    fwrite(s->prompt, 1, strlen(s->prompt), stdout);
    fflush(stdout);
}

/* Each token's bytes as it comes (a character split over tokens completes later). */
static void token(void *user, const char *bytes, size_t n)
{
    if (bytes) fwrite(bytes, 1, n, stdout);
    fflush(stdout);
}

static void pass_end(void *user, int made, int stopped, double secs)
{
    const shown *s = user;
    printf("\n");
    fflush(stdout);
    char mm[200] = "", why[160];
    if (strcmp(s->prec, "fp32")) /* which precision ran, as extract and analyze say */
        snprintf(mm, sizeof mm, "; matmuls %s", op_precision_bf16() ? "bf16 (oneDNN)" : "fp32");
    if (strcmp(s->prec, "fp32") && !op_precision_bf16())
        snprintf(mm + strlen(mm), sizeof mm - strlen(mm), " (no bf16: %s)", op_bf16_why_not(why, sizeof why));
    fprintf(stderr, "generated %d token%s in %.2f s (%.1f tok/s)%s%s\n", made, made == 1 ? "" : "s",
            secs, secs > 0 ? made / secs : 0.0, stopped ? ", stopped at <|endoftext|>" : "", mm);
}

int cmd_generate(int argc, char **argv)
{
    const char *model = NULL, *tokdir = NULL, *prompt = NULL, *sae_dir = NULL, *steer = NULL;
    const char *hook = NULL;
    const char *method_name = NULL, *prec = "fp32"; /* NULL: not given (add) */
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
         ARG_CHOICES("add|clamp|ortho|cap"), ARG_DEFAULT("add")},
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
    /* steering's own flags did nothing without it, exit 0 (an audit) */
    if (!steer && (hook || method_name))
        return cli_usage_error("generate", "%s needs --sae and --steer", hook ? "--hook" : "--steer-method");
    if (steer) { /* the syntax is a usage error (exit 2); the range needs the SAE (run time) */
        ana_steer_term *terms = NULL;
        int nterms = 0;
        if (ana_steer_parse(steer, 0, &terms, &nterms)) return cli_usage_error("generate", "%s", err_msg());
        mem_free(terms);
    }
    ana_steer_method method = ANA_STEER_ADD;
    if (method_name && ana_steer_method_parse(method_name, &method)) return cli_fail("generate");
    cli_catch_signals();
    shown sh = {prompt, prec, compare, method};
    ana_generate_opts o = {
        .model_dir = model, .tokenizer_dir = tokdir, .prompt = prompt, .sae_dir = sae_dir,
        .steer = steer, .hook = hook, .method = method, .compare = compare, .no_stop = no_stop,
        .max_tokens = max_tokens, .top_k = top_k, .temperature = temperature,
        .seed = (uint64_t)seed,
        .precision = !strcmp(prec, "bf16")   ? OP_PRECISION_BF16
                     : !strcmp(prec, "auto") ? OP_PRECISION_AUTO
                                             : OP_PRECISION_FP32,
        .stop = &cli_stop_flag, .pass_begin = pass_begin, .token = token, .pass_end = pass_end,
        .user = &sh};
    ana_generate_result r;
    if (ana_generate_run(&o, &r)) return cli_fail("generate");
    return cli_interrupted() ? 130 : 0;
}
