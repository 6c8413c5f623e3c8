/* test_causal.c - interventions on SAE features: steering and delta clamping (analysis/steer.h);
 * attribution (analysis/attribute.h) and `saelite attribute` as a library call (rep_attr_run). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/ana.h"
#include "analysis/attribute.h"
#include "analysis/effects.h"
#include "analysis/steer.h"
#include "common/err.h"
#include "common/mem.h"
#include "harness.h"
#include "model/gpt2.h"
#include "model/ops.h"
#include "reports/report.h"
#include "reports/report_run.h"
#include "sae/sae.h"
#include "tok_fixture.h"

enum { C = 16, V = 64, T = 12, D = 48 };
static const char *const HOOK = "blocks.0.hook_resid_post";

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (rs >> 11) * (1.0 / 9007199254740992.0);
}

static gpt2_model *tiny_model(int layers)
{
    gpt2_config cfg = {.n_layer = layers, .n_head = 2, .n_embd = C, .n_ctx = 32, .vocab_size = V,
                       .n_inner = 4 * C, .ln_eps = 1e-5f};
    gpt2_model *m = NULL;
    if (gpt2_create(&m, &cfg, 7) != OK) return NULL;
    /* embeddings (tied unembedding) of std 0.5, not 0.02: logits then differ by whole units */
    int nt;
    const gpt2_tensor *tab = gpt2_param_table(m, &nt);
    float *p = gpt2_params(m, NULL);
    for (int i = 0; i < nt; i++)
        if (!strcmp(tab[i].name, "wte.weight"))
            for (size_t k = 0; k < tab[i].numel; k++) p[tab[i].offset + k] *= 25;
    return m;
}

/* ReLU SAE with random unit decoder rows, W_enc = W_dec^T and a bias that lets about half fire. */
static sae_model *tiny_sae(const char *hook, uint64_t seed)
{
    sae_config cfg = {.arch = SAE_RELU, .d_in = C, .d_sae = D, .context_size = T};
    snprintf(cfg.hook_name, sizeof cfg.hook_name, "%s", hook);
    sae_model *s = NULL;
    if (sae_model_new(&s, &cfg) != OK) return NULL;
    rs = seed;
    for (int j = 0; j < D; j++) {
        double n = 0;
        for (int k = 0; k < C; k++) {
            float v = (float)(urand() * 2 - 1);
            s->W_dec[j * C + k] = v;
            n += (double)v * v;
        }
        for (int k = 0; k < C; k++) {
            s->W_dec[j * C + k] /= (float)sqrt(n);
            s->W_enc[k * D + j] = s->W_dec[j * C + k];
        }
    }
    s->b_enc[D - 1] = -1e6f; /* one feature that never fires */
    return s;
}

static void tokens(int *ids, int n, uint64_t seed)
{
    rs = seed;
    for (int t = 0; t < n; t++) ids[t] = (int)(urand() * V);
}

typedef struct { float *buf; } grab;
static int grab_hook(const tensor_view *t, void *user)
{
    memcpy(((grab *)user)->buf, t->data, (size_t)tensor_numel(t) * sizeof(float));
    return 0;
}

/* logits [T,V] of one forward with st attached (NULL: clean) */
static int run(gpt2_model *m, ana_steer *st, const int *ids, float *out)
{
    gpt2_hook_clear(m);
    int rc = st ? ana_steer_attach(st, m, NULL) : OK;
    if (!rc) rc = gpt2_forward(m, ids, 1, T, 1);
    if (!rc && st) rc = ana_steer_error(st);
    if (!rc) memcpy(out, gpt2_logits(m), sizeof(float) * T * V);
    gpt2_hook_clear(m);
    return rc;
}

static void softmax_row(const float *l, double *p)
{
    double mx = l[0], s = 0;
    for (int i = 1; i < V; i++) mx = l[i] > mx ? l[i] : mx;
    for (int i = 0; i < V; i++) s += p[i] = exp(l[i] - mx);
    for (int i = 0; i < V; i++) p[i] /= s;
}

static void test_parse(void)
{
    ana_steer_term *t;
    int n;
    CHECK(ana_steer_parse("3:2.5,17:-1", 20, &t, &n) == OK && n == 2);
    CHECK(t[0].feature == 3 && t[0].value == 2.5f && t[1].feature == 17 && t[1].value == -1.0f);
    mem_free(t);
    CHECK(ana_steer_parse("3:2.5,17:-1", 10, &t, &n) == ERR_ARG, "feature out of range");
    CHECK(ana_steer_parse("3", 0, &t, &n) == ERR_ARG);
    CHECK(ana_steer_parse("3:x", 0, &t, &n) == ERR_ARG);
    /* strtod's other spellings were strengths: 0x10 was 16 (an audit) */
    CHECK(ana_steer_parse("3:0x10", 0, &t, &n) == ERR_ARG, "hex strength");
    CHECK(ana_steer_parse("3:nan", 0, &t, &n) == ERR_ARG && ana_steer_parse("3: 1", 0, &t, &n) == ERR_ARG);
    CHECK(ana_steer_parse("3:+.5", 0, &t, &n) == OK && n == 1 && t[0].value == 0.5f);
    mem_free(t);
    CHECK(ana_steer_parse("3:1,", 0, &t, &n) == ERR_ARG);
    CHECK(ana_steer_parse("-1:1", 0, &t, &n) == ERR_ARG);
    /* blanks on either side were half accepted (strtol skips leading ones), a strength past
       FLT_MAX became inf and the run failed mid-text on a NaN logit (an audit) */
    CHECK(ana_steer_parse(" 5:1", 0, &t, &n) == ERR_ARG);
    CHECK(ana_steer_parse("5: 1", 0, &t, &n) == ERR_ARG);
    CHECK(ana_steer_parse("5:1 ", 0, &t, &n) == ERR_ARG);
    CHECK(ana_steer_parse("5:1e40", 0, &t, &n) == ERR_ARG && strstr(err_msg(), "is outside -1e+06..1e+06"),
          "%s", err_msg());
    /* beyond a double: the same range message, not a syntax error (an audit) */
    CHECK(ana_steer_parse("5:1e309", 0, &t, &n) == ERR_ARG && strstr(err_msg(), "strength 1e309 is outside"),
          "%s", err_msg());
    CHECK(ana_steer_parse("5:-1e400,2:1", 0, &t, &n) == ERR_ARG && strstr(err_msg(), "strength -1e400 is outside"),
          "%s", err_msg());
    CHECK(ana_steer_parse("5:inf", 0, &t, &n) == ERR_ARG && strstr(err_msg(), "is not FEATURE:STRENGTH"), "%s",
          err_msg());
    /* 3e38 fits a float, but the text failed mid-way on a NaN logit (an audit) */
    CHECK(ana_steer_parse("5:-3e38", 0, &t, &n) == ERR_ARG && strstr(err_msg(), "-3e38 is outside"),
          "%s", err_msg());
    CHECK(ana_steer_parse("5:-1e6,6:1e-320", 0, &t, &n) == OK && n == 2 && t[0].value == -1e6f &&
          t[1].value == 0.0f);
    mem_free(t);
    ana_steer_method m;
    CHECK(ana_steer_method_parse("ortho", &m) == OK && m == ANA_STEER_ORTHO);
    CHECK(ana_steer_method_parse("cap", &m) == OK && !strcmp(ana_steer_method_name(m), "cap"));
    CHECK(ana_steer_method_parse("scale", &m) == ERR_ARG);
}

