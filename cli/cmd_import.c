/* cmd_import.c - `saelite import`: a [tokens, width] .npy of activations into a store. */
#include <stdio.h>

#include "cli/cli.h"
#include "common/err.h"
#include "extract/extract.h"
#include "store/store.h"

CLI_COMMAND(import, "Import activations computed elsewhere (.npy) into a database",
            "saelite import --npy ACTS.npy --db FILE --hook NAME [--seq-len T] [--tokens IDS.npy] "
            "[--dtype f32|f16|bf16] [--pair-with HOOK]")

int cmd_import(int argc, char **argv)
{
    const char *db = NULL, *hook = NULL, *npy = NULL, *ids = NULL, *dtype = "f32", *pair = NULL;
    int seq_len = 0; /* 0: the library's default */
    arg_spec spec[] = {
        {"--npy", ARG_STR, &npy, "[tokens, width] array (float32/float16/float64; int32/int64 values exact in float32)", ARG_REQUIRED},
        {"--db", ARG_STR, &db, "database (created when missing)", ARG_REQUIRED},
        {"--hook", ARG_STR, &hook, "name to store the activations under", ARG_REQUIRED},
        {"--seq-len", ARG_INT, &seq_len, "tokens per sequence", ARG_MIN(1), ARG_MAX(1 << 24),
         ARG_DEFAULT("128, or the row count when smaller")},
        {"--tokens", ARG_STR, &ids, "token ids [tokens] (int32/int64 .npy)"},
        {"--dtype", ARG_STR, &dtype, "storage dtype", ARG_CHOICES("f32|f16|bf16")},
        {"--pair-with", ARG_STR, &pair, "an imported hook whose sequences take these rows, one per "
         "token in export's order (a transcoder's input and target, imported as two files)"},
        {NULL, 0, NULL, NULL}};
    int rc = args_parse(argv[0], argc, argv, spec, NULL, 0, NULL);
    if (rc) return rc;
    int dt;
    if (store_dtype_parse(dtype, &dt)) return cli_usage_error(argv[0], "%s", err_msg());
    int64_t rows = 0, seqs = 0;
    rc = ext_import_npy_db(db, npy, ids, hook, pair, seq_len, dt, &rows, &seqs);
    if (rc) return cli_fail(argv[0]);
    printf("imported %s into %s: %lld tokens in %lld sequences as hook %s (%s)\n", npy, db,
           (long long)rows, (long long)seqs, hook, dtype);
    return 0;
}
