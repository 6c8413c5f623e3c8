/* test_eval.c - the evaluations' building blocks (analysis/eval.h) on data where the answer is
 * known: LIBLINEAR against a hand-solved logistic regression, a latent equal to the label, the
 * split by document, balanced one-vs-rest sets, Brown's coarse classes, the minimum set sizes,
 * SCR's normalised score
 * (no score where the clean probe is not better than the biased one), TPP's mean of per-dataset
 * means, and SAEBench's absorption
 * metric against the exact (binary and partial) absorption of hand-built SAEs and of trained TopK
 * SAEs on the hierarchical generator; the sae-eval runner on SAEs, truth and spec saved to files. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/eval.h"
#include "common/err.h"
#include "common/mem.h"
#include "common/npy.h"
#include "common/rng.h"
#include "harness.h"
#include "sae/sae.h"
#include "sae/sae_train.h"
#include "sae/synth.h"

/* min 0.5 (w^2 + b^2) + C sum log(1 + exp(-y (w x + b))) by Newton's method on (w, b): the
 * objective LIBLINEAR's L2R_LR solves with the bias as a feature of value 1. */
static void newton_2d(const double *x, const double *y, int n, double C, double *w, double *b)
{
    *w = *b = 0;
    for (int it = 0; it < 100; it++) {
        double g[2] = {*w, *b}, H[3] = {1, 0, 1}; /* Hww Hwb Hbb */
        for (int i = 0; i < n; i++) {
            double z = y[i] * (*w * x[i] + *b), s = 1 / (1 + exp(z)); /* sigma(-z) */
            g[0] -= C * y[i] * x[i] * s;
            g[1] -= C * y[i] * s;
            double h = C * s * (1 - s);
            H[0] += h * x[i] * x[i];
            H[1] += h * x[i];
            H[2] += h;
        }
        double det = H[0] * H[2] - H[1] * H[1];
        *w -= (H[2] * g[0] - H[1] * g[1]) / det;
        *b -= (H[0] * g[1] - H[1] * g[0]) / det;
    }
}

static void test_liblinear_hand(void)
{
    /* three points on a line, one of them repeated: no symmetry to hide a sign or bias bug */
    const double xs[5] = {1.0, 1.0, -1.0, 2.0, -0.5}, ys[5] = {1, 1, -1, 1, 1};
    float X[5];
    int rows[5];
    unsigned char y[5];
    for (int i = 0; i < 5; i++) {
        X[i] = (float)xs[i];
        rows[i] = i;
        y[i] = ys[i] > 0;
    }
    eval_feats f = {.dense = X, .d = 1};
    eval_probe p;
    int rc = eval_logreg(&f, rows, y, 5, NULL, 0, 1.0, 0, &p);
    CHECK(rc == OK, "%s", err_msg());
    double w, b;
    newton_2d(xs, ys, 5, 1.0, &w, &b);
    if (!rc) {
        CHECK_NEAR(p.w[0], w, 2e-3);
        CHECK_NEAR(p.b, b, 2e-3);
        printf("liblinear w %.5f b %.5f, Newton w %.5f b %.5f\n", p.w[0], p.b, w, b);
    }
    eval_probe_free(&p);
    /* the absorption suite's tolerance (eval_feats.eps 1e-6): at the optimum to 1e-6, where
       0.001 left it 1e-4 off (w 0.81376 against 0.81385) */
    eval_feats ft = {.dense = X, .d = 1, .eps = 1e-6};
    CHECK(eval_logreg(&ft, rows, y, 5, NULL, 0, 1.0, 0, &p) == OK, "%s", err_msg());
    CHECK(fabs(p.w[0] - w) < 1e-6 && fabs(p.b - b) < 1e-6, "eps 1e-6: w %.8f b %.8f, Newton %.8f %.8f",
          p.w[0], p.b, w, b);
    eval_probe_free(&p);
    /* one class only: converted to our error, no LIBLINEAR crash */
    unsigned char same[5] = {1, 1, 1, 1, 1};
    CHECK(eval_logreg(&f, rows, same, 5, NULL, 0, 1.0, 0, &p) == ERR_ARG, "one class is refused");
}

/* A code whose latent 7 equals the label: the mean difference picks it and a 1-sparse probe is
 * perfect; the other latents are noise. */
static void test_latent_is_label(void)
{
    enum { N = 400, D = 64 };
    eval_csr c = {0};
    float row[D];
    int rows[N];
    unsigned char y[N];
    rng_state r;
    rng_seed(&r, 3);
    for (int i = 0; i < N; i++) {
        y[i] = (unsigned char)(i % 2);
        rows[i] = i;
        for (int j = 0; j < D; j++) row[j] = rng_uniform(&r) < 0.1 ? (float)rng_uniform(&r) : 0;
        row[7] = y[i] ? 1.0f : 0;
        CHECK(eval_csr_push(&c, row, D) == OK, "%s", err_msg());
    }
    eval_feats f = {.sparse = &c};
    int cols[5];
    CHECK(eval_top_mean_diff(&f, rows, y, N, 5, cols) == OK, "%s", err_msg());
    CHECK(cols[0] == 7, "top latent %d", cols[0]);
    eval_probe p;
    CHECK(eval_logreg(&f, rows, y, N, cols, 1, 1.0, 0, &p) == OK, "%s", err_msg());
    double *s = mem_alloc(N * sizeof *s);
    eval_scores(&p, &f, rows, N, cols, 1, s);
    CHECK(eval_accuracy(s, y, N) == 1.0, "accuracy %g", eval_accuracy(s, y, N));
    CHECK(eval_f1(s, y, N) == 1.0, "f1");
    /* the full-width sparse probe scores the same way as the column-restricted one */
    eval_probe q;
    CHECK(eval_logreg(&f, rows, y, N, NULL, 0, 1.0, 0, &q) == OK, "%s", err_msg());
    eval_scores(&q, &f, rows, N, NULL, 0, s);
    CHECK(eval_accuracy(s, y, N) == 1.0, "full accuracy %g", eval_accuracy(s, y, N));
    eval_probe_free(&p);
    eval_probe_free(&q);
    mem_free(s);
    eval_csr_free(&c);
}

/* A dense probe problem: N rows of D uniform values in [-0.5, 0.5), rows[i] = i, label y[i] = 1
 * with probability p_pos, and gain added where y is 1 in columns first, first + every, ... */
static void make_problem(float *X, int *rows, unsigned char *y, int N, int D, uint64_t seed,
                         double p_pos, int first, int every, float gain)
{
    rng_state r;
    rng_seed(&r, seed);
    for (int i = 0; i < N; i++) {
        rows[i] = i;
        y[i] = (unsigned char)(rng_uniform(&r) < p_pos);
        for (int j = 0; j < D; j++)
            X[i * D + j] = (float)(rng_uniform(&r) - 0.5) +
                           gain * (j >= first && (j - first) % every == 0) * y[i];
    }
}

/* The memo answers a repeated dense problem with the weights of its first fit, bit for bit, and
 * fits again when any input changes (a value, a label, C, the columns); sparse rows bypass it. */
