/* cli.h - what every cli/cmd_<name>.c needs.
 *
 * A command file declares itself with one line at file scope:
 *     CLI_COMMAND(sae_train, "Train a sparse autoencoder", "saelite sae-train --db FILE ...")
 * and defines `int cmd_sae_train(int argc, char **argv)` returning the exit code. argv[0] is the
 * command name. The Makefile collects the CLI_COMMAND lines into build/gen/commands.h, so main's
 * table is generated, alphabetical, and no shared file needs editing to add a command.
 * Underscores in the id become '-' on the command line. Only cli/ prints errors or chooses exit
 * codes: report module errors with cli_fail().
 *
 * Exit codes (every command):
 *   0    success (also --help)
 *   1    failure: cli_fail() after a module error (bad file, shape mismatch, I/O, ...)
 *   2    usage error: cli_usage_error(), or args_parse() refusing the command line
 *   130  stopped by SIGINT/SIGUSR1/SIGTERM/SIGHUP (cli_fail() returns it once the stop flag is
 *        set, so an interrupted job that cleaned up exits 130, as a shell does for Ctrl-C)
 * Messages: one line on stderr, "saelite <command>: <problem>", the command as typed (argv[0]);
 * usage errors add " (see 'saelite <command> --help')".
 */
#ifndef SAELITE_CLI_H
#define SAELITE_CLI_H
#include <signal.h>
#include <stdint.h>

#define CLI_COMMAND(id, summary, usage)                                                       \
    const char cmd_##id##_summary[] = summary;                                                \
    const char cmd_##id##_usage[] = usage;

#define SAELITE_VERSION "0.1.0"

/* Print "saelite <cmd>: <err_msg()>" to stderr and return 1, or 130 once SIGINT/SIGTERM arrived
 * (use as `return cli_fail("x");`). */
int cli_fail(const char *cmd);
/* s as a terminal shows it safely (utf8_for_terminal: controls and invalid bytes escaped), in
 * buf [cap]: for a string read from a file or database (a name, a path) printed to stdout, which
 * could otherwise carry escape sequences to the user's terminal. Returns buf. */
const char *cli_term(const char *s, char *buf, size_t cap);
/* Print "saelite <cmd>: <message>" plus a usage hint and return 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Before a command writes any of its n output files (NULL entries skipped), each named by its
 * flag: two on one file (or an output on an input listed with them) is a usage error (2), a
 * path an atomic write would refuse, or whose directory is missing, a failure (1) naming it.
 * 0 when all can be written: a command that writes several files then fails on none of the
 * later ones after writing the first. */
int cli_check_outputs(const char *cmd, int n, const char *const *paths, const char *const *flags);
/* Before work whose output directory dir is made only at the end (so that an interrupted run
 * leaves none): dir must be absent or a directory, and, when it exists, each of its n files
 * names[] writable there (file_check_writable: not a directory, a dangling link, ...). A
 * failure (1) naming the path; 0 when all can be written. */
int cli_check_dir_outputs(const char *cmd, const char *dir, int n, const char *const *names);
/* Before writing: none of the n outputs (NULL skipped, each named by its flag) may be one of the
 * nin input files, or an existing file inside one of the nd input directories (a model's, an
 * SAE's, a tokenizer's: `attribute --csv sae/cfg.json` replaced the SAE's config), by its path's
 * directory or, through a symlink, its target's. A usage error (2) naming both. */
int cli_check_not_inputs(const char *cmd, int n, const char *const *paths, const char *const *flags,
                         int nin, const char *const *in_files, int nd, const char *const *in_dirs);
/* Install SIGINT/SIGUSR1/SIGTERM/SIGHUP handlers that set a flag instead of killing the process
 * (SIGHUP left ignored under nohup; under mpirun, SIGTERM ends the rank with the line below
 * instead: see cli_term_hint). */
void cli_catch_signals(void);
/* Under mpirun: what the one line printed when mpirun ends the job (SIGTERM) says about the
 * saved state (default, for sae-train: "the last checkpoint is intact, rerun with --resume").
 * Call after cli_catch_signals. */
void cli_term_hint(const char *hint);
/* The same for a run that checkpoints (sae-train): the line says to --resume once cli_ckpt_done
 * is set (pass &cli_ckpt_done as sae_run_opts.ckpt_done; resume: set from the start), else that
 * no checkpoint was written yet (rerun without --resume; with --force again for a --force run).
 * Call after cli_catch_signals. */
void cli_term_checkpoint(int resume, int force);
extern volatile sig_atomic_t cli_ckpt_done;
/* Non-zero once SIGINT/SIGUSR1/SIGTERM/SIGHUP arrived (long jobs poll it and stop cleanly). */
int cli_interrupted(void);
extern volatile sig_atomic_t cli_stop_flag; /* pollable from hooks/kernels via a pointer (glibc: an int) */

