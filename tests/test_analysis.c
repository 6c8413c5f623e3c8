/* test_analysis.c - analysis kernels against brute-force references. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/ana.h"
#include "analysis/ana_dist.h"
#include "common/err.h"
#include "common/mem.h"
#include "harness.h"
#include "tok_fixture.h"

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
    for (int s = 0; s < S; s++) ana_feat_acc_add(a, &all[s][0][0], T, 100 + s, 0);
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
    ana_feat_acc_add(b, ones, 4, 9, 3); /* positions 3..6 */
    CHECK(ana_feat_top(b, 0, top) == 2 && top[0].pos == 3 && top[1].pos == 4);
    CHECK(ana_feat_quantiles(b, 0, 3, 2, top, NULL) == 0); /* no reservoir */
    ana_feat_acc_free(b);
    CHECK(ana_feat_acc_new(&b, 0, 2, 0, edges, 10, 1) == ERR_ARG && b == NULL);
    /* allocation failure cleans up */
    for (int k = 1; k <= 11; k++) {
        mem_fail_at(k);
        int rc = ana_feat_acc_new(&b, 4, 2, 3, edges, 10, 1);
        mem_fail_at(0);
        CHECK(rc == ERR_NOMEM && b == NULL, "allocation %d failing", k);
    }
}

/* Accumulators of disjoint sets of sequences, merged through pack/merge_packed in any order,
 * hold exactly what one accumulator fed with everything holds (the sums aside: the caller's). */
static void test_feat_merge(void)
{
    enum { D = 5, T = 30, S = 24, TOP = 4, RES = 16, NB = 8 };
    double edges[NB + 1];
    ana_log_edges(edges, NB, 1e-2, 10);
    static float all[S][T][D];
    for (int s = 0; s < S; s++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < D; j++) {
                double p = (j + 1) / 6.0;
                /* few distinct values: many ties for the top lists */
                all[s][t][j] = urand() < p ? (float)(1 + (int)(urand() * 4)) * 0.5f : 0.0f;
            }
    ana_feat_acc *whole, *part[3];
    CHECK(ana_feat_acc_new(&whole, D, TOP, RES, edges, NB, 0x5ae1u) == OK);
    for (int k = 0; k < 3; k++) CHECK(ana_feat_acc_new(&part[k], D, TOP, RES, edges, NB, 0x5ae1u) == OK);
    for (int s = 0; s < S; s++) {
        ana_feat_acc_add(whole, &all[s][0][0], T, 1000 + s, 0);
        ana_feat_acc_add(part[(s * 7) % 3], &all[s][0][0], T, 1000 + s, 0); /* interleaved */
    }
    for (int k = 2; k >= 1; k--) { /* 2 then 1 into 0 */
        size_t n = ana_feat_acc_packed_size(part[k]);
        void *buf = malloc(n);
        ana_feat_acc_pack(part[k], buf);
        CHECK(ana_feat_acc_merge_packed(part[0], buf, n) == OK);
        if (k == 1) CHECK(ana_feat_acc_merge_packed(part[0], buf, n - 1) == ERR_FORMAT);
        free(buf);
    }
    ana_feat_acc *m = part[0];
    CHECK(ana_feat_tokens(m) == ana_feat_tokens(whole));
    int same = 1;
    for (int j = 0; j < D; j++) {
        same &= ana_feat_active(m, j) == ana_feat_active(whole, j) && ana_feat_max(m, j) == ana_feat_max(whole, j);
        same &= !memcmp(ana_feat_hist(m, j), ana_feat_hist(whole, j), NB * sizeof(int64_t));
        ana_act a[TOP], b[TOP], qa[12], qb[12];
        int ia[12], ib[12];
        int na = ana_feat_top(m, j, a), nb = ana_feat_top(whole, j, b);
        same &= na == nb && !memcmp(a, b, (size_t)na * sizeof *a);
        na = ana_feat_quantiles(m, j, 4, 3, qa, ia);
        nb = ana_feat_quantiles(whole, j, 4, 3, qb, ib);
        same &= na == nb && na > 0 && !memcmp(qa, qb, (size_t)na * sizeof *qa) && !memcmp(ia, ib, (size_t)na * sizeof *ia);
    }
    CHECK(same, "merged statistics, top lists or quantile samples differ from one accumulator's");
    /* an accumulator of another shape is refused */
    ana_feat_acc *other;
    CHECK(ana_feat_acc_new(&other, D, TOP + 1, RES, edges, NB, 0x5ae1u) == OK);
    size_t n = ana_feat_acc_packed_size(other);
    void *buf = malloc(n);
    ana_feat_acc_pack(other, buf);
    CHECK(ana_feat_acc_merge_packed(m, buf, n) == ERR_FORMAT);
    free(buf);
    ana_feat_acc_free(other);
    /* values no feed makes (a forged checkpoint): refused, nothing added */
    n = ana_feat_acc_packed_size(part[1]);
    buf = malloc(n);
    const size_t ent = 6 * 8 + (size_t)D * (8 + 4 + 4 + 4) + (size_t)D * NB * 8; /* first top entry */
    for (int v = 0; v < 4; v++) {
        ana_feat_acc_pack(part[1], buf);
        unsigned char *p = buf;
        int64_t neg = -1;
        float nan = NAN;
        int32_t negpos = -3;
        if (v == 0) memcpy(p + 6 * 8, &neg, 8);                       /* n_active[0] */
        if (v == 1) memcpy(p + 6 * 8 + (size_t)D * 8 + (size_t)D * 4, &neg, 8); /* hist[0][0] */
        if (v == 2) memcpy(p + ent, &nan, 4);                          /* a top value */
        if (v == 3) memcpy(p + ent + 4, &negpos, 4);                   /* its position */
        int64_t before = ana_feat_tokens(m);
        CHECK(ana_feat_acc_merge_packed(m, buf, n) == ERR_FORMAT && ana_feat_tokens(m) == before,
              "forged statistics (case %d) refused, nothing added", v);
    }
    free(buf);
    ana_feat_acc_free(whole);
    for (int k = 0; k < 3; k++) ana_feat_acc_free(part[k]);
}