static void test_memo(void)
{
    enum { N = 300, D = 24 };
    float *X = mem_alloc(sizeof(float) * N * D);
    int rows[N];
    unsigned char y[N];
    make_problem(X, rows, y, N, D, 11, 0.4, 3, D, 1.0f);
    eval_memo *memo;
    CHECK(eval_memo_new(&memo) == OK, "%s", err_msg());
    eval_feats plain = {.dense = X, .d = D}, f = {.dense = X, .d = D, .memo = memo};
    eval_probe a, b, c;
    int64_t hits, fits;
    CHECK(eval_logreg(&plain, rows, y, N, NULL, 0, 1.0, 0, &a) == OK, "%s", err_msg());
    CHECK(eval_logreg(&f, rows, y, N, NULL, 0, 1.0, 0, &b) == OK, "%s", err_msg());
    CHECK(eval_logreg(&f, rows, y, N, NULL, 0, 1.0, 0, &c) == OK, "%s", err_msg());
    eval_memo_counts(memo, &hits, &fits);
    CHECK(hits == 1 && fits == 1, "hits %lld fits %lld", (long long)hits, (long long)fits);
    CHECK(a.d == c.d && !memcmp(a.w, c.w, sizeof(double) * D) && a.b == c.b,
          "a remembered probe is the fitted one, bit for bit");
    CHECK(c.w != b.w, "each probe owns its weights");
    eval_probe_free(&b);
    eval_probe_free(&c);
    /* every change of the problem is a new fit */
    X[17 * D + 5] = nextafterf(X[17 * D + 5], 2.0f);
    CHECK(eval_logreg(&f, rows, y, N, NULL, 0, 1.0, 0, &b) == OK, "%s", err_msg());
    X[17 * D + 5] = nextafterf(X[17 * D + 5], -2.0f);
    y[40] ^= 1;
    CHECK(eval_logreg(&f, rows, y, N, NULL, 0, 1.0, 0, &c) == OK, "%s", err_msg());
    y[40] ^= 1;
    eval_probe_free(&b);
    eval_probe_free(&c);
    CHECK(eval_logreg(&f, rows, y, N, NULL, 0, 0.5, 0, &b) == OK, "%s", err_msg());
    int cols[3] = {3, 0, 7};
    CHECK(eval_logreg(&f, rows, y, N, cols, 3, 1.0, 0, &c) == OK, "%s", err_msg());
    eval_probe_free(&b);
    eval_probe_free(&c);
    CHECK(eval_logreg(&f, rows, y, N - 1, NULL, 0, 1.0, 0, &b) == OK, "%s", err_msg());
    eval_probe_free(&b);
    eval_memo_counts(memo, &hits, &fits);
    CHECK(hits == 1 && fits == 6, "hits %lld fits %lld after five changed problems", (long long)hits,
          (long long)fits);
    /* and the unchanged problem still hits */
    CHECK(eval_logreg(&f, rows, y, N, NULL, 0, 1.0, 0, &b) == OK, "%s", err_msg());
    CHECK(!memcmp(a.w, b.w, sizeof(double) * D), "the first fit again");
    eval_probe_free(&b);
    /* sparse rows do not go through the memo */
    eval_csr cs = {0};
    for (int i = 0; i < N; i++) CHECK(eval_csr_push(&cs, X + i * D, D) == OK, "%s", err_msg());
    eval_feats sp = {.sparse = &cs, .memo = memo};
    CHECK(eval_logreg(&sp, rows, y, N, NULL, 0, 1.0, 0, &b) == OK, "%s", err_msg());
    CHECK(eval_logreg(&sp, rows, y, N, NULL, 0, 1.0, 0, &c) == OK, "%s", err_msg());
    eval_memo_counts(memo, &hits, &fits);
    CHECK(hits == 2 && fits == 6, "sparse fits bypass the memo: hits %lld fits %lld",
          (long long)hits, (long long)fits);
    eval_probe_free(&b);
    eval_probe_free(&c);
    eval_csr_free(&cs);
    eval_probe_free(&a);
    eval_memo_free(memo);
    mem_free(X);
}

/* An L1 probe (LIBLINEAR's solver shuffles with the C library's rand()) is the same whatever the
 * process called rand() for before it: a continued sweep must score an SAE as an uninterrupted
 * one does. */
static void test_l1_history(void)
{
    enum { N = 400, D = 40 };
    float *X = mem_alloc(sizeof(float) * N * D);
    int rows[N];
    unsigned char y[N];
    make_problem(X, rows, y, N, D, 5, 0.5, 0, 7, 0.3f);
    eval_feats f = {.dense = X, .d = D};
    eval_probe a, b;
    CHECK(eval_logreg(&f, rows, y, N, NULL, 0, 1.0, 1, &a) == OK, "%s", err_msg());
    for (int i = 0; i < 7; i++) (void)rand(); /* what other fits (or anything else) would do */
    CHECK(eval_logreg(&f, rows, y, N, NULL, 0, 1.0, 1, &b) == OK, "%s", err_msg());
    CHECK(a.d == b.d && !memcmp(a.w, b.w, sizeof(double) * D) && a.b == b.b,
          "an L1 probe does not depend on rand() calls before it");
    eval_probe_free(&a);
    eval_probe_free(&b);
    mem_free(X);
}

static void test_split_and_balance(void)
{
    enum { ND = 60 };
    int64_t doc[ND];
    int grp[ND];
    unsigned char t1[ND], t2[ND], t3[ND];
    for (int i = 0; i < ND; i++) {
        doc[i] = 1000 + 7 * i;
        grp[i] = i < 3 ? 0 : i < 4 ? 1 : 2 + i % 4; /* a group of 3, a group of 1, 4 big ones */
    }
    CHECK(eval_split_docs(doc, grp, ND, 0.2, 42, t1) == OK, "%s", err_msg());
    CHECK(eval_split_docs(doc, grp, ND, 0.2, 42, t2) == OK, "%s", err_msg());
    CHECK(eval_split_docs(doc, grp, ND, 0.2, 43, t3) == OK, "%s", err_msg());
    CHECK(!memcmp(t1, t2, ND), "same seed, same split");
    CHECK(memcmp(t1, t3, ND) != 0, "another seed, another split");
    for (int g = 0; g < 6; g++) {
        int n = 0, nt = 0;
        for (int i = 0; i < ND; i++)
            if (grp[i] == g) n++, nt += t1[i];
        if (n == 1) CHECK(nt == 0, "a lone document stays in train");
        else CHECK(nt >= 1 && nt < n && abs(nt - (int)lround(0.2 * n)) <= 1, "group %d: %d of %d test", g, nt, n);
    }
    /* sequences inherit their document's side: a probe's train rows never share a document
       with its test rows */
    enum { NS = 600 };
    int cls[NS], rows[2 * NS], docof[NS];
    unsigned char y[2 * NS], seen[ND] = {0};
    rng_state r;
    rng_seed(&r, 9);
    for (int i = 0; i < NS; i++) {
        docof[i] = (int)rng_below(&r, ND);
        cls[i] = (int)rng_below(&r, 4);
    }
    for (int pass = 0; pass < 2; pass++) {
        int cl[NS], n;
        for (int i = 0; i < NS; i++) cl[i] = t1[docof[i]] == pass ? cls[i] : -1;
        CHECK(eval_balance(cl, NS, 2, 4, 1000, 5, rows, y, &n) == OK, "%s", err_msg());
        int npos = 0, per[4] = {0};
        for (int i = 0; i < n; i++) {
            CHECK(cl[rows[i]] >= 0, "a row of the other side");
            CHECK((cl[rows[i]] == 2) == (y[i] != 0), "label");
            npos += y[i];
            per[cls[rows[i]]]++;
            seen[docof[rows[i]]] |= (unsigned char)(1 << pass);
        }
        CHECK(2 * npos == n, "balanced: %d of %d", npos, n);
        for (int k = 0; k < 4; k++)
            if (k != 2) CHECK(abs(per[k] - npos / 3) <= 1, "negatives from class %d: %d", k, per[k]);
    }
    int both = 0;
    for (int i = 0; i < ND; i++) both += seen[i] == 3;
    CHECK(both == 0, "%d documents in both train and test", both);
}

