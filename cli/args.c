/* args.c - flag parsing and shared CLI helpers (error printing, signals). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/utf8.h"
#include "common/dist.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"

const char *cli_usage_of(const char *cmd); /* main.c */

volatile sig_atomic_t cli_stop_flag;

static void on_signal(int sig)
{
    /* second Ctrl-C: stop now. Not a second SIGHUP: a closed terminal sends two (the shell's to
       its jobs, then the kernel's to the foreground group as the shell exits), and the second
       ended the job mid-step without the checkpoint the first asked for (1 close in 4, a review) */
    if (cli_stop_flag && sig != SIGHUP) _exit(130);
    cli_stop_flag = 1;
    /* the reader of a pipe (saelite ... 2>&1 | tee log) got the same signal and is gone: the next
       progress line raised SIGPIPE, which ended the job before its checkpoint. EPIPE instead */
    static const struct sigaction ign = {.sa_handler = SIG_IGN};
    sigaction(SIGPIPE, &ign, NULL);
}

/* Under mpirun a SIGTERM comes from the launcher ending the job (a rank died, or the job was
 * stopped): a rank blocked in a collective with the dead one could never reach its next stop
 * check, so it says so in one line and exits; rank 0's last checkpoint is intact (atomic).
 * The lines are published through lock-free atomic pointers (async-signal-safe): the handler may
 * run on any thread (OpenMPI's own threads do not block SIGTERM), so blocking it on the thread
 * that rewrites the lines did not keep the handler from reading a half-made one. Each publish
 * writes the generation of buffers no pointer names (two publishes per process at most). */
static char term_buf[2][2][640];
static int term_gen;
static const char *_Atomic term_line, *_Atomic term_line_none; /* none: no checkpoint written yet */
/* set (sae_run_opts.ckpt_done) once every rank knows a checkpoint of this run is on disk, or at
   the start of a --resume run; a stat() of the path could not say whose the file is (a --force
   run's atomic rewrite reused the old file's inode on ext4, an audit) nor see rank 0's file from
   another node */
volatile sig_atomic_t cli_ckpt_done;
static void on_term(int sig)
{
    (void)sig;
    const char *l = atomic_load(&term_line), *none = atomic_load(&term_line_none);
    if (none && !cli_ckpt_done) l = none;
    /* every rank's line: when rank 0 is the one that died, the others' are what says so */
    if (l) {
        ssize_t w = write(STDERR_FILENO, l, strlen(l));
        (void)w;
    }
    _exit(143);
}

static void set_term_lines(const char *hint, const char *hint_none)
{
    term_gen ^= 1;
    char *b[2] = {term_buf[term_gen][0], term_buf[term_gen][1]};
    const char *h[2] = {hint, hint_none};
    for (int i = 0; i < 2; i++)
        if (h[i])
            snprintf(b[i], sizeof term_buf[0][0], "saelite: rank %d of %d: ended by mpirun (another "
                     "rank died or the job was stopped); %s\n", dist_rank(), dist_size(), h[i]);
    atomic_store(&term_line_none, hint_none ? b[1] : NULL);
    atomic_store(&term_line, b[0]);
}

void cli_term_hint(const char *hint)
{
    if (dist_size() > 1) set_term_lines(hint, NULL);
}

void cli_term_checkpoint(int resume, int force)
{
    if (dist_size() <= 1) return;
    cli_ckpt_done = resume; /* --resume refuses to start without the checkpoint */
    /* mpirun turns Ctrl-C into SIGTERM and kills a second later; it forwards SIGUSR1, which
       stops every rank at a step boundary with a checkpoint (docs/scale.md) */
    set_term_lines("the last checkpoint is intact, rerun with --resume (SIGUSR1 to mpirun stops "
                   "the job with a fresh one)",
                   /* a --force run over another run's files: without --force the rerun is
                      refused (that directory holds an SAE or a checkpoint) */
                   force ? "no checkpoint was written yet, rerun the same command (with --force, "
                           "not --resume; SIGUSR1 to mpirun stops the job with a checkpoint)"
                         : "no checkpoint was written yet, rerun without --resume (SIGUSR1 to "
                           "mpirun stops the job with a checkpoint)");
}