/* The row-level math: add moves by S v, ortho leaves S times the projection, cap bounds it. */
static void test_rows(void)
{
    sae_model *s = tiny_sae(HOOK, 3);
    enum { N = 5 };
    float x[N * C], y[N * C], f[N * D];
    rs = 11;
    for (int i = 0; i < N * C; i++) x[i] = (float)(urand() * 2 - 1);
    const float *v = s->W_dec + 4 * C;
    ana_steer_term t = {4, 3.0f};
    memcpy(y, x, sizeof x);
    CHECK(ana_steer_rows(s, ANA_STEER_ADD, &t, 1, y, N, NULL) == OK);
    int bad = 0;
    for (int i = 0; i < N * C; i++) bad += fabsf(y[i] - (x[i] + 3.0f * v[i % C])) > 1e-6f;
    CHECK(bad == 0, "add moves every row by S v");
    for (int mth = ANA_STEER_ORTHO; mth <= ANA_STEER_CAP; mth++) {
        float S = mth == ANA_STEER_ORTHO ? 0.5f : 0.1f;
        ana_steer_term tt = {4, S};
        memcpy(y, x, sizeof x);
        CHECK(ana_steer_rows(s, (ana_steer_method)mth, &tt, 1, y, N, NULL) == OK);
        bad = 0;
        for (int r = 0; r < N; r++) {
            double px = 0, py = 0, ox = 0; /* projections on the unit decoder row; |orth change| */
            for (int i = 0; i < C; i++) {
                px += (double)x[r * C + i] * v[i];
                py += (double)y[r * C + i] * v[i];
            }
            for (int i = 0; i < C; i++) {
                double dx = (x[r * C + i] - px * v[i]) - (y[r * C + i] - py * v[i]);
                ox += dx * dx;
            }
            double want = mth == ANA_STEER_ORTHO ? S * px : (px > S ? S : px);
            bad += fabs(py - want) > 1e-5 || ox > 1e-10;
        }
        CHECK(bad == 0, "%s: projection %s, orthogonal part unchanged",
              ana_steer_method_name((ana_steer_method)mth), mth == ANA_STEER_ORTHO ? "scaled by S" : "capped");
    }
    /* clamp: afterwards the SAE encodes the feature as S (ReLU SAE, W_enc = W_dec^T scaled) */
    memcpy(y, x, sizeof x);
    CHECK(ana_steer_rows(s, ANA_STEER_CLAMP, &t, 1, y, N, NULL) == ERR_ARG, "clamp needs scratch");
    float f0[N * D];
    sae_encode(s, x, N, f0);
    CHECK(ana_steer_rows(s, ANA_STEER_CLAMP, &t, 1, y, N, f) == OK);
    bad = 0;
    for (int i = 0; i < N * C; i++)
        bad += fabsf(y[i] - (x[i] + (3.0f - f0[(i / C) * D + 4]) * v[i % C])) > 1e-5f;
    CHECK(bad == 0, "clamp adds (S - f_F(x)) W_dec[F]");
    ana_steer_term oob = {D, 1};
    CHECK(ana_steer_rows(s, ANA_STEER_ADD, &oob, 1, y, N, NULL) == ERR_ARG);
    sae_free(s);
}

/* At ln_final.hook_normalized (the LayerNorm's output, gamma and beta applied) the unembedding
 * is linear: adding a direction d at a position changes that position's logits by exactly
 * W_U . d, what ana_logit_effects_final gives (analyze skipped this hook's logit effects as "not
 * on a linear direct path", then multiplied by gamma once more: gamma is not 1 here, as in a
 * trained model, so that shows). */
typedef struct { const float *d; int t; } add_row;
static int add_hook(const tensor_view *tv, void *user)
{
    const add_row *a = user;
    for (int i = 0; i < C; i++) tv->data[(size_t)a->t * C + i] += a->d[i];
    return 0;
}

static void test_final_logits(void)
{
    gpt2_model *m = tiny_model(2);
    int nd, ids[T];
    int64_t shp[2];
    const float *WU = gpt2_param(m, "lm_head.weight", &nd, shp);
    int nt;
    const gpt2_tensor *tab = gpt2_param_table(m, &nt);
    float *p = gpt2_params(m, NULL);
    rs = 98;
    for (int i = 0; i < nt; i++)
        if (!strcmp(tab[i].name, "ln_f.weight"))
            for (size_t k = 0; k < tab[i].numel; k++) p[tab[i].offset + k] = (float)(0.3 + 2 * urand());
    tokens(ids, T, 5);
    float d[C], eff[V], clean[T * V];
    rs = 99;
    for (int i = 0; i < C; i++) d[i] = (float)(urand() * 2 - 1);
    CHECK(ana_logit_effects_final(eff, d, 1, C, WU, V) == OK);
    gpt2_hook_clear(m);
    CHECK(gpt2_forward(m, ids, 1, T, 1) == OK);
    memcpy(clean, gpt2_logits(m), sizeof clean);
    add_row a = {d, 4};
    CHECK(gpt2_hook_add(m, "ln_final.hook_normalized", add_hook, &a) == OK);
    CHECK(gpt2_forward(m, ids, 1, T, 1) == OK);
    const float *lg = gpt2_logits(m);
    double maxd = 0, maxe = 0;
    for (int v = 0; v < V; v++) {
        maxd = fmax(maxd, fabs((lg[4 * V + v] - clean[4 * V + v]) - eff[v]));
        maxe = fmax(maxe, fabs(eff[v]));
    }
    CHECK(maxd < 1e-4 * (1 + maxe) && maxe > 0.1, "final LN logit effects: off by %g (max %g)", maxd, maxe);
    gpt2_hook_clear(m);
    gpt2_free(m);
}

/* A feature whose direct-path logit effects promote a token set raises those tokens'
 * probability at the next position, monotonically in S. */
