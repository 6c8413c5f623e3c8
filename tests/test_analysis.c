/* test_analysis.c - analysis kernels against brute-force references. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/ana.h"
#include "common/err.h"
#include "common/mem.h"
#include "harness.h"

static uint64_t rs = 88172645463325252ull;
static double urand(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (rs >> 11) * (1.0 / 9007199254740992.0);
}

static void test_hist(void)
{
    double e[5];
    CHECK(ana_log_edges(e, 4, 1e-2, 1e2) == OK);
    CHECK_NEAR(e[0], 1e-2, 1e-15);
    CHECK_NEAR(e[1], 1e-1, 1e-12);
    CHECK_NEAR(e[2], 1.0, 1e-12);
    CHECK_NEAR(e[4], 1e2, 1e-12);
    CHECK(ana_log_edges(e, 4, 0, 1) == ERR_ARG);
    CHECK(ana_log_edges(e, 4, 2, 1) == ERR_ARG);
    CHECK(ana_bin_index(e, 4, 1e-5) == 0); /* below: clamped */
    CHECK(ana_bin_index(e, 4, 0.05) == 0);
    CHECK(ana_bin_index(e, 4, e[1]) == 1); /* left edge inclusive */
    CHECK(ana_bin_index(e, 4, 0.99) == 1);
    CHECK(ana_bin_index(e, 4, 5.0) == 2);
    CHECK(ana_bin_index(e, 4, 50.0) == 3);
    CHECK(ana_bin_index(e, 4, 1e9) == 3); /* above: clamped */
    double e1[2] = {1, 2};
    CHECK(ana_bin_index(e1, 1, 0.5) == 0 && ana_bin_index(e1, 1, 3) == 0);
    /* brute force against a linear scan */
    double e30[31];
    ana_log_edges(e30, 30, 1e-3, 1e3);
    int bad = 0;
    for (int i = 0; i < 2000; i++) {
        double v = pow(10, urand() * 8 - 4);
        int want = 0;
        for (int b = 0; b < 30; b++)
            if (v >= e30[b]) want = b;
        if (ana_bin_index(e30, 30, v) != want) bad++;
    }
    CHECK(bad == 0, "%d values binned differently from a linear scan", bad);
}