void cli_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    /* SIGUSR1 is a stop request like Ctrl-C: mpirun forwards it to every rank (it turns SIGINT
       into SIGTERM and kills), and batch schedulers send it ahead of a time limit */
    sigaction(SIGUSR1, &sa, NULL);
    /* SIGHUP (the terminal or ssh session closed) stops with a checkpoint too, where it used to
       kill mid-step; under nohup it stays ignored, as the user asked */
    struct sigaction hup;
    if (sigaction(SIGHUP, NULL, &hup) == 0 && hup.sa_handler != SIG_IGN)
        sigaction(SIGHUP, &sa, NULL);
    if (dist_size() > 1) {
        set_term_lines("the last checkpoint is intact, rerun with --resume", NULL);
        sa.sa_handler = on_term;
    }
    sigaction(SIGTERM, &sa, NULL);
}

int cli_interrupted(void) { return cli_stop_flag; }

int cli_fail(const char *cmd)
{
    const char *m = err_msg();
    /* an error every rank holds (dist_check) is printed once, by rank 0 */
    int shared = dist_size() > 1 && dist_error_shared();
    /* a stop agreed by every rank is a stop on each, also on the ranks that had no signal (a
       SIGINT to rank 0 alone: rank 1 exited 1 and mpirun said 1 when it came first); read
       before the barrier below, whose dist_check clears the shared error */
    int stopped = cli_stop_flag || (shared && dist_error_shared_code() == ERR_ABORTED);
    if (dist_is_root() || !shared)
        fprintf(stderr, "saelite %s: %s\n", cmd, m[0] ? m : "failed");
    if (shared) {
        /* every rank ends here (the error came from a collective). mpirun kills the others as
           soon as one exits non-zero: the rest wait until rank 0 has printed, and that kill
           finds them on their way out, where "ended by mpirun" would be wrong (a SIGUSR1 stop
           lost its "interrupted at step" line 1 time in 3 fresh-clone CI runs) */
        signal(SIGTERM, SIG_IGN);
        dist_check(OK);
    }
    return stopped ? 130 : 1;
}

static void vusage(const char *cmd, const char *fmt, va_list ap)
{
    /* every rank has the same arguments (main checks): rank 0 alone says what is wrong with
       them (each rank printed it, an audit) */
    if (!dist_is_root()) return;
    fprintf(stderr, "saelite %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see 'saelite %s --help')\n", cmd);
}

int cli_check_outputs(const char *cmd, int n, const char *const *paths, const char *const *flags)
{
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (file_same(paths[i], paths[j]))
                return cli_usage_error(cmd, "%s and %s name the same file %s; give each its own",
                                       flags[i], flags[j], paths[j]);
    for (int i = 0; i < n; i++)
        if (paths[i] && file_check_writable(paths[i])) return cli_fail(cmd);
    return 0;
}

int cli_check_dir_outputs(const char *cmd, const char *dir, int n, const char *const *names)
{
    /* made after the work: its nearest existing ancestor must take it (a file there, or an
       unwritable one, failed only after bpe-train's training: an audit) */
    if (file_check_creatable_dir(dir)) return cli_fail(cmd);
    struct stat sb;
    if (stat(dir, &sb) != 0) return 0;
    char path[4096];
    for (int i = 0; i < n; i++)
        if (path_join(path, sizeof path, dir, names[i]) || file_check_writable(path))
            return cli_fail(cmd);
    return 0;
}

int cli_check_not_inputs(const char *cmd, int n, const char *const *paths, const char *const *flags,
                         int nin, const char *const *in_files, int nd, const char *const *in_dirs)
{
    for (int i = 0; i < n; i++) {
        if (!paths[i]) continue;
        for (int k = 0; k < nin; k++)
            if (in_files[k] && file_same_db(paths[i], in_files[k])) /* a database's -wal too */
                return cli_usage_error(cmd, "%s %s is an input (%s); write it elsewhere", flags[i],
                                       paths[i], in_files[k]);
        if (access(paths[i], F_OK) != 0) continue; /* a new file beside the inputs is harmless */
        /* the file a write replaces: a symlink's target (fileio's rule), so the directory is the
           target's ("--npy link.npy" to model/model.safetensors replaced the weights, an audit);
           and the path's own, whose files may be links out of it (a model directory of links
           into a blob store, as Hugging Face's cache is, had its weights replaced by --npy
           model/model.safetensors once only the target's was looked at, a review) */
        char *real = realpath(paths[i], NULL);
        for (int side = 0; side < 2; side++) {
            char parent[4096];
            snprintf(parent, sizeof parent, "%s", side && real ? real : paths[i]);
            char *sl = strrchr(parent, '/');
            if (!sl) snprintf(parent, sizeof parent, ".");
            else if (sl == parent) parent[1] = 0;
            else *sl = 0;
            for (int k = 0; k < nd; k++)
                if (in_dirs[k] && file_same(parent, in_dirs[k])) {
                    free(real);
                    return cli_usage_error(cmd, "%s %s would replace a file of the input directory "
                                           "%s; write it elsewhere", flags[i], paths[i], in_dirs[k]);
                }
        }
        free(real);
    }
    return 0;
}