static void test_monotone(void)
{
    gpt2_model *m = tiny_model(1);
    sae_model *s = tiny_sae(HOOK, 5);
    CHECK(m && s);
    if (!m || !s) return;
    int nd, ids[T];
    int64_t shp[2];
    const float *WU = gpt2_param(m, "lm_head.weight", &nd, shp);
    const float *gamma = gpt2_param(m, "ln_f.weight", &nd, shp);
    tokens(ids, T, 21);
    int ok;
    CHECK(gpt2_hook_direct_proj(m, HOOK, C, &ok) == NULL && ok, "resid_post is on the direct path");
    int bad = 0, tested = 0;
    for (int F = 0; F < 6; F++) {
        float eff[V], val[5];
        int top[5];
        CHECK(ana_logit_effects(eff, s->W_dec + (size_t)F * C, 1, C, NULL, C, gamma, WU, V) == OK);
        ana_topk(top, val, eff, V, 5, 1);
        double prev = -1;
        /* up to S = 2 (|x| is a few units here): far beyond, ln_f's normalisation saturates the
           steered direction and the mass settles at the limit direction's value */
        const float S_list[] = {0, 0.25f, 0.5f, 1, 1.5f, 2};
        double first = -1;
        for (size_t k = 0; k < sizeof S_list / sizeof S_list[0]; k++) {
            ana_steer_term t = {F, S_list[k]};
            ana_steer *st;
            float lg[T * V];
            double p[V];
            CHECK(ana_steer_new(&st, s, ANA_STEER_ADD, &t, 1) == OK);
            CHECK(run(m, st, ids, lg) == OK, "%s", err_msg());
            ana_steer_free(st);
            double mass = 0;
            softmax_row(lg + (T - 2) * V, p); /* a middle position: every position is steered */
            for (int i = 0; i < 5; i++) mass += p[top[i]];
            if (!(mass > prev)) bad++;
            if (k == 0) first = mass;
            prev = mass;
            tested++;
        }
        CHECK(prev > first + 0.02, "feature %d: the promoted tokens' mass %.3f -> %.3f", F, first, prev);
    }
    CHECK(bad == 0, "%d of %d steps did not raise the promoted tokens' probability", bad, tested);
    sae_free(s);
    gpt2_free(m);
}

static int put_hook(const tensor_view *tv, void *user) /* overwrite the hook with given rows */
{
    memcpy(tv->data, user, (size_t)tensor_numel(tv) * sizeof(float));
    return 0;
}

/* Clamping to 0 is ablation (x - f_F(x) W_dec[F], the error term kept); interventions whose
 * change is zero give the clean logits bit for bit. */
static void test_clamp(void)
{
    gpt2_model *m = tiny_model(2);
    const char *hook = "blocks.0.hook_resid_post"; /* layer 1 follows: attention mixes positions */
    sae_model *s = tiny_sae(hook, 9);
    int ids[T];
    tokens(ids, T, 33);
    float x[T * C], f[T * D], clean[T * V], lg[T * V], want[T * V];
    grab g = {x};
    CHECK(gpt2_hook_add(m, hook, grab_hook, &g) == OK);
    CHECK(gpt2_forward(m, ids, 1, T, 1) == OK);
    memcpy(clean, gpt2_logits(m), sizeof clean);
    gpt2_hook_clear(m);
    sae_encode(s, x, T, f);
    int F = -1, Fdead = -1;
    for (int j = 0; j < D; j++) {
        int n = 0;
        for (int t = 0; t < T; t++) n += f[t * D + j] > 0;
        if (n >= T / 3 && F < 0) F = j;
        if (n == 0 && Fdead < 0) Fdead = j;
    }
    CHECK(F >= 0 && Fdead >= 0, "fixture has a frequent and a silent feature (%d, %d)", F, Fdead);
    if (F < 0 || Fdead < 0) return;

    /* ablation computed here, independently of steer.c */
    for (int t = 0; t < T; t++)
        for (int i = 0; i < C; i++) x[t * C + i] -= f[t * D + F] * s->W_dec[F * C + i];
    CHECK(gpt2_hook_add(m, hook, put_hook, x) == OK);
    CHECK(gpt2_forward(m, ids, 1, T, 1) == OK);
    memcpy(want, gpt2_logits(m), sizeof want);
    gpt2_hook_clear(m);

    ana_steer *st;
    ana_steer_term t0 = {F, 0};
    /* a feature clamped twice is refused (the second term added S - f again: 2S - f) */
    ana_steer_term twice[2] = {{F, 0}, {F, 0}};
    CHECK(ana_steer_new(&st, s, ANA_STEER_CLAMP, twice, 2) == ERR_ARG &&
          strstr(err_msg(), "is clamped twice"), "%s", err_msg());
    CHECK(ana_steer_new(&st, s, ANA_STEER_ADD, twice, 2) == OK, "adding twice is a sum");
    ana_steer_free(st);
    CHECK(ana_steer_new(&st, s, ANA_STEER_CLAMP, &t0, 1) == OK);
    CHECK(run(m, st, ids, lg) == OK, "%s", err_msg());
    ana_steer_free(st);
    CHECK_TENSOR(lg, want, T * V, 1e-6, 1e-5, "clamp F:0 = ablation");
    double diff = 0;
    for (int i = 0; i < T * V; i++) diff = fmax(diff, fabs(lg[i] - clean[i]));
    CHECK(diff > 1e-4, "the ablation changes the logits (max %g)", diff);

    /* zero change: clamp a silent feature to 0, ortho with S = 1, a cap no row reaches, no terms */
    struct { ana_steer_method m; ana_steer_term t; int n; } nop[] = {
        {ANA_STEER_CLAMP, {Fdead, 0}, 1}, {ANA_STEER_ORTHO, {F, 1}, 1},
        {ANA_STEER_CAP, {F, 1e6f}, 1}, {ANA_STEER_CLAMP, {0, 0}, 0}};
    for (size_t k = 0; k < sizeof nop / sizeof nop[0]; k++) {
        CHECK(ana_steer_new(&st, s, nop[k].m, &nop[k].t, nop[k].n) == OK);
        CHECK(run(m, st, ids, lg) == OK);
        ana_steer_free(st);
        CHECK(!memcmp(lg, clean, sizeof lg), "case %zu: the SAE spliced in with its error term and "
              "no change reproduces the clean logits exactly", k);
    }
    sae_free(s);
    gpt2_free(m);
}

/* Steered greedy generation agrees with one steered forward over the whole result at every
 * generated position (the generated tokens are steered too), and differs from the unsteered run. */
static void test_generate(void)
{
    gpt2_model *m = tiny_model(1);
    sae_model *s = tiny_sae(HOOK, 5);
    ana_steer *st;
    ana_steer_term t = {2, 3.0f};
    CHECK(ana_steer_new(&st, s, ANA_STEER_ADD, &t, 1) == OK);
    int seq[T], base[T];
    size_t len = 4, blen = 4;
    tokens(seq, 4, 44);
    memcpy(base, seq, sizeof seq);
    ana_gen_opts o = {.max_new = T - 4, .top_k = 0, .vocab_limit = 0, .stop_id = -1,
                      .temperature = 0, .seed = 1};
    CHECK(ana_steer_generate(m, st, 1, &o, seq, &len) == OK && len == T, "%s", err_msg());
    CHECK(ana_steer_generate(m, st, 0, &o, base, &blen) == OK && blen == T);
    CHECK(memcmp(seq, base, sizeof seq) != 0, "steering changes the continuation");
    float lg[T * V];
    CHECK(run(m, st, seq, lg) == OK);
    int bad = 0;
    for (int p = 3; p + 1 < T; p++) {
        int best = 0;
        for (int i = 1; i < V; i++) best = lg[p * V + i] > lg[p * V + best] ? i : best;
        bad += best != seq[p + 1];
    }
    CHECK(bad == 0, "%d generated tokens are not the steered model's greedy choice", bad);
    ana_steer_free(st);
    sae_free(s);
    gpt2_free(m);
}