static int cmp_f_desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static void test_feat_acc(void)
{
    enum { D = 7, T = 50, S = 40, TOP = 5, RES = 64 };
    double edges[11];
    ana_log_edges(edges, 10, 1e-2, 10);
    ana_feat_acc *a;
    CHECK(ana_feat_acc_new(&a, D, TOP, RES, edges, 10, 42) == OK);
    static float all[S][T][D];
    for (int s = 0; s < S; s++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < D; j++) {
                /* feature j fires with probability (j+1)/10; feature 6 never */
                double p = j == 6 ? 0 : (j + 1) / 10.0;
                all[s][t][j] = urand() < p ? (float)(urand() * (j + 1)) + 1e-3f : 0.0f;
                if (j == 0 && s == 3 && t == 7) all[s][t][j] = 100; /* a clear top example */
                if (j == 1) all[s][t][j] = -all[s][t][j]; /* negatives never count as active */
            }
    for (int s = 0; s < S; s++) ana_feat_acc_add(a, &all[s][0][0], T, 100 + s);
    CHECK(ana_feat_tokens(a) == S * T);
    for (int j = 0; j < D; j++) {
        int64_t n = 0;
        double sum = 0;
        float mx = 0;
        static float vals[S * T];
        for (int s = 0; s < S; s++)
            for (int t = 0; t < T; t++)
                if (all[s][t][j] > 0) {
                    vals[n++] = all[s][t][j];
                    sum += all[s][t][j];
                    if (all[s][t][j] > mx) mx = all[s][t][j];
                }
        CHECK(ana_feat_active(a, j) == n, "feature %d: %lld active, want %lld", j,
              (long long)ana_feat_active(a, j), (long long)n);
        CHECK_NEAR(ana_feat_sum(a, j), sum, 1e-6 * (1 + sum));
        CHECK(ana_feat_max(a, j) == mx);
        const int64_t *h = ana_feat_hist(a, j);
        int64_t hs = 0;
        for (int b = 0; b < 10; b++) hs += h[b];
        CHECK(hs == n, "histogram of feature %d sums to %lld", j, (long long)hs);
        ana_act top[TOP];
        int nt = ana_feat_top(a, j, top);
        CHECK(nt == (n < TOP ? n : TOP));
        qsort(vals, (size_t)n, sizeof *vals, cmp_f_desc);
        int ok = 1;
        for (int i = 0; i < nt; i++) {
            if (top[i].value != vals[i]) ok = 0;
            if (all[top[i].seq - 100][top[i].pos][j] != top[i].value) ok = 0; /* right location */
        }
        CHECK(ok, "feature %d: top-%d differs from a full sort", j, TOP);
        ana_act q[5 * 3];
        int iv[5 * 3];
        int nq = ana_feat_quantiles(a, j, 5, 3, q, iv);
        if (n == 0) CHECK(nq == 0);
        else {
            CHECK(nq == 15, "feature %d: %d quantile samples", j, nq);
            int mono = 1;
            for (int i = 1; i < nq; i++)
                if (q[i].value < q[i - 1].value || iv[i] < iv[i - 1]) mono = 0;
            CHECK(mono, "quantile samples ascend by value and band");
            /* the lowest band's samples lie in the lower part of the distribution, the highest
               band's in the upper part (reservoir of 64 from ~1000 values: loose bounds) */
            float med = vals[n / 2];
            CHECK(q[0].value <= med && q[nq - 1].value >= med, "bands straddle the median %g", med);
            CHECK(all[q[nq - 1].seq - 100][q[nq - 1].pos][j] == q[nq - 1].value);
        }
    }
    ana_act top[TOP];
    CHECK(ana_feat_top(a, 0, top) && top[0].value == 100 && top[0].seq == 103 && top[0].pos == 7);
    ana_feat_acc_free(a);

    /* ties keep the earliest examples, in order */
    ana_feat_acc *b;
    CHECK(ana_feat_acc_new(&b, 1, 2, 0, edges, 10, 1) == OK);
    float ones[4] = {1, 1, 1, 1};
    ana_feat_acc_add(b, ones, 4, 9);
    CHECK(ana_feat_top(b, 0, top) == 2 && top[0].pos == 0 && top[1].pos == 1);
    CHECK(ana_feat_quantiles(b, 0, 3, 2, top, NULL) == 0); /* no reservoir */
    ana_feat_acc_free(b);
    CHECK(ana_feat_acc_new(&b, 0, 2, 0, edges, 10, 1) == ERR_ARG && b == NULL);
    /* allocation failure cleans up */
    for (int k = 1; k <= 10; k++) {
        mem_fail_at(k);
        int rc = ana_feat_acc_new(&b, 4, 2, 3, edges, 10, 1);
        mem_fail_at(0);
        CHECK(rc == ERR_NOMEM && b == NULL, "allocation %d failing", k);
    }
}

