/* bench_gpt2.c - GPT-2 forward and training speed as ratios to the sgemm rate of the same shapes.
 *
 * For each case the GEMMs the model performs (linear layers, per-head attention products,
 * unembedding; x3 for a training step) are also timed alone, back to back, with cblas_sgemm on the
 * same shapes: "ratio" = (model GEMM FLOPs / model wall time) / (same FLOPs / bare sgemm time).
 * 1.0 means everything that is not GEMM is free. Figures are best-of-N wall times; on a shared
 * machine they are noisy. SAELITE_BENCH_QUICK=1 runs fewer repetitions.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"
#include "common/par.h"
#include "common/progress.h"
#include "model/gpt2.h"
#include "model/ops.h"
#include "model/train.h"

typedef struct {
    int M, N, K, ta, tb, count;
} gemm_shape;

/* the forward's GEMMs up to and including block `upto` (+ unembedding when logits) */
static int forward_shapes(gemm_shape *s, const gpt2_config *c, int B, int T, int upto, int logits)
{
    int n = 0, N = B * T, C = c->n_embd, F = c->n_inner, H = c->n_head, dh = C / H;
    int L = upto + 1;
    s[n++] = (gemm_shape){N, C, C, 0, 0, 3 * L};       /* q, k, v */
    s[n++] = (gemm_shape){T, T, dh, 0, 1, B * H * L};  /* scores */
    s[n++] = (gemm_shape){T, dh, T, 0, 0, B * H * L};  /* values */
    s[n++] = (gemm_shape){N, C, C, 0, 0, L};           /* attn proj */
    s[n++] = (gemm_shape){N, F, C, 0, 0, L};           /* fc */
    s[n++] = (gemm_shape){N, C, F, 0, 0, L};           /* fc proj */
    if (logits) s[n++] = (gemm_shape){N, c->vocab_size, C, 0, 1, 1};
    return n;
}

/* the backward's GEMMs: for y = x W, dx = dy W^T and dW = x^T dy (same FLOPs as the forward) */
static int backward_shapes(gemm_shape *s, const gemm_shape *f, int nf)
{
    int n = 0;
    for (int i = 0; i < nf; i++) {
        s[n++] = (gemm_shape){f[i].M, f[i].K, f[i].N, 0, 1, f[i].count};
        s[n++] = (gemm_shape){f[i].K, f[i].N, f[i].M, 1, 0, f[i].count};
    }
    return n;
}

static double shapes_flops(const gemm_shape *s, int n)
{
    double f = 0;
    for (int i = 0; i < n; i++) f += 2.0 * s[i].M * s[i].N * s[i].K * s[i].count;
    return f;
}

static double time_shapes(const gemm_shape *s, int n, int reps)
{
    size_t maxa = 0, maxb = 0, maxc = 0;
    for (int i = 0; i < n; i++) {
        size_t a = (size_t)s[i].M * s[i].K, b = (size_t)s[i].K * s[i].N, c = (size_t)s[i].M * s[i].N;
        if (a > maxa) maxa = a;
        if (b > maxb) maxb = b;
        if (c > maxc) maxc = c;
    }
    float *A = mem_alloc_aligned(maxa * 4), *Bm = mem_alloc_aligned(maxb * 4),
          *Cm = mem_alloc_aligned(maxc * 4);
    for (size_t i = 0; i < maxa; i++) A[i] = (float)(i % 13) * 0.01f;
    for (size_t i = 0; i < maxb; i++) Bm[i] = (float)(i % 7) * 0.01f;
    memset(Cm, 0, maxc * 4);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t = now_seconds();
        for (int i = 0; i < n; i++)
            for (int k = 0; k < s[i].count; k++) {
                const gemm_shape *g = &s[i];
                cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans,
                            g->tb ? CblasTrans : CblasNoTrans, g->M, g->N, g->K, 1.0f, A,
                            g->ta ? g->M : g->K, Bm, g->tb ? g->K : g->N, 0.0f, Cm, g->N);
            }
        t = now_seconds() - t;
        if (t < best) best = t;
    }
    mem_free_aligned(A);
    mem_free_aligned(Bm);
    mem_free_aligned(Cm);
    return best;
}

static int noop_hook(const tensor_view *t, void *u) { return 0; }

static void bench_forward(const char *label, gpt2_model *m, int B, int T, const char *hook,
                          int logits, int reps)
{
    const gpt2_config *c = gpt2_cfg(m);
    int upto = c->n_layer - 1;
    gpt2_hook_clear(m);
    if (hook) {
        gpt2_hook_add(m, hook, noop_hook, NULL);
        gpt2_hook_info(m, hook, &upto, NULL);
    }
    int *tok = malloc(sizeof(int) * (size_t)B * T);
    for (int i = 0; i < B * T; i++) tok[i] = (i * 7919) % c->vocab_size;
    gpt2_forward(m, tok, B, T, logits); /* warm-up: buffers allocated once */
    gemm_shape s[8];
    int n = forward_shapes(s, c, B, T, upto, logits);
    double fl = shapes_flops(s, n), best = 1e30, ref = 1e30;
    /* interleave model and reference runs so a load change on a shared machine hits both */
    for (int r = 0; r < reps; r++) {
        double t = now_seconds();
        if (gpt2_forward(m, tok, B, T, logits)) {
            printf("%s: %s\n", label, err_msg());
            return;
        }
        t = now_seconds() - t;
        if (t < best) best = t;
        t = time_shapes(s, n, 1);
        if (t < ref) ref = t;
    }
    printf("%-44s %8.0f tok/s  %6.1f GFLOP/s  sgemm same shapes %6.1f GFLOP/s  ratio %.3f\n", label,
           B * T / best, fl / best * 1e-9, fl / ref * 1e-9, ref / best);
    free(tok);
    gpt2_hook_clear(m);
}