/* ---- ana_generate_run, the generate command's runner, from files ------------------------------ */
typedef struct {
    char got[2][64];
    int n[2], pass, begins, steered_first, ends, made[2], nterms;
} gen_seen;

static void gen_begin(void *user, int pass, int steered, const ana_steer_term *t, int nterms)
{
    gen_seen *g = user;
    g->pass = pass;
    g->begins++;
    if (pass == 0) g->steered_first = steered, g->nterms = nterms;
}

static void gen_token(void *user, const char *b, size_t n)
{
    gen_seen *g = user;
    for (size_t i = 0; b && i < n && g->n[g->pass] < 63; i++) g->got[g->pass][g->n[g->pass]++] = b[i];
}

static void gen_end(void *user, int made, int stopped, double secs)
{
    gen_seen *g = user;
    g->made[g->pass] = made;
    g->ends++;
}

/* The runner tests' directories: a model of n_layer blocks (seed 11) with the byte tokenizer in
 * dir and tiny_sae(HOOK, 5) in sdir; *m and *s stay with the caller. */
static void runner_fixture(const char *dir, const char *sdir, int n_layer, gpt2_model **m,
                           sae_model **s)
{
    gpt2_config cfg = {.n_layer = n_layer, .n_head = 2, .n_embd = C, .n_ctx = 32, .vocab_size = 256,
                       .n_inner = 4 * C, .ln_eps = 1e-5f};
    *m = NULL;
    *s = tiny_sae(HOOK, 5);
    CHECK(gpt2_create(m, &cfg, 11) == OK && gpt2_save(*m, dir, ST_F32, 0) == OK &&
          fixture_byte_tokenizer(dir) == OK && *s && sae_save(*s, sdir) == OK, "%s", err_msg());
}

/* The runner's tokens are the model's own greedy continuation (byte tokenizer: a token's bytes
 * are its id); with compare the unsteered pass repeats a plain run exactly and the steered one
 * is the steered model's; a set stop flag runs no pass; bad steer specs and hooks fail, named. */
static void test_generate_run(void)
{
    char dir[64], sdir[80];
    if (!harness_tmpdir(dir, sizeof dir, "gen")) return;
    snprintf(sdir, sizeof sdir, "%s/sae", dir);
    gpt2_model *m;
    sae_model *s;
    runner_fixture(dir, sdir, 1, &m, &s);
    const char *prompt = "ab";
    ana_generate_opts o = {.model_dir = dir, .prompt = prompt, .method = ANA_STEER_ADD,
                           .no_stop = 1, .max_tokens = 8, .temperature = 0, .seed = 3,
                           .precision = OP_PRECISION_FP32, .pass_begin = gen_begin,
                           .token = gen_token, .pass_end = gen_end};
    gen_seen plain = {0};
    o.user = &plain;
    ana_generate_result r;
    CHECK(ana_generate_run(&o, &r) == OK && r.passes == 1 && plain.n[0] == 8 &&
          plain.made[0] == 8 && plain.begins == 1 && plain.ends == 1, "plain: %s", err_msg());
    /* the reference: the same model's greedy continuation of the prompt's two byte tokens */
    int seq[16] = {'a', 'b'};
    size_t len = 2;
    ana_gen_opts go = {.max_new = 8, .vocab_limit = 256, .stop_id = -1, .temperature = 0, .seed = 3};
    CHECK(ana_steer_generate(m, NULL, 0, &go, seq, &len) == OK && len == 10);
    int same = 1;
    for (int i = 0; i < 8; i++) same &= (unsigned char)plain.got[0][i] == seq[2 + i];
    CHECK(same, "the runner's tokens are the model's greedy continuation");

    gen_seen cmp = {0};
    o.user = &cmp;
    o.sae_dir = sdir;
    o.steer = "2:3";
    o.compare = 1;
    CHECK(ana_generate_run(&o, &r) == OK && r.passes == 2 && cmp.steered_first && cmp.nterms == 1,
          "compare: %s", err_msg());
    CHECK(cmp.n[1] == 8 && !memcmp(cmp.got[1], plain.got[0], 8),
          "the unsteered pass repeats the plain run");
    ana_steer *st = NULL;
    ana_steer_term t = {2, 3.0f};
    int sseq[16] = {'a', 'b'};
    size_t slen = 2;
    CHECK(ana_steer_new(&st, s, ANA_STEER_ADD, &t, 1) == OK &&
          ana_steer_generate(m, st, 1, &go, sseq, &slen) == OK);
    same = cmp.n[0] == 8;
    for (int i = 0; same && i < 8; i++) same &= (unsigned char)cmp.got[0][i] == sseq[2 + i];
    CHECK(same, "the steered pass is the steered model's continuation");
    ana_steer_free(st);

    volatile int stop = 1;
    gen_seen none = {0};
    o.user = &none;
    o.stop = &stop;
    CHECK(ana_generate_run(&o, &r) == OK && r.passes == 0 && none.begins == 0, "stopped: no pass");
    o.stop = NULL;
    o.steer = "abc";
    CHECK(ana_generate_run(&o, &r) == ERR_ARG && strstr(err_msg(), "'abc'"), "%s", err_msg());
    o.steer = "2:1";
    o.hook = "blocks.5.hook_resid_post";
    CHECK(ana_generate_run(&o, &r) != OK && strstr(err_msg(), "blocks.5.hook_resid_post"), "%s",
          err_msg());
    gpt2_free(m);
    sae_free(s);
    CHECK(harness_rmtree(dir) == 0);
}

/* ---- measured effects: the batched ablations against one forward per (feature, position) ---- */
typedef struct { float *delta; } eff_cb;
static int keep_delta(int j, int64_t n, const float *md, int nv, void *user)
{
    memcpy(((eff_cb *)user)->delta + (size_t)j * nv, md, (size_t)nv * sizeof *md);
    return 0;
}

typedef struct { const sae_model *s; int t, j; float a; } one_abl;
static int one_hook(const tensor_view *tv, void *user)
{
    const one_abl *o = user;
    float *x = tv->data + (size_t)o->t * C;
    for (int i = 0; i < C; i++) x[i] -= o->a * o->s->W_dec[o->j * C + i];
    return 0;
}

static void lsm(const float *l, double *lp)
{
    double mx = l[0], s = 0;
    for (int i = 1; i < V; i++) mx = l[i] > mx ? l[i] : mx;
    for (int i = 0; i < V; i++) s += exp(l[i] - mx);
    for (int i = 0; i < V; i++) lp[i] = l[i] - mx - log(s);
}

/* Every state ana_effects offers to save, copied (at most 32). */
typedef struct {
    ana_effects_state st[32];
    int n;
} eff_saves;

