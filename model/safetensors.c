/* safetensors.c - see safetensors.h. The header is parsed with cJSON; every offset and size is
 * checked with overflow-safe arithmetic before any tensor pointer is handed out. */
#include "model/safetensors.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/checked.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/half.h"
#include "common/json.h"
#include "common/mem.h"

#define ST_MAX_HEADER (100u << 20) /* the reference implementation's limit */

struct st_file {
    char *path;
    void *map;
    size_t map_len;
    const unsigned char *buf; /* byte buffer after the header */
    size_t buf_len;
    st_tensor *tensors;
    int count;
    const st_tensor **by_name; /* the tensors sorted by name: st_find, the duplicate check */
    cJSON *meta; /* "__metadata__" object (owned by root) */
    cJSON *root;
};

static const struct { const char *name; st_dtype d; int size; } st_types[] = {
    {"F32", ST_F32, 4}, {"F16", ST_F16, 2}, {"BF16", ST_BF16, 2}, {"F64", ST_F64, 8},
    {"I64", ST_I64, 8}, {"I32", ST_I32, 4}, {"I16", ST_I16, 2},   {"I8", ST_I8, 1},
    {"U8", ST_U8, 1},   {"BOOL", ST_BOOL, 1},
};
#define ST_NTYPES ((int)(sizeof st_types / sizeof st_types[0]))

const char *st_dtype_name(st_dtype d)
{
    for (int i = 0; i < ST_NTYPES; i++)
        if (st_types[i].d == d) return st_types[i].name;
    return "?";
}

static int st_dtype_size(st_dtype d)
{
    for (int i = 0; i < ST_NTYPES; i++)
        if (st_types[i].d == d) return st_types[i].size;
    return 0;
}

/* ---- reader ---------------------------------------------------------------------------- */

void st_close(st_file *f)
{
    if (!f) return;
    if (f->map && f->map != MAP_FAILED) munmap(f->map, f->map_len);
    for (int i = 0; i < f->count; i++) mem_free(f->tensors[i].name);
    mem_free(f->tensors);
    mem_free((void *)f->by_name);
    cJSON_Delete(f->root);
    mem_free(f->path);
    mem_free(f);
}

typedef struct { size_t begin, end; int idx; } st_span;

static int span_cmp(const void *a, const void *b)
{
    const st_span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp((*(const st_tensor *const *)a)->name, (*(const st_tensor *const *)b)->name);
}

static int st_parse_entry(st_file *f, cJSON *e, st_tensor *t, st_span *sp)
{
    const char *p = f->path, *name = e->string;
    if (!cJSON_IsObject(e)) return err_set(ERR_FORMAT, "%s: tensor '%s': entry is not an object", p, name);
    cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off))
        return err_set(ERR_FORMAT, "%s: tensor '%s': needs dtype, shape and data_offsets", p, name);
    int size = 0;
    for (int i = 0; i < ST_NTYPES; i++)
        if (!strcmp(dt->valuestring, st_types[i].name)) { t->dtype = st_types[i].d; size = st_types[i].size; }
    if (!size) return err_set(ERR_FORMAT, "%s: tensor '%s': unknown dtype '%s'", p, name, dt->valuestring);
    int nd = cJSON_GetArraySize(sh);
    if (nd > ST_MAX_DIMS) return err_set(ERR_FORMAT, "%s: tensor '%s': %d dims (max %d)", p, name, nd, ST_MAX_DIMS);
    t->ndim = nd;
    for (int i = 0; i < nd; i++) {
        cJSON *d = cJSON_GetArrayItem(sh, i);
        if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble != floor(d->valuedouble))
            return err_set(ERR_FORMAT, "%s: tensor '%s': shape entry %d is not a non-negative "
                                       "integer", p, name, i);
        if (d->valuedouble > 9.0e15)
            return err_set(ERR_FORMAT, "%s: tensor '%s': shape entry %d (%g) is too large", p,
                           name, i, d->valuedouble);
        t->shape[i] = (int64_t)d->valuedouble;
    }
    /* the byte count must fit (it is compared with data_offsets below, which the file bounds) */
    int64_t nb;
    if (ck_numel(t->shape, nd, size, INT64_MAX, &nb))
        return err_set(ERR_FORMAT, "%s: tensor '%s': shape too large (its byte count overflows 64 "
                                   "bits)", p, name);
    uint64_t numel = (uint64_t)nb / (uint64_t)size;
    if (cJSON_GetArraySize(off) != 2) return err_set(ERR_FORMAT, "%s: tensor '%s': data_offsets needs 2 entries", p, name);
    if (!cJSON_IsNumber(cJSON_GetArrayItem(off, 0)) || !cJSON_IsNumber(cJSON_GetArrayItem(off, 1)))
        return err_set(ERR_FORMAT, "%s: tensor '%s': data_offsets must be two numbers", p, name);
    double b = cJSON_GetArrayItem(off, 0)->valuedouble, en = cJSON_GetArrayItem(off, 1)->valuedouble;
    if (b != floor(b) || en != floor(en))
        return err_set(ERR_FORMAT, "%s: tensor '%s': data_offsets [%g, %g] are not integers", p,
                       name, b, en);
    if (en < b)
        return err_set(ERR_FORMAT, "%s: tensor '%s': data_offsets [%.0f, %.0f] end before they "
                                   "begin", p, name, b, en);
    if (b < 0 || en > (double)f->buf_len)
        return err_set(ERR_FORMAT, "%s: tensor '%s': data_offsets [%.0f, %.0f] outside the %zu-byte data buffer",
                       p, name, b, en, f->buf_len);
    sp->begin = (size_t)b;
    sp->end = (size_t)en;
    if (numel * (uint64_t)size != (uint64_t)(sp->end - sp->begin))
        return err_set(ERR_FORMAT, "%s: tensor '%s': shape needs %llu bytes but data_offsets give %zu", p,
                       name, (unsigned long long)(numel * (uint64_t)size), sp->end - sp->begin);
    t->nbytes = sp->end - sp->begin;
    t->data = f->buf + sp->begin;
    t->name = mem_strdup(name);
    if (!t->name) return err_set(ERR_NOMEM, "%s: out of memory", p);
    return OK;
}