int args_given(int argc, char **argv, const char *flag)
{
    size_t n = strlen(flag);
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], flag, n) && (!argv[i][n] || argv[i][n] == '=')) return 1;
    return 0;
}

const char *cli_term(const char *s, char *buf, size_t cap)
{
    utf8_for_terminal(s, strlen(s), buf, cap);
    return buf;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vusage(cmd, fmt, ap);
    va_end(ap);
    return 2;
}

/* ---- help ------------------------------------------------------------------------------ */

static int help_roff;

void args_help_roff(int on) { help_roff = on; }

void args_roff_text(const char *s)
{
    if (*s == '.' || *s == '\'') fputs("\\&", stdout);
    for (; *s; s++) {
        if (*s == '\\') fputs("\\e", stdout);
        else if (*s == '-') fputs("\\-", stdout);
        else if (*s == '\n') fputs("\n.br\n", stdout);
        else putchar(*s);
    }
}

/* The bound of a number flag as text: ">= 1", "< 1", "in 1..64", "in (0, 1)"; "" if none. */
/* A range bound as --help and messages spell it: whole numbers whole (1000000, not 1e+06),
 * others in the fewest digits that read back (buf_double: 0.1, not 0.10000000000000001). */
static const char *num_text(double x, char *buf, size_t cap)
{
    if (x == floor(x) && fabs(x) < 1e16) {
        snprintf(buf, cap, "%.0f", x);
        return buf;
    }
    return buf_double(buf, cap, x);
}

static void range_text(const arg_spec *s, char *buf, size_t cap)
{
    char lo[32], hi[32];
    num_text(s->lo, lo, sizeof lo);
    num_text(s->hi, hi, sizeof hi);
    if (s->lo_kind && s->hi_kind) {
        if (s->lo_kind == 1 && s->hi_kind == 1 && s->kind != ARG_FLOAT)
            snprintf(buf, cap, "in %s..%s", lo, hi);
        else
            snprintf(buf, cap, "in %c%s, %s%c", s->lo_kind == 1 ? '[' : '(', lo, hi,
                     s->hi_kind == 1 ? ']' : ')');
    } else if (s->lo_kind) snprintf(buf, cap, "%s %s", s->lo_kind == 1 ? ">=" : ">", lo);
    else if (s->hi_kind) snprintf(buf, cap, "%s %s", s->hi_kind == 1 ? "<=" : "<", hi);
    else buf[0] = 0;
}

/* The default --help shows: ARG_DEFAULT text, else the current value; "" when there is none
 * (required flags, unset strings, flags that are off). */
static void default_text(const arg_spec *s, char *buf, size_t cap)
{
    buf[0] = 0;
    if (s->required) return;
    if (s->def) {
        snprintf(buf, cap, "%s", s->def);
        return;
    }
    switch (s->kind) {
    case ARG_STR: {
        const char *v = *(const char *const *)s->dst;
        if (v) snprintf(buf, cap, "%s", v[0] ? v : "\"\"");
        break;
    }
    case ARG_INT: snprintf(buf, cap, "%d", *(const int *)s->dst); break;
    case ARG_I64: {
        long long v = (long long)*(const int64_t *)s->dst;
        if (v && v % 1000000000 == 0) snprintf(buf, cap, "%lldG", v / 1000000000);
        else if (v && v % 1000000 == 0) snprintf(buf, cap, "%lldM", v / 1000000);
        else snprintf(buf, cap, "%lld", v);
        break;
    }
    case ARG_FLOAT: snprintf(buf, cap, "%g", *(const double *)s->dst); break;
    case ARG_FLAG:
        if (*(const int *)s->dst) snprintf(buf, cap, "on");
        break;
    }
}

