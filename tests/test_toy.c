/* test_toy.c - toy models of superposition and the packing optimizer. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"
#include "harness.h"
#include "toy/toy.h"

static sup_model *train(int n, int m, double S, double r, int steps)
{
    sup_config c;
    sup_config_default(&c, n, m);
    c.sparsity = S;
    c.importance_decay = r;
    c.steps = steps;
    c.batch = 512; /* half the paper's batch keeps the test fast; same asserted geometry */
    c.instances = n <= 5 ? 8 : 1; /* best of several: tiny models have local minima */
    c.seed = 0;
    sup_model *s = NULL;
    int rc = sup_train(&c, &s, NULL, NULL);
    CHECK(rc == OK, "train n=%d m=%d S=%g: %s", n, m, S, err_msg());
    return s;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* n=5, m=2 (importance 0.9^i): dense features get two dedicated orthogonal directions; at
 * S=0.8 four features form two antipodal pairs (single runs also end in pentagons of higher
 * loss, hence the best of 8); at S=0.9 all five form a pentagon. */
static void test_five_in_two(void)
{
    sup_model *s = train(5, 2, 0.0, 0.9, 3000);
    if (!s) return;
    sup_feature f[5];
    sup_features(s, f);
    CHECK(sup_represented(s) == 2, "dense: %d features represented, want 2", sup_represented(s));
    CHECK(f[0].norm > 0.95 && f[1].norm > 0.95 && f[0].dimensionality > 0.95 &&
              f[1].dimensionality > 0.95,
          "dense: top two features dedicated (norms %.3f %.3f, D %.3f %.3f)", f[0].norm, f[1].norm,
          f[0].dimensionality, f[1].dimensionality);
    CHECK(fabs(s->W[0] * s->W[2] + s->W[1] * s->W[3]) < 0.05, "dense: W_0 and W_1 orthogonal");
    CHECK_NEAR(sup_dims_per_feature(s), 1.0, 0.05);
    sup_model_free(s);

    s = train(5, 2, 0.8, 0.9, 3000);
    if (!s) return;
    sup_features(s, f);
    CHECK(sup_represented(s) == 4, "S=0.8: %d represented, want 4 (antipodal pairs)",
          sup_represented(s));
    for (int i = 0; i < 5; i++)
        if (f[i].norm > 0.5)
            CHECK(fabs(f[i].dimensionality - 0.5) < 0.05, "S=0.8: D_%d = %.3f, want 1/2", i,
                  f[i].dimensionality);
    sup_model_free(s);

    s = train(5, 2, 0.9, 0.9, 3000);
    if (!s) return;
    sup_features(s, f);
    CHECK(sup_represented(s) == 5, "S=0.9: %d represented, want 5", sup_represented(s));
    double ang[5];
    for (int i = 0; i < 5; i++) {
        CHECK(fabs(f[i].dimensionality - 0.4) < 0.03, "S=0.9: D_%d = %.3f, want 2/5 (pentagon)",
              i, f[i].dimensionality);
        ang[i] = atan2(s->W[2 * i + 1], s->W[2 * i]) * 180 / M_PI;
    }
    qsort(ang, 5, sizeof ang[0], cmp_double);
    for (int i = 0; i < 5; i++) {
        double gap = i < 4 ? ang[i + 1] - ang[i] : ang[0] + 360 - ang[4];
        CHECK(fabs(gap - 72) < 6, "pentagon: angle gap %d = %.1f deg, want 72", i, gap);
    }
    CHECK_NEAR(sup_dims_per_feature(s), 0.4 * 5 / 5.9, 0.1); /* norms ~1.1 */
    /* the reported loss is the model's, not the lowest of 8 estimates on one small set (that
       read 9% low in an audit): within 2% of 2^21 fresh samples (its standard error ~0.4%) */
    sup_config c;
    sup_config_default(&c, 5, 2);
    c.sparsity = 0.9;
    c.importance_decay = 0.9;
    double big = 0;
    CHECK(sup_eval(s, &c, 1 << 21, 99, &big) == OK);
    CHECK(fabs(s->final_loss - big) < 0.02 * big, "reported loss %.6f, 2^21 samples %.6f",
          s->final_loss, big);
    sup_model_free(s);
}

