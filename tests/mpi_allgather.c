/* mpi_allgather.c - for tests/test_mpi.sh (mpirun -np 2): dist_allgather of a payload above one
 * MPI chunk (2^28 bytes per rank, sent in pieces) and of a small one: every rank's bytes arrive
 * in rank order, exactly. Built by test_mpi.sh from common/dist.c, err.c and mem.c. Prints
 * "allgather ok" or the first difference. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/dist.h"
#include "common/err.h"

static unsigned char byte_at(int rank, size_t i) { return (unsigned char)(i * 131 + rank * 7 + (i >> 20)); }

int main(int argc, char **argv)
{
    int rc = dist_init(&argc, &argv);
    if (rc) return fprintf(stderr, "%s\n", err_msg()), 1;
    int N = dist_size(), me = dist_rank(), bad = 0;
    const size_t sizes[2] = {((size_t)1 << 28) + 4097, 1000};
    for (int t = 0; t < 2 && !bad; t++) {
        size_t n = sizes[t];
        unsigned char *s = malloc(n), *r = malloc(n * N);
        if (!s || !r) return fprintf(stderr, "out of memory\n"), 1;
        for (size_t i = 0; i < n; i++) s[i] = byte_at(me, i);
        if ((rc = dist_allgather(s, r, n))) return fprintf(stderr, "%s\n", err_msg()), 1;
        for (int q = 0; q < N && !bad; q++)
            for (size_t i = 0; i < n; i++)
                if (r[(size_t)q * n + i] != byte_at(q, i)) {
                    printf("rank %d: %zu bytes: rank %d's byte %zu differs\n", me, n, q, i);
                    bad = 1;
                    break;
                }
        free(s);
        free(r);
    }
    if (!bad && me == 0) printf("allgather ok\n");
    dist_finalize();
    return bad;
}
