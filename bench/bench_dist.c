/* bench_dist.c - the cost of the deterministic all-reduce (common/dist.h dist_sum_f32) for the
 * gradient sizes of sae-train at (512, 4096) and (768, 24576) and a small (latency) one, under
 * mpirun; one rank (plain `make bench`) has nothing to reduce and says so. Prints one line per
 * size: milliseconds per call (median of SAELITE_BENCH_REPS, default 5) and the bytes each rank
 * sent per second (2 (N-1)/N of the vector: the reduce-scatter + allgather of dist.c); then the
 * exchange of a latent-sharded TopK step at (768, 24576) (sae_train.c latent_leaf).
 * Usage: mpirun -np 2 build/bench/bench_dist
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dist.h"
#include "common/err.h"
#include "common/mem.h"
#include "common/progress.h"

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (dist_init(&argc, &argv)) {
        fprintf(stderr, "bench_dist: %s\n", err_msg());
        return 1;
    }
    int N = dist_size(), reps = getenv("SAELITE_BENCH_REPS") ? atoi(getenv("SAELITE_BENCH_REPS")) : 5;
    if (reps < 1) reps = 1;
    if (N == 1) {
        printf("bench_dist: one rank, nothing to reduce (run under mpirun -np 2; bench_mpi.sh does)\n");
        dist_finalize();
        return 0;
    }
    /* gradients: 2 S D + S + D floats (topk); then the sums of a latent-sharded TopK step
       (--latent-shards N --latent-blocks N, sae_train.c latent_leaf) at (768, 24576), batch
       4096: the reconstruction [B, 768] ([2, B, 768] while AuxK has dead latents) and the b_dec
       gradient [768]; its third exchange, the candidates' allgather, follows */
    const int64_t B = 4096, Dm = 768, kk = 32;
    const int64_t sizes[6] = {16, 2LL * 4096 * 512 + 4096 + 512, 2LL * 24576 * 768 + 24576 + 768,
                              B * Dm, 2 * B * Dm, Dm};
    const char *names[6] = {"16 floats (latency)", "(512, 4096) gradient", "(768, 24576) gradient",
                            "latent: xhat [B, 768]", "latent: xhat+ehat", "latent: b_dec grad"};
    int rc = 0;
    for (int s = 0; s < 6 && !rc; s++) {
        float *v = mem_alloc(sizeof(float) * (size_t)sizes[s]);
        double *t = mem_alloc(sizeof(double) * (size_t)reps);
        if (!v || !t) return 1;
        for (int64_t i = 0; i < sizes[s]; i++) v[i] = (float)(i % 7) * 1e-3f;
        for (int r = 0; r < reps && !rc; r++) {
            rc = dist_sum_f32(v, 1); /* line the ranks up */
            double t0 = now_seconds();
            if (!rc) rc = dist_sum_f32(v, sizes[s]);
            t[r] = now_seconds() - t0;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp_d);
        double ms = 1e3 * t[reps / 2];
        if (dist_is_root())
            printf("dist_sum_f32 %-22s %10lld floats, %d ranks: %9.3f ms  (%.2f GB/s sent per rank)\n",
                   names[s], (long long)sizes[s], N, ms,
                   ms > 0 ? 2.0 * (N - 1) / N * 4.0 * (double)sizes[s] / (ms * 1e6) : 0);
        mem_free(v);
        mem_free(t);
    }
    /* the latent step's candidates: k (value, latent) pairs of 8 bytes per row from each rank */
    if (!rc) {
        size_t bytes = (size_t)(B * kk * 8);
        char *snd = mem_alloc(bytes), *rcv = mem_alloc(bytes * (size_t)N);
        double *t = mem_alloc(sizeof(double) * (size_t)reps);
        if (!snd || !rcv || !t) return 1;
        memset(snd, 1, bytes);
        for (int r = 0; r < reps && !rc; r++) {
            float one = 1;
            rc = dist_sum_f32(&one, 1);
            double t0 = now_seconds();
            if (!rc) rc = dist_allgather(snd, rcv, bytes);
            t[r] = now_seconds() - t0;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp_d);
        if (dist_is_root())
            printf("dist_allgather latent: top-k candidates %10zu bytes, %d ranks: %9.3f ms\n", bytes,
                   N, 1e3 * t[reps / 2]);
        mem_free(snd);
        mem_free(rcv);
        mem_free(t);
    }
    if (rc) fprintf(stderr, "bench_dist: %s\n", err_msg());
    dist_finalize();
    return rc ? 1 : 0;
}