/* n=2, m=1: sparse features share the one dimension as an antipodal pair. */
static void test_antipodal(void)
{
    sup_model *s = train(2, 1, 0.9, 0.9, 3000);
    if (!s) return;
    sup_feature f[2];
    sup_features(s, f);
    CHECK(f[0].norm > 0.9 && f[1].norm > 0.9 && s->W[0] * s->W[1] < 0, "W = %.3f %.3f", s->W[0],
          s->W[1]);
    CHECK(fabs(f[0].dimensionality - 0.5) < 0.05 && fabs(f[1].dimensionality - 0.5) < 0.05,
          "D = %.3f %.3f", f[0].dimensionality, f[1].dimensionality);
    sup_model_free(s);
}

/* n=20, m=5 (importance 0.7^i): dense -> the 5 most important features, orthogonal, no
 * superposition; sparse -> many more features than dimensions. */
static void test_twenty_in_five(void)
{
    sup_model *s = train(20, 5, 0.0, 0.7, 4000);
    if (!s) return;
    sup_feature f[20];
    sup_features(s, f);
    CHECK(sup_represented(s) == 5, "dense: %d represented, want 5", sup_represented(s));
    for (int i = 0; i < 5; i++)
        CHECK(f[i].norm > 0.9 && f[i].superposition < 0.05,
              "dense: feature %d norm %.3f superposition %.3f", i, f[i].norm, f[i].superposition);
    for (int i = 5; i < 20; i++) CHECK(f[i].norm < 0.1, "dense: feature %d norm %.3f", i, f[i].norm);
    float G[400];
    sup_gram(s, G);
    CHECK_NEAR(G[0], f[0].norm * f[0].norm, 1e-4);
    sup_model_free(s);

    s = train(20, 5, 0.99, 0.7, 4000);
    if (!s) return;
    int rep = sup_represented(s);
    CHECK(rep >= 10, "S=0.99: %d represented, want >= 10 (superposition)", rep);
    CHECK(sup_dims_per_feature(s) < 0.5, "S=0.99: dims/feature %.3f", sup_dims_per_feature(s));
    sup_model_free(s);
}

static void test_sup_errors(void)
{
    sup_config c;
    sup_config_default(&c, 5, 2);
    c.sparsity = 1.0;
    sup_model *s = (sup_model *)1;
    CHECK(sup_train(&c, &s, NULL, NULL) == ERR_ARG && s == NULL);
    sup_config_default(&c, 0, 2);
    CHECK(sup_train(&c, &s, NULL, NULL) == ERR_ARG);
    /* a divergence to NaN weights kept the loss finite (the ReLU maps NaN to 0): written, exit 0 */
    sup_config_default(&c, 5, 2);
    c.sparsity = 0.5;
    c.steps = 10;
    c.lr = 1e308;
    CHECK(sup_train(&c, &s, NULL, NULL) == ERR_ARG && s == NULL && strstr(err_msg(), "diverged"), "%s",
          err_msg());
    /* every allocation failure is reported, nothing leaks (checked under ASan) */
    sup_config_default(&c, 5, 2);
    c.steps = 3;
    for (int k = 1; k <= 12; k++) {
        mem_fail_at(k);
        int rc = sup_train(&c, &s, NULL, NULL);
        mem_fail_at(0);
        CHECK(rc == OK || rc == ERR_NOMEM, "alloc %d: rc %d", k, rc);
        if (rc == OK) sup_model_free(s);
    }
}

static int stop_at_3(int step, int total, double loss, void *user)
{
    (void)total, (void)loss, (void)user;
    return step >= 3;
}

