/* bench_sae_archs.c - step time and peak memory of every dictionary type at one shape.
 *
 * For relu, topk, batchtopk, jumprelu, gated, matryoshka and the (skip) transcoders (TopK
 * activation, d_out = d_in), d_in 512, d_sae 4096, k 32, batch 4096 (SAE_BENCH_ARCH_SHAPE=
 * "D,S,K,B" overrides), each in a child process of its own (so its peak RSS is its own: wait4's
 * ru_maxrss): a trainer on Gaussian rows, one warm-up step and SAE_BENCH_ARCH_STEPS (default 5)
 * timed steps; prints one markdown row each (median / min-max s/step, tok/s, peak RSS, and the
 * parameters + gradients + Adam state + one batch for scale). The dead window is two batches,
 * so AuxK and its cost are in the timed steps. The architectures run one after the other; on a
 * loaded machine compare ratios within one run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/err.h"
#include "common/mem.h"
#include "common/par.h"
#include "common/progress.h"
#include "common/rng.h"
#include "model/ops.h"
#include "sae/sae.h"
#include "sae/sae_train.h"

enum { MAX_STEPS = 32 };

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* In the child: steps timed into dt[], written to the pipe fd as doubles. */
static int child(int fd, sae_arch arch, int tc, int D, int S, int K, int B, int steps)
{
    sae_train_config c;
    sae_train_defaults(&c);
    c.arch = arch;
    c.transcoder = tc;
    c.d_in = D;
    c.d_out = tc ? D : 0;
    c.d_sae = S;
    c.k = K;
    c.batch = B;
    c.total_tokens = (int64_t)B * 1000;
    c.dead_window = (int64_t)B * 2;
    int W = tc ? 2 * D : D; /* transcoder rows are (input, target) pairs */
    rng_state r;
    rng_seed(&r, 3);
    float *x = mem_alloc(sizeof(float) * (size_t)B * W);
    if (!x) return 1;
    for (int64_t i = 0; i < (int64_t)B * W; i++) x[i] = (float)rng_normal_alt(&r);
    sae_trainer *t;
    if (sae_trainer_new(&t, &c, x, B)) {
        fprintf(stderr, "bench_sae_archs: %s\n", err_msg());
        return 1;
    }
    double dt[MAX_STEPS];
    sae_step_stats st;
    for (int s = -1; s < steps; s++) {
        double t0 = now_seconds();
        if (sae_trainer_step(t, x, &st)) {
            fprintf(stderr, "bench_sae_archs: %s\n", err_msg());
            return 1;
        }
        if (s >= 0) dt[s] = now_seconds() - t0;
    }
    ssize_t w = write(fd, dt, sizeof(double) * (size_t)steps);
    sae_trainer_free(t);
    mem_free(x);
    return w == (ssize_t)(sizeof(double) * (size_t)steps) ? 0 : 1;
}

int main(int argc, char **argv)
{
    /* OpenBLAS's own kernels where it does not know the CPU, as saelite runs (cli/main.c) */
    if (argc > 0 && op_blas_core_setenv()) par_restart(argv);
    int D = 512, S = 4096, K = 32, B = 4096, steps = 5;
    const char *shape = getenv("SAE_BENCH_ARCH_SHAPE"), *ns = getenv("SAE_BENCH_ARCH_STEPS");
    if (shape && sscanf(shape, "%d,%d,%d,%d", &D, &S, &K, &B) != 4) {
        fprintf(stderr, "bench_sae_archs: SAE_BENCH_ARCH_SHAPE=D,S,K,B\n");
        return 2;
    }
    if (ns) steps = atoi(ns);
    if (steps < 1) steps = 1;
    if (steps > MAX_STEPS) steps = MAX_STEPS;
    static const struct { const char *name; sae_arch arch; int tc; } arch[] = {
        {"relu", SAE_RELU, SAE_NOT_TRANSCODER},
        {"topk", SAE_TOPK, SAE_NOT_TRANSCODER},
        {"batchtopk", SAE_BATCHTOPK, SAE_NOT_TRANSCODER},
        {"jumprelu", SAE_JUMPRELU, SAE_NOT_TRANSCODER},
        {"gated", SAE_GATED, SAE_NOT_TRANSCODER},
        {"matryoshka", SAE_MATRYOSHKA, SAE_NOT_TRANSCODER},
        {"transcoder (topk)", SAE_TOPK, SAE_TRANSCODER},
        {"skip_transcoder (topk)", SAE_TOPK, SAE_SKIP_TRANSCODER},
    };
    printf("d_in %d d_sae %d k %d batch %d, %d steps each (median, min-max), one process each:\n\n",
           D, S, K, B, steps);
    printf("| architecture | s/step | tok/s | peak RSS | params+grad+Adam+batch |\n");
    printf("| --- | ---: | ---: | ---: | ---: |\n");
    fflush(stdout);
    int rc = 0;
    for (size_t a = 0; a < sizeof arch / sizeof *arch; a++) {
        int p[2];
        if (pipe(p)) return 1;
        pid_t pid = fork();
        if (pid < 0) return 1;
        if (pid == 0) {
            close(p[0]);
            _exit(child(p[1], arch[a].arch, arch[a].tc, D, S, K, B, steps));
        }
        close(p[1]);
        double dt[MAX_STEPS];
        size_t got = 0;
        ssize_t n;
        while (got < sizeof(double) * (size_t)steps &&
               (n = read(p[0], (char *)dt + got, sizeof(double) * (size_t)steps - got)) > 0)
            got += (size_t)n;
        close(p[0]);
        int status = 0;
        struct rusage ru;
        memset(&ru, 0, sizeof ru);
        wait4(pid, &status, 0, &ru);
        if (!WIFEXITED(status) || WEXITSTATUS(status) || got != sizeof(double) * (size_t)steps) {
            printf("| %s | failed | | | |\n", arch[a].name);
            rc = 1;
            continue;
        }
        qsort(dt, (size_t)steps, sizeof *dt, cmp_double);
        double med = steps % 2 ? dt[steps / 2] : 0.5 * (dt[steps / 2 - 1] + dt[steps / 2]);
        int Do = arch[a].tc ? D : D; /* d_out = d_in here */
        double params = (double)D * S + (double)S * Do + S + Do;
        if (arch[a].arch == SAE_GATED) params += 2.0 * S;                         /* r_mag, b_mag */
        if (arch[a].arch == SAE_JUMPRELU) params += S;                            /* thresholds */
        if (arch[a].tc == SAE_SKIP_TRANSCODER) params += (double)Do * D;         /* W_skip */
        double need = (params * 4 * 4 + (double)B * (arch[a].tc ? 2 * D : D) * 4) / (1 << 20);
        printf("| %s | %.3f (%.3f-%.3f) | %.0f | %.0f MB | %.0f MB |\n", arch[a].name, med, dt[0],
               dt[steps - 1], B / med, ru.ru_maxrss / 1024.0, need);
        fflush(stdout);
    }
    return rc;
}
