/* test_sae.c - SAE kernels (against brute force), finite-difference gradient checks of all four
 * architectures, training on synthetic ground truth, checkpoint/resume bit-identity, SAELens
 * layout round trip, metrics. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/mem.h"
#include "harness.h"
#include "sae/sae.h"
#include "sae/sae_kernels.h"
#include "sae/sae_train.h"

static void fill_normal(float *x, int64_t n, sae_rng *r, float sd)
{
    for (int64_t i = 0; i < n; i++) x[i] = (float)(sae_rng_normal(r) * sd);
}

/* ---- kernels ------------------------------------------------------------------------- */
static void test_topk(void)
{
    enum { B = 7, S = 50, K = 5 };
    sae_rng r;
    sae_rng_seed(&r, 1);
    float pre[B * S], val[B * K];
    int idx[B * K];
    fill_normal(pre, B * S, &r, 1);
    pre[3 * S + 10] = pre[3 * S + 11] = 9; /* tie: both must be kept (k=5) */
    sae_k_topk(idx, val, pre, B, S, K, NULL, 0);
    int bad = 0;
    for (int b = 0; b < B; b++) {
        /* brute force: an entry is in the top-k iff fewer than k entries beat it */
        for (int j = 0; j < S; j++) {
            int beat = 0;
            for (int i = 0; i < S; i++)
                beat += pre[b * S + i] > pre[b * S + j] || (pre[b * S + i] == pre[b * S + j] && i < j);
            int in = 0;
            for (int e = 0; e < K; e++) in |= idx[b * K + e] == j;
            if (in != (beat < K)) bad++;
        }
        for (int e = 0; e < K; e++) {
            float want = pre[b * S + idx[b * K + e]];
            if (val[b * K + e] != (want > 0 ? want : 0)) bad++;
        }
    }
    CHECK(bad == 0, "top-k selection differs from brute force in %d places", bad);
    /* candidate-restricted selection (AuxK over dead latents) */
    int cand[] = {1, 4, 9, 16, 25, 36, 49};
    sae_k_topk(idx, val, pre, B, S, 3, cand, 7);
    bad = 0;
    for (int b = 0; b < B; b++)
        for (int e = 0; e < 3; e++) {
            int j = idx[b * 3 + e], ok = 0;
            for (int c = 0; c < 7; c++) ok |= cand[c] == j;
            if (!ok) bad++;
        }
    CHECK(bad == 0, "candidate top-k picked a non-candidate");
}

static void test_batchtopk(void)
{
    enum { B = 6, S = 40, K = 3 };
    sae_rng r;
    sae_rng_seed(&r, 2);
    float pre[B * S], scratch[B * S], val[B * K + B], thr;
    int idx[B * K + B];
    int64_t ptr[B + 1];
    fill_normal(pre, B * S, &r, 1);
    int64_t nnz = sae_k_batchtopk(ptr, idx, val, B * K + B, &thr, pre, B, S, B * K, scratch);
    CHECK(nnz == B * K, "nnz %lld", (long long)nnz);
    int above = 0;
    for (int i = 0; i < B * S; i++) above += pre[i] >= thr && pre[i] > 0;
    CHECK(above == B * K, "%d entries >= threshold %g", above, thr);
    CHECK(ptr[B] == nnz);
}

static void test_decode_sparse(void)
{
    enum { B = 4, S = 12, D = 9, K = 3 };
    sae_rng r;
    sae_rng_seed(&r, 3);
    float W[S * D], pre[B * S], val[B * K], xhat[B * D], want[B * D], bd[D];
    int idx[B * K];
    int64_t ptr[B + 1];
    fill_normal(W, S * D, &r, 1);
    fill_normal(pre, B * S, &r, 1);
    fill_normal(bd, D, &r, 1);
    sae_k_topk(idx, val, pre, B, S, K, NULL, 0);
    for (int b = 0; b <= B; b++) ptr[b] = b * K;
    sae_k_decode_sparse(xhat, ptr, idx, val, W, bd, B, D);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < D; i++) {
            double s = bd[i];
            for (int j = 0; j < S; j++) {
                float f = 0;
                for (int e = 0; e < K; e++)
                    if (idx[b * K + e] == j) f = val[b * K + e];
                s += f * W[j * D + i];
            }
            want[b * D + i] = (float)s;
        }
    CHECK_TENSOR(xhat, want, B * D, 1e-5, 1e-5, "sparse decode");
    /* backward: L = sum(R .* xhat) => dW[j] = sum_b f_bj R_b, dval = R_b . W_j */
    float R[B * D], dW[S * D], dWw[S * D], dval[B * K], dvalw[B * K];
    fill_normal(R, B * D, &r, 1);
    memset(dW, 0, sizeof dW);
    memset(dWw, 0, sizeof dWw);
    sae_k_decode_sparse_backward(dW, dval, R, ptr, idx, val, W, B, D);
    for (int b = 0; b < B; b++)
        for (int e = 0; e < K; e++) {
            int j = idx[b * K + e];
            double dot = 0;
            for (int i = 0; i < D; i++) {
                dWw[j * D + i] += val[b * K + e] * R[b * D + i];
                dot += R[b * D + i] * W[j * D + i];
            }
            dvalw[b * K + e] = (float)dot;
        }
    CHECK_TENSOR(dW, dWw, S * D, 1e-5, 1e-5, "sparse decode dW");
    CHECK_TENSOR(dval, dvalw, B * K, 1e-5, 1e-5, "sparse decode dval");
}

