/* fuzz.h - shared helpers for the libFuzzer targets in fuzz/ and their regression replay.
 *
 * Each fuzz/fuzz_<target>.c defines `int fuzz_<target>(const uint8_t *data, size_t n)` and, unless
 * FUZZ_NO_MAIN is defined, the libFuzzer entry point calling it. tests/test_fuzz_regress.c
 * defines FUZZ_NO_MAIN, includes every target and replays the committed seed corpora and crash
 * inputs (fuzz/corpus/<target>/, fuzz/regress/<target>/) in the normal and the ASan test builds.
 * A target returns 0; it calls fuzz_fail() (abort) when an invariant of the code under test is
 * broken (a round trip differs, an error without a message), so libFuzzer records the input.
 * Readers that take a path get the bytes through a memfd ("/proc/self/fd/N"): no disk traffic.
 */
#ifndef SAELITE_FUZZ_H
#define SAELITE_FUZZ_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"

#define fuzz_fail(...)                                                                        \
    do {                                                                                      \
        fprintf(stderr, "fuzz invariant broken at %s:%d: ", __FILE__, __LINE__);             \
        fprintf(stderr, __VA_ARGS__);                                                         \
        fprintf(stderr, "\n");                                                                \
        abort();                                                                              \
    } while (0)

/* FUZZ_IGNORE="tok1,tok2": invariants a long fuzz run should stop tripping over while a known
 * finding is open (fuzz/run.sh sets it; see docs/reliability.md). Unset in the regression replay. */
static inline int fuzz_ignored(const char *token)
{
    const char *e = getenv("FUZZ_IGNORE");
    return e && strstr(e, token) != NULL;
}

/* An error must come with a one-line message (naming the problem). */
static inline void fuzz_check_err(int rc, const char *what)
{
    if (rc == OK) return;
    const char *m = err_msg();
    if (!m || !*m) fuzz_fail("%s failed (code %d) without a message", what, rc);
    if (strchr(m, '\n') && !fuzz_ignored("msg-newline")) fuzz_fail("%s: message spans lines: %s", what, m);
}

/* Put the bytes in an anonymous memory file; *path receives "/proc/self/fd/N". -1 on failure. */
static inline int fuzz_memfd(const uint8_t *data, size_t n, char path[64])
{
    int fd = memfd_create("fuzz", 0);
    if (fd < 0) { perror("memfd_create"); abort(); }
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, data + off, n - off);
        if (w <= 0) { perror("write memfd"); abort(); }
        off += (size_t)w;
    }
    snprintf(path, 64, "/proc/self/fd/%d", fd);
    return fd;
}

static char fuzz_dir[128], fuzz_dir_copy[128];
static void fuzz_rmdir(void) { rmdir(fuzz_dir); } /* targets unlink what they write */

/* The scratch path is kept twice, in separate globals: if a stray write changes one (seen once
 * in a long safetensors run: the path lost a byte), fuzz_guard() reports it at the end of the
 * input that did it instead of an unrelated failure later. */
static inline void fuzz_guard(void)
{
    if (strcmp(fuzz_dir, fuzz_dir_copy))
        fuzz_fail("memory corruption: scratch path '%s' became '%s'", fuzz_dir_copy, fuzz_dir);
}

/* A private scratch directory for targets that must write real files (atomic renames); removed
 * at exit. */
static inline const char *fuzz_tmpdir(void)
{
    if (!fuzz_dir[0]) {
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fuzz_dir, sizeof fuzz_dir, "%s/saelite-fuzz-%d", base, (int)getpid());
        memcpy(fuzz_dir_copy, fuzz_dir, sizeof fuzz_dir);
        atexit(fuzz_rmdir);
    }
    fuzz_guard();
    /* (Re)made on every call: a forked replay child's exit may have removed it. */
    if (mkdir(fuzz_dir, 0700) != 0 && access(fuzz_dir, W_OK) != 0) { perror(fuzz_dir); abort(); }
    return fuzz_dir;
}

#endif
