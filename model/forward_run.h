/* forward_run.h - `saelite forward` as a library call: one sequence through a checkpoint, one
 * hook point's tensor or the logits written as .npy.
 *
 * The sequence is the given token ids, or a text encoded with the tokenizer of tok_dir (default:
 * the model directory), special tokens allowed, with <|endoftext|> prepended when bos is set
 * (the text alone, no BOS, otherwise). The hook is one exact name (gpt2.h lists them); its tensor
 * is written without the batch axis (B = 1), e.g. [T, C] or [H, T, T]; the logits are [T, V].
 * Ownership: the runner loads and frees the model and tokenizer itself; the caller owns opts'
 * strings and token array, and the result holds no memory.
 * Errors: err.h codes with err_set's message: the loader's, the tokenizer's, the forward's (ids
 * outside the vocabulary, a sequence longer than the context), npy_write's; ERR_ARG for a text
 * that encodes to no tokens without bos, bos with a tokenizer that has no <|endoftext|> and a
 * hook pattern ('*') instead of a name; ERR_NOTFOUND for an unknown hook name. The checks run in
 * that order after the model is loaded, so a missing model is reported first.
 * Thread safety: calls share no state. One short forward: no stop flag.
 */
#ifndef SAELITE_FORWARD_RUN_H
#define SAELITE_FORWARD_RUN_H
#include <stdint.h>

typedef struct {
    const char *model;   /* model directory: config.json + model.safetensors */
    const char *text;    /* the text to encode, or NULL: tokens[ntokens] is the sequence */
    const char *tok_dir; /* with text: the tokenizer directory (NULL: the model directory) */
    int bos;             /* with text: prepend <|endoftext|> (text "" is then it alone) */
    const int *tokens;   /* without text: the token ids */
    int ntokens;
    const char *hook;    /* one exact hook point name, or NULL: the logits */
    const char *npy;     /* the output .npy file (written atomically) */
} gpt2_forward_opts;

typedef struct {
    int ndim;            /* of the written tensor */
    int64_t shape[4];    /* its shape: the hook's without B, or [T, V] for the logits */
} gpt2_forward_result;

int gpt2_forward_run(const gpt2_forward_opts *o, gpt2_forward_result *r);

#endif