/* The facts in parentheses after a flag's help: "(required)", "(>= 1, default: 8)". */
static void facts_text(const arg_spec *spec, const arg_spec *s, char *buf, size_t cap)
{
    char r[96], d[160];
    int alias = 0; /* a second spelling: the first one carries the facts */
    for (const arg_spec *t = spec; t < s; t++)
        if (t->dst == s->dst) alias = 1;
    range_text(s, r, sizeof r);
    if (alias) d[0] = 0;
    else default_text(s, d, sizeof d);
    const char *parts[3] = {s->required ? "required" : "", r, d};
    size_t o = 0;
    buf[0] = 0;
    for (int k = 0; k < 3; k++) {
        if (!parts[k][0] || o >= cap) continue;
        o += (size_t)snprintf(buf + o, cap - o, "%s%s%s", o ? ", " : "(", k == 2 ? "default: " : "",
                              parts[k]);
    }
    if (o && o < cap) snprintf(buf + o, cap - o, ")");
}

static const char *meta_of(const arg_spec *s)
{
    if (s->choices) return s->choices;
    return s->kind == ARG_FLAG ? "" : s->kind == ARG_STR ? "STR" : s->kind == ARG_FLOAT ? "X" : "N";
}

static void help_roff_print(const char *usage, const arg_spec *spec)
{
    printf(".PP\n");
    args_roff_text(usage);
    printf("\n");
    for (const arg_spec *s = spec; s && s->name; s++) {
        char facts[400];
        facts_text(spec, s, facts, sizeof facts);
        printf(".TP\n\\fB");
        args_roff_text(s->name);
        printf("\\fR");
        if (s->kind != ARG_FLAG) {
            printf(" \\fI");
            args_roff_text(meta_of(s));
            printf("\\fR");
        }
        printf("\n");
        args_roff_text(s->help ? s->help : "");
        if (facts[0]) {
            printf("%s", s->help && s->help[0] ? " " : "");
            args_roff_text(facts);
        }
        printf("\n");
    }
}

void args_help(const char *cmd, const arg_spec *spec)
{
    if (!dist_is_root()) return; /* once under mpirun, not once per rank */
    const char *u = cli_usage_of(cmd);
    if (help_roff) {
        help_roff_print(u ? u : cmd, spec);
        return;
    }
    printf("usage: %s\n", u ? u : cmd);
    if (spec && spec[0].name) printf("\noptions:\n");
    for (const arg_spec *s = spec; s && s->name; s++) {
        const char *meta = meta_of(s);
        char left[96], facts[400];
        snprintf(left, sizeof left, "%s%s%s", s->name, meta[0] ? " " : "", meta);
        facts_text(spec, s, facts, sizeof facts);
        const char *h = s->help ? s->help : "";
        if (strlen(left) > 22) printf("  %s\n  %-22s", left, ""); /* long choices: own line */
        else printf("  %-22s", left);
        printf(" %s%s%s\n", h, h[0] && facts[0] ? " " : "", facts);
    }
}

/* ---- parsing --------------------------------------------------------------------------- */

/* The declared bound of a number, or 0. */
static int check_range(const char *cmd, const arg_spec *s, double x, const char *v)
{
    int lo_bad = s->lo_kind == 1 ? !(x >= s->lo) : s->lo_kind == 2 ? !(x > s->lo) : 0;
    int hi_bad = s->hi_kind == 1 ? !(x <= s->hi) : s->hi_kind == 2 ? !(x < s->hi) : 0;
    if (!lo_bad && !hi_bad) return 0;
    char r[96];
    range_text(s, r, sizeof r);
    return cli_usage_error(cmd, "%s must be %s, got %s", s->name, r, v);
}