int st_open(st_file **out, const char *path)
{
    *out = NULL;
    st_file *f = mem_calloc(1, sizeof *f);
    if (!f || !(f->path = mem_strdup(path))) {
        mem_free(f);
        return err_set(ERR_NOMEM, "%s: out of memory", path);
    }
    /* O_NONBLOCK: a FIFO is refused below instead of waiting here for a writer */
    int rc = OK, fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) { rc = err_set(ERR_IO, "%s: cannot open: %s", path, strerror(errno)); goto fail; }
    struct stat stt;
    if (fstat(fd, &stt) != 0) { rc = err_set(ERR_IO, "%s: stat: %s", path, strerror(errno)); close(fd); goto fail; }
    if (S_ISDIR(stt.st_mode)) { close(fd); rc = err_set(ERR_IO, "%s: is a directory, not a safetensors file", path); goto fail; }
    if (!S_ISREG(stt.st_mode)) { close(fd); rc = err_set(ERR_IO, "%s: not a regular file", path); goto fail; }
    if (stt.st_size < 8) { close(fd); rc = err_set(ERR_FORMAT, "%s: truncated safetensors file (%lld bytes)", path, (long long)stt.st_size); goto fail; }
    f->map_len = (size_t)stt.st_size;
    f->map = mmap(NULL, f->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (f->map == MAP_FAILED) { f->map = NULL; rc = err_set(ERR_IO, "%s: mmap: %s", path, strerror(errno)); goto fail; }
    const unsigned char *m = f->map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | m[i];
    if (hlen > ST_MAX_HEADER) {
        rc = err_set(ERR_FORMAT, "%s: header of %llu bytes is above the %u MiB limit", path,
                     (unsigned long long)hlen, ST_MAX_HEADER >> 20);
        goto fail;
    }
    if (hlen > f->map_len - 8) {
        rc = err_set(ERR_FORMAT, "%s: header length %llu exceeds the file (%zu bytes): truncated or not safetensors",
                     path, (unsigned long long)hlen, f->map_len);
        goto fail;
    }
    f->buf = m + 8 + hlen;
    f->buf_len = f->map_len - 8 - (size_t)hlen;
    /* strict: a key twice (which tensor is meant?) or bytes after the object are damage; the
       spaces that pad a header to 8 bytes are white space */
    if ((rc = json_parse_object(path, "the safetensors header", (const char *)m + 8, (size_t)hlen, &f->root)))
        goto fail;
    int n = 0;
    for (cJSON *e = f->root->child; e; e = e->next) n += strcmp(e->string, "__metadata__") != 0;
    f->tensors = mem_calloc((size_t)n + 1, sizeof *f->tensors);
    st_span *spans = mem_calloc((size_t)n + 1, sizeof *spans);
    if (!f->tensors || !spans) { mem_free(spans); rc = err_set(ERR_NOMEM, "%s: out of memory", path); goto fail; }
    for (cJSON *e = f->root->child; e; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) {
            if (!cJSON_IsObject(e)) { rc = err_set(ERR_FORMAT, "%s: __metadata__ is not an object", path); break; }
            /* string to string (the format's own reader refuses anything else) */
            for (cJSON *v = e->child; v && !rc; v = v->next)
                if (!cJSON_IsString(v))
                    rc = err_set(ERR_FORMAT, "%s: __metadata__ value of '%.64s' is not a string", path, v->string);
            if (rc) break;
            f->meta = e;
            continue;
        }
        rc = st_parse_entry(f, e, &f->tensors[f->count], &spans[f->count]);
        if (rc) break;
        spans[f->count].idx = f->count;
        f->count++;
    }
    if (!rc) {
        qsort(spans, (size_t)f->count, sizeof *spans, span_cmp);
        for (int i = 1; i < f->count; i++)
            if (spans[i].begin < spans[i - 1].end) {
                rc = err_set(ERR_FORMAT, "%s: tensors '%s' and '%s' overlap in the data buffer", path,
                             f->tensors[spans[i - 1].idx].name, f->tensors[spans[i].idx].name);
                break;
            }
        /* the buffer is entirely indexed, without holes (the format's rule against polyglot
           files; its reader refuses both, and saelite read bytes before, between or after the
           tensors without a word, an audit) */
        uint64_t at = 0;
        for (int i = 0; !rc && i <= f->count; i++) {
            uint64_t next = i < f->count ? spans[i].begin : f->buf_len;
            if (next != at)
                rc = err_set(ERR_FORMAT, "%s: %llu bytes at offset %llu of the data buffer belong to "
                             "no tensor (%s; the format allows no holes): damaged or not safetensors",
                             path, (unsigned long long)(next - at), (unsigned long long)at,
                             i < f->count ? "before a tensor" : "after the last tensor");
            if (i < f->count) at = spans[i].end;
        }
    }
    if (!rc) { /* sorted for st_find (a name twice was refused by json_parse_object) */
        if (!(f->by_name = mem_alloc(sizeof *f->by_name * ((size_t)f->count + 1))))
            rc = err_set(ERR_NOMEM, "%s: out of memory", path);
        for (int i = 0; !rc && i < f->count; i++) f->by_name[i] = &f->tensors[i];
        if (!rc) qsort(f->by_name, (size_t)f->count, sizeof *f->by_name, name_cmp);
    }
    mem_free(spans);
    if (rc) goto fail;
    *out = f;
    return OK;
