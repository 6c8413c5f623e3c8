/* bench_sae.c - SAE training speed against the machine, and ground-truth recovery vs tokens.
 *
 * Speed: for (d_in, d_sae, k, batch) = (512, 4096, 32, 4096) and (768, 24576, 32, 4096), TopK
 * tokens/s in fp32 and bf16 (steps interleaved on two trainers; median and range) and the ratio
 * (time of one GEMM of the encoder shape [batch, d_in] x [d_in, d_sae]) / (time of a step), each
 * step followed by its GEMM calls so both see the same load, median over the steps: fp32 against
 * sgemm (target >= 0.7), bf16 against oneDNN's bf16 matmul with converted inputs (target >= 0.5);
 * where each step's time goes (sae_trainer_profile). SAE_BENCH_SPEED=small|large|0 picks shapes
 * (sweep: the sweep's 512, 1024, 32, 2048 alone);
 * SAE_BENCH_GRAD_CLIP=0 times the step without the default gradient-norm clip.
 * Peak RSS vs the size of weights + gradients + Adam state + one batch.
 * Ground truth (SAE_BENCH_GT=0 skips; SAE_BENCH_GT_TOKENS="1000000,3000000" overrides): synthetic
 * d 256, 512 features, 5 active; TopK d_sae 1024, k 6; MMCS and fraction recovered at cos > 0.9;
 * in fp32 and, where the CPU has it, bf16 (the same run otherwise).
 */
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/err.h"
#include "common/mem.h"
#include "common/par.h"
#include "common/progress.h"
#include "model/ops.h"
#include "sae/metrics.h"
#include "sae/sae.h"
#include "sae/sae_bf16.h"
#include "sae/sae_kernels.h"
#include "sae/sae_train.h"
#include "sae/synth.h"

/* The 1-minute load average, for the record (other work on the machine skews every figure). */
static const char *load_average(void)
{
    static char buf[32];
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f || !fgets(buf, sizeof buf, f)) snprintf(buf, sizeof buf, "?");
    if (f) fclose(f);
    char *sp = strchr(buf, ' ');
    if (sp) *sp = 0;
    return buf;
}

static double peak_rss_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

/* The two GEMM limits on the encoder shape [B,D] x [D,S] -> [B,S]: OpenBLAS sgemm (all its
 * threads) and one oneDNN bf16 matmul (inputs already bf16, weights in the primitive's preferred
 * layout, fp32 output). Buffers and the primitive are made once; gemm_probe times one call of
 * each, so that the probes can be interleaved with the steps and see the same load. */
typedef struct {
    int B, D, S, bf;
    float *a, *w, *c;
    dnnl_engine_t eng;
    dnnl_stream_t st;
    dnnl_primitive_t mm;
    dnnl_primitive_desc_t pd;
    dnnl_memory_t ma, mw, mc;
    void *ba, *bw, *bc; /* their buffers */
    char impl[64];
} gemm_probe;