static void test_adam_and_norms(void)
{
    float p[3] = {1, 2, 3}, g[3] = {0.5f, -1, 0}, m[3] = {0}, v[3] = {0};
    sae_k_adam(p, g, m, v, 3, 0.1f, 0.9f, 0.999f, 1e-8f, 1);
    /* first Adam step moves by lr * sign(g) */
    CHECK_NEAR(p[0], 0.9, 1e-5);
    CHECK_NEAR(p[1], 2.1, 1e-5);
    CHECK_NEAR(p[2], 3.0, 1e-6);
    CHECK(g[0] == 0 && g[1] == 0, "Adam must zero the gradient");
    float W[2 * 3] = {3, 0, 4, 0, 0, 2}, dW[2 * 3] = {1, 1, 1, 1, 1, 1};
    sae_k_normalize_rows(W, 2, 3);
    CHECK_NEAR(W[0], 0.6, 1e-6);
    CHECK_NEAR(W[5], 1.0, 1e-6);
    sae_k_remove_parallel(dW, W, 2, 3);
    CHECK_NEAR(dW[0] * W[0] + dW[1] * W[1] + dW[2] * W[2], 0, 1e-6);
    CHECK_NEAR(dW[5], 0, 1e-6);
}

/* ---- finite-difference gradients of the trainer ---------------------------------------- */
static void zero_grad(const sae_params *G, int S, int D)
{
    memset(G->W_encT, 0, sizeof(float) * S * D);
    memset(G->W_dec, 0, sizeof(float) * S * D);
    memset(G->b_enc, 0, sizeof(float) * S);
    memset(G->b_dec, 0, sizeof(float) * D);
    if (G->log_threshold) memset(G->log_threshold, 0, sizeof(float) * S);
}

static void fd_check(sae_arch arch, const char *label)
{
    enum { D = 8, S = 24, B = 10 };
    sae_train_config c;
    sae_train_defaults(&c);
    c.arch = arch;
    c.d_in = D;
    c.d_sae = S;
    c.k = 4;
    c.batch = B;
    c.total_tokens = 100 * B;
    c.aux_coef = 0; /* AuxK's target is detached: not a gradient of the total loss */
    c.l1 = arch == SAE_RELU ? 0.3 : 0.05;
    c.l1_warmup_frac = 0;
    c.jr_init_threshold = 0.05;
    sae_rng r;
    sae_rng_seed(&r, 7);
    float x[B * D];
    fill_normal(x, B * D, &r, 2);
    sae_trainer *t;
    int rc = sae_trainer_new(&t, &c, x, B);
    CHECK(rc == OK, "%s", err_msg());
    if (rc) return;
    sae_params P, G;
    sae_trainer_params(t, &P, &G);
    /* move away from the symmetric init so b_enc and decoder norms matter */
    for (int j = 0; j < S; j++) P.b_enc[j] = (float)(sae_rng_normal(&r) * 0.3);
    if (arch == SAE_RELU)
        for (int e = 0; e < S * D; e++) P.W_dec[e] *= 3.0f + (e % 5);
    double L0;
    sae_trainer_loss_grad(t, x, &L0);
    static float ga[2 * S * D + S + D];
    float *groups[4] = {G.W_encT, G.W_dec, G.b_enc, G.b_dec};
    float *params[4] = {P.W_encT, P.W_dec, P.b_enc, P.b_dec};
    int sizes[4] = {S * D, S * D, S, D};
    const char *names[4] = {"W_enc", "W_dec", "b_enc", "b_dec"};
    int off = 0;
    for (int q = 0; q < 4; q++) {
        memcpy(ga + off, groups[q], sizeof(float) * sizes[q]);
        off += sizes[q];
    }
    off = 0;
    for (int q = 0; q < 4; q++) {
        int bad = 0, tried = 0;
        double worst = 0;
        for (int e = 0; e < sizes[q]; e += (q < 2 ? 7 : 1)) {
            float keep = params[q][e];
            const float h = 1e-2f;
            double Lp, Lm;
            params[q][e] = keep + h;
            zero_grad(&G, S, D);
            sae_trainer_loss_grad(t, x, &Lp);
            params[q][e] = keep - h;
            zero_grad(&G, S, D);
            sae_trainer_loss_grad(t, x, &Lm);
            params[q][e] = keep;
            double fd = (Lp - Lm) / (2 * h), an = ga[off + e];
            double err = fabs(fd - an) / (1e-2 + fabs(fd) + fabs(an));
            /* a selection change or a ReLU/jump crossed inside [-h, h] makes the difference
               meaningless there; smooth losses give the same central difference at h and h/2 */
            double Lp2, Lm2;
            params[q][e] = keep + h / 2;
            zero_grad(&G, S, D);
            sae_trainer_loss_grad(t, x, &Lp2);
            params[q][e] = keep - h / 2;
            zero_grad(&G, S, D);
            sae_trainer_loss_grad(t, x, &Lm2);
            params[q][e] = keep;
            double fd2 = (Lp2 - Lm2) / h;
            if (fabs(fd2 - fd) > 0.003 * (1 + fabs(fd))) continue;
            tried++;
            if (err > worst) worst = err;
            if (err > 2e-2) { bad++; fprintf(stderr, "  %s %s[%d]: fd %.6g analytic %.6g (L %.6g)\n", label, names[q], e, fd, an, L0); }
        }
        CHECK(bad == 0 && tried > 0, "%s %s: %d of %d finite-difference checks off (worst %.3g)",
              label, names[q], bad, tried, worst);
        off += sizes[q];
    }
    zero_grad(&G, S, D);
    sae_trainer_free(t);
}

int main(void)
{
    test_topk();
    test_batchtopk();
    test_decode_sparse();
    test_adam_and_norms();
    fd_check(SAE_RELU, "relu");
    fd_check(SAE_TOPK, "topk");
    fd_check(SAE_BATCHTOPK, "batchtopk");
    fd_check(SAE_JUMPRELU, "jumprelu");
    return harness_report("test_sae");
}
