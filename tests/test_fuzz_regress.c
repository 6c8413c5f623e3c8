/* test_fuzz_regress - replay the fuzz targets' committed inputs in the normal and ASan builds.
 *
 * fuzz/corpus/<t>/   seed corpus: must run clean.
 * fuzz/regress/<t>/  inputs that once made a target fail and are fixed: must run clean.
 * fuzz/open/<t>/     known findings not fixed yet (reported to the module owner): replayed and
 *                    counted as skipped, with the outcome printed; move a file to regress/ once
 *                    its fix lands. Every input runs in a forked child so a crash is one failure.
 */
#define FUZZ_NO_MAIN
#include "fuzz/fuzz_brown.c"
#include "fuzz/fuzz_config.c"
#include "fuzz/fuzz_corpus.c"
#include "fuzz/fuzz_npy.c"
#include "fuzz/fuzz_saecfg.c"
#include "fuzz/fuzz_storedb.c"
#include "fuzz/fuzz_safetensors.c"
#include "fuzz/fuzz_serve.c"
#include "fuzz/fuzz_tokenizer.c"
#include "fuzz/fuzz_tokload.c"

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>

#include "tests/harness.h"

typedef int (*fuzz_fn)(const uint8_t *, size_t);

static const struct { const char *name; fuzz_fn fn; } targets[] = {
    {"brown", fuzz_brown},         {"config", fuzz_config},           {"corpus", fuzz_corpus},
    {"npy", fuzz_npy},             {"saecfg", fuzz_saecfg},           {"safetensors", fuzz_safetensors},
    {"serve", fuzz_serve},         {"tokenizer", fuzz_tokenizer},     {"tokload", fuzz_tokload},
    {"storedb", fuzz_storedb},
};

/* Run fn on the file's bytes in a child killed after secs seconds (a hang is a failure);
 * returns the wait status (0 = clean). */
static int replay(fuzz_fn fn, const char *path, unsigned secs)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(secs);
        fn(buf, got);
        free(buf);
        exit(0); /* atexit cleanups of the targets run (scratch model files) */
    }
    free(buf);
    int st = -1;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
    return st;
}

static int replay_dir(const char *tname, fuzz_fn fn, const char *kind)
{
    char dir[256];
    snprintf(dir, sizeof dir, "fuzz/%s/%s", kind, tname);
    DIR *d = opendir(dir);
    if (!d) return 0;
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        /* Open findings may be slow under ASan (a multi-GB allocation): give them 3 s. */
        int st = replay(fn, path, strcmp(kind, "open") ? 60 : 3);
        count++;
        if (!strcmp(kind, "open")) {
            char why[700];
            snprintf(why, sizeof why, "open finding %s: %s", path,
                     st == 0 ? "runs clean in this build (some findings show only under sanitizers or make fuzz limits)"
                     : WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM ? "still fails (timed out)"
                                                                 : "still fails (see docs/reliability.md)");
            SKIP(why);
        } else {
            CHECK(st == 0, "%s: target %s failed on it (wait status %d)", path, tname, st);
        }
    }
    closedir(d);
    return count;
}

int main(void)
{
    (void)fuzz_tmpdir(); /* one scratch dir, made before forking, shared by the children */
    tokenizer_load();    /* the GPT-2 vocabulary once, not once per child */
    for (size_t i = 0; i < sizeof targets / sizeof *targets; i++) {
        int seeds = replay_dir(targets[i].name, targets[i].fn, "corpus");
        CHECK(seeds > 0, "no seed corpus in fuzz/corpus/%s", targets[i].name);
        replay_dir(targets[i].name, targets[i].fn, "regress");
        replay_dir(targets[i].name, targets[i].fn, "open");
    }
    return harness_report("test_fuzz_regress");
}