static void test_geometry(void)
{
    /* hand-made: e1, e1 (duplicate), -e1, e2, zero row */
    float W[5 * 3] = {1, 0, 0, 2, 0, 0, -1, 0, 0, 0, 3, 0, 0, 0, 0};
    int64_t h[4];
    int nn[5];
    float nc[5];
    CHECK(ana_geometry(W, 5, 3, 4, h, nn, nc) == OK);
    /* pairs: (0,1) 0deg, (0,2) 180, (1,2) 180, (0,3),(1,3),(2,3) 90 -> bins of 45 deg */
    CHECK(h[0] == 1 && h[1] == 0 && h[2] == 3 && h[3] == 2, "hist %lld %lld %lld %lld",
          (long long)h[0], (long long)h[1], (long long)h[2], (long long)h[3]);
    CHECK(nn[0] == 1 && fabsf(nc[0] - 1) < 1e-6, "nearest of 0: %d %g", nn[0], nc[0]);
    CHECK(nn[2] == 0 && fabsf(nc[2] + 1) < 1e-6, "nearest of 2: %d %g", nn[2], nc[2]);
    CHECK(nn[3] == 0 && fabsf(nc[3]) < 1e-6);
    CHECK(nn[4] == -1 && nc[4] == 0, "zero row has no neighbour");

    /* random rows against brute force, crossing a 512-row block boundary */
    enum { N = 600, DIM = 12, NB = 36 };
    float *R = malloc(sizeof(float) * N * DIM);
    for (int i = 0; i < N * DIM; i++) R[i] = (float)(urand() * 2 - 1);
    int64_t hg[NB], hw[NB] = {0};
    int *near = malloc(sizeof(int) * N);
    float *ncos = malloc(sizeof(float) * N);
    CHECK(ana_geometry(R, N, DIM, NB, hg, near, ncos) == OK);
    int bad_near = 0;
    for (int i = 0; i < N; i++) {
        double best = -1;
        int bj = -1;
        for (int j = 0; j < N; j++) {
            if (j == i) continue;
            double dot = 0, ni = 0, nj = 0;
            for (int k = 0; k < DIM; k++) {
                dot += (double)R[i * DIM + k] * R[j * DIM + k];
                ni += (double)R[i * DIM + k] * R[i * DIM + k];
                nj += (double)R[j * DIM + k] * R[j * DIM + k];
            }
            double c = dot / sqrt(ni * nj);
            if (j > i) {
                int b = (int)(acos(c) / M_PI * NB);
                hw[b >= NB ? NB - 1 : b]++;
            }
            if (fabs(c) > best) {
                best = fabs(c);
                bj = j;
            }
        }
        if (fabs(fabs(ncos[i]) - best) > 1e-5 || (near[i] != bj && fabs(fabs(ncos[i]) - best) > 1e-6))
            bad_near++;
    }
    CHECK(bad_near == 0, "%d nearest neighbours differ from brute force", bad_near);
    int64_t total = 0, diff = 0;
    for (int b = 0; b < NB; b++) {
        total += hg[b];
        diff += llabs(hg[b] - hw[b]);
    }
    CHECK(total == (int64_t)N * (N - 1) / 2);
    CHECK(diff <= 4, "angle histogram differs from brute force by %lld pairs (float rounding at "
                     "bin edges allows a few)", (long long)diff);

    /* random unit vectors: unit norm; in d=256 their angles concentrate at 90 +- ~3.6 deg */
    enum { RN = 200, RD = 256 };
    float *U = malloc(sizeof(float) * RN * RD);
    CHECK(ana_random_unit(U, RN, RD, 7) == OK);
    double nrm = 0;
    for (int k = 0; k < RD; k++) nrm += (double)U[k] * U[k];
    CHECK_NEAR(nrm, 1.0, 1e-5);
    int64_t hr[180];
    CHECK(ana_geometry(U, RN, RD, 180, hr, NULL, NULL) == OK);
    int64_t mid = 0, all = 0;
    for (int b = 0; b < 180; b++) {
        all += hr[b];
        if (b >= 80 && b < 100) mid += hr[b];
    }
    CHECK(mid > 0.99 * all, "%lld of %lld random pairs within 80..100 deg", (long long)mid,
          (long long)all);
    free(U);
    free(R);
    free(near);
    free(ncos);
}