static void test_pos_classes(void)
{
    CHECK(eval_pos_class("nn") == 0 && eval_pos_class("nns$") == 0 && eval_pos_class("np-tl") == 0, "nouns");
    CHECK(eval_pos_class("vbd") == 1 && eval_pos_class("VBN") == 1, "verbs");
    CHECK(eval_pos_class("bez") == 2 && eval_pos_class("md*") == 2, "auxiliaries");
    CHECK(eval_pos_class("at") == 5 && eval_pos_class("in") == 6 && eval_pos_class("pps") == 7, "closed classes");
    CHECK(eval_pos_class("ppss+md") == 7, "a contraction counts as its first tag");
    CHECK(eval_pos_class(",") < 0 && eval_pos_class("fw-nn") < 0 && eval_pos_class("") < 0, "no class");
    CHECK(eval_tense("vbd") == 1 && eval_tense("bedz") == 1 && eval_tense("hvd") == 1, "past");
    CHECK(eval_tense("vbz") == 0 && eval_tense("bez*") == 0 && eval_tense("ber") == 0, "present");
    CHECK(eval_tense("vb") < 0 && eval_tense("vbn") < 0 && eval_tense("md") < 0 && eval_tense("nn") < 0, "no tense");
    /* contractions: the finite verb is the second part (it's, I'm, I'd) */
    CHECK(eval_tense("pps+bez") == 0 && eval_tense("ppss+bem") == 0 && eval_tense("ppss+hvd") == 1 &&
              eval_tense("ex+bez") == 0 && eval_tense("ppss+md") < 0 && eval_tense("fw-pps+bez") < 0,
          "contractions");
    CHECK(eval_imaginative("romance") == 1 && eval_imaginative("learned") == 0 && eval_imaginative("x") < 0, "prose kinds");
}

/* The smallest sets a task is scored on: 20 train and 5 test positives and negatives. */
static void test_min_sizes(void)
{
    CHECK(eval_sets_big_enough(20, 20, 5, 5), "the minimums are enough");
    CHECK(!eval_sets_big_enough(19, 20, 5, 5) && !eval_sets_big_enough(20, 19, 5, 5), "train too small");
    CHECK(!eval_sets_big_enough(20, 20, 4, 5) && !eval_sets_big_enough(20, 20, 5, 4), "test too small");
    CHECK(!eval_sets_big_enough(2, 2, 1, 1), "the audit's --train-per-class 2 --test-per-class 1");
}

/* SCR's normalised score: (ablated - orig) / (clean - orig) only where the clean probe beats the
 * biased one by more than one test example. The audit's cases: on 40 test rows, biased 0.700,
 * clean 0.675, ablated 0.675 scored +1.0 ("fully removed") and ablated 0.600 scored +4.0. */
static void test_scr_score(void)
{
    CHECK(isnan(eval_scr_score(0.675, 0.700, 0.675, 40)), "clean below orig: no score (was +1)");
    CHECK(isnan(eval_scr_score(0.600, 0.700, 0.675, 40)), "clean below orig: no score (was +4)");
    CHECK(isnan(eval_scr_score(0.700, 0.700, 0.700, 40)), "clean equal to orig: no score");
    CHECK(isnan(eval_scr_score(0.750, 0.700, 0.725, 40)), "one example better is noise: no score");
    CHECK(isnan(eval_scr_score(0.75, 0.7, 0.8, 0)), "no test rows: no score");
    CHECK_NEAR(eval_scr_score(0.750, 0.700, 0.750, 40), 1.0, 1e-12);  /* two examples: scored */
    CHECK_NEAR(eval_scr_score(0.650, 0.700, 0.800, 40), -0.5, 1e-12); /* worse after ablation */
    CHECK_NEAR(eval_scr_score(0.7025, 0.700, 0.8, 400), 0.025, 1e-12);
}

/* TPP's headline averages per dataset, then over datasets (SAEBench), not over pooled classes:
 * 10 POS classes at 0.3 and 15 genres at 0.1 give 0.2, not the pooled 0.18. */
static void test_mean_of_means(void)
{
    double sum[3] = {10 * 0.3, 15 * 0.1, 0};
    int n[3] = {10, 15, 0};
    CHECK_NEAR(eval_mean_of_means(sum, n, 3), 0.2, 1e-12); /* an empty dataset does not count */
    CHECK_NEAR(eval_mean_of_means(sum, n, 1), 0.3, 1e-12);
    CHECK(isnan(eval_mean_of_means(sum + 2, n + 2, 1)), "no dataset: NAN");
}

/* ---- standard errors: the bootstrap over test documents (eval_boot) ---------------------- */
/* The se of one task of n_docs documents of m rows each; v per row from correct[doc] when
 * per_doc, else from correct[row]; doc of row r = r / m, or r itself when by_token (what a
 * bootstrap over tokens would resample). */
static double boot_one(int n_docs, int m, const unsigned char *correct, int per_doc, int by_token,
                       uint64_t seed)
{
    int n = n_docs * m, nd = by_token ? n : n_docs;
    int *doc = malloc((size_t)n * sizeof *doc);
    double *v = malloc((size_t)n * sizeof *v), se = NAN;
    for (int r = 0; r < n; r++) {
        doc[r] = by_token ? r : r / m;
        v[r] = correct[per_doc ? r / m : r];
    }
    eval_boot *b = NULL;
    int rc = eval_boot_new(&b, nd, NULL);
    if (!rc) rc = eval_boot_add(b, 0, doc, v, n);
    if (!rc) rc = eval_boot_se(b, 1, seed, EVAL_BOOT_N, &se);
    CHECK(rc == OK, "bootstrap: %s", err_msg());
    eval_boot_free(b);
    free(doc);
    free(v);
    return se;
}

/* Known answers: a document's rows all right or all wrong (i.i.d. per document, accuracy p): the
 * se of the accuracy is sqrt(p(1-p)/n_docs), whatever the rows per document; a bootstrap over
 * the rows (tokens) gives sqrt(p(1-p)/(n_docs m)), 1/sqrt(20) of it, and fails this check.
 * Rows i.i.d. within documents: sqrt(p(1-p)/(n_docs m)), which the document bootstrap gives too. */
static void test_boot_known(void)
{
    enum { ND = 400, M = 20 };
    static unsigned char cd[ND], cr[ND * M];
    rng_state r;
    rng_seed(&r, 77);
    int k = 0;
    for (int d = 0; d < ND; d++) k += cd[d] = rng_uniform(&r) < 0.7;
    double p = (double)k / ND, want = sqrt(p * (1 - p) / ND);
    double se_doc = boot_one(ND, M, cd, 1, 0, 1);
    CHECK(fabs(se_doc / want - 1) < 0.15, "per-document accuracy: se %.5f, sqrt(p(1-p)/n_docs) %.5f",
          se_doc, want);
    double se_tok = boot_one(ND, M, cd, 1, 1, 1);
    CHECK(se_tok < 0.5 * want, "by tokens the same rows read se %.5f (so the check above tells "
          "the units apart; want %.5f)", se_tok, want);
    CHECK(fabs(se_tok / (want / sqrt(M)) - 1) < 0.15, "by tokens: se %.5f, sqrt(p(1-p)/n) %.5f",
          se_tok, want / sqrt(M));
    printf("bootstrap: %d documents of %d rows, accuracy %.4f per document: se %.5f against "
           "sqrt(p(1-p)/n_docs) %.5f; resampling tokens instead: %.5f\n", ND, M, p, se_doc, want, se_tok);
    /* independent rows within documents */
    k = 0;
    for (int i = 0; i < ND * M; i++) k += cr[i] = rng_uniform(&r) < 0.7;
    p = (double)k / (ND * M);
    want = sqrt(p * (1 - p) / (ND * M));
    double se_ind = boot_one(ND, M, cr, 0, 0, 2);
    CHECK(fabs(se_ind / want - 1) < 0.15, "i.i.d. rows: se %.5f, sqrt(p(1-p)/n_rows) %.5f", se_ind, want);
    /* the same inputs and seed: the same bits; another seed: another Monte Carlo draw */
    double again = boot_one(ND, M, cd, 1, 0, 1), other = boot_one(ND, M, cd, 1, 0, 3);
    CHECK(memcmp(&again, &se_doc, sizeof again) == 0, "a rerun gives the same bits");
    CHECK(other != se_doc && fabs(other / se_doc - 1) < 0.2, "seed 3: %.5f against %.5f", other, se_doc);
}