/* pairwise sum of x[lo, hi), hi - lo a power of two: the tree ana_tree must build */
static double tree_ref(const double *x, int lo, int hi)
{
    if (hi - lo == 1) return x[lo];
    int mid = (lo + hi) / 2;
    return tree_ref(x, lo, mid) + tree_ref(x, mid, hi);
}

static void test_tree(void)
{
    static double v[ANA_BLOCKS][3];
    for (int b = 0; b < ANA_BLOCKS; b++)
        for (int i = 0; i < 3; i++) v[b][i] = (urand() - 0.3) * pow(10, (int)(urand() * 12) - 6);
    ana_tree t;
    CHECK(ana_tree_init(&t, 3) == OK);
    const double *tot;
    for (int b = 0; b < ANA_BLOCKS; b++) {
        memcpy(t.leaf, v[b], sizeof v[b]);
        ana_tree_push(&t);
        if (b == 2) CHECK(ana_tree_total(&t, &tot) == ERR_ARG); /* 3 blocks: two partial sums */
    }
    CHECK(ana_tree_total(&t, &tot) == OK);
    int exact = 1;
    for (int i = 0; i < 3; i++) {
        double col[ANA_BLOCKS];
        for (int b = 0; b < ANA_BLOCKS; b++) col[b] = v[b][i];
        exact &= tot[i] == tree_ref(col, 0, ANA_BLOCKS);
    }
    CHECK(exact, "the block sums are not the fixed pairwise tree");
    ana_tree_free(&t);
    /* the blocks cover [0, n) without gaps, and one rank owns them all */
    int b0, b1;
    ana_dist_blocks(&b0, &b1);
    CHECK(b0 == 0 && b1 == ANA_BLOCKS && ana_block_start(1000, 0) == 0 && ana_block_start(1000, ANA_BLOCKS) == 1000);
    CHECK(ana_block_start(3, 255) == 2 && ana_block_start(3, 86) == 1);
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
    /* equal rows whose float dot product rounds above 1: the cosine is clamped to [-1, 1] (an
       audit: 1.0000001 was stored, and report refused the table as tampered) */
    {
        enum { GD = 7 };
        float Wd[3 * GD], o[3];
        int on[3];
        int64_t oh[4];
        int over = 0;
        for (int t = 0; t < 2000 && !over; t++) {
            uint64_t sd = 0x9e3779b97f4a7c15ull * (uint64_t)(t + 1);
            for (int k = 0; k < GD; k++) {
                sd ^= sd << 13, sd ^= sd >> 7, sd ^= sd << 17;
                Wd[k] = Wd[GD + k] = (float)((sd >> 40) / 16777216.0 - 0.5);
                Wd[2 * GD + k] = k == t % GD ? 1.0f : 0.0f;
            }
            CHECK(ana_geometry(Wd, 3, GD, 4, oh, on, o) == OK);
            for (int i = 0; i < 3; i++) CHECK(o[i] >= -1 && o[i] <= 1, "cosine %.9g outside [-1, 1]", o[i]);
            over = o[0] == 1 && on[0] == 1;
        }
        CHECK(over, "an equal pair's cosine is 1");
    }

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
    /* the prepared form agrees with the direct one */
    enum { KV = 1000 };
    static float lp[KV], lq[KV], pp[KV];
    for (int i = 0; i < KV; i++) {
        lp[i] = (float)(urand() * 20 - 10);
        lq[i] = lp[i] + (float)(urand() - 0.5);
    }
    lp[3] = -3000; /* a probability that underflows */
    double lse;
    ana_softmax(pp, lp, KV, &lse);
    double direct = ana_kl_logits(lp, lq, KV), prep = ana_kl_prepared(lp, pp, lse, lq, KV);
    CHECK(direct > 0 && fabs(prep - direct) < 1e-6 * (1 + direct), "prepared KL %.9g vs %.9g", prep, direct);
    CHECK_NEAR(ana_kl_prepared(lp, pp, lse, lp, KV), 0, 1e-7);
    double psum = 0;
    for (int i = 0; i < KV; i++) psum += pp[i];
    CHECK_NEAR(psum, 1.0, 1e-5);
    CHECK_NEAR(ana_score(4.0, 3.0, 2.0), 0.5, 1e-15); /* ce_loss_score */
    CHECK_NEAR(ana_score(4.0, 2.0, 2.0), 1.0, 1e-15); /* perfect reconstruction */
    CHECK_NEAR(ana_score(0.8, 0.2, 0.0), 0.75, 1e-15); /* kl_score */
    CHECK(isnan(ana_score(1, 1, 1)));
}


/* ---- end to end: `saelite analyze` on a tiny random model, store and SAE ------------------- */
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/ana_run.h"
#include "model/gpt2.h"
#include "model/tokenizer.h"
#include "sae/sae.h"
#include "store/sqlfuncs.h"
#include "store/store.h"
#include "store/store_ana.h"
#include "store/store_internal.h"

enum { E_T = 16, E_SEQS = 24, E_C = 16, E_V = 64, E_DSAE = 32 };