static void test_logits(void)
{
    enum { n = 3, d = 4, C = 5, V = 6 };
    float dirs[n * d], P[d * C], g[C], WU[V * C], out[n * V];
    for (int i = 0; i < n * d; i++) dirs[i] = (float)(urand() - 0.5);
    for (int i = 0; i < d * C; i++) P[i] = (float)(urand() - 0.5);
    for (int i = 0; i < C; i++) g[i] = (float)(0.5 + urand());
    for (int i = 0; i < V * C; i++) WU[i] = (float)(urand() - 0.5);
    CHECK(ana_logit_effects(out, dirs, n, d, P, C, g, WU, V) == OK);
    float want[n * V];
    for (int i = 0; i < n; i++) {
        double r[C], mean = 0;
        for (int c = 0; c < C; c++) {
            r[c] = 0;
            for (int k = 0; k < d; k++) r[c] += (double)dirs[i * d + k] * P[k * C + c];
            mean += r[c] / C;
        }
        for (int v = 0; v < V; v++) {
            double s = 0;
            for (int c = 0; c < C; c++) s += (r[c] - mean) * g[c] * WU[v * C + c];
            want[i * V + v] = (float)s;
        }
    }
    CHECK_TENSOR(out, want, n * V, 1e-5, 1e-4, "logit effects with projection");
    /* no projection: d must equal C */
    CHECK(ana_logit_effects(out, dirs, n, d, NULL, C, g, WU, V) == ERR_ARG);
    float id[C * C] = {0};
    for (int c = 0; c < C; c++) id[c * C + c] = 1;
    float out2[C * V];
    CHECK(ana_logit_effects(out2, id, C, C, NULL, C, NULL, WU, V) == OK);
    /* basis direction c -> W_U[:, c] minus the mean over columns */
    double m0 = 0;
    for (int c = 0; c < C; c++) m0 += WU[0 * C + c] / C;
    CHECK_NEAR(out2[0 * V + 0], WU[0] - m0, 1e-5);
    /* a constant direction is removed entirely by the LayerNorm centring */
    float ones[C] = {1, 1, 1, 1, 1}, o3[V];
    CHECK(ana_logit_effects(o3, ones, 1, C, NULL, C, NULL, WU, V) == OK);
    float zeros[V] = {0};
    CHECK_TENSOR(o3, zeros, V, 1e-6, 0, "constant direction has no effect");

    float x[8] = {3, -1, 7, 7, 0, -5, 2, NAN};
    int idx[3];
    float val[3];
    CHECK(ana_topk(idx, val, x, 8, 3, 1) == 3);
    CHECK(idx[0] == 2 && idx[1] == 3 && idx[2] == 0 && val[2] == 3, "top3 %d %d %d", idx[0],
          idx[1], idx[2]);
    CHECK(ana_topk(idx, val, x, 8, 2, 0) == 2 && idx[0] == 5 && idx[1] == 1);
    CHECK(ana_topk(idx, val, x, 2, 5, 1) == 2 && idx[0] == 0);
}

static void test_pos(void)
{
    /* "The dog ran." tokens: "The", " dog", " ran", "." */
    const char *text = "The dog ran.";
    size_t ts[4] = {0, 3, 7, 11};
    size_t ss[4] = {0, 4, 8, 11}, se[4] = {3, 7, 11, 12};
    int st[4] = {0, 1, 2, 3};
    int tags[4];
    ana_token_tags(tags, ts, 4, text, strlen(text), ss, se, st, 4);
    CHECK(tags[0] == 0 && tags[1] == 1 && tags[2] == 2 && tags[3] == 3, "%d %d %d %d", tags[0],
          tags[1], tags[2], tags[3]);
    /* an untagged gap: only "dog" is tagged */
    ana_token_tags(tags, ts, 4, text, strlen(text), ss + 1, se + 1, st + 1, 1);
    CHECK(tags[0] == -1 && tags[1] == 1 && tags[2] == -1 && tags[3] == -1);
    /* a word split in two tokens: both pieces get the word's tag */
    size_t ts2[3] = {0, 4, 6};
    ana_token_tags(tags, ts2, 3, text, 8, ss, se, st, 2);
    CHECK(tags[0] == 0 && tags[1] == 1 && tags[2] == 1);

    int ex[7] = {2, 2, 1, -1, 2, 0, 1};
    int64_t cnt[3];
    double prec;
    CHECK(ana_tag_dist(cnt, 3, ex, 7, &prec) == 2);
    CHECK(cnt[0] == 1 && cnt[1] == 2 && cnt[2] == 3);
    CHECK_NEAR(prec, 0.5, 1e-12); /* 3 of 6 tagged */
    int none[2] = {-1, -1};
    CHECK(ana_tag_dist(cnt, 3, none, 2, &prec) == -1 && prec == 0);
    int tie[2] = {1, 0};
    CHECK(ana_tag_dist(cnt, 3, tie, 2, &prec) == 0 && prec == 0.5);
}

