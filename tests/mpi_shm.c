/* mpi_shm.c - for tests/test_mpi.sh (mpirun -np 2 and 4): dist_shm_new, dist_shm_sum_part and
 * window reuse. Built by test_mpi.sh from common/dist.c, err.c and mem.c. Checks that
 *  - a window asked for with sizes that differ by rank, released, then asked for with other
 *    sizes does not hang (each rank's reuse decision is agreed), and one of the same sizes and
 *    key is reused;
 *  - each rank's part of dist_shm_sum_part equals dist_sum_f32's result bit for bit (an odd
 *    length, values of mixed sign and magnitude, so the order of the additions shows), and the
 *    other ranks' copies of that part are zero afterwards.
 * Prints "shm ok", "shm unavailable" (no shared window here: nothing to test) or the first
 * difference. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dist.h"
#include "common/err.h"

static float value(int rank, int64_t i)
{
    uint64_t h = (uint64_t)i * 0x9e3779b97f4a7c15ULL ^ (uint64_t)(rank + 1) * 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 31;
    float m = (float)(h % 2000003) / 1000.0f - 1000.0f;
    return m * (float)(1 << (h >> 60)) / 64.0f;
}

int main(int argc, char **argv)
{
    int rc = dist_init(&argc, &argv);
    if (rc) return fprintf(stderr, "%s\n", err_msg()), 1;
    int N = dist_size(), me = dist_rank(), bad = 0;
    dist_shm *w1 = NULL, *w2 = NULL, *w3 = NULL;
    if ((rc = dist_shm_new(&w1, me == 0 ? 400 : 0, 7))) return fprintf(stderr, "%s\n", err_msg()), 1;
    if (!w1) {
        if (me == 0) printf("shm unavailable\n");
        dist_finalize();
        return 0;
    }
    dist_shm_release(w1);
    if ((rc = dist_shm_new(&w2, me == 0 ? 800 : 0, 7)) || !w2) return fprintf(stderr, "second window\n"), 1;
    dist_shm_release(w2);
    if ((rc = dist_shm_new(&w3, me == 0 ? 800 : 0, 7)) || w3 != w2) {
        printf("rank %d: a released window of the same sizes was not reused\n", me);
        bad = 1;
    }
    const int64_t n = 1000003;
    dist_shm *g = NULL;
    if (!bad && ((rc = dist_shm_new(&g, sizeof(float) * (size_t)n, 8)) || !g)) return fprintf(stderr, "data window\n"), 1;
    float *ref = malloc(sizeof(float) * (size_t)n), *seg = bad ? NULL : dist_shm_seg(g, me);
    if (!ref) return fprintf(stderr, "out of memory\n"), 1;
    for (int64_t i = 0; !bad && i < n; i++) ref[i] = seg[i] = value(me, i);
    if (!bad && (rc = dist_sum_f32(ref, n))) return fprintf(stderr, "%s\n", err_msg()), 1;
    int64_t lo = 0, hi = 0;
    if (!bad) {
        dist_tree_part(n, me, &lo, &hi);
        dist_shm_sync(g, NULL);
        dist_shm_sum_part(g, lo, hi);
        dist_shm_sync(g, NULL);
    }
    for (int64_t i = 0; !bad && i < n; i++) {
        int mine = i >= lo && i < hi;
        float want = mine ? ref[i] : 0.0f;
        if (memcmp(&seg[i], &want, sizeof want)) {
            printf("rank %d of %d: element %lld (%s its part [%lld, %lld)): %.9g, want %.9g\n", me, N,
                   (long long)i, mine ? "in" : "outside", (long long)lo, (long long)hi, seg[i], want);
            bad = 1;
        }
    }
    free(ref);
    if (!bad && me == 0) printf("shm ok\n");
    dist_finalize();
    return bad;
}
