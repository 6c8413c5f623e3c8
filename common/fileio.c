/* fileio.c - atomic writes, copies, mkdir -p and checked path building (see fileio.h). */
#include "common/fileio.h"

#include <dirent.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/hash.h"
#include "common/mem.h"

/* ---- paths -------------------------------------------------------------------------------- */

int path_fmt(char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    /* the message quotes the cut text, so format once more into a scratch copy on overflow */
    char head[256];
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(out, cap, fmt, ap);
    va_end(ap);
    int rc = OK;
    if (n < 0 || (size_t)n >= cap) {
        vsnprintf(head, sizeof head, fmt, ap2);
        if (cap) out[0] = 0;
        rc = err_set(ERR_ARG, "path too long (%d bytes, at most %zu): %.200s...", n,
                     cap ? cap - 1 : 0, head);
    }
    va_end(ap2);
    return rc;
}

int path_join(char *out, size_t cap, const char *dir, const char *name)
{
    if (!dir || !*dir) return path_fmt(out, cap, "%s", name);
    return path_fmt(out, cap, "%s/%s", dir, name);
}

/* ---- directories -------------------------------------------------------------------------- */

void file_rmdir_upto(const char *dir, const char *top)
{
    char *p = mem_strdup(dir);
    if (!p) return;
    size_t n = strlen(p), tn = strlen(top);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0;
    while (n >= tn) {
        if (rmdir(p) != 0) break;
        while (n > 0 && p[n - 1] != '/') n--;
        while (n > 1 && p[n - 1] == '/') n--;
        p[n] = 0;
    }
    mem_free(p);
}