static void test_loss(void)
{
    float p[3] = {1, 2, 3}, q[3] = {1, 2, 3}, r[3] = {0, 0, 0};
    CHECK_NEAR(ana_kl_logits(p, q, 3), 0, 1e-12);
    /* KL(p || uniform) = log 3 - H(p) */
    double z = exp(1) + exp(2) + exp(3), H = 0;
    for (int i = 0; i < 3; i++) {
        double pi = exp(i + 1) / z;
        H -= pi * log(pi);
    }
    CHECK_NEAR(ana_kl_logits(p, r, 3), log(3) - H, 1e-9);
    float sh[3] = {101, 102, 103}; /* shift invariance, large logits */
    CHECK_NEAR(ana_kl_logits(sh, p, 3), 0, 1e-9);
    CHECK_NEAR(ana_ce_logits(p, 3, 2), log(z) - 3, 1e-9);
    CHECK_NEAR(ana_ce_logits(r, 3, 0), log(3), 1e-12);
    float far[2] = {0, -2000}; /* exp underflow must not give NaN */
    double kl = ana_kl_logits(far, r, 2);
    CHECK(isfinite(kl) && fabs(kl - log(2)) < 1e-9, "kl %g", kl);
    CHECK_NEAR(ana_score(4.0, 3.0, 2.0), 0.5, 1e-15); /* ce_loss_score */
    CHECK_NEAR(ana_score(4.0, 2.0, 2.0), 1.0, 1e-15); /* perfect reconstruction */
    CHECK_NEAR(ana_score(0.8, 0.2, 0.0), 0.75, 1e-15); /* kl_score */
    CHECK(isnan(ana_score(1, 1, 1)));
}


static void test_recon(void)
{
    /* x rows (1,0), (3,0); xhat (1,0), (2,1); f with 1 and 2 active */
    float x[4] = {1, 0, 3, 0}, xh[4] = {1, 0, 2, 1}, f[6] = {1, 0, 0, 2, 3, 0};
    ana_recon r;
    CHECK(ana_recon_init(&r, 2) == OK);
    ana_recon_add(&r, x, xh, f, 1, 3);
    ana_recon_add(&r, x + 2, xh + 2, f + 3, 1, 3);
    ana_recon_metrics m;
    ana_recon_result(&r, &m);
    CHECK_NEAR(m.mse, 2.0 / 4, 1e-12);                 /* errors 0 and (1 + 1) over 4 elements */
    CHECK_NEAR(m.explained_variance, 1 - 2.0 / 2, 1e-12); /* mean (2,0): SST = 1 + 1 */
    CHECK_NEAR(m.cosine, (1 + 6 / (3 * sqrt(5))) / 2, 1e-12);
    CHECK_NEAR(m.l2_ratio, (1 + sqrt(5) / 3) / 2, 1e-12);
    CHECK_NEAR(m.l0, 1.5, 1e-12);
    ana_recon_free(&r);
    /* perfect reconstruction */
    CHECK(ana_recon_init(&r, 2) == OK);
    ana_recon_add(&r, x, x, NULL, 2, 0);
    ana_recon_result(&r, &m);
    CHECK(m.mse == 0 && m.explained_variance == 1 && fabs(m.cosine - 1) < 1e-12);
    ana_recon_free(&r);
    CHECK(ana_recon_init(&r, 0) == ERR_ARG);
}

int main(void)
{
    test_recon();
    test_hist();
    test_feat_acc();
    test_geometry();
    test_logits();
    test_pos();
    test_loss();
    return harness_report("test_analysis");
}