/* ---- flags ----------------------------------------------------------------------------
 * A command declares its flags in one table; args_parse enforces the declarations and --help
 * prints them, so the help is complete by construction:
 *     int batch = 8;             (the initial value is the default --help prints)
 *     const char *dtype = "f32", *db = NULL;
 *     arg_spec spec[] = {
 *         {"--db", ARG_STR, &db, "database to create or extend", ARG_REQUIRED},
 *         {"--batch", ARG_INT, &batch, "windows per forward pass", ARG_MIN(1)},
 *         {"--dtype", ARG_STR, &dtype, "storage dtype", ARG_CHOICES("f32|f16|bf16")},
 *         {NULL}};
 * Help text explains the flag; it does not restate the default, range or choices. Where the
 * initial value is a sentinel ("0 = the model's n_ctx", NULL = "the model directory"), say what
 * the default means with ARG_DEFAULT("..."); ARG_DEFAULT("") prints none. A second spelling
 * ("-o" beside "--out") is a separate entry with the same dst; declarations go on one of them
 * (a required flag is satisfied by any spelling). Checks that relate several flags (exactly one
 * of, X needs Y) stay code after args_parse, reported with cli_usage_error.
 * Messages of the declared checks (exit 2, through cli_usage_error):
 *     saelite extract: --db is required
 *     saelite extract: --batch must be >= 1, got 0
 *     saelite report: --threads must be in 1..64, got 99
 *     saelite analyze: --val-frac must be in (0, 1), got 2
 *     saelite extract: --dtype must be one of f32|f16|bf16, got 'f8'
 * Ranges are checked on values given on the command line (a sentinel default may lie outside). */
enum arg_kind { ARG_STR, ARG_INT, ARG_I64, ARG_FLOAT, ARG_FLAG };

typedef struct {
    const char *name;  /* "--lr"; a second spelling can follow as a separate entry */
    enum arg_kind kind;
    void *dst;         /* const char **, int *, int64_t *, double *, int * (flag: set to 1) */
    const char *help;  /* shown by --help after the usage line */
    /* declarations, written with the macros below after the four fields above */
    unsigned char required;         /* must be given */
    unsigned char lo_kind, hi_kind; /* bound on a number: 0 none, 1 inclusive, 2 exclusive */
    double lo, hi;
    const char *choices; /* ARG_STR: "a|b|c", the value must be one of them */
    const char *def;     /* default as --help prints it, instead of the initial value */
} arg_spec;

#define ARG_REQUIRED .required = 1
#define ARG_MIN(x) .lo_kind = 1, .lo = (x)   /* value >= x */
#define ARG_MAX(x) .hi_kind = 1, .hi = (x)   /* value <= x */
#define ARG_ABOVE(x) .lo_kind = 2, .lo = (x) /* value > x */
#define ARG_BELOW(x) .hi_kind = 2, .hi = (x) /* value < x */
#define ARG_RANGE(a, b) ARG_MIN(a), ARG_MAX(b)
#define ARG_CHOICES(list) .choices = (list)
#define ARG_DEFAULT(text) .def = (text)

/* Whether argv[1..] spells flag (alone or as flag=value): for a note about a flag the user gave
 * whose value equals its default (args_parse writes the value, not whether it was typed). */
int args_given(int argc, char **argv, const char *flag);
/* Parses argv[1..] against spec (terminated by an entry with name NULL). Accepts
 * "--name value" and "--name=value"; "--no-name" clears an ARG_FLAG whose spec is "--name".
 * Positional arguments are collected into pos (up to max_pos; more is an error).
 * The whole command line is checked before any dst is written, so --help anywhere prints the
 * initial values as defaults, and a refused command line leaves every dst as it was.
 * Returns 0 ok, -1 when --help/-h was printed (exit 0), 2 on a usage error (printed).
 * Numbers are parsed strictly: trailing junk, NaN and Inf are errors. */
int args_parse(const char *cmd, int argc, char **argv, const arg_spec *spec, const char **pos,
               int max_pos, int *npos);
/* Print usage + flags for a command to stdout; the current values are printed as defaults. */
void args_help(const char *cmd, const arg_spec *spec);
/* Make --help print the roff fragment of saelite(1) for the command instead (saelite help --man). */
void args_help_roff(int on);
/* Write s to stdout escaped for roff text (backslashes, dashes, a leading '.' or '\''). */
void args_roff_text(const char *s);

/* Parse "0,5,7-9" into a malloc'd int array (free with mem_free). Returns 0 or ERR_ARG. */
int args_int_list(const char *s, int **out, int *n);
/* Parse "0,0.7,1e-3" into v[0..max): each item a decimal as a float flag takes it
 * (buf_read_double: no blanks, hex, inf or nan), no empty item or trailing comma. The caller
 * checks each value's range. Returns 0 or ERR_ARG ("bad list ..."). */
int args_float_list(const char *s, double *v, int max, int *n);

#endif