static int save_copy(const ana_effects_state *st, void *user)
{
    eff_saves *sv = user;
    if (sv->n == 32) return 0;
    ana_effects_state *c = &sv->st[sv->n++];
    *c = *st;
    size_t cw = (size_t)((st->j0 + st->chunk < st->d_sae ? st->j0 + st->chunk : st->d_sae) - st->j0);
    float *acc = malloc(cw * st->V * sizeof *acc);
    int64_t *n = malloc((size_t)st->d_sae * sizeof *n);
    double *sums = malloc((size_t)st->d_sae * 3 * sizeof *sums);
    memcpy(acc, st->acc, cw * st->V * sizeof *acc);
    memcpy(n, st->n, (size_t)st->d_sae * sizeof *n);
    memcpy(sums, st->sum_act, (size_t)st->d_sae * sizeof *sums);
    memcpy(sums + st->d_sae, st->sum_kl, (size_t)st->d_sae * sizeof *sums);
    memcpy(sums + 2 * st->d_sae, st->sum_dloss, (size_t)st->d_sae * sizeof *sums);
    c->acc = acc;
    c->n = n;
    c->sum_act = sums;
    c->sum_kl = sums + st->d_sae;
    c->sum_dloss = sums + 2 * st->d_sae;
    return 0;
}

/* A run continued from each saved state gives the uninterrupted run's numbers, bit for bit: the
 * counts and means of every feature and the mean deltas the callbacks see from the state's chunk
 * on (the chunks before it are the caller's to keep, as analyze's checkpoint does). */
static void check_effects_resume(gpt2_model *m, sae_model *s, const char *hook, const int *tok,
                                 const int64_t *off, const unsigned char *bos, int NS,
                                 const ana_effects_opts *o0, const int64_t *n, const double *act,
                                 const double *kl, const double *dl, const float *delta)
{
    eff_saves sv = {.n = 0};
    ana_effects_opts o = *o0;
    o.save_secs = 1e-12; /* every sequence boundary */
    o.save = save_copy;
    o.save_user = &sv;
    int64_t n2[D];
    double a2[D], k2[D], d2[D];
    float *delta2 = mem_calloc((size_t)D * V, sizeof *delta2);
    ana_effects_out out = {n2, a2, k2, d2};
    eff_cb cb = {delta2};
    int rc = ana_effects(m, s, hook, tok, off, bos, (size_t)NS, &o, &out, keep_delta, &cb);
    CHECK(rc == OK && sv.n >= 3, "effects with saves: %d states (%s)", sv.n, rc ? err_msg() : "ok");
    int bad = rc != OK || memcmp(n2, n, sizeof n2) || memcmp(a2, act, sizeof a2) ||
              memcmp(k2, kl, sizeof k2) || memcmp(d2, dl, sizeof d2);
    CHECK(!bad, "%s: saving changed the numbers", hook);
    int tried = 0, differ = 0;
    for (int q = 0; q < sv.n; q++) {
        ana_effects_opts r = *o0;
        r.resume = &sv.st[q];
        memset(delta2, 0, (size_t)D * V * sizeof *delta2);
        rc = ana_effects(m, s, hook, tok, off, bos, (size_t)NS, &r, &out, keep_delta, &cb);
        int j0 = sv.st[q].j0;
        differ += rc != OK || memcmp(n2, n, sizeof n2) || memcmp(a2, act, sizeof a2) ||
                  memcmp(k2, kl, sizeof k2) || memcmp(d2, dl, sizeof d2) ||
                  memcmp(delta2 + (size_t)j0 * V, delta + (size_t)j0 * V, (size_t)(D - j0) * V * sizeof *delta);
        tried++;
    }
    CHECK(differ == 0, "%s: %d of %d continued runs differ from the uninterrupted one", hook, differ, tried);
    ana_effects_state wrong = sv.st[0];
    wrong.chunk++;
    ana_effects_opts r = *o0;
    r.resume = &wrong;
    rc = ana_effects(m, s, hook, tok, off, bos, (size_t)NS, &r, &out, keep_delta, &cb);
    CHECK(rc == ERR_ARG && strstr(err_msg(), "does not fit"), "a state of another chunking: %s", err_msg());
    err_clear();
    for (int q = 0; q < sv.n; q++) {
        free((void *)sv.st[q].acc);
        free((void *)sv.st[q].n);
        free((void *)sv.st[q].sum_act);
    }
    mem_free(delta2);
}

/* A ReLU transcoder from hook (d_in wide) to hook_out (C wide): random unit decoder rows, random
   encoder columns of norm 1 (about half fire). */
static sae_model *tiny_tc(const char *hook, int d_in, const char *hook_out, uint64_t seed)
{
    sae_config cfg = {.arch = SAE_RELU, .d_in = d_in, .d_sae = D, .context_size = T,
                      .transcoder = SAE_TRANSCODER, .d_out = C};
    snprintf(cfg.hook_name, sizeof cfg.hook_name, "%s", hook);
    snprintf(cfg.hook_name_out, sizeof cfg.hook_name_out, "%s", hook_out);
    sae_model *s = NULL;
    if (sae_model_new(&s, &cfg) != OK) return NULL;
    rs = seed;
    for (int j = 0; j < D; j++) {
        double n = 0, ne = 0;
        for (int k = 0; k < C; k++) n += pow(s->W_dec[j * C + k] = (float)(urand() * 2 - 1), 2);
        for (int k = 0; k < C; k++) s->W_dec[j * C + k] /= (float)sqrt(n);
        for (int k = 0; k < d_in; k++) ne += pow(s->W_enc[k * D + j] = (float)(urand() * 2 - 1), 2);
        for (int k = 0; k < d_in; k++) s->W_enc[k * D + j] /= (float)sqrt(ne);
    }
    s->b_enc[D - 1] = -1e6f;
    return s;
}