/* Small strata: 150 strata of two documents (a document all right or all wrong, p 0.6). The
 * unbiased stratified variance of the mean is sum_h (x_h1 - x_h2)^2 / N^2 (N documents); the
 * plain bootstrap (two draws of weight 1 per stratum) gives half of it, se 0.71x, which fails
 * here; Rao and Wu's n - 1 draws of weight n / (n - 1) give it whole. */
static void test_boot_small_strata(void)
{
    enum { NH = 150, ND = 2 * NH, M = 4 };
    static int doc[ND * M], strat[ND];
    static double v[ND * M];
    static unsigned char x[ND];
    rng_state r;
    rng_seed(&r, 31);
    for (int d = 0; d < ND; d++) {
        x[d] = rng_uniform(&r) < 0.6;
        strat[d] = d / 2;
        for (int j = 0; j < M; j++) doc[d * M + j] = d, v[d * M + j] = x[d];
    }
    double var = 0;
    for (int h = 0; h < NH; h++) var += (double)(x[2 * h] - x[2 * h + 1]) * (x[2 * h] - x[2 * h + 1]);
    double want = sqrt(var) / ND, se = NAN;
    eval_boot *b = NULL;
    int rc = eval_boot_new(&b, ND, strat);
    if (!rc) rc = eval_boot_add(b, 0, doc, v, ND * M);
    if (!rc) rc = eval_boot_se(b, 1, 4, 4000, &se);
    CHECK(rc == OK && fabs(se / want - 1) < 0.05, "strata of 2 documents: se %.5f, unbiased "
          "stratified %.5f (the plain bootstrap: %.5f)", se, want, want / sqrt(2));
    eval_boot_free(b);
}

/* Means over tasks: the tasks are resampled with one draw per replicate. Two tasks with the same
 * right answers per document have the se of one (independent draws would give 1/sqrt(2) of it);
 * a task and its complement average to 0.5 in every replicate (se 0). Strata: the test documents
 * are drawn per stratum (the split's genres), so a stratum all right and one all wrong give se 0
 * (an unstratified draw: about sqrt(0.25 / n_docs)). NaN rows do not count; a series without a
 * task has no se; a row of a document outside the draw is refused. */
static void test_boot_joint(void)
{
    enum { ND = 200, M = 5 };
    int doc[ND * M], strat[ND];
    double v[ND * M], w[ND * M], se[4];
    rng_state r;
    rng_seed(&r, 5);
    for (int d = 0; d < ND; d++) {
        int ok = rng_uniform(&r) < 0.6;
        for (int j = 0; j < M; j++) {
            doc[d * M + j] = d;
            v[d * M + j] = ok;
            w[d * M + j] = !ok;
        }
        strat[d] = d < ND / 2 ? 0 : 1;
    }
    eval_boot *b = NULL;
    int rc = eval_boot_new(&b, ND, NULL);
    if (!rc) rc = eval_boot_add(b, 0, doc, v, ND * M); /* series 0: task A alone */
    if (!rc) rc = eval_boot_add(b, 1, doc, v, ND * M); /* series 1: A and A again */
    if (!rc) rc = eval_boot_add(b, 1, doc, v, ND * M);
    if (!rc) rc = eval_boot_add(b, 2, doc, v, ND * M); /* series 2: A and not-A */
    if (!rc) rc = eval_boot_add(b, 2, doc, w, ND * M);
    if (!rc) rc = eval_boot_se(b, 4, 9, EVAL_BOOT_N, se); /* series 3: no task */
    CHECK(rc == OK, "joint: %s", err_msg());
    CHECK(se[0] > 0.02 && fabs(se[1] - se[0]) < 1e-12, "identical tasks: se %.5f, one task %.5f", se[1], se[0]);
    CHECK(se[2] < 1e-12, "complementary tasks: se %.3g", se[2]);
    CHECK(isnan(se[3]), "a series without tasks: NaN");
    eval_boot_free(b);

    /* strata: the first half of the documents right, the second wrong */
    for (int i = 0; i < ND * M; i++) v[i] = doc[i] < ND / 2;
    double one = NAN;
    rc = eval_boot_new(&b, ND, strat);
    if (!rc) rc = eval_boot_add(b, 0, doc, v, ND * M);
    if (!rc) rc = eval_boot_se(b, 1, 9, EVAL_BOOT_N, &one);
    CHECK(rc == OK && one < 1e-12, "stratified: se %.3g (the strata's counts are fixed)", one);
    eval_boot_free(b);
    rc = eval_boot_new(&b, ND, NULL);
    if (!rc) rc = eval_boot_add(b, 0, doc, v, ND * M);
    if (!rc) rc = eval_boot_se(b, 1, 9, EVAL_BOOT_N, &one);
    CHECK(rc == OK && fabs(one / sqrt(0.25 / ND) - 1) < 0.15, "one stratum: se %.5f", one);
    eval_boot_free(b);

    /* strata of one document are drawn together: every document its own stratum is one
       stratum; one such beside larger strata is drawn with the first of them; one document: NaN */
    int own[ND], lone[ND];
    double x[2] = {NAN, NAN};
    for (int d = 0; d < ND; d++) {
        own[d] = ND - d; /* numbered in another order than the documents */
        lone[d] = d == 0 ? 7 : 1 + (d >= ND / 2);
    }
    for (int t = 0; t < 2; t++) {
        rc = eval_boot_new(&b, ND, t ? lone : own);
        if (!rc) rc = eval_boot_add(b, 0, doc, v, ND * M);
        if (!rc) rc = eval_boot_se(b, 1, 9, EVAL_BOOT_N, &x[t]);
        eval_boot_free(b);
    }
    CHECK(rc == OK && memcmp(&x[0], &one, sizeof one) == 0, "singleton strata: se %.5f, one stratum %.5f",
          x[0], one);
    for (int d = 0; d < ND; d++) lone[d] = 1 + (d >= ND / 2);
    double y1 = NAN;
    rc = eval_boot_new(&b, ND, lone);
    if (!rc) rc = eval_boot_add(b, 0, doc, v, ND * M);
    if (!rc) rc = eval_boot_se(b, 1, 9, EVAL_BOOT_N, &y1);
    eval_boot_free(b);
    CHECK(rc == OK && memcmp(&x[1], &y1, sizeof y1) == 0, "a lone singleton stratum joins the first: "
          "se %.5f against %.5f", x[1], y1);
    double z = 0;
    int d0 = 0;
    double v0 = 1;
    rc = eval_boot_new(&b, 1, NULL);
    if (!rc) rc = eval_boot_add(b, 0, &d0, &v0, 1);
    if (!rc) rc = eval_boot_se(b, 1, 9, EVAL_BOOT_N, &z);
    CHECK(rc == OK && isnan(z), "one document: no se (%g)", z);
    eval_boot_free(b);

    /* one document with rows among several test documents (a small --seqs-per-genre sampled no
       sequence of the others): every replicate that draws it reads the same value, and the se
       read 0 ("± 0.0000"), not unknown; with a second document it is a number again */
    {
        int od[4] = {0, 0, 0, 0}, stw[6] = {0, 0, 0, 0, 0, 0};
        double ov[4] = {1, 0, 1, 1}, s1 = 0, s2 = NAN;
        rc = eval_boot_new(&b, 6, stw);
        if (!rc) rc = eval_boot_add(b, 0, od, ov, 4);
        if (!rc) rc = eval_boot_se(b, 1, 9, EVAL_BOOT_N, &s1);
        eval_boot_free(b);
        CHECK(rc == OK && isnan(s1), "one of six test documents with rows: no se (%g)", s1);
        od[3] = 4;
        ov[3] = 0;
        rc = eval_boot_new(&b, 6, stw);
        if (!rc) rc = eval_boot_add(b, 0, od, ov, 4);
        if (!rc) rc = eval_boot_se(b, 1, 9, EVAL_BOOT_N, &s2);
        eval_boot_free(b);
        CHECK(rc == OK && s2 > 0, "two of six with rows: se %g", s2);
        /* per series: one with rows in two documents, one (another sample set) in one of them */
        double s3[2] = {NAN, 0};
        rc = eval_boot_new(&b, 6, stw);
        if (!rc) rc = eval_boot_add(b, 0, od, ov, 4);
        if (!rc) rc = eval_boot_add(b, 1, od, ov, 3);
        if (!rc) rc = eval_boot_se(b, 2, 9, EVAL_BOOT_N, s3);
        eval_boot_free(b);
        CHECK(rc == OK && s3[0] == s2 && isnan(s3[1]), "a series of one document beside one of two: "
              "se %g (want %g), %g (want NaN)", s3[0], s2, s3[1]);
    }

    /* NaN rows are not rows: a task of half NaN rows is its other rows' mean */
    for (int i = 0; i < ND * M; i++) w[i] = i % 2 ? NAN : v[i];
    double a = NAN, h = NAN;
    rc = eval_boot_new(&b, ND, NULL);
    if (!rc) rc = eval_boot_add(b, 0, doc, w, ND * M);
    if (!rc) rc = eval_boot_se(b, 1, 9, EVAL_BOOT_N, &h);
    eval_boot_free(b);
    int hd[ND * M / 2];
    double hv[ND * M / 2];
    for (int i = 0; i < ND * M / 2; i++) hd[i] = doc[2 * i], hv[i] = v[2 * i];
    if (!rc) rc = eval_boot_new(&b, ND, NULL);
    if (!rc) rc = eval_boot_add(b, 0, hd, hv, ND * M / 2);
    if (!rc) rc = eval_boot_se(b, 1, 9, EVAL_BOOT_N, &a);
    CHECK(rc == OK && a == h, "NaN rows left out: se %.5f, the other rows alone %.5f", h, a);
    eval_boot_free(b);

    /* a train document (stratum -1) or one out of range is no test row's */
    strat[3] = -1;
    rc = eval_boot_new(&b, ND, strat);
    CHECK(rc == OK && eval_boot_add(b, 0, doc, v, ND * M) == ERR_ARG, "a train document's row refused");
    err_clear();
    int bad = ND;
    double one_v = 1;
    CHECK(eval_boot_add(b, 0, &bad, &one_v, 1) == ERR_ARG, "a document out of range refused");
    err_clear();
    eval_boot_free(b);
}