typedef struct { float *buf; } capture;
static int capture_hook(const tensor_view *t, void *user)
{
    memcpy(((capture *)user)->buf, t->data, (size_t)tensor_numel(t) * sizeof(float));
    return 0;
}

/* First column of the first row of a query, as a double (NAN when NULL or no row). */
typedef struct { double v; int rows; } one;
static int one_row(void *u, int k, int nc, const char *const *names, const char *const *vals,
                   const int *types)
{
    one *o = u;
    if (!vals) return 0;
    if (o->rows++ == 0) o->v = vals[0] ? atof(vals[0]) : NAN;
    return 0;
}
static double q1(const char *db, const char *sql)
{
    one o = {NAN, 0};
    if (store_ro_query(db, sql, one_row, &o) != OK) {
        fprintf(stderr, "query failed: %s: %s\n", sql, err_msg());
        return NAN;
    }
    return o.v;
}

static int make_sae(const char *dir, int d_in, const char *hook, uint64_t seed)
{
    sae_config cfg = {.arch = SAE_RELU, .d_in = d_in, .d_sae = E_DSAE, .context_size = E_T};
    snprintf(cfg.hook_name, sizeof cfg.hook_name, "%s", hook);
    snprintf(cfg.model_name, sizeof cfg.model_name, "tiny");
    sae_model *s;
    int rc = sae_model_new(&s, &cfg);
    if (rc) return rc;
    rs = seed;
    for (int j = 0; j < E_DSAE; j++) {
        double n = 0;
        for (int k = 0; k < d_in; k++) {
            float v = (float)(urand() * 2 - 1);
            s->W_dec[j * d_in + k] = v;
            n += (double)v * v;
        }
        for (int k = 0; k < d_in; k++) {
            s->W_dec[j * d_in + k] /= (float)sqrt(n);
            s->W_enc[k * E_DSAE + j] = s->W_dec[j * d_in + k];
        }
        s->b_enc[j] = -0.002f;
    }
    rc = sae_save(s, dir);
    sae_free(s);
    return rc;
}

/* make_sae's weights as another architecture: gated (b_gate = b_enc, small b_mag and r_mag) or
   matryoshka (a JumpReLU threshold and widths). */
static int make_sae_arch(const char *dir, sae_arch arch, uint64_t seed)
{
    int rc = make_sae(dir, E_C, "blocks.0.hook_resid_post", seed);
    sae_model *r = NULL, *s = NULL;
    if (!rc) rc = sae_load(&r, dir);
    sae_config cfg = r ? r->cfg : (sae_config){0};
    cfg.arch = arch;
    if (arch == SAE_MATRYOSHKA) {
        cfg.n_widths = 2;
        cfg.widths[0] = E_DSAE / 2;
        cfg.widths[1] = E_DSAE;
    }
    if (!rc) rc = sae_model_new(&s, &cfg);
    if (!rc) {
        memcpy(s->W_enc, r->W_enc, sizeof(float) * E_C * E_DSAE);
        memcpy(s->W_dec, r->W_dec, sizeof(float) * E_C * E_DSAE);
        memcpy(s->b_enc, r->b_enc, sizeof(float) * E_DSAE);
        memcpy(s->b_dec, r->b_dec, sizeof(float) * E_C);
        for (int j = 0; j < E_DSAE; j++) {
            if (s->b_mag) s->b_mag[j] = 0.01f * (j % 3);
            if (s->r_mag) s->r_mag[j] = 0.1f * (j % 5) - 0.2f;
            if (s->threshold) s->threshold[j] = 0.05f;
        }
        rc = sae_save(s, dir);
    }
    sae_free(r);
    sae_free(s);
    return rc;
}

static int build_fixture(const char *root, char *db, char *model_dir, char *sae_dir)
{
    sprintf(db, "%s/a.db", root);
    sprintf(model_dir, "%s/model", root);
    sprintf(sae_dir, "%s/sae", root);
    gpt2_config cfg = {.n_layer = 2, .n_head = 2, .n_embd = E_C, .n_ctx = 32, .vocab_size = E_V,
                       .n_inner = 4 * E_C, .ln_eps = 1e-5f};
    gpt2_model *m = NULL;
    store *s = NULL;
    int rc = gpt2_create(&m, &cfg, 1);
    if (!rc) rc = gpt2_save(m, model_dir, ST_F32, 0);
    /* a tokenizer in the model directory: the 256 byte tokens, id = byte value, no merges */
    if (!rc) rc = fixture_byte_tokenizer(model_dir);
    if (!rc) rc = store_open(&s, db, STORE_CREATE);
    int64_t mid = 0;
    store_hook h;
    char cs[17] = "";
    if (!rc) rc = gpt2_dir_checksum(model_dir, cs); /* as extract records it; analyze checks it */
    if (!rc) rc = store_model_add(s, "tiny", model_dir, "{}", cs, &mid);
    if (!rc) rc = store_hook_add(s, mid, "blocks.0.hook_resid_post", 0, E_C, STORE_F32, E_T, &h);
    float acts[E_T * E_C];
    capture cap = {acts};
    if (!rc) rc = gpt2_hook_add(m, "blocks.0.hook_resid_post", capture_hook, &cap);
    if (!rc) rc = store_begin(s);
    rs = 12345;
    for (int q = 0; q < E_SEQS && !rc; q++) {
        int ids[E_T];
        const char *text[E_T], *tags[E_T];
        char buf[E_T][8];
        for (int t = 0; t < E_T; t++) {
            ids[t] = (int)(urand() * E_V);
            snprintf(buf[t], 8, " t%d", ids[t]);
            text[t] = buf[t];
            tags[t] = ids[t] % 3 == 0 ? "NN" : ids[t] % 3 == 1 ? "VB" : NULL;
        }
        int bos = q % 2; /* odd sequences start with a prepended end-of-text token */
        if (bos) {
            ids[0] = E_V - 1;
            tags[0] = NULL;
        }
        int64_t doc, seq;
        rc = store_doc_add(s, "synthetic", q, "doc", NULL, NULL, 0, &doc);
        if (!rc) rc = store_seq_add(s, doc, 0, bos, ids, E_T, &seq, NULL);
        if (!rc) rc = store_tokens_add(s, seq, E_T, ids, text, NULL, NULL, tags);
        if (!rc) rc = gpt2_forward(m, ids, 1, E_T, 0);
        if (!rc) rc = store_act_write(s, h.id, seq, acts, E_T);
    }
    if (!rc) rc = store_commit(s);
    store_close(s);
    gpt2_free(m);
    if (!rc) rc = make_sae(sae_dir, E_C, "blocks.0.hook_resid_post", 99);
    return rc;
}