static void test_pack_known(void)
{
    /* 4 lines in R^3: the regular simplex, |cos| = 1/3; 6 lines: icosahedron diagonals,
     * |cos| = 1/sqrt(5). Both meet the Welch bound with equality. */
    int dims[2] = {3, 3}, counts[2] = {4, 6};
    for (int t = 0; t < 2; t++) {
        float V[18];
        pack_config c;
        pack_config_default(&c, dims[t], counts[t]);
        c.seed = 3;
        CHECK(pack_optimize(&c, V, 0, NULL, NULL) == OK, "%s", err_msg());
        pack_stats st;
        CHECK(pack_measure(V, counts[t], dims[t], &st, NULL, 0) == OK);
        double w = pack_welch_bound(counts[t], dims[t]);
        CHECK(st.max_abs_cos >= w - 1e-5 && st.max_abs_cos < w + 2e-3,
              "%d in %d: max |cos| %.5f, optimum %.5f", counts[t], dims[t], st.max_abs_cos, w);
    }
    CHECK_NEAR(pack_welch_bound(4, 3), 1.0 / 3, 1e-12);
    CHECK_NEAR(pack_welch_bound(6, 3), 1 / sqrt(5), 1e-12);
    CHECK(pack_welch_bound(3, 3) == 0);
    CHECK_NEAR(pack_jl_eps(10000, 100), sqrt(4 * log(10000.0) / 100), 1e-12);
    CHECK_NEAR(pack_jl_dim(10000, pack_jl_eps(10000, 100)), 100, 1e-9);
}

/* The optimizer beats random vectors clearly and never "beats" the Welch bound. */
static void test_pack_vs_random(void)
{
    int dim = 20, count = 200;
    float *V = mem_alloc(sizeof(float) * dim * count), *R = mem_alloc(sizeof(float) * dim * count);
    pack_random(R, count, dim, 7);
    pack_stats sr, so;
    CHECK(pack_measure(R, count, dim, &sr, NULL, 0) == OK);
    pack_config c;
    pack_config_default(&c, dim, count);
    c.seed = 7;
    CHECK(pack_optimize(&c, V, 0, NULL, NULL) == OK, "%s", err_msg());
    CHECK(pack_measure(V, count, dim, &so, NULL, 0) == OK);
    CHECK(so.max_abs_cos < 0.6 * sr.max_abs_cos, "optimized %.4f vs random %.4f", so.max_abs_cos,
          sr.max_abs_cos);
    CHECK(so.max_abs_cos >= pack_welch_bound(count, dim), "below the Welch bound: %.4f",
          so.max_abs_cos);
    CHECK(so.min_angle_deg > 70 && so.max_angle_deg < 110, "optimized angles %.1f..%.1f",
          so.min_angle_deg, so.max_angle_deg);
    /* init = 1 continues from given vectors; the callback can stop the run */
    memcpy(V, R, sizeof(float) * dim * count);
    CHECK(pack_optimize(&c, V, 1, stop_at_3, NULL) == ERR_ABORTED);
    mem_free(V);
    mem_free(R);
}

