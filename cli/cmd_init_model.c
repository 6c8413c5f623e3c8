/* cmd_init_model.c - `saelite init-model`: write a random-weight GPT-2 checkpoint (HF layout). */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/err.h"
#include "model/gpt2.h"

CLI_COMMAND(init_model, "Write a random-weight GPT-2 checkpoint (Hugging Face layout)",
            "saelite init-model --layers L --d-model C --heads H [--d-mlp F] [--ctx N] [--vocab V] "
            "[--seed S] [--dtype f32|f16|bf16] [--prefix] [--untied] [--force] -o DIR")

int cmd_init_model(int argc, char **argv)
{
    int layers = 0, dmodel = 0, heads = 0, dmlp = 0, ctx = 128, vocab = 50257, prefix = 0,
        untied = 0, force = 0;
    int64_t seed = 0;
    const char *dtype = "f32", *out = NULL;
    arg_spec spec[] = {
        /* the ranges config.json has (gpt2.h), so a bad value names its flag (an audit:
           "vocab_size 0 is outside ..." for --vocab 0) */
        {"--layers", ARG_INT, &layers, "number of transformer blocks", ARG_REQUIRED,
         ARG_RANGE(1, GPT2_MAX_LAYERS)},
        {"--d-model", ARG_INT, &dmodel, "residual width (n_embd)", ARG_REQUIRED, ARG_RANGE(1, GPT2_MAX_EMBD)},
        {"--heads", ARG_INT, &heads, "attention heads (must divide d-model)", ARG_REQUIRED,
         ARG_RANGE(1, GPT2_MAX_HEADS)},
        {"--d-mlp", ARG_INT, &dmlp, "MLP width (0: the default)", ARG_RANGE(0, GPT2_MAX_INNER),
         ARG_DEFAULT("4 x d-model")},
        {"--ctx", ARG_INT, &ctx, "context length / positions", ARG_RANGE(1, GPT2_MAX_CTX)},
        {"--vocab", ARG_INT, &vocab, "vocabulary size", ARG_RANGE(1, GPT2_MAX_VOCAB)},
        {"--seed", ARG_I64, &seed, "random seed", ARG_MIN(0)},
        {"--dtype", ARG_STR, &dtype, "storage dtype", ARG_CHOICES("f32|f16|bf16")},
        {"--prefix", ARG_FLAG, &prefix, "name tensors transformer.* as GPT2LMHeadModel does"},
        {"--untied", ARG_FLAG, &untied, "store a separate lm_head.weight"},
        {"-o", ARG_STR, &out, "output directory", ARG_REQUIRED},
        {"--force", ARG_FLAG, &force, "replace a model already in -o (a train-lm run's: and drop its training state)"},
        {"--out", ARG_STR, &out, "same as -o"},
        {NULL, 0, NULL, NULL}};
    int rc = args_parse(argv[0], argc, argv, spec, NULL, 0, NULL);
    if (rc) return rc;
    if (dmodel % heads)
        return cli_usage_error(argv[0], "--d-model %d is not a multiple of --heads %d", dmodel, heads);
    /* 4 x d_model in int64: a d_model near INT_MAX overflowed before the range check */
    int64_t d4 = 4 * (int64_t)dmodel;
    /* before the weights are drawn, not after (seconds for GPT-2's shape): -o '', a file or a
       path under one failed only at the write (a review) */
    static const char *const names[2] = {"config.json", "model.safetensors"};
    if ((rc = cli_check_dir_outputs(argv[0], out, 2, names))) return rc;
    gpt2_init_opts o = {
        .cfg = {layers, heads, dmodel, ctx, vocab, dmlp ? dmlp : d4 > INT_MAX ? INT_MAX : (int)d4, 1e-5f},
        .seed = (uint64_t)seed,
        .dtype = !strcmp(dtype, "f16") ? ST_F16 : !strcmp(dtype, "bf16") ? ST_BF16 : ST_F32,
        .prefix = prefix, .untied = untied, .force = force, .out = out, .stop = &cli_stop_flag};
    cli_catch_signals(); /* a stop while the weights are drawn writes nothing */
    size_t n;
    if (gpt2_init_run(&o, &n)) return cli_fail(argv[0]);
    printf("wrote %s: %d layers, d_model %d, %d heads, d_mlp %d, ctx %d, vocab %d, %zu parameters (%s)\n",
           out, layers, dmodel, heads, o.cfg.n_inner, ctx, vocab, n, dtype);
    return 0;
}
