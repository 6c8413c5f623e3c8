/* cmd_export.c - `saelite export`: stored activations of one hook to a float32 .npy. */
#include <stdio.h>

#include "cli/cli.h"
#include "common/err.h"
#include "extract/extract.h"
#include "store/store.h"

CLI_COMMAND(export, "Write stored activations of a hook to a .npy file",
            "saelite export --db FILE --hook NAME --npy OUT.npy [--tokens-npy IDS.npy] [--limit N]")

int cmd_export(int argc, char **argv)
{
    const char *db = NULL, *hook = NULL, *npy = NULL, *ids = NULL;
    int64_t limit = 0;
    arg_spec spec[] = {
        {"--db", ARG_STR, &db, "database written by extract or import", ARG_REQUIRED},
        {"--hook", ARG_STR, &hook, "hook name, e.g. blocks.0.mlp.hook_post", ARG_REQUIRED},
        {"--npy", ARG_STR, &npy, "output [tokens, width] float32 array", ARG_REQUIRED},
        {"--tokens-npy", ARG_STR, &ids, "also write the token ids as int32 [tokens]"},
        {"--limit", ARG_I64, &limit, "only the first N tokens (sequences in id order; 0: all)",
         ARG_MIN(0)},
        {NULL, 0, NULL, NULL}};
    int rc = args_parse(argv[0], argc, argv, spec, NULL, 0, NULL);
    if (rc) return rc;
    store *s;
    if (store_open(&s, db, STORE_READONLY)) return cli_fail(argv[0]);
    int64_t rows = 0;
    int width = 0;
    rc = ext_export_npy(s, hook, npy, ids, limit, &rows, &width);
    store_close(s);
    if (rc) return cli_fail(argv[0]);
    printf("wrote %s: [%lld, %d] float32 of %s%s%s\n", npy, (long long)rows, width, hook,
           ids ? ", token ids to " : "", ids ? ids : "");
    return 0;
}
