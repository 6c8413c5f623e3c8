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
 * What an output path may be (decided once, at open, for every writer above):
 *   missing or a regular file   atomic replace: temp file in the same directory, then rename.
 *   a symlink                   followed (the whole chain) to a regular file, whose final path
 *                               is replaced atomically in the target's own directory; the link
 *                               stays a link. A dangling link is refused (as GNU cp does): we
 *                               do not create files wherever a link points.
 *   a character device or FIFO  written through directly (no temp file, no rename, no fsync):
 *                               /dev/null and pipes work, /dev/full reports ENOSPC as a write
 *                               failure at write or commit. Opening a FIFO blocks until it has a
 *                               reader. abort cannot take back what a device already received.
 *   anything else               (a directory, block device, socket, also through a symlink)
 *                               refused at open with ERR_IO naming the path and its type.
 *
 * Paths: path_join and path_fmt fill a caller's buffer and return ERR_ARG (message naming the
 * path) when it does not fit, never a silently truncated path. file_mkdir_p is `mkdir -p`.
 * No global state; thread-safe apart from the one-writer-per-path rule.
 */
#ifndef SAELITE_FILEIO_H
#define SAELITE_FILEIO_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int file_write_atomic(const char *path, const void *data, size_t n);

/* A file being written: write to f between open and commit/abort. A zeroed struct is closed
 * (abort on it does nothing). */
typedef struct {
    FILE *f;    /* the temp file, opened "wb" */
    int sync;   /* set to 1 after open to fsync before the rename (durable checkpoints) */
    char *path; /* owned: the path as given, then the temp path after its NUL */
    char *tmp;  /* TARGET.tmp.PID (TARGET: path, or the file a symlink resolves to); for a
                 * direct write the path itself */
    char *real; /* owned: the resolved target of a symlink, else NULL */
    int direct; /* 1: a device or FIFO written through (no temp file) */
} file_atomic;

/* Create TARGET.tmp.PID, or open a device/FIFO directly (the rule above). ERR_IO (naming the
 * path as given, and why) or ERR_NOMEM; *a is then closed. */
int file_atomic_open(file_atomic *a, const char *path);
/* file_atomic_open for a file that is the program's own (a checkpoint beside a database): always
 * a new temp file beside path (O_EXCL, O_NOFOLLOW) and a rename over path itself, whatever is
 * there: a symlink, FIFO or device at path is replaced, never followed or written through (a
 * link there made analyze overwrite the file it pointed to, a FIFO hung it: an audit); a
 * directory there fails at the commit. */
int file_atomic_open_plain(file_atomic *a, const char *path);
/* The reading side of such a file: *f opened for reading and *size its bytes when path is a
 * regular file; *f NULL (OK) when there is none; ERR_IO naming the path for anything else there (a
 * symbolic link, FIFO, device, directory: never followed or waited on) or a failed open. */
int file_open_plain_read(const char *path, FILE **f, int64_t *size);
/* Finish: a write error on f, a failed flush/fsync/close or rename gives ERR_IO naming the path
 * (the temp file is removed). *a is closed afterwards either way. */
int file_atomic_commit(file_atomic *a);
/* Drop the temp file (for error paths; safe on a closed or zeroed struct). */
void file_atomic_abort(file_atomic *a);

/* Remove PATH.tmp.PID left by writers of path whose process is gone (an export or synth killed
 * mid-write left 0.1-1.9 GB for good, an audit): called once per output by the commands that
 * write single files, not by every atomic write (one directory scan each: a report's thousands of
 * pictures made that quadratic). A live writer's temp is left alone; on a filesystem shared by
 * several hosts (another PID namespace) a writer of the same path elsewhere looks dead. */
void file_remove_dead_temps(const char *path);
/* The same for file_atomic_open_plain's files: the temps beside path itself, whatever path is
 * (a link there is not followed); prefix: of every file whose name starts with path's (a
 * checkpoint's siblings: other ranks', other world sizes', its .effects). */
void file_remove_dead_temps_plain(const char *path, int prefix);

/* Several output files of one command, all or none (attribute's --csv --npy --png: a failing
 * PNG left the new CSV and .npy, an audit). Each regular-file output is written under a staging
 * name beside its target (TARGET.tmp.PID: a later write of TARGET removes it if this process
 * died) and renamed into place only once all were written; a device or FIFO is written directly.
 * file_group_add returns the path to write (NULL for NULL) and removes the target's dead temps;
 * file_group_commit renames them all (ERR_IO naming the path: a rename that fails, which the
 * staging beside the target makes unlikely, leaves the ones before it in place); file_group_abort removes the staged files and writes the targets'
 * names into the recorded message in place of the staging ones. */
enum { FILE_GROUP_MAX = 8 };
typedef struct {
    int n;
    char *target[FILE_GROUP_MAX], *staged[FILE_GROUP_MAX], *given[FILE_GROUP_MAX];
} file_group;
const char *file_group_add(file_group *g, const char *path);
int file_group_commit(file_group *g);
void file_group_abort(file_group *g);

/* Whether an atomic write to path could start, checked without writing anything: what
 * file_atomic_open refuses (a directory, a dangling link, ...) and a missing or unwritable
 * directory. ERR_IO naming path. For commands that write several files, so that a bad later
 * path fails before the first file is written. */
int file_check_writable(const char *path);
/* Whether dir can be the output directory of a command that makes it (file_mkdir_p) after its
 * work: a directory already, or missing with its nearest existing ancestor a writable
 * directory (a trailing '/' on a file is caught too; "" is refused). ERR_IO naming dir and the
 * ancestor. */