fail:
    st_close(f);
    return rc;
}

int st_count(const st_file *f) { return f->count; }
const st_tensor *st_at(const st_file *f, int i) { return i >= 0 && i < f->count ? &f->tensors[i] : NULL; }
const char *st_path(const st_file *f) { return f->path; }

const st_tensor *st_find(const st_file *f, const char *name)
{
    int lo = 0, hi = f->count; /* binary search: a loader looks up every tensor it needs */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(f->by_name[mid]->name, name);
        if (!c) return f->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const char *st_metadata(const st_file *f, const char *key)
{
    if (!f->meta) return NULL;
    cJSON *v = cJSON_GetObjectItemCaseSensitive(f->meta, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int64_t st_numel(const st_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

int st_read_f32(const st_file *f, const st_tensor *t, float *dst)
{
    int64_t n = st_numel(t);
    const unsigned char *p = t->data;
    switch (t->dtype) {
    case ST_F32: memcpy(dst, p, (size_t)n * 4); return OK;
    case ST_F16:
        for (int64_t i = 0; i < n; i++) { uint16_t h; memcpy(&h, p + 2 * i, 2); dst[i] = half_f16_to_f32(h); }
        return OK;
    case ST_BF16:
        for (int64_t i = 0; i < n; i++) { uint16_t h; memcpy(&h, p + 2 * i, 2); dst[i] = half_bf16_to_f32(h); }
        return OK;
    case ST_F64:
        for (int64_t i = 0; i < n; i++) { double d; memcpy(&d, p + 8 * i, 8); dst[i] = (float)d; }
        return OK;
    default:
        return err_set(ERR_FORMAT, "%s: tensor '%s' has dtype %s, expected a float type", f->path,
                       t->name, st_dtype_name(t->dtype));
    }
}

const char *st_shape_text(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i <= ndim && n < cap; i++) {
        int w = i < ndim ? snprintf(buf + n, cap - n, "%s%lld", i ? "," : "[", (long long)shape[i])
                         : snprintf(buf + n, cap - n, "%s]", ndim ? "" : "[");
        if (w < 0) break;
        n += (size_t)w;
    }
    return buf;
}

int st_load_f32(const st_file *f, const char *name, int ndim, const int64_t *shape, float *dst)
{
    const st_tensor *t = st_find(f, name);
    if (!t) return err_set(ERR_NOTFOUND, "%s: missing tensor '%s'", f->path, name);
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == shape[i];
    if (!ok) {
        char want[96], got[96];
        return err_set(ERR_SHAPE, "%s: tensor '%s' has shape %s, expected %s", f->path, name,
                       st_shape_text(got, sizeof got, t->ndim, t->shape),
                       st_shape_text(want, sizeof want, ndim, shape));
    }
    return dst ? st_read_f32(f, t, dst) : OK;
}

/* ---- writer ---------------------------------------------------------------------------- */

static int out_cmp(const void *a, const void *b)
{
    return strcmp((*(const st_out *const *)a)->name, (*(const st_out *const *)b)->name);
}

int st_write(const char *path, const st_out *tensors, int n, const char *const *meta)
{
    int rc = OK;
    const st_out **order = mem_alloc(sizeof *order * (size_t)(n ? n : 1));
    cJSON *root = cJSON_CreateObject();
    char *hdr = NULL;
    file_atomic out = {0};
    if (!order || !root) { rc = err_set(ERR_NOMEM, "%s: out of memory", path); goto out; }
    for (int i = 0; i < n; i++) order[i] = &tensors[i];
    qsort(order, (size_t)n, sizeof *order, out_cmp);
    if (meta && meta[0]) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; meta[i] && meta[i + 1]; i += 2) cJSON_AddStringToObject(m, meta[i], meta[i + 1]);
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        const st_out *t = order[i];
        int es = st_dtype_size(t->dtype);
        if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16) {
            rc = err_set(ERR_ARG, "%s: cannot write tensor '%s' as %s", path, t->name, st_dtype_name(t->dtype));
            goto out;
        }
        int64_t numel = 1;
        cJSON *e = cJSON_AddObjectToObject(root, t->name), *sh = cJSON_CreateArray(), *of = cJSON_CreateArray();
        cJSON_AddStringToObject(e, "dtype", st_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++) {
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[d]));
            numel *= t->shape[d];
        }
        cJSON_AddItemToObject(e, "shape", sh);
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)off));
        off += (size_t)numel * (size_t)es;
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)off));
        cJSON_AddItemToObject(e, "data_offsets", of);
    }
    hdr = cJSON_PrintUnformatted(root);
    if (!hdr) { rc = err_set(ERR_NOMEM, "%s: out of memory", path); goto out; }
    size_t hl = strlen(hdr), padded = (hl + 7) / 8 * 8; /* keep the data 8-byte aligned */
    if ((rc = file_atomic_open(&out, path))) goto out;
    FILE *fp = out.f;
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    int ok = fwrite(le, 1, 8, fp) == 8 && fwrite(hdr, 1, hl, fp) == hl;
    for (size_t i = hl; ok && i < padded; i++) ok = fputc(' ', fp) != EOF;
    uint16_t chunk[4096];
    for (int i = 0; ok && i < n; i++) {
        const st_out *t = order[i];
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
        if (t->dtype == ST_F32) { ok = numel == 0 || fwrite(t->data, 4, (size_t)numel, fp) == (size_t)numel; continue; }
        for (int64_t s = 0; ok && s < numel; s += 4096) {
            int64_t c = numel - s < 4096 ? numel - s : 4096;
            for (int64_t j = 0; j < c; j++)
                chunk[j] = t->dtype == ST_BF16 ? half_f32_to_bf16(t->data[s + j]) : half_f32_to_f16(t->data[s + j]);
            ok = fwrite(chunk, 2, (size_t)c, fp) == (size_t)c;
        }
    }
    if (!ok) {
        rc = err_set(ERR_IO, "%s: write failed: %s", path, strerror(errno));
        goto out;
    }
    out.sync = 1; /* checkpoints and SAE weights must survive a crash right after the rename */
    rc = file_atomic_commit(&out);
out:
    file_atomic_abort(&out); /* nothing to do after a commit */
    cJSON_free(hdr);
    cJSON_Delete(root);
    mem_free(order);
    return rc;
}
