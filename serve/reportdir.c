/* reportdir.c - the per-feature dashboards of a `saelite report` directory (serve --report DIR;
 * serve_internal.h).
 *
 * At open, DIR is listed once: an entry counts when its name is feature_N.png (N decimal), it is
 * a regular file (not a symlink) of at most SRV_PNG_MAX bytes, and its PNG text chunks (read by
 * reports/, the one libpng user, without decoding pixels) say Software "saelite", feature N, and
 * the dictionary's name and hook, which must be one of the database's ana_dicts: the analysis
 * the PNG records (dict-id, split) when it does, else the only analysis of that name and hook
 * (two analyses of one SAE, val and all splits, once shared the newer's dashboards). Only those
 * (dictionary, feature) pairs are ever served; a request names a pair, never a file, and the
 * file is reopened relative to DIR's descriptor with O_NOFOLLOW and checked again (regular,
 * size, PNG signature). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/mem.h"
#include "reports/report.h"
#include "serve/serve_internal.h"

typedef struct {
    int64_t dict, feature;
} dash;

struct srv_report {
    int dirfd;
    char dir[1024];
    dash *d;
    int n, cap;
};

static int dash_cmp(const void *a, const void *b)
{
    const dash *x = a, *y = b;
    return x->dict != y->dict ? (x->dict < y->dict ? -1 : 1)
         : x->feature != y->feature ? (x->feature < y->feature ? -1 : 1) : 0;
}

/* "feature_N.png" with N a plain decimal (no sign, no leading zero but "0"): 1 and *f. */
static int dash_name(const char *s, int64_t *f)
{
    if (strncmp(s, "feature_", 8)) return 0;
    const char *p = s + 8, *q = p;
    while (*q >= '0' && *q <= '9') q++;
    if (q == p || q - p > 9 || (*p == '0' && q - p > 1) || strcmp(q, ".png")) return 0;
    *f = strtoll(p, NULL, 10);
    return 1;
}

int srv_report_open(srv_report **out, const char *dir, store_srv *st, int *n_found)
{
    *out = NULL;
    *n_found = 0;
    srv_report *r = mem_calloc(1, sizeof *r);
    if (!r) return err_set(ERR_NOMEM, "out of memory");
    snprintf(r->dir, sizeof r->dir, "%s", dir);
    r->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (r->dirfd < 0) {
        int e = errno;
        mem_free(r);
        return err_set(ERR_IO, "--report %s: %s", dir, strerror(e));
    }
    int dfd = dup(r->dirfd);
    DIR *dp = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!dp) {
        if (dfd >= 0) close(dfd);
        srv_report_close(r);
        return err_set(ERR_IO, "--report %s: cannot list: %s", dir, strerror(errno));
    }
    int rc = OK;
    struct dirent *e;
    while (!rc && (e = readdir(dp))) {
        int64_t f, dict = -1;
        struct stat sb;
        if (!dash_name(e->d_name, &f) || fstatat(r->dirfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) ||
            !S_ISREG(sb.st_mode) || sb.st_size > SRV_PNG_MAX)
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        rep_image img;
        if (rep_png_read_meta(path, &img)) continue; /* not a PNG: not the report's */
        const char *sw = rep_image_meta(&img, "Software"), *fm = rep_image_meta(&img, "feature"),
                   *sae = rep_image_meta(&img, "sae"), *hook = rep_image_meta(&img, "hook"),
                   *did = rep_image_meta(&img, "dict-id"), *split = rep_image_meta(&img, "split"),
                   *ntok = rep_image_meta(&img, "dict-tokens"), *nact = rep_image_meta(&img, "n-active");
        char fs[24];
        snprintf(fs, sizeof fs, "%lld", (long long)f);
        int64_t id = -1, tok = -1, act = -1;
        if (did && !srv_parse_int(did, 0, INT64_MAX, &id)) sae = NULL; /* a bad id: not ours */
        if ((ntok && !srv_parse_int(ntok, 0, INT64_MAX, &tok)) || (nact && !srv_parse_int(nact, 0, INT64_MAX, &act)))
            sae = NULL;
        if (sw && !strcmp(sw, "saelite") && fm && !strcmp(fm, fs) && sae && hook) {
            store_val p[] = {{.type = STORE_Q_TEXT, .s = sae, .n = strlen(sae)},
                             {.type = STORE_Q_TEXT, .s = hook, .n = strlen(hook)},
                             {.type = STORE_Q_INT, .i = id},
                             split ? (store_val){.type = STORE_Q_TEXT, .s = split, .n = strlen(split)}
                                   : (store_val){.type = STORE_Q_NULL},
                             ntok ? (store_val){.type = STORE_Q_INT, .i = tok} : (store_val){.type = STORE_Q_NULL},
                             {.type = STORE_Q_INT, .i = f},
                             nact ? (store_val){.type = STORE_Q_INT, .i = act} : (store_val){.type = STORE_Q_NULL}};
            rc = store_srv_query(st, STORE_SRV_DICT_BY_NAME, p, 7, srv_int_cb, &dict);
        }
        rep_image_free(&img);
        if (rc || dict < 0) continue;
        if (r->n == r->cap) {
            int nc = r->cap ? 2 * r->cap : 64;
            dash *nd = mem_realloc(r->d, (size_t)nc * sizeof *nd);
            if (!nd) {
                rc = err_set(ERR_NOMEM, "out of memory");
                break;
            }
            r->d = nd;
            r->cap = nc;
        }
        r->d[r->n++] = (dash){dict, f};
    }
    closedir(dp);
    if (rc) {
        srv_report_close(r);
        return rc;
    }
    if (r->n) qsort(r->d, (size_t)r->n, sizeof *r->d, dash_cmp);
    *n_found = r->n;
    *out = r;
    return OK;
}

void srv_report_close(srv_report *r)
{
    if (!r) return;
    if (r->dirfd >= 0) close(r->dirfd);
    mem_free(r->d);
    mem_free(r);
}

int srv_report_has(const srv_report *r, int64_t dict, int64_t feature)
{
    dash k = {dict, feature};
    return r && r->n && bsearch(&k, r->d, (size_t)r->n, sizeof *r->d, dash_cmp) != NULL;
}

int srv_report_read(const srv_report *r, int64_t dict, int64_t feature, char **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    if (!srv_report_has(r, dict, feature))
        return err_set(ERR_NOTFOUND, "no dashboard of feature %lld of dictionary %lld in the "
                       "report directory", (long long)feature, (long long)dict);
    char name[48];
    snprintf(name, sizeof name, "feature_%lld.png", (long long)feature);
    int fd = openat(r->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_size > SRV_PNG_MAX ||
        sb.st_size < 8) {
        if (fd >= 0) close(fd);
        return err_set(ERR_NOTFOUND, "%s/%s is gone or no longer a dashboard", r->dir, name);
    }
    char *b = mem_alloc((size_t)sb.st_size + 1);
    size_t got = 0;
    while (b && got < (size_t)sb.st_size) {
        ssize_t k = read(fd, b + got, (size_t)sb.st_size - got);
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd);
    if (!b) return err_set(ERR_NOMEM, "out of memory");
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (got != (size_t)sb.st_size || memcmp(b, sig, 8)) {
        mem_free(b);
        return err_set(ERR_NOTFOUND, "%s/%s changed since serve started", r->dir, name);
    }
    *data = b;
    *len = got;
    return OK;
}
