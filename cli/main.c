/* main.c - the saelite command dispatcher.
 *
 * The command table is generated from the CLI_COMMAND lines of cli/cmd_*.c (see cli.h) into
 * build/gen/commands.h, sorted by name; help is generated from it, and so is the man page
 * (`saelite help --man` prints saelite(1) as roff: each command's summary and usage from its
 * CLI_COMMAND line, its options from its flag table, by running the command with --help while
 * args_help_roff is on).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/dist.h"
#include "common/err.h"
#include "common/hash.h"
#include "common/mem.h"
#include "common/par.h"
#include "model/ops.h"

#define X(id)                                                                                 \
    int cmd_##id(int argc, char **argv);                                                      \
    extern const char cmd_##id##_summary[];                                                   \
    extern const char cmd_##id##_usage[];
#include "commands.h"
#undef X

typedef struct {
    char name[32];
    int (*fn)(int, char **);
    const char *summary;
    const char *usage;
} command;

#define X(id) {#id, cmd_##id, cmd_##id##_summary, cmd_##id##_usage},
static command commands[] = {
#include "commands.h"
};
#undef X
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void fix_names(void)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        for (char *c = commands[i].name; *c; c++)
            if (*c == '_') *c = '-';
}

static const command *find(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(commands[i].name, name)) return &commands[i];
    return NULL;
}

const char *cli_usage_of(const char *cmd)
{
    const command *c = find(cmd);
    return c ? c->usage : NULL;
}

static void roff_line(const char *macro, const char *text)
{
    printf("%s", macro);
    args_roff_text(text);
    printf("\n");
}

static int print_man(void)
{
    printf(".TH SAELITE 1 \"\" \"saelite %s\" \"User Commands\"\n", SAELITE_VERSION);
    printf(".SH NAME\nsaelite \\- sparse autoencoders for transformer interpretability\n");
    printf(".SH SYNOPSIS\n.B saelite\n.I command\n.RI [ options ]\n.br\n"
           ".B saelite help\n.RI [ command ]\n.br\n.B saelite help \\-\\-man\n");
    printf(".SH DESCRIPTION\nsaelite runs GPT\\-2\\-style models with hook points, stores their "
           "activations in a SQLite database, trains sparse autoencoders on them, analyses the "
           "features and renders dashboards.\n.PP\nEvery command takes the options listed under "
           "it; \\fBsaelite help\\fR \\fIcommand\\fR (or \\fIcommand\\fR \\fB\\-\\-help\\fR) prints "
           "the same. Options are written \\fB\\-\\-name value\\fR or \\fB\\-\\-name=value\\fR; "
           "an on/off option \\fB\\-\\-name\\fR is turned off with \\fB\\-\\-no\\-name\\fR.\n");
    printf(".SH COMMANDS\n");
    args_help_roff(1);
    for (size_t i = 0; i < NCOMMANDS; i++) {
        const command *c = &commands[i];
        roff_line(".SS ", c->name);
        args_roff_text(c->summary);
        printf(".\n");
        char *argv[] = {(char *)c->name, "--help", NULL};
        c->fn(2, argv);
    }
    args_help_roff(0);
    printf(".SH EXIT STATUS\n.TP\n0\nsuccess\n.TP\n1\nfailure (the message names the file or "
           "value at fault)\n.TP\n2\nusage error: an unknown, missing or out\\-of\\-range option\n"
           ".TP\n130\na long job stopped by SIGINT, SIGUSR1, SIGTERM or SIGHUP (it stops cleanly and can be resumed; quick commands die by the signal)\n");
    printf(".SH FILES\n.TP\n.I lib/saelite/saelite.so\nthe saelite SQL functions as a loadable "
           "SQLite extension, under the installation prefix: \\fBsqlite3 db \"\\&.load "
           "PREFIX/lib/saelite/saelite\"\\fR\n");
    printf(".SH SEE ALSO\n.BR sqlite3 (1)\n");
    return 0;
}

static int print_help(const char *cmd)
{
    if (cmd && !strcmp(cmd, "--man")) return print_man();
    if (cmd) {
        const command *c = find(cmd);
        if (!c) {
            fprintf(stderr, "saelite: unknown command '%s' (see 'saelite help')\n", cmd);
            return 2;
        }
        char *argv[] = {(char *)c->name, "--help", NULL};
        return c->fn(2, argv) < 0 ? 0 : 0;
    }
    printf("saelite %s - sparse autoencoders for transformer interpretability\n\n", SAELITE_VERSION);
    printf("usage: saelite <command> [options]   (saelite help <command> for details)\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        printf("  %-12s %s\n", commands[i].name, commands[i].summary);
    return 0;
}

/* Variables read when a library loads, before main, set here and taken up by one restart
 * (/proc/self/exe, same argv) when they change; the user's own settings are never changed.
 * - OPENBLAS_CORETYPE: OpenBLAS 0.3.21 runs its Prescott (SSE3) kernels on CPUs it does not
 *   know, 6-8x below the AVX-512 ones on a 2-core Xeon (model/ops.h, op_blas_core_setenv).
 * - OMP_WAIT_POLICY=PASSIVE for a command asked to run in bf16 (or auto): spinning OpenMP
 *   workers (common/par.h) fight saelite's own threads, OpenBLAS's and the storage thread for
 *   the cores: measured on 2 busy cores, a bf16 GPT-2-small extract ran at 348 tok/s spinning
 *   and 1171 passive, the bf16 SAE step 1.3x fp32 spinning and 2.0x passive. fp32 runs, the
 *   default, never load work onto OpenMP and keep the runtime's default. */