/* The dual basis of the true directions (rows of dirs [F, d], F <= d): e_j . d_k = [j == k], so
 * x . e_j is feature j's magnitude exactly. E = (D D^T)^-1 D by Gauss-Jordan. */
static int dual_basis(const float *dirs, int F, int d, double *E)
{
    double *G = mem_alloc(sizeof(double) * (size_t)F * 2 * F);
    if (!G) return err_set(ERR_NOMEM, "out of memory");
    for (int a = 0; a < F; a++)
        for (int b = 0; b < 2 * F; b++) {
            double v = 0;
            if (b < F)
                for (int i = 0; i < d; i++) v += (double)dirs[(size_t)a * d + i] * dirs[(size_t)b * d + i];
            else v = a == b - F;
            G[(size_t)a * 2 * F + b] = v;
        }
    for (int c = 0; c < F; c++) { /* G is symmetric positive definite: no pivoting needed */
        double piv = G[(size_t)c * 2 * F + c];
        for (int b = 0; b < 2 * F; b++) G[(size_t)c * 2 * F + b] /= piv;
        for (int a = 0; a < F; a++) {
            if (a == c) continue;
            double m = G[(size_t)a * 2 * F + c];
            for (int b = 0; b < 2 * F; b++) G[(size_t)a * 2 * F + b] -= m * G[(size_t)c * 2 * F + b];
        }
    }
    for (int a = 0; a < F; a++)
        for (int i = 0; i < d; i++) {
            double v = 0;
            for (int b = 0; b < F; b++) v += G[(size_t)a * 2 * F + F + b] * dirs[(size_t)b * d + i];
            E[(size_t)a * d + i] = v;
        }
    mem_free(G);
    return OK;
}

/* A JumpReLU SAE with one latent per true feature (encoder = the dual vector, decoder = the
 * direction, threshold 0.05), except that each parent's latent is switched off by its absorbing
 * children (its encoder minus 3 x theirs), and their latents read and write parent + child
 * (encoder (e_a + e_p) / sqrt 2, decoder (d_a + d_p) / sqrt 2, threshold 0.73: above what the
 * parent alone gives, below parent and child together, their magnitudes being >= 0.5):
 * SAEBench's picture of absorption, built exactly. */
/* The exact JumpReLU SAE both builders start from: one latent per true feature, decoder the
 * direction, threshold 0.05; *enc [F, d] receives the dual vectors (the encoder rows) for the
 * builder to change, then dual_sae_end writes them into W_enc and frees them. */
static int dual_sae_begin(const synth_config *sc, const float *dirs, sae_model **out, double **enc)
{
    sae_config cfg = {.arch = SAE_JUMPRELU, .d_in = sc->d, .d_sae = sc->n_features};
    snprintf(cfg.hook_name, sizeof cfg.hook_name, "synthetic");
    *enc = NULL;
    int rc = sae_model_new(out, &cfg);
    if (rc) return rc;
    const int d = sc->d, F = sc->n_features;
    *enc = mem_alloc(sizeof(double) * (size_t)F * d);
    if (!*enc) return err_set(ERR_NOMEM, "out of memory");
    if ((rc = dual_basis(dirs, F, d, *enc))) { /* the caller frees only the model */
        mem_free(*enc);
        *enc = NULL;
        return rc;
    }
    memcpy((*out)->W_dec, dirs, sizeof(float) * (size_t)F * d);
    for (int j = 0; j < F; j++) (*out)->threshold[j] = 0.05f;
    return OK;
}

static void dual_sae_end(const synth_config *sc, sae_model *m, double *enc)
{
    const int d = sc->d, F = sc->n_features;
    for (int j = 0; j < F; j++)
        for (int i = 0; i < d; i++) m->W_enc[(size_t)i * F + j] = (float)enc[(size_t)j * d + i];
    mem_free(enc);
}

static int absorbing_sae(const synth_config *sc, const float *dirs, int n_abs, sae_model **out)
{
    double *enc;
    int rc = dual_sae_begin(sc, dirs, out, &enc);
    if (rc) return rc;
    sae_model *m = *out;
    const int d = sc->d, G = 1 + sc->children;
    for (int g = 0; g < sc->parents; g++)
        for (int a = 1; a <= n_abs; a++) {
            int par = g * G, ch = par + a;
            for (int i = 0; i < d; i++) {
                size_t ci = (size_t)ch * d + i, pi = (size_t)par * d + i;
                m->W_dec[ci] = (float)((dirs[ci] + dirs[pi]) / sqrt(2.0));
                double e = enc[ci];
                enc[ci] = (e + enc[pi]) / sqrt(2.0);
                enc[pi] -= 3 * e;
            }
            m->threshold[ch] = 0.73f;
        }
    dual_sae_end(sc, m, enc);
    return OK;
}