/* hook_out: a transcoder from hook (d_in wide) to hook_out, its features ablated there */
static void check_effects_at(const char *hook, const char *hook_out, int d_in, int max_ctx, int want_local)
{
    enum { NS = 3 };
    gpt2_model *m = tiny_model(2);
    sae_model *s = hook_out ? tiny_tc(hook, d_in, hook_out, 13) : tiny_sae(hook, 13);
    const char *ahook = hook_out ? hook_out : hook;
    CHECK(gpt2_hook_position_local(m, ahook) == want_local, "%s position-local", ahook);
    int tok[NS * T];
    int64_t off[NS + 1];
    unsigned char bos[NS] = {0, 1, 0};
    tokens(tok, NS * T, 77);
    for (int i = 0; i <= NS; i++) off[i] = (int64_t)i * T;
    int64_t n[D];
    double act[D], kl[D], dl[D];
    float *delta = mem_calloc((size_t)D * V, sizeof *delta);
    ana_effects_out out = {n, act, kl, dl};
    ana_effects_opts o = {.max_ctx = max_ctx, .batch = 3, .max_acc_bytes = 7 * V * sizeof(float)};
    eff_cb cb = {delta};
    int rc = ana_effects(m, s, hook, tok, off, bos, NS, &o, &out, keep_delta, &cb);
    CHECK(rc == OK, "effects: %s", err_msg());
    check_effects_resume(m, s, hook, tok, off, bos, NS, &o, n, act, kl, dl, delta);
    /* brute force */
    int64_t bn[D] = {0};
    double bact[D] = {0}, bkl[D] = {0}, bdl[D] = {0};
    double *bdelta = calloc((size_t)D * V, sizeof *bdelta);
    float x[T * 4 * C], f[T * D], clean[T * V];
    for (int q = 0; q < NS; q++) {
        const int *ids = tok + q * T;
        grab g = {x};
        gpt2_hook_clear(m);
        gpt2_hook_add(m, hook, grab_hook, &g);
        gpt2_forward(m, ids, 1, T, 1);
        memcpy(clean, gpt2_logits(m), sizeof clean);
        sae_encode(s, x, T, f);
        for (int t = bos[q]; t + 1 < T; t++)
            for (int j = 0; j < D; j++) {
                if (!(f[t * D + j] > 0) || (max_ctx > 0 && bn[j] >= max_ctx)) continue;
                one_abl a = {s, t, j, f[t * D + j]};
                gpt2_hook_clear(m);
                gpt2_hook_add(m, ahook, one_hook, &a);
                gpt2_forward(m, ids, 1, T, 1);
                double lc[V], la[V], k = 0;
                lsm(clean + t * V, lc);
                lsm(gpt2_logits(m) + t * V, la);
                for (int v = 0; v < V; v++) {
                    k += exp(lc[v]) * (lc[v] - la[v]);
                    bdelta[(size_t)j * V + v] += lc[v] - la[v];
                }
                bn[j]++;
                bact[j] += a.a;
                bkl[j] += k;
                bdl[j] += lc[ids[t + 1]] - la[ids[t + 1]];
            }
    }
    gpt2_hook_clear(m);
    int bad = 0, used = 0;
    double maxd = 0;
    for (int j = 0; j < D; j++) {
        if (n[j] != bn[j]) bad++;
        if (!bn[j]) {
            bad += !isnan(kl[j]);
            continue;
        }
        used++;
        bad += fabs(act[j] - bact[j] / bn[j]) > 1e-6 * (1 + fabs(act[j]));
        bad += fabs(kl[j] - bkl[j] / bn[j]) > 1e-5 * (1 + bkl[j] / bn[j]);
        bad += fabs(dl[j] - bdl[j] / bn[j]) > 1e-4;
        for (int v = 0; v < V; v++)
            maxd = fmax(maxd, fabs(delta[(size_t)j * V + v] - bdelta[(size_t)j * V + v] / bn[j]));
    }
    CHECK(bad == 0 && maxd < 1e-4, "%s -> %s: %d statistics differ from single ablations (delta max %g)", hook, ahook, bad, maxd);
    CHECK(used > D / 2, "%d features measured", used);
    if (max_ctx > 0) {
        int over = 0;
        for (int j = 0; j < D; j++) over += n[j] > max_ctx;
        CHECK(over == 0);
    }
    /* the effects are not all zero, and the ablation of a promoting feature lowers those tokens */
    double mk = 0;
    for (int j = 0; j < D; j++) if (n[j]) mk = fmax(mk, kl[j]);
    CHECK(mk > 1e-3, "largest mean KL %g", mk);
    free(bdelta);
    mem_free(delta);
    sae_free(s);
    gpt2_free(m);
}

/* Once every feature of a chunk has its --effects-ctx contexts, the sequences left get no clean
 * pass (they ran one each for nothing): every feature fires everywhere here, so with a cap of 2
 * the first sequence fills every chunk and three sequences cost what one does. */
static void test_effects_capped(void)
{
    enum { NS = 3 };
    const char *hook = "blocks.1.hook_resid_post";
    gpt2_model *m = tiny_model(2);
    sae_model *s = tiny_sae(hook, 13);
    for (int j = 0; j < D; j++) s->b_enc[j] = 1e3f;
    int tok[NS * T];
    int64_t off[NS + 1];
    tokens(tok, NS * T, 77);
    for (int i = 0; i <= NS; i++) off[i] = (int64_t)i * T;
    int64_t n[D];
    double act[D], kl[D], dl[D];
    ana_effects_out out = {n, act, kl, dl};
    ana_effects_opts o = {.max_ctx = 2, .batch = 3, .max_acc_bytes = 7 * V * sizeof(float)};
    int rc = ana_effects(m, s, hook, tok, off, NULL, NS, &o, &out, NULL, NULL);
    int64_t f3 = out.forwards, r3 = out.rows;
    int full = 1;
    for (int j = 0; j < D; j++) full &= n[j] == 2;
    if (!rc) rc = ana_effects(m, s, hook, tok, off, NULL, 1, &o, &out, NULL, NULL);
    CHECK(rc == OK, "effects: %s", err_msg());
    CHECK(full, "every feature has its 2 contexts");
    CHECK(f3 == out.forwards && r3 == out.rows, "3 sequences took %lld forwards (%lld rows), 1 took %lld (%lld)",
          (long long)f3, (long long)r3, (long long)out.forwards, (long long)out.rows);
    sae_free(s);
    gpt2_free(m);
}

static void check_effects(const char *hook, int max_ctx, int want_local)
{
    check_effects_at(hook, NULL, C, max_ctx, want_local);
}

static void test_effects(void)
{
    /* transcoders: codes from the input hook, ablation at the output hook, where the decoder
       writes (analyze --effects ablated at the input hook: of an mlp.hook_post transcoder it
       read W_dec out of bounds; an audit) */
    check_effects_at("blocks.0.mlp.hook_post", "blocks.0.hook_mlp_out", 4 * C, 0, 0);
    check_effects_at("blocks.1.ln2.hook_normalized", "blocks.1.hook_mlp_out", C, 0, 1);
    check_effects("blocks.1.hook_resid_post", 0, 1); /* position-local: packed rows */
    check_effects("blocks.1.hook_resid_post", 5, 1);
    check_effects("blocks.0.hook_resid_post", 4, 0); /* attention follows: one ablation a row */
    test_effects_capped();
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {2, 4, 5, 9, 10, 30}, c[6] = {6, 5, 4, 3, 2, 1};
    float t[4] = {1, 1, 2, 3}, u[4] = {1, 2, 3, 4}, k[4] = {7, 7, 7, 7};
    CHECK_NEAR(ana_spearman(a, b, 6), 1.0, 1e-12);
    CHECK_NEAR(ana_spearman(a, c, 6), -1.0, 1e-12);
    /* ties get average ranks: (1.5, 1.5, 3, 4) against (1, 2, 3, 4) */
    CHECK_NEAR(ana_spearman(t, u, 4), 4.5 / sqrt(4.5 * 5.0), 1e-12);
    CHECK(isnan(ana_spearman(k, u, 4)), "constant input");
}

/* ---- gradients at hooks and attribution ------------------------------------------------------ */
typedef struct { const float *u; double eps; } nudge;
static int nudge_hook(const tensor_view *tv, void *user)
{
    const nudge *n = user;
    for (int64_t i = 0; i < tensor_numel(tv); i++) tv->data[i] += (float)(n->eps * n->u[i]);
    return 0;
}

/* M = logit[pos][a] - logit[pos][b] with the hook nudged by eps * u */
static double metric_nudged(gpt2_model *m, const int *ids, const char *hook, const float *u,
                            double eps, int pos, int a, int b)
{
    nudge n = {u, eps};
    gpt2_hook_clear(m);
    gpt2_hook_add(m, hook, nudge_hook, &n);
    gpt2_forward(m, ids, 1, T, 1);
    const float *l = gpt2_logits(m) + (size_t)pos * V;
    double r = (double)l[a] - l[b];
    gpt2_hook_clear(m);
    return r;
}

