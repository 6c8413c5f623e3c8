/* fileio.h - file and path helpers shared by every module that writes files.
 *
 * Atomic writes: a file is written to PATH.tmp.PID and renamed over PATH only when it is
 * complete, so readers see either the old file or the whole new one. The temp name is fixed
 * (NAME.tmp.PID): file_remove_temps finds the leftovers of a killed run by it. One writer per
 * path per process (two threads writing the same path would share the temp name).
 *   file_write_atomic   n bytes from memory.
 *   file_atomic_*       a file written piecewise through a FILE *: open, write to a->f, then
 *                       commit (flush, optional fsync, close, rename) or abort (close, unlink).
 *   file_copy_atomic    a stream copy of src.
 * On failure the temp file is removed and ERR_IO, naming the file, is recorded with err_set.
 *
 * Paths: path_join and path_fmt fill a caller's buffer and return ERR_ARG (message naming the
 * path) when it does not fit, never a silently truncated path. file_mkdir_p is `mkdir -p`.
 * No global state; thread-safe apart from the one-writer-per-path rule.
 */
#ifndef SAELITE_FILEIO_H
#define SAELITE_FILEIO_H
#include <stddef.h>
#include <stdio.h>

int file_write_atomic(const char *path, const void *data, size_t n);

/* A file being written: write to f between open and commit/abort. A zeroed struct is closed
 * (abort on it does nothing). */
typedef struct {
    FILE *f;    /* the temp file, opened "wb" */
    int sync;   /* set to 1 after open to fsync before the rename (durable checkpoints) */
    char *path; /* owned: the final path, then the temp path after its NUL */
    char *tmp;
} file_atomic;

/* Create PATH.tmp.PID. ERR_IO (naming the temp file) or ERR_NOMEM; *a is then closed. */
int file_atomic_open(file_atomic *a, const char *path);
/* Finish: a write error on f, a failed flush/fsync/close or rename gives ERR_IO naming the path
 * (the temp file is removed). *a is closed afterwards either way. */
int file_atomic_commit(file_atomic *a);
/* Drop the temp file (for error paths; safe on a closed or zeroed struct). */
void file_atomic_abort(file_atomic *a);

/* Copy src to dst atomically (dst.tmp.PID, then rename). ERR_IO naming the failing file. */
int file_copy_atomic(const char *src, const char *dst);
/* Remove dir/NAME.tmp.* for each of the n names: the leftovers of runs killed inside an atomic
 * write (the renamed files themselves are intact). Errors are ignored. */
void file_remove_temps(const char *dir, const char *const *names, size_t n);

/* mkdir -p with mode 0777 (less umask); trailing slashes are ignored. ERR_IO naming the
 * component that could not be created, or the path when it exists but is not a directory;
 * ERR_ARG for an empty path. */
int file_mkdir_p(const char *dir);
/* The same, and created (capacity cap) receives the outermost directory this call created
 * ("" if none), so a caller that fails later can remove exactly what it added. A component
 * this call created is removed again when a deeper one fails. */
int file_mkdir_p_created(const char *dir, char *created, size_t cap);
/* Remove dir and its parents up to and including top (as file_mkdir_p_created reported it);
 * rmdir only removes empty directories, so nothing else can be lost. */
void file_rmdir_upto(const char *dir, const char *top);

/* out = "dir/name" (just name when dir is NULL or ""). ERR_ARG naming the path if it needs
 * more than cap bytes. */
int path_join(char *out, size_t cap, const char *dir, const char *name);
/* out = printf(fmt, ...), ERR_ARG naming the (cut) path if it needs more than cap bytes. */
int path_fmt(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