/* Parse (and check) one value; write it to s->dst only when apply is set. */
static int parse_value(const char *cmd, const arg_spec *s, const char *v, int apply)
{
    char *end;
    errno = 0;
    switch (s->kind) {
    case ARG_STR:
        if (s->choices) {
            size_t n = strlen(v);
            const char *c = s->choices;
            int found = 0;
            while (*c && !found) {
                size_t k = strcspn(c, "|");
                found = k == n && !strncmp(c, v, n);
                c += k + (c[k] == '|');
            }
            if (!found)
                return cli_usage_error(cmd, "%s must be one of %s, got '%s'", s->name, s->choices, v);
        }
        if (apply) *(const char **)s->dst = v;
        return 0;
    case ARG_INT: {
        /* strtol skips leading blanks, which the other number flags refuse (buf_read_double) */
        if (isspace((unsigned char)v[0]))
            return cli_usage_error(cmd, "%s expects an integer, got '%s'", s->name, v);
        long x = strtol(v, &end, 10);
        if (end != v && !*end && (errno == ERANGE || x < -2147483647L || x > 2147483647L))
            return cli_usage_error(cmd, "%s: %s is out of range (at most 2147483647)", s->name, v);
        if (end == v || *end || errno)
            return cli_usage_error(cmd, "%s expects an integer, got '%s'", s->name, v);
        if (check_range(cmd, s, (double)x, v)) return 2;
        if (apply) *(int *)s->dst = (int)x;
        return 0;
    }
    case ARG_I64: {
        if (isspace((unsigned char)v[0]))
            return cli_usage_error(cmd, "%s expects an integer, got '%s'", s->name, v);
        /* a plain integer exactly (strtod would round those above 2^53: a seed would change) */
        long long li = strtoll(v, &end, 10);
        if (end != v && !*end) {
            if (errno == ERANGE)
                return cli_usage_error(cmd, "%s: %s is out of range (at most %lld)", s->name, v,
                                       (long long)INT64_MAX);
            if (check_range(cmd, s, (double)li, v)) return 2;
            if (apply) *(int64_t *)s->dst = (int64_t)li;
            return 0;
        }
        /* accept 1e6 / 10M / 2k style sizes as well as plain integers */
        double x = 0;
        size_t len = buf_read_double(v, 0, &x);
        const char *e = v + len;
        double mul = 1;
        if (len && (*e == 'k' || *e == 'K')) { mul = 1e3; e++; }
        else if (len && (*e == 'M' || *e == 'm')) { mul = 1e6; e++; }
        else if (len && (*e == 'G' || *e == 'g')) { mul = 1e9; e++; }
        x *= mul;
        if (len && !*e && isfinite(x) && x == floor(x) && fabs(x) > 9e18)
            return cli_usage_error(cmd, "%s: %s is out of range (at most %lld)", s->name, v,
                                   (long long)INT64_MAX);
        /* 1e-400 reads as 0 (an underflow): not the integer it spells (a non-zero mantissa) */
        size_t mant = strcspn(v, "eE");
        int nonzero = 0;
        for (size_t i = 0; i < mant; i++) nonzero |= v[i] >= '1' && v[i] <= '9';
        if (!len || *e || !isfinite(x) || x != floor(x) || fabs(x) > 9e18 || (x == 0 && nonzero))
            return cli_usage_error(cmd, "%s expects an integer, got '%s'", s->name, v);
        if (check_range(cmd, s, x, v)) return 2;
        if (apply) *(int64_t *)s->dst = (int64_t)x;
        return 0;
    }
    case ARG_FLOAT: {
        double x = 0;
        size_t len = buf_read_double(v, 0, &x); /* an underflow (1e-310) reads as the nearest double */
        if (!len || v[len])
            return cli_usage_error(cmd, "%s expects a finite number, got '%s'", s->name, v);
        if (check_range(cmd, s, x, v)) return 2;
        if (apply) *(double *)s->dst = x;
        return 0;
    }
    case ARG_FLAG:
        break;
    }
    return cli_usage_error(cmd, "%s takes no value", s->name);
}

#define MAX_SPECS 128

/* One walk over argv. apply = 0 checks everything (and answers --help) without writing;
 * apply = 1 writes the values. seen[k] is set for spec entries that were given. */
static int walk(const char *cmd, int argc, char **argv, const arg_spec *spec, const char **pos,
                int max_pos, int *npos, unsigned char *seen, int apply)
{
    int np = 0, only_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_pos && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
            args_help(cmd, spec);
            return -1;
        }
        if (!only_pos && !strcmp(a, "--")) { only_pos = 1; continue; }
        /* no option name holds white space: "-- a comment\nSELECT ..." is SQL, not a flag (it was
           "unknown option", an audit); so are negative numbers */
        size_t name_len = strcspn(a, "=");
        int spaced = strcspn(a, " \t\n\r\f\v") < name_len;
        if (only_pos || a[0] != '-' || a[1] == 0 || (a[1] >= '0' && a[1] <= '9') || spaced) {
            if (np >= max_pos)
                return cli_usage_error(cmd, "unexpected argument '%s'", a);
            pos[np++] = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        const arg_spec *s = NULL;
        int negate = 0;
        for (const arg_spec *t = spec; t && t->name; t++) {
            if (strlen(t->name) == nl && !strncmp(t->name, a, nl)) { s = t; break; }
            if (t->kind == ARG_FLAG && !strncmp(a, "--no-", 5) && strlen(t->name) == nl - 3 &&
                !strncmp(t->name + 2, a + 5, nl - 5)) { s = t; negate = 1; break; }
        }
        if (!s) return cli_usage_error(cmd, "unknown option '%.*s'", (int)nl, a);
        seen[s - spec] = 1;
        if (s->kind == ARG_FLAG) {
            if (eq) return cli_usage_error(cmd, "%s takes no value", s->name);
            if (apply) *(int *)s->dst = !negate;
            continue;
        }
        const char *v;
        if (eq) v = eq + 1;
        else if (i + 1 < argc) v = argv[++i];
        else return cli_usage_error(cmd, "%s needs a value", s->name);
        int rc = parse_value(cmd, s, v, apply);
        if (rc) return rc;
    }
    if (npos) *npos = np;
    return 0;
}