int file_mkdir_p_created(const char *dir, char *created, size_t cap)
{
    if (created && cap) created[0] = 0;
    size_t n = dir ? strlen(dir) : 0;
    if (n == 0) return err_set(ERR_ARG, "directory '': empty path");
    char *p = mem_strdup(dir), *top = NULL;
    if (!p) return err_set(ERR_NOMEM, "%s: out of memory", dir);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0;
    int rc = OK;
    size_t last = 0; /* length of the deepest component this call created */
    for (size_t i = 1; i <= n && !rc; i++) {
        if (i < n && p[i] != '/') continue;
        char c = p[i];
        p[i] = 0;
        if (mkdir(p, 0777) == 0) {
            last = i;
            if (!top && !(top = mem_strdup(p))) rc = err_set(ERR_NOMEM, "%s: out of memory", dir);
        } else if (errno != EEXIST) {
            rc = err_set(ERR_IO, "%s: cannot create directory: %s", p, strerror(errno));
        }
        p[i] = c;
    }
    struct stat sb;
    if (!rc && (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        rc = err_set(ERR_IO, "%s: not a directory", dir);
    if (rc && top) {
        p[last] = 0;
        file_rmdir_upto(p, top);
    }
    else if (top && created && cap) snprintf(created, cap, "%s", top);
    mem_free(top);
    mem_free(p);
    return rc;
}

int file_mkdir_p(const char *dir) { return file_mkdir_p_created(dir, NULL, 0); }

/* ---- atomic writes ------------------------------------------------------------------------ */

static void atomic_clear(file_atomic *a)
{
    mem_free(a->path);
    mem_free(a->real);
    a->path = a->tmp = a->real = NULL;
    a->f = NULL;
    a->sync = 0;
    a->direct = 0;
}

/* What a write to path means (the rule in fileio.h): 0 atomic replace of *target (path itself,
 * or the regular file or missing name a symlink chain ends at), 1 write through (a character
 * device or FIFO), or an error naming path and the reason. *target is owned by the caller. */
static int atomic_target(const char *path, char **target, int *direct)
{
    *target = NULL;
    *direct = 0;
    /* "" passed the output checks ("." was its directory) and failed at the end, after the
       work: "forward --npy ''" said ": write failed", and attention's --npy '' failed at the
       rename, its PNG already in place (an audit) */
    if (!path[0]) return err_set(ERR_IO, "file '': empty path");
    struct stat lb, sb;
    if (lstat(path, &lb) != 0) {
        if (errno == ENOENT) return OK; /* a new file (a missing directory fails at create) */
        return err_set(ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    }
    const char *what = path;
    if (S_ISLNK(lb.st_mode)) {
        if (stat(path, &sb) != 0) {
            if (errno == ENOENT)
                return err_set(ERR_IO, "%s: symlink to a missing file; not writing through a "
                                       "dangling link (remove it or point it at a file)", path);
            return err_set(ERR_IO, "%s: cannot follow symlink: %s", path, strerror(errno));
        }
        if (S_ISREG(sb.st_mode)) {
            /* replace the final target in its own directory, so the link stays a link */
            if (!(*target = realpath(path, NULL)))
                return err_set(ERR_IO, "%s: cannot resolve symlink: %s", path, strerror(errno));
            return OK;
        }
    } else {
        sb = lb;
    }
    if (S_ISREG(sb.st_mode)) return OK;
    if (S_ISCHR(sb.st_mode) || S_ISFIFO(sb.st_mode)) {
        *direct = 1;
        return OK;
    }
    const char *kind = S_ISDIR(sb.st_mode)    ? "a directory"
                       : S_ISBLK(sb.st_mode)  ? "a block device"
                       : S_ISSOCK(sb.st_mode) ? "a socket"
                                              : "not a regular file";
    return err_set(ERR_IO, "%s: is %s%s; refusing to write over it", what, kind,
                   S_ISLNK(lb.st_mode) ? " (through a symlink)" : "");
}

/* The length of NAME when entry is NAME.tmp.PID (file_atomic_open's temporary name) or
 * NAME.tmp.PID.tmp.PID (a file group's staged name written through file_atomic_open: a SIGKILL in
 * that write left it, and no run removed it; an audit's init-model left 117 MB so), else 0. */
static size_t temp_base_len(const char *entry)
{
    const char *t = NULL;
    for (const char *p = strstr(entry, ".tmp."); p; p = strstr(p + 1, ".tmp.")) t = p;
    if (!t || !t[5] || strspn(t + 5, "0123456789") != strlen(t + 5)) return 0;
    size_t bl = (size_t)(t - entry), sl = strlen(t); /* sl: ".tmp.PID" */
    if (bl > sl && !memcmp(entry + bl - sl, t, sl)) bl -= sl; /* the same process's, nested */
    return bl;
}

/* TARGET.tmp.PID, this process's temporary name for target (file_atomic and file_group) */
static void temp_name(char *out, size_t cap, const char *target)
{
    snprintf(out, cap, "%s.tmp.%ld", target, (long)getpid());
}

int file_atomic_open(file_atomic *a, const char *path)
{
    memset(a, 0, sizeof *a);
    char *real = NULL;
    int direct = 0, rc = atomic_target(path, &real, &direct);
    if (rc) return rc;
    /* real comes from realpath (malloc); keep our own copy so mem_free owns it */
    if (real) {
        a->real = mem_strdup(real);
        free(real);
        if (!a->real) return err_set(ERR_NOMEM, "%s: out of memory", path);
    }
    const char *dst = a->real ? a->real : path;
    size_t pl = strlen(path), dl = strlen(dst), cap = pl + dl + 34;
    a->path = mem_alloc(cap);
    if (!a->path) {
        atomic_clear(a);
        return err_set(ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(a->path, path, pl + 1);
    a->tmp = a->path + pl + 1;
    a->direct = direct;
    if (direct) {
        /* a device or FIFO: no temp file, no rename; the "temp" name is the path itself */
        memcpy(a->tmp, path, pl + 1);
        a->f = fopen(path, "wb");
        if (!a->f) {
            rc = err_set(ERR_IO, "%s: cannot open for writing: %s", path, strerror(errno));
            atomic_clear(a);
            return rc;
        }
        return OK;
    }
    temp_name(a->tmp, cap - pl - 1, dst);
    a->f = fopen(a->tmp, "wb");
    if (!a->f) {
        rc = err_set(ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        atomic_clear(a);
        return rc;
    }
    return OK;
}

int file_atomic_open_plain(file_atomic *a, const char *path)
{
    memset(a, 0, sizeof *a);
    size_t pl = strlen(path), cap = 2 * pl + 34;
    a->path = mem_alloc(cap);
    if (!a->path) return err_set(ERR_NOMEM, "%s: out of memory", path);
    memcpy(a->path, path, pl + 1);
    a->tmp = a->path + pl + 1;
    temp_name(a->tmp, cap - pl - 1, path);
    /* a new file of our own: no link followed, nothing opened that was there (a stale temp of
       this PID is ours to drop) */
    unlink(a->tmp);
    int fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 || !(a->f = fdopen(fd, "wb"))) {
        int rc = err_set(ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(a->tmp);
        }
        atomic_clear(a);
        return rc;
    }
    return OK;
}

int file_open_plain_read(const char *path, FILE **f, int64_t *size)
{
    *f = NULL;
    *size = 0;
    /* O_NONBLOCK: a FIFO put there opens at once (and is refused below) instead of waiting for a
       writer; O_NOFOLLOW: a link is not the program's file */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return OK;
        return err_set(ERR_IO, "%s: cannot open: %s", path, errno == ELOOP ? "a symbolic link" : strerror(errno));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return err_set(ERR_IO, "%s: not a regular file", path);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl != -1) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    if (!(*f = fdopen(fd, "rb"))) {
        close(fd);
        return err_set(ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    *size = (int64_t)sb.st_size;
    return OK;
}

/* The directory an atomic write to dst creates its temp file in. */
static void dir_of(char *out, size_t cap, const char *dst)
{
    const char *sl = strrchr(dst, '/');
    if (!sl) snprintf(out, cap, ".");
    else if (sl == dst) snprintf(out, cap, "/");
    else snprintf(out, cap, "%.*s", (int)(sl - dst), dst);
}

int file_check_writable(const char *path)
{
    char *real = NULL;
    int direct = 0, rc = atomic_target(path, &real, &direct);
    if (rc || direct) {
        free(real);
        return rc;
    }
    char dir[PATH_MAX];
    dir_of(dir, sizeof dir, real ? real : path);
    free(real);
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return err_set(ERR_IO, "%s: cannot create: directory %s: %s", path, dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return err_set(ERR_IO, "%s: cannot create: %s is not a directory", path, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return err_set(ERR_IO, "%s: cannot create: directory %s: %s", path, dir, strerror(errno));
    return OK;
}

int file_check_creatable_dir(const char *dir)
{
    /* "" took "." for its ancestor and passed: bpe-train -o '' trained, then file_mkdir_p said
       "empty path" (a review; file_check_writable's rule, 6f9da1d) */
    if (!dir[0]) return err_set(ERR_IO, "directory '': empty path");
    char up[PATH_MAX];
    if (snprintf(up, sizeof up, "%s", dir) >= (int)sizeof up) return err_set(ERR_IO, "%.80s...: path too long", dir);
    struct stat sb;
    for (int self = 1;; self = 0) {
        size_t n = strlen(up);
        while (n > 1 && up[n - 1] == '/') up[--n] = 0; /* "afile/" is afile itself */
        if (stat(up, &sb) == 0) {
            if (self) return S_ISDIR(sb.st_mode) ? OK : err_set(ERR_IO, "%s: not a directory", dir);
            break;
        }
        if (errno != ENOENT && errno != ENOTDIR)
            return err_set(ERR_IO, "%s: cannot be made: %s: %s", dir, up, strerror(errno));
        char parent[PATH_MAX];
        dir_of(parent, sizeof parent, up);
        if (!strcmp(parent, up)) return OK; /* "." or "/" missing: nothing to say ahead */
        memcpy(up, parent, strlen(parent) + 1);
    }
    if (!S_ISDIR(sb.st_mode)) return err_set(ERR_IO, "%s: cannot be made: %s is not a directory", dir, up);
    if (access(up, W_OK | X_OK) != 0)
        return err_set(ERR_IO, "%s: cannot be made: %s is not writable", dir, up);
    return OK;
}

/* path with its longest existing prefix resolved (realpath) and the rest appended as given;
 * NULL when even its directory cannot be resolved. mem_free the result. */
static char *resolve_existing(const char *path)
{
    char *r = realpath(path, NULL);
    if (r) {
        char *c = mem_strdup(r);
        free(r);
        return c;
    }
    char dir[PATH_MAX];
    dir_of(dir, sizeof dir, path);
    const char *sl = strrchr(path, '/'), *base = sl ? sl + 1 : path;
    if (!(r = realpath(dir, NULL))) return NULL;
    size_t n = strlen(r) + strlen(base) + 2;
    char *c = mem_alloc(n);
    if (c) snprintf(c, n, "%s/%s", r, base);
    free(r);
    return c;
}

int file_same(const char *a, const char *b)
{
    if (!a || !b || !*a || !*b) return 0;
    struct stat sa, sb;
    int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea != eb) return 0;
    if (!strcmp(a, b)) return 1;
    char *ra = resolve_existing(a), *rb = resolve_existing(b);
    int same = ra && rb && !strcmp(ra, rb);
    mem_free(ra);
    mem_free(rb);
    return same;
}

int file_same_db(const char *a, const char *db)
{
    if (file_same(a, db)) return 1;
    static const char *const side[] = {"-wal", "-shm", "-journal"};
    char p[4200];
    for (size_t i = 0; db && i < sizeof side / sizeof side[0]; i++)
        if ((size_t)snprintf(p, sizeof p, "%s%s", db, side[i]) < sizeof p && file_same(a, p)) return 1;
    return 0;
}

int file_atomic_commit(file_atomic *a)
{
    if (!a->f) return err_set(ERR_IO, "atomic write: file not open");
    int e = 0;
    if (ferror(a->f)) e = errno ? errno : EIO;
    if (fflush(a->f) != 0 && !e) e = errno;
    /* fsync of a device or FIFO means nothing (and fails with EINVAL on some) */
    if (a->sync && !a->direct && !e && fsync(fileno(a->f)) != 0) e = errno;
    if (fclose(a->f) != 0 && !e) e = errno;
    a->f = NULL;
    const char *dst = a->real ? a->real : a->path;
    if (!e && !a->direct && rename(a->tmp, dst) != 0) e = errno;
    int rc = OK;
    if (e) {
        if (!a->direct) unlink(a->tmp);
        rc = err_set(ERR_IO, "%s: write failed: %s", a->path, strerror(e));
    }
    atomic_clear(a);
    return rc;
}

void file_atomic_abort(file_atomic *a)
{
    if (a->f) {
        fclose(a->f);
        if (!a->direct) unlink(a->tmp);
    }
    atomic_clear(a);
}

int file_write_atomic(const char *path, const void *data, size_t n)
{
    file_atomic a;
    int rc = file_atomic_open(&a, path);
    if (rc) return rc;
    if (n && fwrite(data, 1, n, a.f) != n) {
        int e = errno;
        file_atomic_abort(&a);
        return err_set(ERR_IO, "%s: write failed: %s", path, strerror(e));
    }
    return file_atomic_commit(&a);
}

int file_copy_atomic(const char *src, const char *dst)
{
    FILE *in = fopen(src, "rb");
    if (!in) return err_set(ERR_IO, "%s: cannot open: %s", src, strerror(errno));
    file_atomic a;
    int rc = file_atomic_open(&a, dst);
    if (rc) {
        fclose(in);
        return rc;
    }
    char buf[1 << 16];
    size_t k;
    int bad = 0;
    while (!bad && (k = fread(buf, 1, sizeof buf, in)) > 0) bad = fwrite(buf, 1, k, a.f) != k;
    int rbad = ferror(in);
    fclose(in);
    if (rbad) {
        file_atomic_abort(&a);
        return err_set(ERR_IO, "%s: read error", src);
    }
    if (bad) {
        int e = errno;
        file_atomic_abort(&a);
        return err_set(ERR_IO, "%s: write failed: %s", dst, strerror(e));
    }
    return file_atomic_commit(&a);
}

int file_pid_gone(const char *pid_text)
{
    /* digits only, to the end: ".saelite-report.tmp.123abc" read as process 123, and a folder a
       user had named so was taken for a dead run's and emptied (an audit) */
    if (!isdigit((unsigned char)pid_text[0])) return 0;
    char *end = NULL;
    errno = 0;
    long pid = strtol(pid_text, &end, 10);
    if (*end || errno || pid <= 0) return 0;
    if (pid == (long)getpid()) return 0;
    if (kill((pid_t)pid, 0) != 0) return errno == ESRCH;
    /* a zombie writes nothing more: a run SIGKILLed with its parent (make's whole job) is one
       until init reaps it (about a second on a VM whose init reaps periodically), and a rerun
       started at once left its staging folder beside the finished report for good (an audit) */
    char sp[64], st[512];
    snprintf(sp, sizeof sp, "/proc/%ld/stat", pid);
    FILE *f = fopen(sp, "r");
    if (!f) return 0;
    size_t n = fread(st, 1, sizeof st - 1, f);
    fclose(f);
    st[n] = 0;
    const char *rp = strrchr(st, ')'); /* "pid (comm) S ...": comm may hold spaces or ')' */
    return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

/* by_ending: names[] are endings of NAME (".png") rather than whole names; dead_only: only the
 * temps of writers that are gone */
enum { MATCH_NAME, MATCH_ENDING, MATCH_PREFIX }; /* how remove_temps compares a temp's base */

static void remove_temps(const char *dir, const char *const *names, size_t n, int match,
                         int dead_only)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t bl = temp_base_len(e->d_name);
        int ours = 0;
        for (size_t i = 0; bl && i < n && !ours; i++) {
            size_t l = strlen(names[i]);
            ours = match == MATCH_ENDING ? l <= bl && !strncmp(e->d_name + bl - l, names[i], l)
                   : match == MATCH_PREFIX ? l <= bl && !strncmp(e->d_name, names[i], l)
                                           : l == bl && !strncmp(e->d_name, names[i], l);
        }
        if (ours && dead_only) ours = file_pid_gone(strrchr(e->d_name, '.') + 1); /* the last PID */
        char path[4096];
        if (ours && path_join(path, sizeof path, dir, e->d_name) == OK) unlink(path);
    }
    closedir(d);
}

void file_remove_temps(const char *dir, const char *const *names, size_t n)
{
    remove_temps(dir, names, n, MATCH_NAME, 0);
}

void file_remove_temps_ending(const char *dir, const char *const *endings, size_t n)
{
    remove_temps(dir, endings, n, MATCH_ENDING, 1);
}

void file_remove_dead_temps(const char *path)
{
    char *real = realpath(path, NULL); /* a symlink's temps are its file's (file_atomic's rule) */
    const char *dst = real ? real : path, *slash = strrchr(dst, '/');
    char dir[4096];
    dir_of(dir, sizeof dir, dst);
    const char *base = slash ? slash + 1 : dst;
    remove_temps(dir, &base, 1, MATCH_NAME, 1);
    free(real);
}

void file_remove_dead_temps_plain(const char *path, int prefix)
{
    const char *slash = strrchr(path, '/');
    char dir[4096];
    dir_of(dir, sizeof dir, path);
    const char *base = slash ? slash + 1 : path;
    remove_temps(dir, &base, 1, prefix ? MATCH_PREFIX : MATCH_NAME, 1);
}

/* the one wording of "another run holds dir's lock" (file_dir_lock, file_dir_lock_refuse) */
static int dir_busy(const char *dir, const char *name, const char *what)
{
    return err_set(ERR_BUSY, "%s: another %s is writing into this directory (it holds %s); wait for "
                   "it to end", dir, what, name);
}

int file_dir_lock(const char *dir, const char *name, const char *what, int *fd)
{
    *fd = -1;
    char path[4096];
    int rc = path_join(path, sizeof path, dir, name);
    if (rc) return rc;
    /* A conflict is tried again for about 0.1 s: file_dir_lock_held (report's look) takes a
       shared lock for an instant, and a run that came then was refused as if another ran. A lock
       counts only on the file still at path: a holder that fails removes the file it made while
       it holds it (sae_run.c), and a run that had opened it just before locked the unlinked file
       once it was gone, while the next run made a new one and locked that (two runs in one
       directory, both exit 0). */
    for (int tries = 0;; tries++) {
        /* O_NONBLOCK: a FIFO in the lock file's place must not hang the run */
        int d = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
        if (d < 0)
            return err_set(ERR_IO, "%s: cannot create the lock file: %s", path, strerror(errno));
        struct stat st;
        if (fstat(d, &st) != 0 || !S_ISREG(st.st_mode)) {
            close(d);
            return err_set(ERR_IO, "%s: the lock file is not a regular file", path);
        }
        if (flock(d, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            close(d);
            if (e == EWOULDBLOCK && tries < 50) {
                nanosleep(&(struct timespec){0, 2000000}, NULL);
                continue;
            }
            if (e == EWOULDBLOCK) return dir_busy(dir, name, what);
            /* a filesystem without flock (Lustre without -o flock, some FUSE and 9p mounts): run
               unlocked, as before the lock existed, rather than refuse to work there */
            if (e == ENOSYS || e == ENOLCK || e == EOPNOTSUPP || e == EINVAL) return OK;
            return err_set(ERR_IO, "%s: cannot lock: %s", path, strerror(e));
        }
        /* the file is still linked: a holder that failed unlinks it (and a new one may take its
           place), which leaves the file this descriptor locked with no links. The link count,
           not a comparison of fstat and lstat, which stacked filesystems need not make agree. */
        struct stat held;
        if (fstat(d, &held) == 0 && held.st_nlink > 0) {
            *fd = d;
            return OK;
        }
        close(d);
        if (tries >= 50)
            return err_set(ERR_IO, "%s: the lock file was removed or replaced each time it was "
                           "locked", path);
    }
}

void file_dir_unlock(int fd)
{
    if (fd >= 0) close(fd);
}

int file_dir_lock_held(const char *dir, const char *name)
{
    char path[4096];
    if (path_join(path, sizeof path, dir, name)) {
        err_clear();
        return 0;
    }
    int d = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK); /* a FIFO: no hang */
    if (d < 0) return 0;
    struct stat st;
    if (fstat(d, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(d);
        return 0;
    }
    int held = flock(d, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(d); /* drops the shared lock if it got one */
    return held;
}

int file_dir_lock_refuse(const char *dir, const char *name, const char *what)
{
    return file_dir_lock_held(dir, name) ? dir_busy(dir, name, what) : OK;
}

int file_find_open_fd(const char *path)
{
    struct stat want, got;
    if (stat(path, &want) != 0) return -1;
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int found = -1, self = dirfd(d);
    for (struct dirent *e; found < 0 && (e = readdir(d));) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (*end || end == e->d_name || fd < 0 || fd > INT_MAX || fd == self) continue;
        if (fstat((int)fd, &got) == 0 && S_ISREG(got.st_mode) && got.st_dev == want.st_dev &&
            got.st_ino == want.st_ino)
            found = (int)fd;
    }
    closedir(d);
    return found;
}

void file_writeback_start(int fd)
{
#ifdef SYNC_FILE_RANGE_WRITE
    if (fd >= 0) (void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
#else
    (void)fd;
#endif
}

int file_read_text(const char *path, size_t max, char **out, size_t *len)
{
    *out = NULL;
    if (len) *len = 0;
    /* O_NONBLOCK: a FIFO is refused below instead of waiting here for a writer */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return err_set(errno == ENOENT ? ERR_NOTFOUND : ERR_IO, "%s: cannot open: %s", path,
                       strerror(errno));
    struct stat st;
    int rc = OK;
    if (fstat(fd, &st) != 0) rc = err_set(ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if (S_ISDIR(st.st_mode))
        rc = err_set(ERR_IO, "%s: is a directory, not a regular file", path);
    else if (!S_ISREG(st.st_mode)) rc = err_set(ERR_IO, "%s: not a regular file", path);
    else if ((uint64_t)st.st_size > max)
        rc = err_set(ERR_IO, "%s: %lld bytes, more than the %zu this file may have", path,
                     (long long)st.st_size, max);
    char *buf = rc ? NULL : mem_alloc((size_t)st.st_size + 1);
    if (!rc && !buf) rc = err_set(ERR_NOMEM, "%s: out of memory", path);
    size_t n = 0;
    while (!rc && n < (size_t)st.st_size) { /* a file that shrinks while read ends early */
        ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) rc = err_set(ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        if (r <= 0) break;
        n += (size_t)r;
    }
    close(fd);
    if (rc) {
        mem_free(buf);
        return rc;
    }
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return OK;
}

int file_fnv1a(const char *path, uint64_t *h)
{
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(errno == ENOENT ? ERR_NOTFOUND : ERR_IO, "%s: cannot open: %s", path,
                           strerror(errno));
    enum { CH = 1 << 20 };
    unsigned char *buf = mem_alloc(CH);
    if (!buf) {
        fclose(f);
        return err_set(ERR_NOMEM, "out of memory");
    }
    size_t n;
    while ((n = fread(buf, 1, CH, f)) > 0) *h = hash_fnv1a(*h, buf, n);
    int bad = ferror(f);
    mem_free(buf);
    fclose(f);
    if (bad) return err_set(ERR_IO, "%s: read error", path);
    return OK;
}

/* ---- file_sum ---------------------------------------------------------------------------- */
file_sum file_sum_start(FILE *f) { return (file_sum){f, HASH_FNV1A_INIT, !f}; }

void file_sum_put(file_sum *s, const void *p, size_t n)
{
    s->h = hash_fnv1a(s->h, p, n);
    if (!s->bad && n && fwrite(p, 1, n, s->f) != n) s->bad = 1;
}

void file_sum_get(file_sum *s, void *p, size_t n)
{
    if (s->bad || (n && fread(p, 1, n, s->f) != n)) {
        s->bad = 1;
        memset(p, 0, n);
        return;
    }
    s->h = hash_fnv1a(s->h, p, n);
}

const char *file_sum_open(const char *path, file_sum *s, int64_t *size)
{
    FILE *f = NULL;
    int rc = file_open_plain_read(path, &f, size);
    *s = file_sum_start(f);
    if (!rc) return NULL;
    err_clear();
    return "is not a regular file (a link, FIFO or directory)";
}

void file_sum_put_end(file_sum *s)
{
    uint64_t h = s->h;
    file_sum_put(s, &h, sizeof h);
}

int file_sum_get_end(file_sum *s)
{
    uint64_t want = s->h, h;
    file_sum_get(s, &h, sizeof h);
    return !s->bad && h == want && fgetc(s->f) == EOF;
}

/* ---- file_group ------------------------------------------------------------------------------ */
static void group_drop(file_group *g)
{
    for (int i = 0; i < g->n; i++) {
        mem_free(g->target[i]);
        mem_free(g->staged[i]);
        mem_free(g->given[i]);
    }
    g->n = 0;
}

const char *file_group_add(file_group *g, const char *path)
{
    if (!path) return NULL;
    struct stat sb;
    if (g->n == FILE_GROUP_MAX || (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)))
        return path; /* a device or FIFO (or more files than the group holds): written directly */
    /* a symlink's file is replaced, not the link (file_atomic's rule); a dangling one is written
       through path, where file_atomic_open refuses it */
    char *real = NULL;
    if (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode) && !(real = realpath(path, NULL))) return path;
    const char *t = real ? real : path;
    char *target = mem_strdup(t), *given = mem_strdup(path), *staged = mem_alloc(strlen(t) + 32);
    free(real);
    if (!target || !given || !staged) {
        mem_free(target);
        mem_free(given);
        mem_free(staged);
        return path;
    }
    file_remove_dead_temps(target); /* a killed run's staged file of this target */
    temp_name(staged, strlen(t) + 32, target);
    g->target[g->n] = target;
    g->staged[g->n] = staged;
    g->given[g->n] = given;
    return g->staged[g->n++];
}

int file_group_commit(file_group *g)
{
    int rc = OK;
    for (int i = 0; i < g->n && !rc; i++)
        if (rename(g->staged[i], g->target[i]) != 0)
            rc = err_set(ERR_IO, "%s: cannot rename into place: %s", g->given[i], strerror(errno));
    if (rc) file_group_abort(g);
    else group_drop(g);
    return rc;
}

void file_group_abort(file_group *g)
{
    for (int i = 0; i < g->n; i++) {
        unlink(g->staged[i]);
        err_replace(g->staged[i], g->given[i]); /* the name the user gave, not the staging one */
    }
    group_drop(g);
}

int file_free_bytes(const char *path, int64_t *free_bytes)
{
    char dir[4096];
    struct statvfs v;
    const char *p = path;
    if (access(path, F_OK) != 0) {
        int rc = path_fmt(dir, sizeof dir, "%s", path);
        if (rc) return rc;
        char *slash = strrchr(dir, '/');
        if (!slash) snprintf(dir, sizeof dir, ".");
        else if (slash == dir) dir[1] = 0;
        else *slash = 0;
        p = dir;
    }
    if (statvfs(p, &v) != 0)
        return err_set(ERR_IO, "%s: cannot check free space: %s", p, strerror(errno));
    *free_bytes = (int64_t)v.f_bavail * (int64_t)v.f_frsize;
    return OK;
}
