#include "common/fileio.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"

int file_write_atomic(const char *path, const void *data, size_t n)
{
    char tmp[4240];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return err_set(ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    int ok = n == 0 || fwrite(data, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return err_set(ERR_IO, "%s: cannot write: %s", path, strerror(e));
    }
    return OK;
}