static void test_hook_grad(void)
{
    gpt2_model *m = tiny_model(2);
    CHECK(gpt2_train_enable(m) == OK);
    int ids[T];
    tokens(ids, T, 5);
    const char *hooks[] = {"blocks.0.hook_resid_pre", "blocks.0.attn.hook_z", "blocks.0.hook_resid_mid",
                           "blocks.0.mlp.hook_post", "blocks.0.hook_mlp_out", "blocks.1.hook_attn_out",
                           "blocks.1.hook_resid_post", "ln_final.hook_normalized"};
    const int pos = 7, a = 3, b = 40;
    float *dl = mem_calloc((size_t)T * V, sizeof *dl);
    dl[pos * V + a] = 1;
    dl[pos * V + b] = -1;
    for (size_t h = 0; h < sizeof hooks / sizeof hooks[0]; h++) {
        int layer, w;
        CHECK(gpt2_hook_info(m, hooks[h], &layer, &w) == OK);
        float *g = mem_alloc(sizeof(float) * T * w), *u = mem_alloc(sizeof(float) * T * w);
        float lg[T * V];
        rs = 100 + h;
        for (int i = 0; i < T * w; i++) u[i] = (float)(urand() * 2 - 1);
        gpt2_hook_clear(m);
        CHECK(gpt2_hook_grad(m, ids, 1, T, dl, hooks[h], g, lg) == OK, "%s: %s", hooks[h], err_msg());
        double an = 0, fd, late = 0;
        for (int i = 0; i < T * w; i++) an += (double)g[i] * u[i];
        for (int i = (pos + 1) * w; i < T * w; i++) late += fabs(g[i]);
        const double eps = 1e-2;
        fd = (metric_nudged(m, ids, hooks[h], u, eps, pos, a, b) -
              metric_nudged(m, ids, hooks[h], u, -eps, pos, a, b)) / (2 * eps);
        CHECK(fabs(an - fd) <= 2e-3 * (1 + fabs(fd)), "%s: backward %.6f vs finite differences %.6f", hooks[h], an, fd);
        CHECK(late == 0, "%s: positions after %d do not influence its logits (%g)", hooks[h], pos, late);
        CHECK(fabs(lg[pos * V + a] - lg[pos * V + b] - metric_nudged(m, ids, hooks[h], u, 0, pos, a, b)) < 1e-5, "logits_out");
        mem_free(g);
        mem_free(u);
    }
    float g1[T * C];
    CHECK(gpt2_hook_grad(m, ids, 1, T, dl, "blocks.0.attn.hook_q", g1, NULL) == ERR_ARG);
    mem_free(dl);
    gpt2_free(m);
}

static void test_attribute(void)
{
    gpt2_model *m = tiny_model(2);
    const char *hook = "blocks.0.hook_resid_post";
    sae_model *s = tiny_sae(hook, 17);
    for (int i = 0; i < C; i++) s->b_dec[i] = 0.05f * (float)(i % 3); /* a non-trivial baseline */
    int ids[T];
    tokens(ids, T, 8);
    ana_attr_opts o = {.tokens = ids, .T = T, .pos = -1, .target = 5, .target_b = 9};
    ana_attr_result r;
    CHECK(ana_attribute(m, s, &o, &r) == OK, "%s", err_msg());
    if (!r.attr) return;
    /* gradient x activation of the strongest node against finite differences on its activation */
    int best = 0, nz = 0;
    for (int i = 0; i < T * D; i++) {
        if (fabsf(r.attr[i]) > fabsf(r.attr[best])) best = i;
        nz += r.attr[i] != 0 && r.f[i] == 0;
    }
    CHECK(nz == 0, "inactive features get no attribution");
    int bt = best / D, bi = best % D;
    float *u = mem_calloc((size_t)T * C, sizeof *u);
    for (int k = 0; k < C; k++) u[bt * C + k] = s->W_dec[bi * C + k];
    const double eps = 1e-2;
    double fd = (metric_nudged(m, ids, hook, u, eps, T - 1, 5, 9) -
                 metric_nudged(m, ids, hook, u, -eps, T - 1, 5, 9)) / (2 * eps);
    CHECK(fabs(r.attr[best] / r.f[best] - fd) < 2e-3 * (1 + fabs(fd)),
          "d M / d f[%d,%d]: backward %.6f, finite differences %.6f", bt, bi, r.attr[best] / r.f[best], fd);
    CHECK(fabs(r.metric - metric_nudged(m, ids, hook, u, 0, T - 1, 5, 9)) < 1e-4, "metric %.6f", r.metric);
    CHECK(isnan(r.metric_base));
    ana_attr_result_free(&r);
    mem_free(u);
    /* integrated gradients: attributions + error nodes = M(clean) - M(baseline), up to the
       midpoint rule's O(1/N^2) (LayerNorm makes the path strongly curved near the baseline) */
    double gap[2];
    const int steps[2] = {64, 256};
    for (int k = 0; k < 2; k++) {
        o.ig_steps = steps[k];
        CHECK(ana_attribute(m, s, &o, &r) == OK, "%s", err_msg());
        gap[k] = fabs(r.total - (r.metric - r.metric_base));
        if (k == 1)
            CHECK(gap[1] < 1e-3 * (1 + fabs(r.metric - r.metric_base)),
                  "completeness: sum %.6f vs change %.6f (%.6f -> %.6f)", r.total,
                  r.metric - r.metric_base, r.metric_base, r.metric);
        double e = 0;
        for (int t = 0; t < T; t++) e += fabs(r.err[t]);
        CHECK(e > 0, "error nodes carry attribution");
        ana_attr_result_free(&r);
    }
    CHECK(gap[1] < gap[0] / 8, "4x the steps close the gap like 1/N^2 (%g -> %g)", gap[0], gap[1]);
    o.pos = T;
    CHECK(ana_attribute(m, s, &o, &r) == ERR_ARG);
    sae_free(s);
    gpt2_free(m);
}

/* A transcoder writes another hook than it reads: steering and attribution refuse it (generate
 * --sae with one of d_out < d_in read past its decoder and crashed; attribute summed to -49.76). */
static void test_transcoder_refused(void)
{
    gpt2_model *m = tiny_model(2);
    sae_config cfg = {.arch = SAE_RELU, .d_in = C, .d_sae = D, .d_out = C / 2, .context_size = T,
                      .transcoder = SAE_TRANSCODER};
    snprintf(cfg.hook_name, sizeof cfg.hook_name, "blocks.0.mlp.hook_post");
    snprintf(cfg.hook_name_out, sizeof cfg.hook_name_out, "blocks.0.hook_mlp_out");
    sae_model *s = NULL;
    CHECK(sae_model_new(&s, &cfg) == OK, "%s", err_msg());
    if (!s || !m) return;
    ana_steer_term t = {.feature = D - 1, .value = 5};
    ana_steer *st = NULL;
    CHECK(ana_steer_new(&st, s, ANA_STEER_ADD, &t, 1) == ERR_ARG && strstr(err_msg(), "transcoder") &&
          st == NULL, "%s", err_msg());
    int ids[T];
    tokens(ids, T, 8);
    ana_attr_opts o = {.tokens = ids, .T = T, .pos = -1, .target = 5, .target_b = -1};
    ana_attr_result r;
    CHECK(ana_attribute(m, s, &o, &r) == ERR_ARG && strstr(err_msg(), "transcoder"), "%s", err_msg());
    sae_free(s);
    gpt2_free(m);
}