/* pack_measure over several row blocks agrees with a direct double loop. */
static void test_pack_measure(void)
{
    int dim = 4, count = 3000; /* > 2896: more than one block of rows */
    float *V = mem_alloc(sizeof(float) * dim * count);
    pack_random(V, count, dim, 11);
    double mx = 0, cmin = 1, cmax = -1;
    int64_t h2[18];
    for (int i = 0; i < count; i++)
        for (int j = i + 1; j < count; j++) {
            double d = 0;
            for (int k = 0; k < dim; k++) d += (double)V[i * dim + k] * V[j * dim + k];
            if (fabs(d) > mx) mx = fabs(d);
            if (d < cmin) cmin = d;
            if (d > cmax) cmax = d;
        }
    pack_stats st;
    CHECK(pack_measure(V, count, dim, &st, h2, 18) == OK);
    CHECK_NEAR(st.max_abs_cos, mx, 1e-5);
    CHECK_NEAR(st.min_angle_deg, acos(cmax) * 180 / M_PI, 0.05);
    CHECK_NEAR(st.max_angle_deg, acos(cmin) * 180 / M_PI, 0.05);
    int64_t tot = 0;
    for (int b = 0; b < 18; b++) tot += h2[b];
    CHECK(tot == st.pairs && st.pairs == (int64_t)count * (count - 1) / 2);
    /* by symmetry of random directions, bins b and 17-b hold about the same counts */
    CHECK(llabs(h2[8] - h2[9]) < 0.05 * h2[8], "%lld vs %lld", (long long)h2[8],
          (long long)h2[9]);
    /* hand-made: e1, e2, (e1+e2)/sqrt2 -> angles 90, 45, 45 */
    float W[6] = {1, 0, 0, 1, (float)M_SQRT1_2, (float)M_SQRT1_2};
    int64_t h3[3];
    CHECK(pack_measure(W, 3, 2, &st, h3, 3) == OK);
    CHECK_NEAR(st.max_abs_cos, M_SQRT1_2, 1e-6);
    CHECK_NEAR(st.min_angle_deg, 45, 1e-3);
    CHECK_NEAR(st.max_angle_deg, 90, 1e-3);
    CHECK(h3[0] == 2 && h3[1] == 1 && h3[2] == 0, "hist %lld %lld %lld", (long long)h3[0],
          (long long)h3[1], (long long)h3[2]);
    CHECK(pack_measure(W, 1, 2, &st, NULL, 0) == ERR_ARG);
    /* NaN vectors measured as max |cos| 0, below the Welch bound; a huge step kept them as the
       best iterate (an audit) */
    W[3] = NAN;
    CHECK(pack_measure(W, 3, 2, &st, NULL, 0) == ERR_ARG && strstr(err_msg(), "not finite"), "%s", err_msg());
    pack_config c;
    pack_config_default(&c, 3, 4);
    c.lr = 1e37;
    float P[12];
    CHECK(pack_optimize(&c, P, 0, NULL, NULL) == ERR_ARG && strstr(err_msg(), "diverged"), "%s", err_msg());
    /* passes over all pairs too long to finish are refused */
    CHECK(pack_measure(V, 1000000, 10, &st, NULL, 0) == ERR_ARG && strstr(err_msg(), "count^2 x dim"), "%s",
          err_msg());
    mem_free(V);
}

/* king - man + woman = queen on hand-made 3-d embeddings; inputs excluded; ties by id. */
static void test_nearest(void)
{
    /* rows: 0 king, 1 man, 2 woman, 3 queen, 4 apple, 5 zero row, 6 = queen again */
    float E[7 * 3] = {1, 1, 0, 1, 0, 0, 0, 0, 1, 0, 1, 1, 1, -1, 0, 0, 0, 0, 0, 2, 2};
    float q[3];
    for (int j = 0; j < 3; j++) q[j] = E[0 * 3 + j] - E[1 * 3 + j] + E[2 * 3 + j];
    unsigned char ex[7] = {1, 1, 1, 0, 0, 0, 0};
    int ids[7], n;
    float cs[7];
    CHECK(toy_nearest(E, 7, 3, q, ex, 3, ids, cs, &n) == OK && n == 3);
    CHECK(ids[0] == 3 && ids[1] == 6 && fabs(cs[0] - 1) < 1e-6 && fabs(cs[1] - 1) < 1e-6,
          "%d %d %.4f", ids[0], ids[1], cs[0]);
    CHECK(ids[2] == 5 && cs[2] == 0, "zero row has cosine 0: %d %.3f", ids[2], cs[2]);
    CHECK(toy_nearest(E, 7, 3, q, NULL, 10, ids, cs, &n) == OK && n == 7);
    CHECK(ids[6] == 4 && fabs(cs[6] - (-1.0 / 2)) < 1e-6, "apple last %d %.4f", ids[6], cs[6]);
    float z[3] = {0, 0, 0};
    CHECK(toy_nearest(E, 7, 3, z, NULL, 3, ids, cs, &n) == ERR_ARG);
}