/* ana_run as `saelite analyze --db DB [--sae SAE] --all` with the defaults, then `set` applied. */
typedef struct { const char *hook; int neurons, no_model, keep_bos, all_acts, ce_seqs, top, effects, no_err; volatile int *stop; ana_memo *memo; } ana_flags;

static int analyze(const char *db, const char *sae, ana_flags fl)
{
    ana_run_opts o;
    ana_run_defaults(&o);
    o.db = db;
    o.sae_dir = sae;
    o.all = 1;
    o.hook = fl.hook;
    o.neurons = fl.neurons;
    o.no_model = fl.no_model;
    o.keep_bos = fl.keep_bos;
    o.all_acts = fl.all_acts;
    o.effects = fl.effects;
    o.effects_ctx = 5;
    if (fl.ce_seqs) o.ce_seqs = fl.ce_seqs;
    if (fl.top) o.top_n = fl.top;
    o.stop = fl.stop;
    o.memo = fl.memo;
    o.no_err_pass = fl.no_err;
    ana_run_result res;
    int rc = ana_run(&o, &res);
    if (!rc) CHECK(res.n_dicts == (sae != NULL) + fl.neurons, "one result per dictionary");
    return rc;
}

static void test_analyze_e2e(void)
{
    char root[] = "/tmp/saelite_analyze_XXXXXX";
    if (!mkdtemp(root)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char db[256], model[256], sae[256], args[1024], sql[512];
    int rc = build_fixture(root, db, model, sae);
    CHECK(rc == OK, "fixture: %s", err_msg());
    if (rc) return;
    /* finding 8: the first analyze of a database failing on an SAE of another width leaves the
     * database byte-identical (the analysis schema part used to be created first) */
    {
        char first_sae[300], cmp[1200];
        snprintf(first_sae, sizeof first_sae, "%s/sae_first_narrow", root);
        CHECK(make_sae(first_sae, 8, "blocks.0.hook_resid_post", 4) == OK);
        snprintf(cmp, sizeof cmp, "cp %s %s.orig", db, db);
        CHECK(system(cmp) == 0);
        CHECK(analyze(db, first_sae, (ana_flags){.no_model = 1}) == ERR_SHAPE, "width mismatch refused");
        CHECK(!strstr(err_msg(), "analyze: analyze:") && strstr(err_msg(), first_sae), "%s", err_msg());
        snprintf(cmp, sizeof cmp, "cmp -s %s %s.orig", db, db);
        CHECK(system(cmp) == 0, "a failed first analyze changed the database");
    }
    const ana_flags full = {.neurons = 1, .ce_seqs = 8, .top = 5};
    rc = analyze(db, sae, full);
    CHECK(rc == 0, "analyze: %s", err_msg());
    if (rc) return;
    CHECK(q1(db, "SELECT count(*) FROM ana_dicts") == 2);
    double clean = q1(db, "SELECT value FROM ana_metrics m JOIN ana_dicts d ON d.id = m.dict_id WHERE kind='sae' AND m.name='ce_clean'");
    double err = q1(db, "SELECT value FROM ana_metrics m JOIN ana_dicts d ON d.id = m.dict_id WHERE kind='sae' AND m.name='ce_sae_err'");
    double sae_ce = q1(db, "SELECT value FROM ana_metrics m JOIN ana_dicts d ON d.id = m.dict_id WHERE kind='sae' AND m.name='ce_sae'");
    double zero = q1(db, "SELECT value FROM ana_metrics m JOIN ana_dicts d ON d.id = m.dict_id WHERE kind='sae' AND m.name='ce_zero'");
    double score = q1(db, "SELECT value FROM ana_metrics m JOIN ana_dicts d ON d.id = m.dict_id WHERE kind='sae' AND m.name='ce_loss_score'");
    double klerr = q1(db, "SELECT value FROM ana_metrics m JOIN ana_dicts d ON d.id = m.dict_id WHERE kind='sae' AND m.name='kl_sae_err'");
    double klsae = q1(db, "SELECT value FROM ana_metrics m JOIN ana_dicts d ON d.id = m.dict_id WHERE kind='sae' AND m.name='kl_sae'");
    /* the sanity check: reconstruction + error term gives back the clean model */
    CHECK(isfinite(clean) && fabs(err - clean) < 1e-4, "ce with error term %.8f vs clean %.8f", err, clean);
    CHECK(klerr >= 0 && klerr < 1e-6, "KL with error term %g", klerr);
    CHECK(klsae > 1e-6, "the spliced SAE changes the output (KL %g)", klsae);
    CHECK(fabs(score - (zero - sae_ce) / (zero - clean)) < 1e-9, "ce_loss_score formula");
    CHECK(fabs(clean - log(E_V)) < 0.5, "clean CE %.4f near log V for a random model", clean);
    /* the sweep's downstream: the zero-ablation sums from a memo are the ones measured, bit for
       bit, and without the error pass its metrics are not written */
    {
        const char *mq = "SELECT value FROM ana_metrics m JOIN ana_dicts d ON d.id = m.dict_id WHERE kind='sae' AND m.name='%s'";
        char qs[300];
        snprintf(qs, sizeof qs, mq, "kl_zero");
        double klzero = q1(db, qs);
        ana_memo *memo;
        CHECK(ana_memo_new(&memo) == OK);
        int64_t hits, kept;
        for (int pass = 0; pass < 2; pass++) {
            CHECK(analyze(db, sae, (ana_flags){.ce_seqs = 8, .top = 5, .memo = memo, .no_err = 1}) == OK,
                  "%s", err_msg());
            ana_memo_counts(memo, &hits, &kept);
            CHECK(kept == 8 && hits == 8 * pass, "pass %d: %lld kept, %lld hits", pass,
                  (long long)kept, (long long)hits);
            snprintf(qs, sizeof qs, mq, "ce_zero");
            CHECK(q1(db, qs) == zero, "ce_zero %.17g vs %.17g", q1(db, qs), zero);
            snprintf(qs, sizeof qs, mq, "kl_zero");
            CHECK(q1(db, qs) == klzero, "kl_zero %.17g vs %.17g", q1(db, qs), klzero);
            snprintf(qs, sizeof qs, mq, "ce_sae");
            CHECK(q1(db, qs) == sae_ce, "ce_sae %.17g vs %.17g", q1(db, qs), sae_ce);
            CHECK(q1(db, "SELECT count(*) FROM ana_metrics WHERE name IN ('ce_sae_err', 'kl_sae_err')") == 0,
                  "no error-pass metrics without the pass");
        }
        ana_memo_free(memo);
        CHECK(analyze(db, sae, full) == OK, "%s", err_msg()); /* the rows the tests below read */
    }

    /* per-feature statistics against a direct recomputation */
    sae_model *sm;
    store *s;
    int opened = sae_load(&sm, sae) == OK && store_open(&s, db, STORE_READONLY) == OK;
    CHECK(opened, "%s", err_msg());
    if (!opened) return;
    store_hook h;
    CHECK(store_hook_find(s, "blocks.0.hook_resid_post", &h) == OK);
    int64_t *ids;
    size_t n;
    CHECK(store_seq_list(s, h.id, STORE_SPLIT_ALL, 0.1, &ids, &n) == OK && n == E_SEQS);
    int64_t active[E_DSAE] = {0};
    float maxv[E_DSAE] = {0};
    double l0 = 0;
    for (size_t i = 0; i < n; i++) {
        float x[E_T * E_C], f[E_T * E_DSAE];
        int T = E_T;
        CHECK(store_act_read(s, h.id, ids[i], x, &T) == OK && T == E_T);
        sae_encode(sm, x, T, f);
        int b0 = (int)(i % 2); /* the BOS position is left out of the statistics */
        for (int k = b0 * E_DSAE; k < T * E_DSAE; k++)
            if (f[k] > 0) {
                active[k % E_DSAE]++;
                l0 += 1.0 / (E_SEQS * E_T - E_SEQS / 2);
                if (f[k] > maxv[k % E_DSAE]) maxv[k % E_DSAE] = f[k];
            }
    }
    mem_free(ids);
    store_close(s);
    sae_free(sm);
    int bad = 0;
    for (int j = 0; j < E_DSAE; j++) {
        snprintf(sql, sizeof sql, "SELECT n_active FROM ana_features f JOIN ana_dicts d ON d.id = f.dict_id WHERE kind='sae' AND feature=%d", j);
        if (q1(db, sql) != active[j]) bad++;
        snprintf(sql, sizeof sql, "SELECT max_act FROM ana_features f JOIN ana_dicts d ON d.id = f.dict_id WHERE kind='sae' AND feature=%d", j);
        double mx = q1(db, sql);
        if (active[j] ? fabs(mx - maxv[j]) > 1e-5 * (1 + maxv[j]) : !isnan(mx)) bad++;
    }
    CHECK(bad == 0, "%d per-feature counts/maxima differ from a direct recomputation", bad);
    CHECK_NEAR(q1(db, "SELECT value FROM ana_metrics m JOIN ana_dicts d ON d.id = m.dict_id WHERE kind='sae' AND m.name='l0'"), l0, 1e-9);
    CHECK(q1(db, "SELECT count(*) FROM (SELECT f.feature FROM ana_features f JOIN ana_hist h USING (dict_id, feature) GROUP BY f.dict_id, f.feature HAVING sum(h.count) != max(f.n_active))") == 0,
          "histograms sum to n_active");
    CHECK(q1(db, "SELECT count(*) FROM ana_features f JOIN ana_acts a USING (dict_id, feature) WHERE a.kind='top' AND a.rank=0 AND a.value != f.max_act") == 0,
          "the first top activation is the maximum");
    CHECK(q1(db, "SELECT count(*) FROM ana_acts a JOIN tokens t ON t.sequence_id = a.seq_id AND t.position = a.pos WHERE a.token != t.token_id") == 0,
          "stored token ids match the store");
    CHECK(q1(db, "SELECT count(*) FROM ana_acts WHERE kind='quantile'") > 0);
    CHECK(q1(db, "SELECT count(*) FROM ana_acts a JOIN sequences s ON s.id = a.seq_id WHERE s.bos = 1 AND a.pos = 0") == 0,
          "BOS positions are not in the statistics");
    CHECK(q1(db, "SELECT n_tokens FROM ana_dicts WHERE kind = 'neurons'") == E_SEQS * E_T - E_SEQS / 2);
    CHECK(q1(db, "SELECT count(*) FROM ana_geometry g JOIN ana_dicts d ON d.id = g.dict_id WHERE kind='sae' AND source='decoder'") == 90);
    CHECK(q1(db, "SELECT sum(count) FROM ana_geometry g JOIN ana_dicts d ON d.id = g.dict_id WHERE kind='sae' AND source='random'") == E_DSAE * (E_DSAE - 1) / 2);
    CHECK(q1(db, "SELECT sum(count) FROM ana_geometry g JOIN ana_dicts d ON d.id = g.dict_id WHERE kind='neurons' AND source='decoder' AND lo_deg <= 90 AND hi_deg > 90") == E_C * (E_C - 1) / 2,
          "neuron basis: all pairs orthogonal");
    CHECK(q1(db, "SELECT count(*) FROM ana_logits l JOIN ana_dicts d ON d.id = l.dict_id WHERE kind='sae'") == E_DSAE * 2 * 10);
    CHECK(q1(db, "SELECT count(*) FROM ana_decoder d1 JOIN ana_decoder d2 ON d1.dict_id = d2.dict_id AND d2.feature = (SELECT nearest FROM ana_features f WHERE f.dict_id = d1.dict_id AND f.feature = d1.feature) JOIN ana_features f ON f.dict_id = d1.dict_id AND f.feature = d1.feature WHERE abs(vec_cos(d1.vec, d2.vec) - f.nearest_cos) > 1e-5") == 0,
          "nearest_cos agrees with vec_cos of the stored decoder rows");
    CHECK(q1(db, "SELECT count(*) FROM ana_vocab") == 256, "vocabulary from the model's tokenizer");
    CHECK(q1(db, "SELECT count(*) FROM ana_logits WHERE tok_text(token) IS NULL") == 0);
    CHECK(q1(db, "SELECT tok_id('(')") == 40 && q1(db, "SELECT count(*) WHERE tok_text(40) = '('") == 1);
    double prec = q1(db, "SELECT min(best_tag_precision) FROM ana_features WHERE best_tag IS NOT NULL");
    CHECK(prec > 0 && prec <= 1, "best-tag precision %g", prec);
    CHECK(q1(db, "SELECT count(*) FROM ana_metrics m JOIN ana_dicts d ON d.id = m.dict_id WHERE kind='neurons' AND m.name='pos_precision_mean'") == 1);
    CHECK(q1(db, "SELECT value FROM ana_metrics m JOIN ana_dicts d ON d.id = m.dict_id WHERE kind='neurons' AND m.name='explained_variance'") == 1);

    /* --effects: measured ablation effects beside the direct-path logits */
    CHECK(q1(db, "SELECT count(*) FROM ana_effects") == 0, "no effects without --effects");
    ana_flags eff = full;
    eff.effects = 1;
    CHECK(analyze(db, sae, eff) == 0, "analyze --effects: %s", err_msg());
    double ne = q1(db, "SELECT count(*) FROM ana_effects");
    CHECK(ne > E_DSAE / 2 && ne <= E_DSAE, "%g features with effects", ne);
    CHECK(q1(db, "SELECT count(*) FROM ana_effects e JOIN ana_features f USING (dict_id, feature) WHERE e.n_contexts > min(5, f.n_active) OR e.n_contexts < 1") == 0,
          "at most --effects-ctx contexts, only where the feature fires");
    CHECK(q1(db, "SELECT count(*) FROM ana_effects WHERE mean_kl < 0 OR rank_corr IS NULL OR rank_corr < -1 OR rank_corr > 1 OR mean_act <= 0") == 0);
    CHECK(q1(db, "SELECT count(*) FROM ana_effect_logits") == ne * 2 * 10);
    CHECK(q1(db, "SELECT count(*) FROM ana_effect_logits WHERE sign * value < 0") == 0, "raised tokens rise, lowered fall");
    CHECK(q1(db, "SELECT max(mean_kl) FROM ana_effects") > 1e-6);
    /* the schema upgrade: a version 2 database gets the effects tables */
    {
        store *s2;
        CHECK(store_open(&s2, db, 0) == OK);
        CHECK(store_exec(s2, "DROP TABLE ana_effects; DROP TABLE ana_effect_logits; UPDATE schema_parts SET version = 2 WHERE name = 'analysis'") == OK);
        CHECK(store_ana_init(s2) == OK, "%s", err_msg());
        store_close(s2);
        CHECK(q1(db, "SELECT version FROM schema_parts WHERE name = 'analysis'") == STORE_ANA_VERSION && STORE_ANA_VERSION == 4);
        CHECK(q1(db, "SELECT count(*) FROM ana_effects") == 0, "ana_effects recreated");
    }
    /* the SAE's weights checksum is recorded (report finds the analysis by it); a version 3
       database, without the column, opens as it was made and gets the column on upgrade */
    {
        char want[17], sql[160];
        CHECK(sae_weights_checksum(sae, want) == OK);
        snprintf(sql, sizeof sql, "SELECT count(*) FROM ana_dicts WHERE kind = 'sae' AND weights = '%s'", want);
        CHECK(q1(db, sql) == 1, "the SAE's weights checksum recorded");
        CHECK(q1(db, "SELECT count(*) FROM ana_dicts WHERE kind = 'neurons' AND weights IS NOT NULL") == 0);
        store *s2;
        CHECK(store_open(&s2, db, 0) == OK);
        CHECK(store_exec(s2, "ALTER TABLE ana_dicts DROP COLUMN weights; UPDATE schema_parts SET version = 3 WHERE name = 'analysis'") == OK);
        store_close(s2);
        CHECK(store_open(&s2, db, STORE_READONLY) == OK, "a version 3 database opens: %s", err_msg());
        store_close(s2);
        CHECK(store_open(&s2, db, 0) == OK);
        CHECK(store_ana_init(s2) == OK, "%s", err_msg());
        store_close(s2);
        CHECK(q1(db, "SELECT version FROM schema_parts WHERE name = 'analysis'") == 4);
        CHECK(q1(db, "SELECT count(*) FROM pragma_table_info('ana_dicts') WHERE name = 'weights'") == 1, "the column added");
        CHECK(q1(db, "SELECT count(*) FROM ana_dicts WHERE weights IS NOT NULL") == 0, "older rows: NULL");
        CHECK(store_open(&s2, db, STORE_READONLY) == OK, "a version 4 database opens: %s", err_msg());
        store_close(s2);
    }
    /* rerun replaces; bad inputs leave the database as it was */
    rc = analyze(db, sae, full);
    CHECK(rc == 0 && q1(db, "SELECT count(*) FROM ana_dicts") == 2, "rerun replaces the analysis");
    double nrows = q1(db, "SELECT count(*) FROM ana_acts");
    /* a raised stop flag aborts and rolls the dictionary in progress back */
    volatile int stop = 1;
    ana_flags stopped = full;
    stopped.stop = &stop;
    CHECK(analyze(db, sae, stopped) == ERR_ABORTED, "stop flag: %s", err_msg());
    CHECK(q1(db, "SELECT count(*) FROM ana_dicts") == 2 && q1(db, "SELECT count(*) FROM ana_acts") == nrows,
          "an interrupted analyze keeps the previous rows");
    char bad_sae[300];
    snprintf(bad_sae, sizeof bad_sae, "%s/sae_narrow", root);
    CHECK(make_sae(bad_sae, 8, "blocks.0.hook_resid_post", 5) == OK);
    CHECK(analyze(db, bad_sae, (ana_flags){.no_model = 1}) == ERR_SHAPE, "width mismatch refused");
    snprintf(bad_sae, sizeof bad_sae, "%s/sae_otherhook", root);
    CHECK(make_sae(bad_sae, E_C, "blocks.1.hook_resid_post", 5) == OK);
    CHECK(analyze(db, bad_sae, (ana_flags){.no_model = 1}) == ERR_NOTFOUND, "unknown hook refused");
    CHECK(q1(db, "SELECT count(*) FROM ana_dicts") == 2 && q1(db, "SELECT count(*) FROM ana_acts") == nrows,
          "failed runs modified nothing");
    /* an SAE trained from an exported .npy names no hook: --hook supplies it */
    snprintf(bad_sae, sizeof bad_sae, "%s/sae_nohook", root);
    CHECK(make_sae(bad_sae, E_C, "", 6) == OK);
    CHECK(analyze(db, bad_sae, (ana_flags){.no_model = 1}) == ERR_ARG && strstr(err_msg(), "hook_name"),
          "SAE without hook_name needs --hook: %s", err_msg());
    const ana_flags nohook = {.hook = "blocks.0.hook_resid_post", .no_model = 1};
    CHECK(analyze(db, bad_sae, nohook) == 0, "--hook names the SAE's hook");
    CHECK(q1(db, "SELECT count(*) FROM ana_dicts") == 3, "a second SAE on the same hook is kept apart");
    CHECK(q1(db, "SELECT count(*) FROM ana_metrics m JOIN ana_dicts d ON d.id = m.dict_id WHERE d.name LIKE '%/sae_nohook' AND m.name = 'ce_clean'") == 0 && q1(db, "SELECT count(*) FROM ana_metrics m JOIN ana_dicts d ON d.id = m.dict_id WHERE d.name LIKE '%/sae_nohook' AND m.name = 'l0'") == 1,
          "--no-model: no downstream metrics");
    CHECK(analyze(db, sae, full) == 0 && q1(db, "SELECT count(*) FROM ana_dicts") == 3, "rerun replaces");
    /* --all-acts stores every non-zero: as many rows as the features' n_active add up to */
    ana_flags allacts = nohook;
    allacts.all_acts = 1;
    CHECK(analyze(db, bad_sae, allacts) == 0, "--all-acts run");
    CHECK(q1(db, "SELECT count(*) FROM ana_acts a JOIN ana_dicts d ON d.id = a.dict_id WHERE d.name LIKE '%/sae_nohook' AND a.kind = 'all'") ==
          q1(db, "SELECT sum(n_active) FROM ana_features f JOIN ana_dicts d ON d.id = f.dict_id WHERE d.name LIKE '%/sae_nohook'"),
          "--all-acts rows = sum of n_active");
    CHECK(q1(db, "SELECT count(*) FROM ana_acts a JOIN ana_dicts d ON d.id = a.dict_id WHERE d.name LIKE '%/sae_nohook' AND a.kind = 'all' AND a.value <= 0") == 0);
    /* the same bits as the top and quantile rows at the same places, and max_act among them
       (the BOS row was encoded too, moving the GEMM's rows: 1 ulp apart, an audit) */
    CHECK(q1(db, "SELECT count(*) FROM ana_acts a JOIN ana_acts b ON a.dict_id = b.dict_id AND a.feature = b.feature AND a.seq_id = b.seq_id AND a.pos = b.pos JOIN ana_dicts d ON d.id = a.dict_id WHERE d.name LIKE '%/sae_nohook' AND a.kind = 'all' AND b.kind IN ('top', 'quantile')") > 0 &&
              q1(db, "SELECT count(*) FROM ana_acts a JOIN ana_acts b ON a.dict_id = b.dict_id AND a.feature = b.feature AND a.seq_id = b.seq_id AND a.pos = b.pos JOIN ana_dicts d ON d.id = a.dict_id WHERE d.name LIKE '%/sae_nohook' AND a.kind = 'all' AND b.kind IN ('top', 'quantile') AND a.value <> b.value") == 0,
          "--all-acts values are the top rows' bits");
    CHECK(q1(db, "SELECT count(*) FROM ana_features f JOIN ana_dicts d ON d.id = f.dict_id WHERE d.name LIKE '%/sae_nohook' AND f.n_active > 0 AND f.max_act <> (SELECT max(value) FROM ana_acts a WHERE a.dict_id = f.dict_id AND a.feature = f.feature AND a.kind = 'all')") == 0,
          "max_act is the largest --all-acts value");
    CHECK(q1(db, "SELECT count(*) FROM sae_metrics_view WHERE basis = 'sae' AND metric = 'l0'") == 2,
          "the metrics view lists both SAEs");
    CHECK(q1(db, "SELECT count(*) FROM feature_pos WHERE basis = 'neurons'") ==
          q1(db, "SELECT count(*) FROM ana_features f JOIN ana_dicts d ON d.id = f.dict_id WHERE d.kind = 'neurons' AND best_tag IS NOT NULL"));
    snprintf(bad_sae, sizeof bad_sae, "%s/missing", root);
    CHECK(analyze(db, bad_sae, (ana_flags){0}) != OK, "missing SAE refused");
    CHECK(q1(db, "SELECT count(*) FROM ana_dicts") == 3, "a missing SAE modified nothing");
    CHECK(analyze(db, NULL, (ana_flags){.hook = "blocks.0.hook_resid_post", .neurons = 1, .no_model = 1, .keep_bos = 1}) == 0 && q1(db, "SELECT n_tokens FROM ana_dicts WHERE kind = 'neurons' AND split = 'all+bos'") == E_SEQS * E_T &&
              q1(db, "SELECT count(*) FROM ana_dicts WHERE kind = 'neurons' AND split = 'all'") == 1,
          "--keep-bos counts every position, in an analysis beside the default one");
    /* gated and matryoshka SAEs go through analyze like the others: the error-term sanity check
       and the per-feature counts against sae_encode */
    sae_arch archs[2] = {SAE_GATED, SAE_MATRYOSHKA};
    for (int a = 0; a < 2; a++) {
        char adir[300];
        snprintf(adir, sizeof adir, "%s/sae_%s", root, sae_arch_name(archs[a]));
        CHECK(make_sae_arch(adir, archs[a], 11 + a) == OK, "%s", err_msg());
        CHECK(analyze(db, adir, (ana_flags){.ce_seqs = 8, .top = 5}) == 0, "%s analyze: %s",
              sae_arch_name(archs[a]), err_msg());
        snprintf(sql, sizeof sql, "SELECT value FROM ana_metrics m JOIN ana_dicts d ON d.id = m.dict_id WHERE d.name LIKE '%%/sae_%s' AND m.name='ce_sae_err'", sae_arch_name(archs[a]));
        double e2 = q1(db, sql);
        CHECK(fabs(e2 - clean) < 1e-4, "%s: ce with error term %.8f vs clean %.8f",
              sae_arch_name(archs[a]), e2, clean);
        sae_model *am = NULL;
        CHECK(sae_load(&am, adir) == OK && am->cfg.arch == archs[a]);
        store *as;
        int64_t tot = 0;
        if (am && store_open(&as, db, STORE_READONLY) == OK) {
            store_hook ah;
            int64_t *aids;
            size_t an;
            if (store_hook_find(as, "blocks.0.hook_resid_post", &ah) == OK &&
                store_seq_list(as, ah.id, STORE_SPLIT_ALL, 0.1, &aids, &an) == OK) {
                for (size_t i = 0; i < an; i++) {
                    float x[E_T * E_C], f[E_T * E_DSAE];
                    int T = E_T;
                    store_act_read(as, ah.id, aids[i], x, &T);
                    sae_encode(am, x, T, f);
                    for (int k = (int)(i % 2) * E_DSAE; k < T * E_DSAE; k++) tot += f[k] > 0;
                }
                mem_free(aids);
            }
            store_close(as);
        }
        sae_free(am);
        snprintf(sql, sizeof sql, "SELECT sum(n_active) FROM ana_features f JOIN ana_dicts d ON d.id = f.dict_id WHERE d.name LIKE '%%/sae_%s'", sae_arch_name(archs[a]));
        CHECK(tot > 0 && q1(db, sql) == tot, "%s: n_active sums to %g, direct %lld",
              sae_arch_name(archs[a]), q1(db, sql), (long long)tot);
    }
    snprintf(args, sizeof args, "rm -rf %s", root);
    if (!harness_fail && !getenv("SAELITE_KEEP")) CHECK(system(args) == 0);
}

int main(void)
{
    test_analyze_e2e();
    test_hist();
    test_feat_acc();
    test_feat_merge();
    test_tree();
    test_geometry();
    test_logits();
    test_pos();
    test_loss();
    return harness_report("test_analysis");
}