static int probe_init(gemm_probe *g, int B, int D, int S, int bf)
{
    memset(g, 0, sizeof *g);
    g->B = B, g->D = D, g->S = S;
    g->a = mem_alloc_aligned(sizeof(float) * (size_t)B * D); /* as the trainers: huge pages */
    g->w = mem_alloc_aligned(sizeof(float) * (size_t)S * D);
    g->c = mem_alloc_aligned(sizeof(float) * (size_t)B * S);
    if (!g->a || !g->w || !g->c) return 1;
    for (int64_t i = 0; i < (int64_t)B * D; i++) g->a[i] = (float)(i % 7) * 0.1f;
    for (int64_t i = 0; i < (int64_t)S * D; i++) g->w[i] = (float)(i % 5) * 0.1f;
    memset(g->c, 0, sizeof(float) * (size_t)B * S);
    if (!bf) return 0;
    if (dnnl_engine_create(&g->eng, dnnl_cpu, 0) ||
        dnnl_stream_create(&g->st, g->eng, dnnl_stream_default_flags))
        return 0;
    dnnl_memory_desc_t a, w, c;
    dnnl_dims_t da = {B, D}, dw = {D, S}, dc = {B, S};
    dnnl_memory_desc_init_by_tag(&a, 2, da, dnnl_bf16, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&w, 2, dw, dnnl_bf16, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&c, 2, dc, dnnl_f32, dnnl_ab);
    dnnl_matmul_desc_t md;
    if (dnnl_matmul_desc_init(&md, &a, &w, NULL, &c) ||
        dnnl_primitive_desc_create(&g->pd, &md, NULL, g->eng, NULL) ||
        dnnl_primitive_create(&g->mm, g->pd))
        return 0;
    const char *im = "";
    dnnl_primitive_desc_query(g->pd, dnnl_query_impl_info_str, 0, &im);
    snprintf(g->impl, sizeof g->impl, "%s", im);
    const dnnl_memory_desc_t *wmd = dnnl_primitive_desc_query_md(g->pd, dnnl_query_weights_md, 0);
    /* buffers from mem_alloc_aligned (huge pages), as the trainers' and the model's */
    size_t na = dnnl_memory_desc_get_size(&a), nw = dnnl_memory_desc_get_size(wmd),
           nc = dnnl_memory_desc_get_size(&c);
    if (!(g->ba = mem_alloc_aligned(na)) || !(g->bw = mem_alloc_aligned(nw)) ||
        !(g->bc = mem_alloc_aligned(nc)))
        return 1;
    memset(g->ba, 0x3f, na); /* bf16 0x3f3f: about 0.75 */
    memset(g->bw, 0x3c, nw);
    memset(g->bc, 0, nc);
    dnnl_memory_create(&g->ma, &a, g->eng, g->ba);
    dnnl_memory_create(&g->mw, wmd, g->eng, g->bw);
    dnnl_memory_create(&g->mc, &c, g->eng, g->bc);
    g->bf = 1;
    return 0;
}

/* Seconds of one sgemm call, of one oneDNN fp32 GEMM (dnnl_sgemm, the same call: on the Zen 5
 * VM it ran 1.7-2.0x OpenBLAS's Haswell kernel, so the fp32 step is also given against it) and
 * of one bf16 matmul (0 when there is none). */
static void probe_run(gemm_probe *g, double *t_sgemm, double *t_dnnl, double *t_bf16)
{
    double t0 = now_seconds();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g->B, g->S, g->D, 1.0f, g->a, g->D, g->w,
                g->D, 0.0f, g->c, g->S);
    *t_sgemm = now_seconds() - t0;
    /* OpenBLAS's idle workers spin (sched_yield) for ~0.1 s after a call: let them go to sleep
       before anything else is timed (they slowed the next oneDNN call several-fold) */
    usleep(200000);
    t0 = now_seconds();
    dnnl_sgemm('N', 'T', g->B, g->S, g->D, 1.0f, g->a, g->D, g->w, g->D, 0.0f, g->c, g->S);
    *t_dnnl = now_seconds() - t0;
    *t_bf16 = 0;
    if (!g->bf) return;
    dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, g->ma}, {DNNL_ARG_WEIGHTS, g->mw}, {DNNL_ARG_DST, g->mc}};
    t0 = now_seconds();
    dnnl_primitive_execute(g->mm, g->st, 3, args);
    dnnl_stream_wait(g->st);
    *t_bf16 = now_seconds() - t0;
}

