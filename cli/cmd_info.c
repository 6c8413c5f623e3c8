/* cmd_info.c - `saelite info`: what a database holds. */
#include <stdio.h>

#include "cli/cli.h"
#include "common/err.h"
#include "common/mem.h"
#include "store/store.h"

CLI_COMMAND(info, "Summarize a database (models, hooks, tokens, sizes)", "saelite info --db FILE")

static const char *mb(char *buf, double bytes)
{
    snprintf(buf, 32, "%.1f MB", bytes / 1e6);
    return buf;
}

int cmd_info(int argc, char **argv)
{
    const char *db = NULL;
    const char *pos[1];
    int npos = 0;
    arg_spec spec[] = {{"--db", ARG_STR, &db, "database file (or give it as the argument)"},
                       {NULL, 0, NULL, NULL}};
    int rc = args_parse(argv[0], argc, argv, spec, pos, 1, &npos);
    if (rc) return rc;
    if (db && npos) /* `--db A B` read A and ignored B (audit) */
        return cli_usage_error(argv[0], "the database is given twice (--db %s and %s)", db, pos[0]);
    if (!db && npos) db = pos[0];
    if (!db) return cli_usage_error(argv[0], "--db is required");
    store *s;
    if (store_open(&s, db, STORE_READONLY)) return cli_fail(argv[0]);
    store_summary sm;
    store_model *ms = NULL;
    store_hook *hs = NULL;
    size_t nm = 0, nh = 0;
    char parts[32][64];
    int vers[32], np = 0;
    int64_t runs_done = 0, runs_open = 0;
    rc = store_summary_get(s, &sm);
    if (!rc) rc = store_model_list(s, &ms, &nm);
    if (!rc) rc = store_hook_list(s, &hs, &nh);
    if (!rc) rc = store_part_list(s, parts, vers, 32, &np);
    if (!rc) rc = store_run_counts(s, &runs_done, &runs_open);
    if (!rc) {
        char b1[32], b2[32];
        printf("%s: saelite store, schema version %d, %s on disk (%s of activations)\n", db,
               sm.version, mb(b1, (double)sm.file_bytes), mb(b2, (double)sm.act_bytes));
        printf("documents %lld, sequences %lld, tokens %lld\n", (long long)sm.n_documents,
               (long long)sm.n_sequences, (long long)sm.n_tokens);
        /* the names and paths are the file's bytes: printed as a terminal shows them safely */
        char t1[4 * sizeof ms->path], t2[4 * sizeof ms->name], t3[4 * sizeof ms->checksum];
        for (size_t i = 0; i < nm; i++)
            /* an import's path is already in parentheses, "(imported .npy)" */
            printf("model %lld: %s %s%s%s%s%s\n", (long long)ms[i].id,
                   cli_term(ms[i].name, t2, sizeof t2), ms[i].path[0] == '(' ? "" : "(",
                   cli_term(ms[i].path, t1, sizeof t1), ms[i].path[0] == '(' ? "" : ")",
                   ms[i].checksum[0] ? ", checksum " : "",
                   cli_term(ms[i].checksum, t3, sizeof t3));
        for (size_t i = 0; i < nh; i++) {
            /* in double: n_tokens is a sum over rows of the file (no int64 overflow) */
            double bytes = (double)hs[i].n_tokens * hs[i].width * store_dtype_size(hs[i].dtype);
            printf("hook %lld: %s (model %lld), width %d, %s, seq_len %d: %lld sequences, %lld "
                   "tokens, %s\n", (long long)hs[i].id, cli_term(hs[i].name, t1, sizeof t1),
                   (long long)hs[i].model_id,
                   hs[i].width, store_dtype_name(hs[i].dtype), hs[i].seq_len,
                   (long long)hs[i].n_seqs, (long long)hs[i].n_tokens, mb(b1, bytes));
        }
        printf("runs: %lld finished, %lld unfinished%s\n", (long long)runs_done,
               (long long)runs_open, runs_open ? " (rerun the same extract command to resume)" : "");
        for (int i = 0; i < np; i++)
            printf("schema part %s: version %d\n", cli_term(parts[i], t1, sizeof t1), vers[i]);
        int64_t nsae = -1, ndict = -1;
        if (!store_count_rows(s, "sae_registry", &nsae) && nsae >= 0)
            printf("SAEs registered: %lld\n", (long long)nsae);
        if (!store_count_rows(s, "ana_dicts", &ndict) && ndict >= 0)
            printf("analyses stored: %lld\n", (long long)ndict);
    }
    mem_free(ms);
    mem_free(hs);
    store_close(s);
    return rc ? cli_fail(argv[0]) : 0;
}