/* The hand-built cases' generator: d 256, 96 features, 3 parents with 16 children of child_p
 * 0.04, 3 active, no copula. */
static synth_config hand_built_config(void)
{
    synth_config sc;
    synth_defaults(&sc);
    sc.d = 256;
    sc.n_features = 96;
    sc.active = 3;
    sc.rank = 0;
    sc.seed = 5;
    sc.parents = 3;
    sc.children = 16;
    sc.child_p = 0.04;
    return sc;
}

static void test_absorption_synth(void)
{
    synth_config sc = hand_built_config();
    eval_abs_params p;
    eval_abs_defaults(&p);
    const int n_abs_cases[2] = {0, 8};
    for (int q = 0; q < 2; q++) {
        sae_synth *g = NULL;
        sae_model *m = NULL;
        int rc = sae_synth_new(&g, &sc);
        if (!rc) rc = absorbing_sae(&sc, sae_synth_directions(g), n_abs_cases[q], &m);
        eval_abs_class mean;
        sae_absorption_result ex;
        if (!rc) rc = eval_absorption_synth(m, &sc, 30000, 30000, &p, &mean, NULL, &ex, NULL);
        CHECK(rc == OK, "%s", err_msg());
        if (!rc) {
            printf("absorbing children %d: exact absorption %.4f, partial %.4f (%d parents); SAEBench metric: "
                   "full-absorption rate %.4f, mean fraction %.4f, split %d, GT F1 %.3f, %d TP\n",
                   n_abs_cases[q], ex.absorption, ex.partial, ex.n_parents, mean.full_rate, mean.mean_frac,
                   mean.n_split, mean.gt_f1, mean.n_tp);
            CHECK(fabs(mean.full_rate - ex.absorption) <= 0.05, "full rate %.4f vs exact %.4f",
                  mean.full_rate, ex.absorption);
            CHECK(fabs(mean.mean_frac - ex.partial) <= 0.05, "mean fraction %.4f vs exact partial %.4f",
                  mean.mean_frac, ex.partial);
            CHECK(fabs(ex.partial - ex.absorption) < 1e-4, "all or nothing: partial %.4f, binary %.4f",
                  ex.partial, ex.absorption);
            CHECK(mean.included == sc.parents, "GT probes above the F1 minimum: %d", mean.included);
            CHECK(mean.n_split == 1, "split features %d (the parent's latent)", mean.n_split);
            if (q) CHECK(ex.absorption > 0.3, "the built SAE absorbs (%.3f)", ex.absorption);
        }
        sae_free(m);
        sae_synth_free(g);
    }
}

/* Partial absorption, built exactly: a JumpReLU SAE with one latent per true feature (dual-basis
 * encoders, the true directions as decoders, threshold 0.05), except that the first n_abs
 * children of each parent carry beta of the parent: their decoder is (d_a + beta d_p) / n_a and
 * their encoder n_a e_a (n_a = |d_a + beta d_p|), so they write m_a (d_a + beta d_p), and the
 * parent's latent reads e_p - beta (sum of their e_a), so it writes what they leave, m_p - beta
 * sum m_a (nothing when that is below 0.05). The reconstruction stays exact; the parent's latent
 * carries 1 - beta sum m_a / m_p of the parent. */
static int partial_sae(const synth_config *sc, const float *dirs, int n_abs, double beta, sae_model **out)
{
    double *enc;
    int rc = dual_sae_begin(sc, dirs, out, &enc);
    if (rc) return rc;
    sae_model *m = *out;
    const int d = sc->d, G = 1 + sc->children;
    for (int g = 0; g < sc->parents; g++)
        for (int a = 1; a <= n_abs; a++) {
            size_t ch = (size_t)(g * G + a) * d, par = (size_t)g * G * d;
            double nn = 0;
            for (int i = 0; i < d; i++) {
                double v = dirs[ch + i] + beta * dirs[par + i];
                nn += v * v;
            }
            nn = sqrt(nn);
            for (int i = 0; i < d; i++) {
                m->W_dec[ch + i] = (float)((dirs[ch + i] + beta * dirs[par + i]) / nn);
                enc[par + i] -= beta * enc[ch + i];
                enc[ch + i] *= nn;
            }
        }
    dual_sae_end(sc, m, enc);
    return OK;
}

/* SAEBench's absorption fraction against the exact partial absorption (sae_absorption's
 * partial: the share of the parent's true part its latent does not carry) on partial_sae. With
 * beta 1 the absorbers carry at least half of the parent (m_a / m_p >= 0.5), above SAEBench's
 * gate (the absorbers must carry 40% of the probe projection): the fraction must report the
 * exact partial within 0.05. With beta 0.3 they carry 15-60%, mostly below the gate, which the
 * fraction counts as 0: it must fall short by more than 0.05, and report it within 0.05 once the
 * gate is removed (prop 0), so the gate is the whole difference. */
static void test_absorption_partial(void)
{
    synth_config sc = hand_built_config();
    const double betas[2] = {1.0, 0.3};
    for (int q = 0; q < 2; q++) {
        sae_synth *g = NULL;
        sae_model *m = NULL;
        int rc = sae_synth_new(&g, &sc);
        if (!rc) rc = partial_sae(&sc, sae_synth_directions(g), 8, betas[q], &m);
        eval_abs_params p, p0;
        eval_abs_defaults(&p);
        p0 = p;
        p0.prop = 0;
        eval_abs_class mean, mean0;
        sae_absorption_result ex;
        if (!rc) rc = eval_absorption_synth(m, &sc, 30000, 30000, &p, &mean, NULL, &ex, NULL);
        if (!rc) rc = eval_absorption_synth(m, &sc, 30000, 30000, &p0, &mean0, NULL, NULL, NULL);
        CHECK(rc == OK, "%s", err_msg());
        if (!rc) {
            printf("partial absorption beta %.1f: exact partial %.4f, binary %.4f; SAEBench metric: "
                   "mean fraction %.4f (without the 40%% gate %.4f), full-absorption rate %.4f, split %d\n",
                   betas[q], ex.partial, ex.absorption, mean.mean_frac, mean0.mean_frac, mean.full_rate,
                   mean.n_split);
            CHECK(mean.n_split == 1 && mean.included == sc.parents, "split %d, included %d",
                  mean.n_split, mean.included);
            CHECK(ex.partial > ex.absorption + 0.1, "partial absorption (%.4f) beyond silencing (%.4f)",
                  ex.partial, ex.absorption);
            CHECK(fabs(mean0.mean_frac - ex.partial) <= 0.05, "ungated fraction %.4f vs exact partial %.4f",
                  mean0.mean_frac, ex.partial);
            CHECK(mean.mean_frac_nogate == mean0.mean_frac, "the reported ungated fraction %.6f is "
                  "the fraction with prop 0 (%.6f)", mean.mean_frac_nogate, mean0.mean_frac);
            if (q == 0)
                CHECK(fabs(mean.mean_frac - ex.partial) <= 0.05, "mean fraction %.4f vs exact partial %.4f",
                      mean.mean_frac, ex.partial);
            else
                CHECK(mean.mean_frac < ex.partial - 0.05, "below the gate: fraction %.4f, exact partial %.4f",
                      mean.mean_frac, ex.partial);
        }
        sae_free(m);
        sae_synth_free(g);
    }
}

/* TopK SAEs trained on the hierarchical generator (d 256, 96 features: 3 parents with 16
 * children of child_p 0.05, 3 active; d_sae 96, k 3, 300k tokens; seeds 0-5, about a second
 * each): they learn a clean latent per parent (decoder cosine > 0.9) that the children switch off
 * on 12-18% of the parent + child samples and weaken on most others (exact partial absorption
 * 0.38-0.45). SAEBench's full-absorption rate must report the binary absorption within 0.05. Its
 * absorption fraction (0.32-0.38) does not report the partial one within 0.05: samples whose
 * absorbers carry less than 40% of the probe projection count 0 (SAEBench's gate), so it must be
 * below it, and within 0.05 of it without the gate (docs/eval.md). Each seed twice: on raw inputs
 * and with sae-train's default input normalisation (and its default gradient clip). */