int args_parse(const char *cmd, int argc, char **argv, const arg_spec *spec, const char **pos,
               int max_pos, int *npos)
{
    unsigned char seen[MAX_SPECS] = {0};
    int n = 0;
    while (spec && spec[n].name) n++;
    if (n > MAX_SPECS) return cli_usage_error(cmd, "internal: more than %d flags", MAX_SPECS);
    int rc = walk(cmd, argc, argv, spec, pos, max_pos, npos, seen, 0);
    if (rc) return rc;
    for (int k = 0; k < n; k++) {
        if (!spec[k].required) continue;
        int given = 0;
        for (int t = 0; t < n && !given; t++) given = seen[t] && spec[t].dst == spec[k].dst;
        if (!given) return cli_usage_error(cmd, "%s is required", spec[k].name);
    }
    return walk(cmd, argc, argv, spec, pos, max_pos, npos, seen, 1);
}

int args_int_list(const char *s, int **out, int *n)
{
    int cap = 16, cnt = 0;
    int *v = mem_alloc(sizeof(int) * (size_t)cap);
    if (!v) return err_set(ERR_NOMEM, "out of memory");
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        /* digits only: strtol's leading blanks and '+' let " 5", "1, 2" and "+1" through where
           the integer flags refuse them (an audit) */
        if (!isdigit((unsigned char)*p)) goto bad;
        long a = strtol(p, &end, 10), b;
        if (end == p || a < 0) goto bad;
        /* ids are ints: 4294967297 was cast to 1 (forward ran token 1), and LONG_MAX looped
           until memory ran out (an audit) */
        if (errno == ERANGE || a > INT_MAX) goto range;
        p = end;
        b = a;
        if (*p == '-') {
            errno = 0;
            if (!isdigit((unsigned char)p[1])) goto bad;
            b = strtol(p + 1, &end, 10);
            if (end == p + 1 || b < a) goto bad;
            if (errno == ERANGE || b > INT_MAX) goto range;
            p = end;
        }
        if (b - a >= 10000000 || cnt + (b - a + 1) > 10000000) goto bad;
        for (long x = a; x <= b; x++) {
            if (cnt == cap) {
                int *nv = mem_realloc(v, sizeof(int) * (size_t)(cap *= 2));
                if (!nv) { mem_free(v); return err_set(ERR_NOMEM, "out of memory"); }
                v = nv;
            }
            v[cnt++] = (int)x;
        }
        if (*p == ',' && p[1]) p++;
        else if (*p) goto bad; /* a trailing comma too ("5,") */
    }
    if (cnt == 0) goto bad;
    *out = v;
    *n = cnt;
    return OK;
bad:
    mem_free(v);
    return err_set(ERR_ARG, "bad list '%s' (want e.g. 0,5,7-9; at most 10M values)", s);
range:
    mem_free(v);
    return err_set(ERR_ARG, "bad list '%s': values must be in 0..%d", s, INT_MAX);
}

/* The float lists (superpose --sparsity, sweep's settings, pack --range) each parsed in their own
 * way: pack's sscanf took " 89, 91", hex and nan, superpose refused a sign (a review). */
int args_float_list(const char *s, double *v, int max, int *n)
{
    int k = 0;
    for (const char *p = s; *p;) {
        double x = 0;
        size_t len = buf_read_double(p, 0, &x);
        if (!len || k == max) goto bad;
        v[k++] = x;
        p += len;
        if (*p == ',' && p[1]) p++;
        else if (*p) goto bad;
    }
    if (k) {
        *n = k;
        return OK;
    }
bad:
    return err_set(ERR_ARG, "bad list '%s' (want numbers a,b,... with no blanks; at most %d)", s, max);
}