static void probe_free(gemm_probe *g)
{
    if (g->bf) {
        dnnl_memory_destroy(g->ma), dnnl_memory_destroy(g->mw), dnnl_memory_destroy(g->mc);
        dnnl_primitive_destroy(g->mm), dnnl_primitive_desc_destroy(g->pd);
    }
    if (g->st) dnnl_stream_destroy(g->st);
    if (g->eng) dnnl_engine_destroy(g->eng);
    mem_free_aligned(g->a), mem_free_aligned(g->w), mem_free_aligned(g->c);
    mem_free_aligned(g->ba), mem_free_aligned(g->bw), mem_free_aligned(g->bc);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* median, min, max of n samples (sorted in place) */
static void stats3(double *v, int n, double *med, double *lo, double *hi)
{
    qsort(v, n, sizeof *v, cmp_double);
    *med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    *lo = v[0];
    *hi = v[n - 1];
}

enum { MAX_REPS = 16 };

/* TopK steps at one shape, fp32 and (where the CPU has it) bf16, on two trainers from the same
 * init, each step followed by one call of each GEMM limit, so that a step and its limit see the
 * same load: the ratios are taken per step (limit time / step time), then the median. */
/* The speed runs' TopK config and batch (standard normal x [B, D]; NULL when out of memory). */
static float *speed_setup(sae_train_config *c, int D, int S, int k, int B)
{
    sae_train_defaults(c);
    c->arch = SAE_TOPK;
    c->d_in = D;
    c->d_sae = S;
    c->k = k;
    c->batch = B;
    c->total_tokens = (int64_t)B * 1000;
    c->dead_window = (int64_t)B * 2; /* AuxK becomes active from the 3rd step: include its cost */
    /* the default step clips the gradient norm (issue 22); SAE_BENCH_GRAD_CLIP=0 times it without */
    const char *clip = getenv("SAE_BENCH_GRAD_CLIP");
    if (clip && clip[0]) c->grad_clip = atof(clip) > 0 ? atof(clip) : -1;
    rng_state r;
    rng_seed(&r, 3);
    float *x = mem_alloc(sizeof(float) * (size_t)B * D);
    for (int64_t i = 0; x && i < (int64_t)B * D; i++) x[i] = (float)rng_normal_alt(&r);
    return x;
}

static int bench_speed(int D, int S, int k, int B, int steps)
{
    sae_train_config c;
    float *x = speed_setup(&c, D, S, k, B);
    if (!x) return 1;
    int bf = sae_bf16_supported();
    sae_trainer *t[2] = {NULL, NULL};
    for (int p = 0; p < 1 + bf; p++)
        if (sae_trainer_new(&t[p], &c, x, B)) {
            fprintf(stderr, "bench_sae: %s\n", err_msg());
            return 1;
        }
    gemm_probe g;
    if (probe_init(&g, B, D, S, bf)) {
        fprintf(stderr, "bench_sae: out of memory for the GEMM probe\n");
        return 1;
    }
    bf = bf && g.bf;
    sae_step_stats st;
    double dt[2][MAX_REPS], tg[3][MAX_REPS], prof[2][SAE_PROF_N] = {{0}};
    if (steps > MAX_REPS) steps = MAX_REPS;
    double rss = 0;
    for (int s = -1; s < steps; s++) { /* step -1: warm-up */
        for (int p = 0; p < 1 + bf; p++) {
            sae_k_set_precision(p ? SAE_PRECISION_BF16 : SAE_PRECISION_FP32);
            sae_trainer_profile(t[p], s >= 0 ? prof[p] : NULL);
            double t0 = now_seconds();
            sae_trainer_step(t[p], x, &st);
            if (s >= 0) dt[p][s] = now_seconds() - t0;
        }
        if (s < 0) rss = peak_rss_mb(); /* before the probes' first use of their [B, S] output */
        double a, b, f;
        probe_run(&g, &a, &f, &b);
        if (s >= 0) tg[0][s] = a, tg[1][s] = b, tg[2][s] = f;
    }
    char eng[96];
    sae_k_engine(eng, sizeof eng);
    sae_k_set_precision(SAE_PRECISION_FP32);
    double flop = 2.0 * D * S, gflop = flop * B / 1e9; /* encoder FLOPs per token, per batch */
    double params = 2.0 * D * S + S + D;
    double need_mb = (params * 4 * 4 + (double)B * D * 4) / (1 << 20);
    printf("topk d_in %d d_sae %d k %d batch %d, %d steps each (load average %s):\n", D, S, k, B,
           steps, load_average());
    double gm[2], ratio[2], rl[2], rh[2];
    for (int p = 0; p < 1 + bf; p++) {
        double rr[MAX_REPS], tmp[MAX_REPS], med, lo, hi, d0, d1;
        for (int s = 0; s < steps; s++) rr[s] = tg[p][s] / dt[p][s];
        stats3(rr, steps, &ratio[p], &rl[p], &rh[p]);
        memcpy(tmp, tg[p], sizeof(double) * steps);
        stats3(tmp, steps, &gm[p], &d0, &d1);
        stats3(dt[p], steps, &med, &lo, &hi);
        gm[p] = gflop / gm[p];
        if (p == 0) {
            double rd[MAX_REPS], qd, ql, qh, gd;
            for (int s = 0; s < steps; s++) rd[s] = tg[2][s] / dt[0][s];
            stats3(rd, steps, &qd, &ql, &qh);
            memcpy(tmp, tg[2], sizeof(double) * steps);
            stats3(tmp, steps, &gd, &d0, &d1);
            printf("  fp32: %.0f tok/s median (%.0f-%.0f); sgemm %.1f GFLOP/s (median, interleaved); "
                   "of sgemm %.2f (%.2f-%.2f; target >= 0.7); oneDNN's fp32 GEMM %.1f GFLOP/s, of "
                   "it %.2f (%.2f-%.2f)\n",
                   B / med, B / hi, B / lo, gm[0], ratio[0], rl[0], rh[0], gflop / gd, qd, ql, qh);
        }
        else
            printf("  bf16: %.0f tok/s median (%.0f-%.0f) [%s]; oneDNN bf16 GEMM %.1f GFLOP/s (%s); "
                   "of it %.2f (%.2f-%.2f; target >= 0.5); bf16 GEMM / sgemm %.2fx\n",
                   B / med, B / hi, B / lo, eng, gm[1], g.impl, ratio[1], rl[1], rh[1],
                   gm[1] / gm[0]);
    }
    if (!bf)
        printf("  bf16: not measured (oneDNN ISA %s has no bf16, or SAELITE_NO_BF16)\n",
               sae_bf16_isa());
    for (int p = 0; p < 1 + bf; p++) { /* where a step's time goes (means over the steps) */
        double tot = 0;
        for (int i = 0; i < SAE_PROF_N; i++) tot += prof[p][i];
        printf("  %s phases, ms/step (of the step):", p ? "bf16" : "fp32");
        for (int i = 0; i < SAE_PROF_N; i++)
            if (prof[p][i] / tot >= 0.005)
                printf(" %s %.1f (%.0f%%)", sae_prof_name(i), 1e3 * prof[p][i] / steps,
                       100 * prof[p][i] / tot);
        printf("; the GEMM alone %.1f\n", 1e3 * gflop / gm[p]);
    }
    printf("  dead %.1f%%; peak RSS %.0f MB with %d trainer(s) (weights+grad+Adam+batch %.0f MB "
           "each)\n", 100 * st.dead_frac, rss, 1 + bf, need_mb);
    fflush(stdout);
    probe_free(&g);
    sae_trainer_free(t[0]);
    sae_trainer_free(t[1]);
    mem_free(x);
    return 0;
}

/* SAE_BENCH_PEER="d_in,d_sae": only the TopK steps of bench_speed at that shape, one line per
 * precision, "saelite <precision> <tok/s median> <min> <max>" after "openblas <core>", for
 * bench_sae_peer.sh, which
 * interleaves it with the PyTorch peer (bench_sae_torch.py, the same batch). */
static int bench_peer(int D, int S, int steps)
{
    int B = 4096;
    sae_train_config c;
    float *x = speed_setup(&c, D, S, 32, B);
    if (!x) return 1;
    if (steps > MAX_REPS) steps = MAX_REPS;
    printf("openblas %s\n", op_blas_core()); /* the peer script gives PyTorch the same kernels */
    for (int p = 0; p < 1 + sae_bf16_supported(); p++) {
        sae_k_set_precision(p ? SAE_PRECISION_BF16 : SAE_PRECISION_FP32);
        sae_trainer *t;
        if (sae_trainer_new(&t, &c, x, B)) {
            fprintf(stderr, "bench_sae: %s\n", err_msg());
            return 1;
        }
        sae_step_stats st;
        double dt[MAX_REPS], med, lo, hi;
        for (int s = -1; s < steps; s++) {
            double t0 = now_seconds();
            sae_trainer_step(t, x, &st);
            if (s >= 0) dt[s] = now_seconds() - t0;
        }
        stats3(dt, steps, &med, &lo, &hi);
        printf("saelite %s %.0f %.0f %.0f\n", p ? "bf16" : "fp32", B / med, B / hi, B / lo);
        fflush(stdout);
        sae_trainer_free(t);
    }
    sae_k_set_precision(SAE_PRECISION_FP32);
    mem_free(x);
    return 0;
}

static int bench_ground_truth(int64_t tokens, sae_precision prec)
{
    sae_k_set_precision(prec);
    synth_config sc;
    synth_defaults(&sc); /* d 256, 512 features, 5 active */
    sae_source *src;
    sae_synth *g;
    if (sae_source_synth(&src, &sc) || sae_synth_new(&g, &sc)) return 1;
    sae_train_config c;
    sae_train_defaults(&c);
    c.arch = SAE_TOPK;
    c.d_in = sc.d;
    c.d_sae = 1024;
    c.k = 6;
    c.batch = 1024;
    c.lr = 0.002;
    c.total_tokens = tokens;
    float *x = mem_alloc(sizeof(float) * 16384 * sc.d);
    src->next(src, x, 16384);
    sae_trainer *t;
    if (sae_trainer_new(&t, &c, x, 16384)) return 1;
    double t0 = now_seconds();
    sae_step_stats st;
    while (sae_trainer_step_index(t) < sae_trainer_total_steps(t)) {
        src->next(src, x, c.batch);
        if (sae_trainer_step(t, x, &st)) return 1;
    }
    sae_model *m;
    sae_trainer_export(t, NULL, &m);
    double mm, rec;
    sae_mmcs(sae_synth_directions(g), sc.n_features, m->W_dec, c.d_sae, c.d_in, 0.9, &mm, &rec, NULL);
    printf("ground truth d 256, 512 features, 5 active; topk d_sae 1024 k 6 batch %d lr %g, %s: "
           "%lld tokens: MMCS %.4f, recovered %.1f%% (target 0.95 / 90%%), ev %.4f, %.0f s\n",
           c.batch, c.lr, prec == SAE_PRECISION_BF16 ? "bf16" : "fp32", (long long)tokens, mm,
           100 * rec, st.ev, now_seconds() - t0);
    sae_k_set_precision(SAE_PRECISION_FP32);
    fflush(stdout);
    sae_free(m);
    sae_trainer_free(t);
    sae_synth_free(g);
    sae_source_close(src);
    mem_free(x);
    return 0;
}

int main(int argc, char **argv)
{
    /* The steps interleave with the bf16 trainer's oneDNN calls, after which libgomp's workers
       spin unless OMP_WAIT_POLICY=PASSIVE (read when the runtime loads): the fp32 encode then
       read 10 ms slower. run-bench.sh sets it; run by hand, set it here and start again, as
       saelite's bf16 commands do (cli/main.c); OpenBLAS's kernels likewise (op_blas_core_setenv). */
    int blas = op_blas_core_setenv(), omp = par_passive_setenv();
    if (argc > 0 && (blas || omp)) par_restart(argv);
    int rc = 0;
    const char *peer = getenv("SAE_BENCH_PEER"), *comma = peer ? strchr(peer, ',') : NULL;
    if (comma) return bench_peer(atoi(peer), atoi(comma + 1), 5);
    const char *only = getenv("SAE_BENCH_SPEED"); /* "small", "large", "0" */
    if (!only || !strcmp(only, "small")) rc |= bench_speed(512, 4096, 32, 4096, 5);
    if (!only || !strcmp(only, "large")) rc |= bench_speed(768, 24576, 32, 4096, 3);
    /* the sweep's shape (make sweep: d_sae 1024, batch 2048), not in the default set */
    if (only && !strcmp(only, "sweep")) rc |= bench_speed(512, 1024, 32, 2048, 9);
    const char *gt = getenv("SAE_BENCH_GT");
    if (!gt || strcmp(gt, "0")) {
        const char *list = getenv("SAE_BENCH_GT_TOKENS");
        char buf[256];
        snprintf(buf, sizeof buf, "%s", list ? list : "1000000,3000000,10000000");
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ","))
            for (int p = 0; p < 1 + sae_bf16_supported(); p++) /* bf16 within 0.005 MMCS? */
                rc |= bench_ground_truth(atoll(tok), p ? SAE_PRECISION_BF16 : SAE_PRECISION_FP32);
    }
    return rc;
}