int file_check_creatable_dir(const char *dir);
/* 1 if a and b name the same file: the same device and inode where both exist (links
 * followed), else the same path once the existing part of each is resolved; 0 otherwise (also
 * when either is NULL). For refusing an output that would overwrite an input or another output. */
int file_same(const char *a, const char *b);
/* 1 if a names the SQLite database db or one of the files SQLite keeps beside it (db-wal,
 * db-shm, db-journal): writing over the write-ahead log loses committed transactions. */
int file_same_db(const char *a, const char *db);
/* *free_bytes = the bytes an unprivileged writer may still use on the filesystem holding path
 * (or its directory when path does not exist). ERR_IO naming the path. For refusing a write
 * that cannot fit before it starts (extract's plan, analyze --all-acts). */
int file_free_bytes(const char *path, int64_t *free_bytes);

/* Copy src to dst atomically (dst.tmp.PID, then rename). ERR_IO naming the failing file. */
int file_copy_atomic(const char *src, const char *dst);
/* *out = the whole regular file at path, NUL-terminated (mem_free it), if it holds at most max
 * bytes; *len (may be NULL) its length. ERR_NOTFOUND (missing) or ERR_IO naming the path and
 * why: unreadable, not a regular file, larger than max. *out is NULL on failure. */
int file_read_text(const char *path, size_t max, char **out, size_t *len);
/* *h = 64-bit FNV-1a (common/hash.h) of the file's bytes, continuing from *h (start at
 * HASH_FNV1A_INIT). ERR_NOTFOUND or ERR_IO naming the path. For the checksums the store records
 * of a model directory and of an SAE's weights. */
int file_fnv1a(const char *path, uint64_t *h);

/* A file of pieces with a trailing 64-bit FNV-1a of them all (the checkpoints of analyze's pass
 * and eval's read: caches, so a damaged one must be found and redone, never used).
 * file_sum_start(f): a stream over f (NULL: bad from the start); file_sum_put writes n bytes and
 * folds them in (bad = 1 on a write error); file_sum_get reads n bytes (zeros, and bad = 1, on a
 * short read or once bad); file_sum_put_end appends the sum; file_sum_get_end is 1 when the next
 * 8 bytes are the sum of everything read so far and the file ends right after them. No errors
 * are recorded: the caller reads bad and names the file. */
typedef struct {
    FILE *f;
    uint64_t h;
    int bad;
} file_sum;
file_sum file_sum_start(FILE *f);
void file_sum_put(file_sum *s, const void *p, size_t n);
void file_sum_get(file_sum *s, void *p, size_t n);
void file_sum_put_end(file_sum *s);
int file_sum_get_end(file_sum *s);
/* file_open_plain_read as a file_sum to read (the checkpoints' loaders): NULL with s->f open, or
 * NULL with s->f NULL when there is no file; else why it cannot be used ("is not a regular file
 * (a link, FIFO or directory)", s bad). No error is recorded. */
const char *file_sum_open(const char *path, file_sum *s, int64_t *size);

/* 1 when pid_text is a process id (decimal digits, nothing after them) and that process is gone:
 * not this process, and no process of that id here, or only its zombie (a live writer's temp or
 * staging folder is left alone). */
int file_pid_gone(const char *pid_text);
/* Remove dir/NAME.tmp.PID for each of the n names: the leftovers of runs killed inside an atomic
 * write (the renamed files themselves are intact). Errors are ignored. */
void file_remove_temps(const char *dir, const char *const *names, size_t n);
/* The same for every NAME ending in one of the n endings (".png": a report's pictures, whose
 * names depend on the features drawn), but only where the writer PID is gone: two reports into
 * one directory run side by side (the second removed the first's temps, which then failed). */
void file_remove_temps_ending(const char *dir, const char *const *endings, size_t n);

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

/* A descriptor this process already holds on path's file (same device and inode, found in
 * /proc/self/fd), or -1. For hints only: the caller does not own it and never closes it (closing
 * any descriptor of a file drops every POSIX lock the process holds on it, SQLite's included). */
int file_find_open_fd(const char *path);
/* One writer per directory: takes flock(LOCK_EX | LOCK_NB) on dir/name (created, kept: an empty
 * file) and returns its descriptor in *fd, held until file_dir_unlock or the process ends (a
 * kill frees it). flock, not fcntl: independent of SQLite's POSIX locks. Only the file still at
 * dir/name counts (one its holder unlinked meanwhile is opened again), and a conflict is tried
 * again for about 0.1 s (file_dir_lock_held's look). ERR_BUSY naming the directory and `what`
 * when another process holds it; ERR_IO when it cannot be made. OK with *fd -1 where the
 * filesystem has no flock (ENOSYS, ENOLCK, EOPNOTSUPP, EINVAL): nothing is locked there. */
int file_dir_lock(const char *dir, const char *name, const char *what, int *fd);
void file_dir_unlock(int fd);
/* 1 when another process holds file_dir_lock's lock on dir/name now, 0 when it is free or the
 * file does not exist or cannot be opened. A reader's check: it takes a shared lock for an
 * instant (file_dir_lock tries again past it). */
int file_dir_lock_held(const char *dir, const char *name);
/* ERR_BUSY with file_dir_lock's message when file_dir_lock_held, else OK (a check before a run
 * reads what another run is writing). */
int file_dir_lock_refuse(const char *dir, const char *name, const char *what);
/* Starts writeback of fd's dirty pages without waiting for it (sync_file_range WRITE), so that a
 * later fsync finds them written; errors are ignored (a hint). No-op for fd < 0. */
void file_writeback_start(int fd);

#endif
