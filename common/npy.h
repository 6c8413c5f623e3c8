/* npy.h - NumPy .npy files (format version 1.0/2.0/3.0 read, 1.0 write).
 *
 * Reads little-endian float32 ('<f4'), float16 ('<f2'), float64 ('<f8'), int32 ('<i4') and
 * int64 ('<i8') arrays in C order; data is converted to float32 (npy_read: values float32
 * cannot hold, a float64 beyond its range or an integer it cannot represent exactly, are
 * ERR_FORMAT naming the element) or int64 (npy_read_i64). Fortran order, big-endian and object arrays are refused with ERR_FORMAT.
 * The data must be exactly what the shape needs: a short file is "truncated", extra bytes after
 * the data are refused (naming the count); a dtype error quotes the whole descr value.
 * Writes float32 or int32 C-order arrays atomically (temp file + rename).
 * The caller owns *data and frees it with mem_free.
 */
#ifndef SAELITE_NPY_H
#define SAELITE_NPY_H
#include <stddef.h>
#include <stdint.h>

#define NPY_MAX_DIMS 8

int npy_read(const char *path, float **data, int *ndim, int64_t shape[NPY_MAX_DIMS]);
/* npy_read for a caller that rounds the values again to bf16 or f16: float64 elements are
 * rounded to float32 by round-to-odd, so that the second rounding gives the nearest-even value of
 * the float64 one (two nearest-even roundings can be 1 ulp off). Other dtypes as npy_read. */
int npy_read_narrow(const char *path, float **data, int *ndim, int64_t shape[NPY_MAX_DIMS]);
int npy_read_i64(const char *path, int64_t **data, int *ndim, int64_t shape[NPY_MAX_DIMS]);
int npy_write(const char *path, const float *data, int ndim, const int64_t *shape);
/* OK, or ERR_FORMAT "PATH: non-finite value (nan) at row R, column C" for the first NaN or
 * +-Inf of the [rows, cols] array x: activations are refused where they are read, naming the
 * file, before they can turn into a NaN loss many steps later. */
int npy_check_finite(const char *path, const float *x, int64_t rows, int64_t cols);
/* "(0, 16)" / "(5,)" / "()": a shape as NumPy prints it, for messages (cut to cap). */
void npy_shape_str(char *out, size_t cap, int ndim, const int64_t *shape);
int npy_write_i32(const char *path, const int32_t *data, int ndim, const int64_t *shape);

#endif