static void test_absorption_trained(void)
{
    for (int run = 0; run < 12; run++) {
        int seed = run % 6, norm = run / 6;
        synth_config sc;
        synth_defaults(&sc);
        sc.d = 256;
        sc.n_features = 96;
        sc.active = 3;
        sc.rank = 0;
        sc.seed = 11 + (uint64_t)seed;
        sc.parents = 3;
        sc.children = 16;
        sc.child_p = 0.05;
        sae_train_config c;
        sae_train_defaults(&c);
        c.arch = SAE_TOPK;
        c.d_in = sc.d;
        c.d_sae = 96;
        c.k = 3;
        c.batch = 1024;
        c.total_tokens = 300000;
        c.lr = 0.002;
        c.seed = 42 + (uint64_t)seed;
        /* raw inputs, then sae-train's default normalisation (b_enc at lr x sqrt(d_in) there).
           Normalised runs from before the default gradient clip (ffea41b) absorbed more on seeds
           0 and 1 (exact 0.197 / 0.189) and SAEBench's full rate fell outside 0.05 */
        c.normalize = norm;
        enum { N = 16384 };
        sae_source *src = NULL;
        sae_model *m = NULL;
        int rc = sae_source_synth(&src, &sc);
        if (!rc && !run) {
            sae_model *none = NULL;
            CHECK(sae_train_source(&c, src, 0, &none, NULL) == ERR_ARG && !none,
                  "no initial rows refused");
        }
        if (!rc) rc = sae_train_source(&c, src, N, &m, NULL);
        eval_abs_params p;
        eval_abs_defaults(&p);
        eval_abs_class mean;
        sae_absorption_result ex;
        if (!rc) rc = eval_absorption_synth(m, &sc, N, N, &p, &mean, NULL, &ex, NULL);
        CHECK(rc == OK, "%s", err_msg());
        if (!rc) {
            printf("trained topk seed %d%s: exact absorption %.4f, partial %.4f (parent cosine %.3f); SAEBench metric: "
                   "full-absorption rate %.4f, mean fraction %.4f (without the 40%% gate %.4f), split %d\n", seed,
                   norm ? " normalised" : "",
                   ex.absorption, ex.partial, ex.parent_cos, mean.full_rate, mean.mean_frac, mean.mean_frac_nogate,
                   mean.n_split);
            /* the fraction is gated (partial absorption below 40% of the probe projection counts
               0), so it reports less than the exact partial; without the gate it reports it */
            CHECK(mean.mean_frac < ex.partial, "gated fraction %.4f below the exact partial %.4f",
                  mean.mean_frac, ex.partial);
            CHECK(fabs(mean.mean_frac_nogate - ex.partial) <= 0.05, "ungated fraction %.4f vs exact partial %.4f",
                  mean.mean_frac_nogate, ex.partial);
            CHECK(ex.parent_cos > 0.9, "clean parent latents (cosine %.3f)", ex.parent_cos);
            CHECK(ex.absorption > 0.1, "the trained SAE absorbs (%.3f)", ex.absorption);
            CHECK(fabs(mean.full_rate - ex.absorption) <= 0.05, "full rate %.4f vs exact %.4f",
                  mean.full_rate, ex.absorption);
            CHECK(mean.included == sc.parents, "GT probes above the F1 minimum: %d", mean.included);
        }
        sae_free(m);
        sae_source_close(src);
    }
}

/* The random-SAE baseline of a centred SAE reads C x as the SAE does: its codes do not move when
 * every component of x moves by the same amount (a missing fold would let the mean through), and
 * an uncentred one's do. Its decoder rows are unit vectors and its b_dec the trained one. */
static void test_random_centred(void)
{
    sae_config c = {.arch = SAE_RELU, .d_in = 16, .d_sae = 40, .k = 0};
    for (int centred = 0; centred <= 1; centred++) {
        c.center_input = centred;
        sae_model *m = NULL, *r = NULL;
        CHECK(sae_model_new(&m, &c) == OK, "%s", err_msg());
        if (!m) return;
        for (int i = 0; i < c.d_in; i++) m->b_dec[i] = 0.1f * (float)(i % 5) - 0.2f;
        CHECK(eval_random_sae(m, 7, &r) == OK, "%s", err_msg());
        if (!r) {
            sae_free(m);
            return;
        }
        double maxdn = 0;
        for (int j = 0; j < c.d_sae; j++) {
            double n = 0;
            for (int i = 0; i < c.d_in; i++) n += (double)r->W_dec[j * c.d_in + i] * r->W_dec[j * c.d_in + i];
            maxdn = fmax(maxdn, fabs(sqrt(n) - 1));
        }
        CHECK(maxdn < 1e-6, "decoder rows of norm 1 (off by %g)", maxdn);
        CHECK(!memcmp(r->b_dec, m->b_dec, (size_t)c.d_in * sizeof(float)));
        float x[2][16], f[2][40];
        rng_state g;
        rng_seed(&g, 3);
        for (int i = 0; i < c.d_in; i++) {
            x[0][i] = (float)rng_normal(&g);
            x[1][i] = x[0][i] + 2.5f; /* the same x moved along the all-ones direction */
        }
        CHECK(sae_encode(r, x[0], 1, f[0]) == OK && sae_encode(r, x[1], 1, f[1]) == OK);
        double d = 0, mag = 0;
        for (int j = 0; j < c.d_sae; j++) {
            d = fmax(d, fabs((double)f[0][j] - f[1][j]));
            mag = fmax(mag, fabs((double)f[0][j]));
        }
        if (centred) CHECK(d < 1e-5 * (1 + mag), "centred: codes moved by %g with x's mean", d);
        else CHECK(d > 1e-2, "uncentred: codes should move with x's mean (by %g)", d);
        sae_free(r);
        sae_free(m);
    }
}

/* The sae-eval runner (eval_sae_run) on SAEs saved to files, with the hand-built generator's spec,
 * its directions as the truth and its samples as activations: an SAE whose decoder rows are the
 * true directions recovers them all (MMCS 1 against the file and the rebuilt generator, no
 * absorption) and reconstructs the samples exactly; the absorbing one gives the numbers
 * eval_absorption_synth gives on the same model and generator, and the same MMCS against file and
 * generator. A failing part keeps the parts before it; activations that do not fit the SAE
 * (targets for a plain SAE, a transcoder's without them) are ERR_ARG with misuse set. */