/* replicas: train_opts.replicas (0: train-lm's default, the batch split over the cores). The
 * sgemm reference runs on the OpenBLAS threads the caller had, whatever the trainer set. */
static void bench_train(const char *label, gpt2_model *m, int B, int T, int reps, int replicas)
{
    const gpt2_config *c = gpt2_cfg(m);
    train_opts o;
    train_opts_default(&o);
    o.batch = B;
    o.seq = T;
    o.steps = 1000;
    o.replicas = replicas;
    int blas = openblas_get_num_threads();
    train_state s;
    if (train_init(&s, m, &o)) {
        printf("%s: %s\n", label, err_msg());
        return;
    }
    int blas_step = openblas_get_num_threads();
    char full[128];
    snprintf(full, sizeof full, "%s%s", label, s.nrep > 1 ? ", batch split" : "");
    label = full;
    train_data d;
    train_data_init(&d, -1, 0.01, 1);
    int doc[4096];
    for (int i = 0; i < 4096; i++) doc[i] = (i * 7919 + i / 3) % c->vocab_size;
    for (int k = 0; k < 8; k++) train_data_add(&d, doc, 4096);
    train_step(&s, &d, NULL, NULL, NULL);
    gemm_shape f[8], b[16];
    int nf = forward_shapes(f, c, B, T, c->n_layer - 1, 1);
    int nb = backward_shapes(b, f, nf);
    double fl = shapes_flops(f, nf) + shapes_flops(b, nb), best = 1e30, ref = 1e30;
    for (int r = 0; r < reps; r++) {
        double t = now_seconds();
        train_step(&s, &d, NULL, NULL, NULL);
        t = now_seconds() - t;
        if (t < best) best = t;
        openblas_set_num_threads(blas);
        t = time_shapes(f, nf, 1) + time_shapes(b, nb, 1);
        openblas_set_num_threads(blas_step);
        if (t < ref) ref = t;
    }
    printf("%-44s %8.0f tok/s  %6.1f GFLOP/s  sgemm same shapes %6.1f GFLOP/s  ratio %.3f\n", label,
           B * T / best, fl / best * 1e-9, fl / ref * 1e-9, ref / best);
    train_free(&s);
    train_data_free(&d);
}

int main(int argc, char **argv)
{
    /* OpenBLAS's own kernels where it does not know the CPU, as saelite runs (cli/main.c) */
    if (argc > 0 && op_blas_core_setenv()) par_restart(argv);
    setvbuf(stdout, NULL, _IOLBF, 0); /* figures appear as measured, also in logs */
    int quick = getenv("SAELITE_BENCH_QUICK") != NULL;
    int reps = quick ? 2 : 5;
    printf("bench_gpt2: OpenBLAS %d threads (%s kernels); best of %d\n", openblas_get_num_threads(), op_blas_core(), reps);
    /* the default small model: 1 layer, d 128, 4 heads, d_mlp 512, ctx 128, vocab 4096 */
    gpt2_config sc = {1, 4, 128, 128, 4096, 512, 1e-5f};
    gpt2_model *sm;
    if (gpt2_create(&sm, &sc, 1)) return 1;
    bench_forward("small  fwd to blocks.0.mlp.hook_post B=32", sm, 32, 128, "blocks.0.mlp.hook_post", 0, reps * 4);
    bench_forward("small  fwd + logits B=32", sm, 32, 128, NULL, 1, reps * 4);
    int nt = openblas_get_num_threads();
    if (nt > 1) {
        openblas_set_num_threads(1);
        bench_forward("small  fwd + logits B=32 (1 thread)", sm, 32, 128, NULL, 1, reps * 4);
        openblas_set_num_threads(nt);
    }
    bench_train("small  train step B=32 T=128", sm, 32, 128, reps * 2, 0);
    if (nt > 1) {
        bench_train("small  train step B=32 T=128, OpenBLAS thr", sm, 32, 128, reps * 2, 1);
        openblas_set_num_threads(1);
        bench_train("small  train step B=32 T=128 (1 thread)", sm, 32, 128, reps * 2, 1);
        openblas_set_num_threads(nt);
    }
    gpt2_free(sm);

    /* GPT-2 small shape: 12 layers, d 768, 12 heads, ctx 1024, vocab 50257 (random weights) */
    gpt2_config gc = {12, 12, 768, 1024, 50257, 3072, 1e-5f};
    gpt2_model *gm;
    double t = now_seconds();
    if (gpt2_create(&gm, &gc, 1)) return 1;
    printf("(gpt2-small random init %.1fs)\n", now_seconds() - t);
    /* fewer repetitions for the big shape: on the shared 2-core machine one full forward with
     * logits takes ~10 s and a training step ~25 s */
    int greps = quick ? 2 : 3;
    bench_forward("gpt2-small fwd to blocks.5.mlp.hook_post B=8", gm, 8, 128, "blocks.5.mlp.hook_post", 0, greps);
    if (nt > 1) {
        openblas_set_num_threads(1);
        bench_forward("gpt2-small fwd to blocks.5.mlp.hook_post (1 thr)", gm, 8, 128, "blocks.5.mlp.hook_post", 0, quick ? 1 : 2);
        openblas_set_num_threads(nt);
    }
    bench_forward("gpt2-small fwd + logits B=8", gm, 8, 128, NULL, 1, greps);
    if (!quick) bench_train("gpt2-small train step B=4 T=128", gm, 4, 128, 1, 0);
    gpt2_free(gm);
    return 0;
}
