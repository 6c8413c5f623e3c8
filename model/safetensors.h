/* safetensors.h - reader and writer for the safetensors format (Hugging Face).
 *
 * Format: u64 little-endian header length N, then N bytes of UTF-8 JSON
 *   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"k": "v"}}
 * then the byte buffer; offsets are relative to the buffer start.
 *
 * Reader: st_open maps the file read-only (mmap) and validates everything before returning:
 * header length within the file, JSON well-formed, known dtype, shape product * dtype size ==
 * end - begin, offsets inside the buffer and not overlapping. Every failure is ERR_FORMAT (or
 * ERR_IO) with a message naming the file and the offending tensor. Tensor data pointers stay
 * valid until st_close. Lookups never read out of bounds on any input.
 * Writer: st_write takes float32 source data and stores each tensor in the requested dtype
 * (F32, F16 or BF16, round-to-nearest-even by common/half.h), tensors sorted by name as the reference writer
 * does, written to a temp file and renamed into place (atomic).
 */
#ifndef SAELITE_SAFETENSORS_H
#define SAELITE_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>

typedef enum { ST_F32, ST_F16, ST_BF16, ST_F64, ST_I64, ST_I32, ST_I16, ST_I8, ST_U8, ST_BOOL } st_dtype;

#define ST_MAX_DIMS 8

typedef struct {
    char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    size_t nbytes;
    const void *data; /* points into the mapping */
} st_tensor;

typedef struct st_file st_file;

int st_open(st_file **out, const char *path);
void st_close(st_file *f);
int st_count(const st_file *f);
const st_tensor *st_at(const st_file *f, int i);
const st_tensor *st_find(const st_file *f, const char *name); /* NULL when absent */
const char *st_metadata(const st_file *f, const char *key);   /* NULL when absent */
const char *st_path(const st_file *f);
int64_t st_numel(const st_tensor *t);
const char *st_dtype_name(st_dtype d);
/* "[a, b, ...]" of a shape into buf[cap] (cut to fit); returns buf. */
const char *st_shape_text(char *buf, size_t cap, int ndim, const int64_t *shape);
/* Convert a tensor's elements (F32/F16/BF16/F64) to float32 into dst[st_numel(t)]. */
int st_read_f32(const st_file *f, const st_tensor *t, float *dst);
/* Find `name`, check it has exactly the shape given (ndim dims), convert into dst (dst NULL:
 * the checks only, with the same errors). */
int st_load_f32(const st_file *f, const char *name, int ndim, const int64_t *shape, float *dst);

typedef struct {
    const char *name;
    st_dtype dtype; /* F32, F16 or BF16 */
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const float *data; /* float32 source, numel elements */
} st_out;

/* meta: NULL or alternating key, value strings ending with NULL. */
int st_write(const char *path, const st_out *tensors, int n, const char *const *meta);

#endif