static void restart_tuned(int argc, char **argv)
{
    int want = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "--precision") && i + 1 < argc) v = argv[i + 1];
        else if (!strncmp(a, "--precision=", 12)) v = a + 12;
        if (v && (!strcmp(v, "bf16") || !strcmp(v, "auto"))) want = 1;
    }
    int blas = op_blas_core_setenv(), omp = want && par_passive_setenv();
    if (blas || omp) par_restart(argv);
}

/* Commands that run under mpirun with several ranks (the others would all write the same
 * outputs): the data-parallel ones. */
static int runs_distributed(const char *name)
{
    return !strcmp(name, "sae-train") || !strcmp(name, "extract") || !strcmp(name, "analyze");
}

static int run_command(int argc, char **argv);

/* Under mpirun every rank must run the same command line: an MPMD launch with --k 16 on one
 * rank trained weights no single process gives while cfg.json recorded rank 0's k, and
 * sae-train on one rank beside analyze on another hung until killed (an audit). Returns the
 * first rank whose arguments differ from rank 0's (0 when all agree, -1 when MPI failed). */
static int ranks_disagree(int argc, char **argv)
{
    uint64_t h = 1469598103934665603ULL;
    for (int i = 1; i < argc; i++) h = hash_fnv1a(h, argv[i], strlen(argv[i]) + 1);
    int n = dist_size();
    uint64_t *all = mem_alloc(sizeof *all * (size_t)n);
    if (!all) err_set(ERR_NOMEM, "out of memory comparing the ranks' arguments");
    if (!all || dist_allgather(&h, all, sizeof h)) {
        mem_free(all);
        return -1;
    }
    int bad = 0;
    for (int r = 1; r < n && !bad; r++)
        if (all[r] != all[0]) bad = r;
    mem_free(all);
    return bad;
}

int main(int argc, char **argv)
{
    restart_tuned(argc, argv);
    /* MPI starts only when mpirun (or another MPI launcher) started this process */
    if (dist_init(&argc, &argv)) {
        fprintf(stderr, "saelite: %s\n", err_msg());
        return 1;
    }
    fix_names();
    int rc, bad = dist_size() > 1 ? ranks_disagree(argc, argv) : 0;
    if (bad) {
        if (dist_is_root()) {
            if (bad < 0) fprintf(stderr, "saelite: %s\n", err_msg());
            else
                fprintf(stderr, "saelite: rank %d was started with other arguments than rank 0; "
                                "under mpirun every rank runs the same command with the same flags\n",
                        bad);
        }
        rc = 2;
    } else if (dist_size() > 1 && argc >= 2 && find(argv[1]) && !runs_distributed(argv[1])) {
        if (dist_is_root())
            fprintf(stderr, "saelite %s: does not run on several ranks (mpirun -np %d); run it "
                            "as one process (data parallel: sae-train, extract, analyze)\n", argv[1], dist_size());
        rc = 2;
    } else
        rc = run_command(argc, argv);
    dist_finalize();
    return rc;
}

static int run_command(int argc, char **argv)
{
    int rc;
    if (argc < 2) {
        print_help(NULL);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "help") || !strcmp(name, "--help") || !strcmp(name, "-h"))
        rc = print_help(argc > 2 ? argv[2] : NULL);
    else if (!strcmp(name, "--version") || !strcmp(name, "version")) {
        printf("saelite %s\n", SAELITE_VERSION);
        rc = 0;
    } else {
        const command *c = find(name);
        if (!c) {
            fprintf(stderr, "saelite: unknown command '%s' (see 'saelite help')\n", name);
            return 2;
        }
        rc = c->fn(argc - 1, argv + 1);
        if (rc < 0) rc = 0; /* --help */
    }
    /* errno only where this flush failed: a write that failed earlier (tokenize's ids to a full
       disk) set the error flag, and perror then said "writing output: Success" (an audit) */
    errno = 0;
    int ferr = fflush(stdout) != 0 ? errno : 0;
    if (ferr || ferror(stdout)) {
        /* a command that failed said why in its own line (query's "cannot write the output",
           tokenize's): a second line here broke the one-line rule */
        if (!rc)
            fprintf(stderr, "saelite: writing output: %s\n",
                    ferr ? strerror(ferr) : "a write to standard output failed");
        return rc ? rc : 1;
    }
    return rc;
}
