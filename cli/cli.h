/* cli.h - what every cli/cmd_<name>.c needs.
 *
 * A command file declares itself with one line at file scope:
 *     CLI_COMMAND(sae_train, "Train a sparse autoencoder", "saelite sae-train --db FILE ...")
 * and defines `int cmd_sae_train(int argc, char **argv)` returning the exit code
 * (0 ok, 1 failure, 2 usage error). argv[0] is the command name. The Makefile collects the
 * CLI_COMMAND lines into build/gen/commands.h, so main's table is generated, alphabetical, and no
 * shared file needs editing to add a command. Underscores in the id become '-' on the command
 * line. Only cli/ prints errors or chooses exit codes: report module errors with cli_fail().
 */
#ifndef SAELITE_CLI_H
#define SAELITE_CLI_H
#include <stdint.h>

#define CLI_COMMAND(id, summary, usage)                                                       \
    const char cmd_##id##_summary[] = summary;                                                \
    const char cmd_##id##_usage[] = usage;

#define SAELITE_VERSION "0.1.0"

/* Print "saelite <cmd>: <err_msg()>" to stderr and return 1 (use as `return cli_fail("x");`). */
int cli_fail(const char *cmd);
/* Print "saelite <cmd>: <message>" plus a usage hint and return 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Install SIGINT/SIGTERM handlers that set a flag instead of killing the process. */
void cli_catch_signals(void);
/* Non-zero once SIGINT/SIGTERM arrived (long jobs poll it and stop cleanly). */
int cli_interrupted(void);
extern volatile int cli_stop_flag; /* pollable directly from hooks/kernels via a pointer */

/* ---- flags ---------------------------------------------------------------------------- */
enum arg_kind { ARG_STR, ARG_INT, ARG_I64, ARG_FLOAT, ARG_FLAG };

typedef struct {
    const char *name;  /* "--lr"; a second spelling can follow as a separate entry */
    enum arg_kind kind;
    void *dst;         /* const char **, int *, int64_t *, double *, int * (flag: set to 1) */
    const char *help;  /* shown by --help after the usage line */
} arg_spec;

/* Parses argv[1..] against spec (terminated by an entry with name NULL). Accepts
 * "--name value" and "--name=value"; "--no-name" clears an ARG_FLAG whose spec is "--name".
 * Positional arguments are collected into pos (up to max_pos; more is an error).
 * Returns 0 ok, -1 when --help/-h was printed (exit 0), 2 on a usage error (printed).
 * Numbers are parsed strictly: trailing junk, NaN and Inf are errors. */
int args_parse(const char *cmd, int argc, char **argv, const arg_spec *spec, const char **pos,
               int max_pos, int *npos);
/* Print usage + flags for a command to stdout. */
void args_help(const char *cmd, const arg_spec *spec);

/* Parse "0,5,7-9" into a malloc'd int array (free with mem_free). Returns 0 or ERR_ARG. */
int args_int_list(const char *s, int **out, int *n);

#endif