/* ---- toy_embed_parse and toy_embed_run (`saelite embed`) ----------------------------------- */
static void test_embed_parse(void)
{
    toy_embed_term t[TOY_EMBED_MAX_TERMS];
    int nt = -1;
    /* what the command refuses (a usage error, before it loads anything) */
    static const struct {
        const char *expr, *msg;
    } bad[] = {{"", "has no terms"},         {"   ", "has no terms"},  {"-", "has no terms"},
               {"+ -", "has no terms"},      {"king -", "ends with an operator"},
               {"king - man +\t", "ends with an operator"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(toy_embed_parse(bad[i].expr, t, &nt) == ERR_ARG && strstr(err_msg(), bad[i].msg) &&
                  nt == -1,
              "'%s': %s", bad[i].expr, err_msg());
    char s[2 * TOY_EMBED_MAX_TERMS + 2 * TOY_EMBED_TERM_MAX];
    strcpy(s, "a");
    for (int i = 1; i < TOY_EMBED_MAX_TERMS; i++) strcat(s, "+a");
    CHECK(toy_embed_parse(s, t, &nt) == OK && nt == TOY_EMBED_MAX_TERMS, "64 terms: %s", err_msg());
    strcat(s, "+a");
    nt = -1;
    CHECK(toy_embed_parse(s, t, &nt) == ERR_ARG && strstr(err_msg(), "too many") && nt == -1,
          "65 terms: %s", err_msg());
    memset(s, 'x', TOY_EMBED_TERM_MAX - 1);
    strcpy(s + TOY_EMBED_TERM_MAX - 1, "  ");
    CHECK(toy_embed_parse(s, t, &nt) == OK && nt == 1 && strlen(t[0].text) == TOY_EMBED_TERM_MAX - 1);
    strcpy(s + TOY_EMBED_TERM_MAX - 1, "x");
    CHECK(toy_embed_parse(s, t, &nt) == ERR_ARG && strstr(err_msg(), "too long"), "%s", err_msg());
    /* signs: a leading one, runs of operators multiply; blanks trimmed, inner ones kept */
    CHECK(toy_embed_parse(" - new york - - man+\twoman ", t, &nt) == OK && nt == 3);
    CHECK(t[0].sign == -1 && !strcmp(t[0].text, "new york") && t[1].sign == 1 &&
              !strcmp(t[1].text, "man") && t[2].sign == 1 && !strcmp(t[2].text, "woman") &&
              !t[0].ids && !t[2].nids,
          "%d '%s' %d '%s' %d '%s'", t[0].sign, t[0].text, t[1].sign, t[1].text, t[2].sign,
          t[2].text);
}

typedef struct {
    char seen[8][32]; /* the texts the runner looked up */
    int n;
} words;

/* A dictionary: " king" -> 0, ..., "kingman" -> {0, 1}; anything else is refused. */
static int lookup_word(const char *text, int **ids, size_t *n, void *user)
{
    static const char *const dict[] = {"king", "man", "woman", "queen", "apple", "other"};
    words *w = user;
    if (w->n < 8) snprintf(w->seen[w->n++], sizeof w->seen[0], "%s", text);
    const char *word = text[0] == ' ' ? text + 1 : text;
    *n = 0;
    *ids = mem_alloc(2 * sizeof(int));
    if (!*ids) return err_set(ERR_NOMEM, "out of memory");
    if (!strcmp(word, "kingman")) {
        (*ids)[0] = 0;
        (*ids)[1] = 1;
        *n = 2;
        return OK;
    }
    for (int i = 0; i < 6; i++)
        if (!strcmp(word, dict[i])) {
            (*ids)[0] = i;
            *n = 1;
            return OK;
        }
    return err_set(ERR_ARG, "unknown word '%s'", word);
}

static void test_embed_run(void)
{
    /* rows: 0 king, 1 man, 2 woman, 3 queen = king - man + woman, 4 apple, 5 other */
    const float E[6 * 3] = {1, 1, 0, 1, 0, 0, 0, 0, 1, 0, 1, 1, 0, 1, 0, -1, 0, 0};
    words w = {0};
    toy_embed_opts o = {.expr = "king - man + woman", .E = E, .rows = 6, .dim = 3, .vocab = 6,
                        .top = 5, .lookup = lookup_word, .user = &w, .lookup_name = "dict"};
    toy_embed_result r;
    CHECK(toy_embed_run(&o, &r) == OK, "%s", err_msg());
    /* the inputs (king 0.5, woman 0.71) are excluded: 3 rows left of top 5 */
    CHECK(r.found == 3 && r.ids[0] == 3 && r.ids[1] == 4 && r.ids[2] == 5, "found %d: %d %d %d",
          r.found, r.ids[0], r.ids[1], r.ids[2]);
    if (r.found == 3) {
        CHECK_NEAR(r.cos[0], 1.0, 1e-6);
        CHECK_NEAR(r.cos[1], sqrt(0.5), 1e-6);
        CHECK_NEAR(r.cos[2], 0.0, 1e-6);
    }
    CHECK(r.nterms == 3 && r.terms[1].sign == -1 && r.terms[1].nids == 1 && r.terms[1].ids[0] == 1);
    CHECK(w.n == 3 && !strcmp(w.seen[0], " king") && !strcmp(w.seen[2], " woman"), "looked up '%s'",
          w.seen[0]);
    toy_embed_result_free(&r);
    CHECK(!r.terms && !r.ids && !r.found);

    /* a word of two ids is their mean: kingman + woman = (1, 0.5, 1), queen's cosine 1/sqrt(2)
       (the sum would give 2/sqrt(12)); no_space looks up the word alone */
    w.n = 0;
    o.expr = "kingman + woman";
    o.no_space = 1;
    o.top = 1;
    CHECK(toy_embed_run(&o, &r) == OK && r.found == 1 && r.ids[0] == 3, "%s", err_msg());
    if (r.found == 1) CHECK_NEAR(r.cos[0], sqrt(0.5), 1e-6);
    CHECK(r.terms[0].nids == 2 && !strcmp(w.seen[0], "kingman"));
    toy_embed_result_free(&r);

    /* only rows below the lookup's vocabulary are searched */
    o.expr = "king - man + woman";
    o.top = 5;
    o.vocab = 5;
    CHECK(toy_embed_run(&o, &r) == OK && r.found == 2 && r.ids[1] == 4, "found %d", r.found);
    toy_embed_result_free(&r);

    /* refusals leave an empty result */
    static const struct {
        const char *expr;
        int vocab, rc;
        const char *msg;
    } bad[] = {{"king -", 6, ERR_ARG, "ends with an operator"},
               {"king - king", 6, ERR_ARG, "terms cancel"},
               {"king + pear", 6, ERR_ARG, "unknown word 'pear'"},
               {"king - man + queen", 3, ERR_SHAPE, "token 3 of 'queen' is outside the model's "
                                                   "vocabulary (6 rows; the tokenizer dict has 3"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        o.expr = bad[i].expr;
        o.vocab = bad[i].vocab;
        int rc = toy_embed_run(&o, &r);
        CHECK(rc == bad[i].rc && strstr(err_msg(), bad[i].msg) && !r.terms && !r.ids && !r.found,
              "'%s': %d %s", bad[i].expr, rc, err_msg());
    }
}

int main(void)
{
    test_nearest();
    test_embed_parse();
    test_embed_run();
    test_five_in_two();
    test_antipodal();
    test_twenty_in_five();
    test_sup_errors();
    test_pack_known();
    test_pack_vs_random();
    test_pack_measure();
    return harness_report("test_toy");
}
