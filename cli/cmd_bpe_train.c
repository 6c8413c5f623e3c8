/* cmd_bpe_train.c - `saelite bpe-train`: learn a byte-level BPE vocabulary in GPT-2 format. */
#include <stdio.h>

#include "cli/cli.h"
#include "common/err.h"
#include "model/bpe.h"

CLI_COMMAND(bpe_train, "Learn a byte-level BPE vocabulary (GPT-2 encoder.json + vocab.bpe)",
            "saelite bpe-train --vocab N [--min-freq F] FILE... -o DIR [--force]   "
            "(FILE: JSONL or blank-line separated text)")

#define MAX_FILES 256

int cmd_bpe_train(int argc, char **argv)
{
    int vocab = 0;
    int64_t min_freq = 2;
    const char *out = NULL;
    int force = 0;
    arg_spec spec[] = {
        {"--vocab", ARG_INT, &vocab, "vocabulary size incl. 256 byte tokens and <|endoftext|>",
         ARG_REQUIRED, ARG_RANGE(257, 1000000)},
        {"--min-freq", ARG_I64, &min_freq, "stop when the best pair occurs fewer times", ARG_MIN(1)},
        {"-o", ARG_STR, &out, "output directory for encoder.json and vocab.bpe", ARG_REQUIRED},
        {"--out", ARG_STR, &out, "same as -o"},
        {"--force", ARG_FLAG, &force, "replace a tokenizer already in the output directory"},
        {NULL, 0, NULL, NULL},
    };
    const char *pos[MAX_FILES];
    int np = 0;
    int rc = args_parse("bpe-train", argc, argv, spec, pos, MAX_FILES, &np);
    if (rc) return rc;
    if (!np) return cli_usage_error("bpe-train", "no input FILE");
    /* its two files must not be the corpus it reads (a corpus named encoder.json in -o was
       replaced by the vocabulary it trained) */
    char enc[4200], bpe[4200];
    snprintf(enc, sizeof enc, "%s/encoder.json", out);
    snprintf(bpe, sizeof bpe, "%s/vocab.bpe", out);
    const char *outs[2] = {enc, bpe};
    static const char *const oflags[2] = {"-o (encoder.json)", "-o (vocab.bpe)"};
    if ((rc = cli_check_not_inputs("bpe-train", 2, outs, oflags, np, pos, 0, NULL))) return rc;
    /* before training, not after it (an audit: a bad -o failed once the merges were learnt) */
    static const char *const names[2] = {"encoder.json", "vocab.bpe"};
    if ((rc = cli_check_dir_outputs("bpe-train", out, 2, names))) return rc;
    cli_catch_signals(); /* outputs come at the end: a stop leaves none (it died on SIGTERM) */
    bpe_run_opts o = {.paths = pos, .npaths = np, .out = out, .force = force,
                      .train = {.vocab_size = vocab, .min_freq = (long)min_freq, .stop = &cli_stop_flag}};
    bpe_train_stats st;
    if (bpe_train_run(&o, &st)) return cli_fail("bpe-train");
    printf("bpe-train: %ld documents, %zu bytes, %zu pieces (%zu distinct) read in %.2fs; "
           "%zu merges in %.2fs (last pair count %ld); %.2fs CPU in all -> %s/encoder.json, %s/vocab.bpe\n",
           st.docs, st.bytes, st.pieces, st.distinct_pieces, st.read_s, st.merges, st.train_s,
           st.last_count, st.cpu_s, out, out);
    if ((int)st.merges < vocab - 257)
        printf("bpe-train: stopped early: no pair occurs --min-freq %ld times\n", (long)min_freq);
    return 0;
}
