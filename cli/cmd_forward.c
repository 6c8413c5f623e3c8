/* cmd_forward.c - `saelite forward`: run one sequence and write a hook's tensor (or logits). */
#include <stdio.h>

#include "cli/cli.h"
#include "common/err.h"
#include "common/mem.h"
#include "model/forward_run.h"

CLI_COMMAND(forward, "Run the model on one sequence and save a hook point or the logits as .npy",
            "saelite forward --model DIR (--text STR [--tokenizer DIR] [--bos] | --tokens 1,2,3) "
            "(--hook NAME | --logits) --npy OUT.npy")

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
    /* with --tokens it was read by nothing, a missing directory included, exit 0 (an audit) */
    if (tokdir && !text)
        return cli_usage_error(argv[0], "--tokenizer needs --text (--tokens are ids already)");
    /* --npy model/model.safetensors replaced the weights it had just read (an audit) */
    const char *outs[1] = {npy}, *in_dirs[2] = {model, tokdir};
    static const char *const oflags[1] = {"--npy"};
    if ((rc = cli_check_outputs(argv[0], 1, outs, oflags)) ||
        (rc = cli_check_not_inputs(argv[0], 1, outs, oflags, 0, NULL, 2, in_dirs)))
        return rc;
    int *ids = NULL, n = 0;
    if (toks && args_int_list(toks, &ids, &n)) return cli_usage_error(argv[0], "%s", err_msg());
    gpt2_forward_opts o = {.model = model, .text = text, .tok_dir = tokdir, .bos = bos,
                           .tokens = ids, .ntokens = n, .hook = hook, .npy = npy};
    gpt2_forward_result r;
    rc = gpt2_forward_run(&o, &r);
    mem_free(ids);
    if (rc) return cli_fail(argv[0]);
    if (logits) {
        printf("wrote %s: logits [%d, %d]\n", npy, (int)r.shape[0], (int)r.shape[1]);
    } else {
        printf("wrote %s: %s [", npy, hook);
        for (int i = 0; i < r.ndim; i++) printf("%s%lld", i ? ", " : "", (long long)r.shape[i]);
        printf("]\n");
    }
    return 0;
}
