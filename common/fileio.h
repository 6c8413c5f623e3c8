/* fileio.h - small file helpers shared by modules that write whole files.
 *
 * file_write_atomic writes n bytes to PATH.tmp.PID and renames it over path, so readers see
 * either the old file or the complete new one; on failure the temp file is removed and the
 * error (ERR_IO, naming the file) is recorded with err_set.
 */
#ifndef SAELITE_FILEIO_H
#define SAELITE_FILEIO_H
#include <stddef.h>

int file_write_atomic(const char *path, const void *data, size_t n);

#endif