static int has_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0;
}

/* rep_attr_run (reports/report_run.h): the nodes ranked as the command prints them, the heat map
 * with its text chunks next to the CSV and the .npy; a PNG that cannot be written leaves none of
 * the three but keeps the analysis; a failing analysis leaves nothing; every allocation made to
 * fail in turn leaves all three files or none. */
static void test_attr_runner(void)
{
    char dir[64], sdir[80], csv[80], npy[80], png[80];
    if (!harness_tmpdir(dir, sizeof dir, "rattr")) return;
    snprintf(sdir, sizeof sdir, "%s/sae", dir);
    snprintf(csv, sizeof csv, "%s/a.csv", dir);
    snprintf(npy, sizeof npy, "%s/a.npy", dir);
    snprintf(png, sizeof png, "%s/a.png", dir);
    gpt2_model *m;
    sae_model *s;
    runner_fixture(dir, sdir, 2, &m, &s);
    rep_attr_opts o = {.run = {.model_dir = dir, .sae_dir = sdir, .text = "the cat sat", .target = "#7",
                               .pos = -1, .top_rows = 4, .csv = csv, .npy = npy},
                       .png = png};
    rep_attr_result r;
    int rc = rep_attr_run(&o, &r);
    CHECK(rc == OK && r.analysed && r.run.T == 11 && r.run.target == 7, "run: %s", err_msg());
    if (rc) goto done;
    CHECK(has_file(csv) && has_file(npy) && has_file(png), "the CSV, the .npy and the PNG written");
    /* the ranking: every non-zero node once, by |attribution|, summing to the printed total */
    const ana_attr_result *a = &r.run.r;
    int want = 0, sorted = 1, match = 1;
    double sum = 0;
    for (int t = 0; t < a->T; t++) {
        for (int j = 0; j < a->d_sae; j++) want += a->attr[(size_t)t * a->d_sae + j] != 0;
        want += a->err[t] != 0;
    }
    for (int k = 0; k < r.n_nodes; k++) {
        const rep_attr_node *q = &r.nodes[k];
        sum += q->attr;
        if (k) sorted &= fabs(r.nodes[k - 1].attr) >= fabs(q->attr);
        match &= q->attr == (q->feature < 0 ? a->err[q->pos] : a->attr[(size_t)q->pos * a->d_sae + q->feature]);
    }
    CHECK(r.n_nodes == want && want > a->T, "%d nodes ranked, %d non-zero", r.n_nodes, want);
    CHECK(sorted && match, "ranked by |attribution|, each node its own value");
    CHECK(fabs(sum - a->total) < 1e-4 * (1 + fabs(a->total)), "nodes sum %.6f, total %.6f", sum, a->total);
    /* the picture's text chunks and its size (rows: top_rows features and the error nodes) */
    rep_image im = {0};
    CHECK(rep_png_read_meta(png, &im) == OK, "%s", err_msg());
    const char *sw = rep_image_meta(&im, "Software"), *title = rep_image_meta(&im, "Title");
    char wt[160];
    snprintf(wt, sizeof wt, "attribution to \"%s\" at position 10 (gradient x activation)", r.run.target_text);
    CHECK(sw && !strcmp(sw, "saelite attribute"), "Software %s", sw ? sw : "(none)");
    CHECK(title && !strcmp(title, wt), "Title %s", title ? title : "(none)");
    CHECK(r.run.n_rows == 5 && im.height == 170 + 22 * 5 && im.width == 700, "%d rows: %dx%d", r.run.n_rows,
          im.width, im.height);
    rep_image_free(&im);
    rep_attr_run_free(&r);
    CHECK(r.nodes == NULL && !r.analysed, "freed");
    unlink(csv), unlink(npy), unlink(png);

    /* a PNG that cannot be written (a directory): none of the three, the analysis kept */
    char pd[80];
    snprintf(pd, sizeof pd, "%s/p.png", dir);
    CHECK(mkdir(pd, 0755) == 0);
    o.png = pd;
    rc = rep_attr_run(&o, &r);
    CHECK(rc != OK && strstr(err_msg(), pd) && !strstr(err_msg(), ".tmp."), "PNG a directory: %d %s", rc,
          err_msg());
    CHECK(r.analysed && r.nodes && r.n_nodes == want, "the analysis and the ranking kept");
    CHECK(!has_file(csv) && !has_file(npy), "no CSV, no .npy");
    rep_attr_run_free(&r);
    o.png = png;
    /* a failing analysis: nothing */
    o.run.pos = 11;
    CHECK(rep_attr_run(&o, &r) == ERR_ARG && !r.analysed && !r.nodes, "--pos 11: %s", err_msg());
    CHECK(!has_file(csv) && !has_file(npy) && !has_file(png), "no files");
    rep_attr_run_free(&r);
    o.run.pos = -1;

    /* every allocation made to fail in turn: all three files or none, no staged file left */
    mem_fail_at(0);
    (void)mem_alloc_count();
    mem_fail_at(1000000000L); /* counts without failing */
    rc = rep_attr_run(&o, &r);
    long total = mem_alloc_count();
    mem_fail_at(0);
    rep_attr_run_free(&r);
    CHECK(rc == OK, "%s", err_msg());
    unlink(csv), unlink(npy), unlink(png);
    int bad_rc = 0, torn = 0, late = 0, ok = 0;
    long step = total > 60 ? total / 60 : 1;
    for (long k = 1; k <= total; k += k > total - 150 ? 1 : step) {
        mem_fail_at(k);
        rc = rep_attr_run(&o, &r);
        mem_fail_at(0);
        int n = has_file(csv) + has_file(npy) + has_file(png);
        if (rc == OK) ok++, torn += n != 3;
        else bad_rc += rc != ERR_NOMEM, torn += n != 0, late += r.analysed;
        rep_attr_run_free(&r);
        unlink(csv), unlink(npy), unlink(png);
    }
    char cmd[160];
    snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -q '\\.tmp\\.'", dir);
    int staged = system(cmd) == 0;
    CHECK(bad_rc == 0 && torn == 0 && !staged && late > 0,
          "%ld allocations: %d ok, %d other codes, %d torn groups, staged left %d, %d failed after the analysis",
          total, ok, bad_rc, torn, staged, late);
done:
    gpt2_free(m);
    sae_free(s);
    CHECK(harness_rmtree(dir) == 0);
}

int main(void)
{
    test_parse();
    test_rows();
    test_monotone();
    test_final_logits();
    test_clamp();
    test_generate();
    test_generate_run();
    test_effects();
    test_hook_grad();
    test_attribute();
    test_transcoder_refused();
    test_attr_runner();
    return harness_report("test_causal");
}