static void test_sae_run(void)
{
    char root[64];
    if (!harness_tmpdir(root, sizeof root, "eval_sae")) return;
    char exact[300], absorb[300], tcdir[300], truth[300], spec[300], acts[300], wide[300];
    snprintf(exact, sizeof exact, "%s/exact", root);
    snprintf(absorb, sizeof absorb, "%s/absorb", root);
    snprintf(tcdir, sizeof tcdir, "%s/tc", root);
    snprintf(truth, sizeof truth, "%s/truth.npy", root);
    snprintf(spec, sizeof spec, "%s/gen.json", root);
    snprintf(acts, sizeof acts, "%s/acts.npy", root);
    snprintf(wide, sizeof wide, "%s/wide.npy", root);
    synth_config sc = hand_built_config();
    enum { N = 1000, NS = 4096 };
    sae_synth *g = NULL;
    sae_model *m0 = NULL, *m8 = NULL, *tc = NULL;
    float *x = mem_alloc(sizeof(float) * (size_t)N * sc.d);
    int rc = x ? sae_synth_new(&g, &sc) : ERR_NOMEM;
    if (!rc) rc = absorbing_sae(&sc, sae_synth_directions(g), 0, &m0);
    if (!rc) rc = absorbing_sae(&sc, sae_synth_directions(g), 8, &m8);
    sae_config tcc = {.arch = SAE_TOPK, .d_in = sc.d, .d_sae = 8, .k = 2, .transcoder = SAE_TRANSCODER,
                      .d_out = sc.d};
    snprintf(tcc.hook_name, sizeof tcc.hook_name, "in");
    snprintf(tcc.hook_name_out, sizeof tcc.hook_name_out, "out");
    if (!rc) rc = sae_model_new(&tc, &tcc);
    if (!rc) rc = sae_save(m0, exact);
    if (!rc) rc = sae_save(m8, absorb);
    if (!rc) rc = sae_save(tc, tcdir);
    int64_t tsh[2] = {sc.n_features, sc.d}, xsh[2] = {N, sc.d}, wsh[2] = {N / 2, 2 * sc.d};
    if (!rc) rc = npy_write(truth, sae_synth_directions(g), 2, tsh);
    if (!rc) rc = sae_synth_spec_save(&sc, spec);
    if (!rc) rc = sae_synth_sample(g, x, N, NULL);
    if (!rc) rc = npy_write(acts, x, 2, xsh);
    if (!rc) rc = npy_write(wide, x, 2, wsh);
    CHECK(rc == OK, "fixtures: %s", err_msg());
    if (rc) goto done;

    eval_sae_opts o;
    eval_sae_defaults(&o);
    CHECK(o.synth_samples == 16384 && o.thr == 0.9, "the command's defaults");
    o.sae = exact;
    o.truth = truth;
    o.synth = spec;
    o.synth_samples = NS;
    o.acts = acts;
    eval_sae_result r;
    CHECK((rc = eval_sae_run(&o, &r)) == OK, "%s", err_msg());
    enum { ALL = EVAL_SAE_LOADED | EVAL_SAE_TRUTH | EVAL_SAE_GENERATOR | EVAL_SAE_ABSORPTION |
                 EVAL_SAE_RECON };
    if (!rc) {
        CHECK(r.done == ALL && !r.misuse, "done %d", r.done);
        CHECK(r.sae.arch == SAE_JUMPRELU && r.sae.d_in == sc.d && r.sae.d_sae == sc.n_features);
        CHECK(r.truth_features == sc.n_features);
        CHECK_NEAR(r.truth_mmcs, 1, 1e-5);
        CHECK_NEAR(r.truth_recovered, 1, 0);
        CHECK(r.gen.d == sc.d && r.gen.n_features == sc.n_features && r.gen.parents == sc.parents &&
              r.gen.children == sc.children && r.gen.child_p == sc.child_p, "the spec read back");
        CHECK_NEAR(r.gen_mmcs, 1, 1e-5);
        CHECK_NEAR(r.gen_recovered, 1, 0);
        CHECK(r.abs_samples == NS && r.abs_params.min_gt_f1 == 0.6);
        CHECK(r.abs_exact.n_parents == sc.parents && r.abs_exact.absorption < 0.01,
              "the exact SAE absorbs nothing (%.4f)", r.abs_exact.absorption);
        CHECK(r.recon.n == N && r.recon.ev_defined && r.recon.ev > 0.999,
              "%lld rows, explained variance %.6f", (long long)r.recon.n, r.recon.ev);
    }
    o.max_tokens = 100;
    o.truth = o.synth = NULL;
    CHECK(eval_sae_run(&o, &r) == OK && r.done == (EVAL_SAE_LOADED | EVAL_SAE_RECON) &&
          r.recon.n == 100, "max_tokens: %lld rows (%s)", (long long)r.recon.n, err_msg());

    /* the absorbing SAE: the runner's numbers are eval_absorption_synth's on the loaded model */
    eval_sae_defaults(&o);
    o.sae = absorb;
    o.truth = truth;
    o.synth = spec;
    o.synth_samples = NS;
    CHECK((rc = eval_sae_run(&o, &r)) == OK, "%s", err_msg());
    sae_model *ml = NULL;
    if (!rc) rc = sae_load(&ml, absorb);
    eval_abs_params p;
    eval_abs_defaults(&p);
    eval_abs_class mean;
    sae_absorption_result ex;
    if (!rc) rc = eval_absorption_synth(ml, &sc, NS, NS, &p, &mean, NULL, &ex, NULL);
    CHECK(rc == OK, "%s", err_msg());
    if (!rc) {
        CHECK(r.done == (ALL & ~EVAL_SAE_RECON), "done %d", r.done);
        CHECK(r.truth_mmcs < 0.99 && r.gen_mmcs == r.truth_mmcs, "MMCS %.4f (file) %.4f (generator)",
              r.truth_mmcs, r.gen_mmcs);
        CHECK(r.abs_exact.absorption > 0.3 && r.abs_exact.absorption == ex.absorption &&
                  r.abs_exact.partial == ex.partial,
              "exact absorption %.4f (direct %.4f)", r.abs_exact.absorption, ex.absorption);
        CHECK(r.abs_saebench.full_rate == mean.full_rate && r.abs_saebench.mean_frac == mean.mean_frac &&
                  r.abs_saebench.n_split == mean.n_split && r.abs_saebench.included == mean.included,
              "SAEBench full rate %.4f (direct %.4f)", r.abs_saebench.full_rate, mean.full_rate);
    }
    sae_free(ml);

    /* a failing part keeps what finished before it */
    eval_sae_defaults(&o);
    o.sae = exact;
    o.truth = truth;
    o.acts = wide;
    CHECK(eval_sae_run(&o, &r) == ERR_SHAPE && strstr(err_msg(), "wide.npy: expected [tokens, 256]"),
          "%s", err_msg());
    CHECK(r.done == (EVAL_SAE_LOADED | EVAL_SAE_TRUTH) && fabs(r.truth_mmcs - 1) < 1e-5 && !r.misuse,
          "done %d", r.done);
    volatile int stop = 1;
    o.stop = &stop;
    CHECK(eval_sae_run(&o, &r) == ERR_ABORTED && r.done == EVAL_SAE_LOADED, "stop: done %d", r.done);
    o.stop = NULL;
    o.acts_out = acts;
    CHECK(eval_sae_run(&o, &r) == ERR_ARG && r.misuse == EVAL_SAE_TARGETS_UNUSED && !r.done,
          "targets for a plain SAE: %s", err_msg());
    o.sae = tcdir;
    o.acts_out = NULL;
    o.acts = acts;
    CHECK(eval_sae_run(&o, &r) == ERR_ARG && r.misuse == EVAL_SAE_NEEDS_TARGETS && !r.done,
          "a transcoder without targets: %s", err_msg());
    o.acts_out = acts;
    o.truth = NULL;
    CHECK(eval_sae_run(&o, &r) == OK && r.done == (EVAL_SAE_LOADED | EVAL_SAE_RECON) &&
          r.sae.transcoder == SAE_TRANSCODER && r.recon.n == N, "a transcoder's pairs: %s", err_msg());
done:
    sae_free(m0);
    sae_free(m8);
    sae_free(tc);
    sae_synth_free(g);
    mem_free(x);
    if (!harness_fail) CHECK(harness_rmtree(root) == 0);
}

int main(void)
{
    test_liblinear_hand();
    test_random_centred();
    test_latent_is_label();
    test_memo();
    test_l1_history();
    test_split_and_balance();
    test_pos_classes();
    test_min_sizes();
    test_scr_score();
    test_mean_of_means();
    test_boot_known();
    test_boot_joint();
    test_boot_small_strata();
    test_absorption_synth();
    test_absorption_partial();
    test_absorption_trained();
    test_sae_run();
    return harness_report("test_eval");
}
