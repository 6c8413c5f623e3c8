/* test_graph.c - attribution graphs (analysis/graph.h): completeness against the real forward
 * pass (1 and 2 blocks, plain and skip transcoders), circuit-tracer's pruning on hand-made
 * graphs, and the refusals; `saelite graph` as a library call (rep_graph_run: the picture and the
 * file group). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "analysis/graph.h"
#include "common/err.h"
#include "common/mem.h"
#include "harness.h"
#include "model/gpt2.h"
#include "reports/dashboard.h"
#include "reports/report.h"
#include "reports/report_run.h"
#include "sae/sae.h"
#include "store/store_internal.h"
#include "tok_fixture.h"

enum { C = 16, V = 64, T = 9, D = 40 };

static uint64_t rs = 0x2545f4914f6cdd1dull;
static double urand(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (rs >> 11) * (1.0 / 9007199254740992.0);
}

/* random GPT-2 with non-trivial biases and LayerNorm weights (so every bias path is exercised) */
static gpt2_model *tiny_model_v(int layers, int vocab)
{
    gpt2_config cfg = {.n_layer = layers, .n_head = 2, .n_embd = C, .n_ctx = 32, .vocab_size = vocab,
                       .n_inner = 4 * C, .ln_eps = 1e-5f};
    gpt2_model *m = NULL;
    if (gpt2_create(&m, &cfg, 11) != OK) return NULL;
    int nt;
    const gpt2_tensor *tab = gpt2_param_table(m, &nt);
    float *p = gpt2_params(m, NULL);
    rs = 99;
    for (int i = 0; i < nt; i++) {
        float *x = p + tab[i].offset;
        for (size_t k = 0; k < tab[i].numel; k++) {
            if (strstr(tab[i].name, "ln_") && strstr(tab[i].name, "weight")) x[k] = (float)(0.5 + urand());
            else if (strstr(tab[i].name, "bias")) x[k] = (float)(0.2 * (urand() - 0.5));
            else x[k] *= strstr(tab[i].name, "wte") ? 25 : 10; /* std 0.5 / 0.2: real attention */
        }
    }
    return m;
}
static gpt2_model *tiny_model(int layers) { return tiny_model_v(layers, V); }

static sae_model *tiny_tc(int layer, sae_arch arch, int skip, uint64_t seed)
{
    sae_config cfg = {.arch = arch, .d_in = C, .d_sae = D, .k = arch == SAE_TOPK ? 6 : 0,
                      .transcoder = skip ? SAE_SKIP_TRANSCODER : SAE_TRANSCODER, .d_out = C};
    snprintf(cfg.hook_name, sizeof cfg.hook_name, "blocks.%d.ln2.hook_normalized", layer);
    snprintf(cfg.hook_name_out, sizeof cfg.hook_name_out, "blocks.%d.hook_mlp_out", layer);
    sae_model *s = NULL;
    if (sae_model_new(&s, &cfg) != OK) return NULL;
    rs = seed;
    for (int k = 0; k < C * D; k++) s->W_enc[k] = (float)(0.6 * (urand() - 0.5));
    for (int k = 0; k < D * C; k++) s->W_dec[k] = (float)(0.6 * (urand() - 0.5));
    for (int j = 0; j < D; j++) s->b_enc[j] = (float)(0.3 * (urand() - 0.5));
    for (int k = 0; k < C; k++) s->b_dec[k] = (float)(0.2 * (urand() - 0.5));
    if (s->threshold)
        for (int j = 0; j < D; j++) s->threshold[j] = 0.1f;
    if (s->W_skip)
        for (int k = 0; k < C * C; k++) s->W_skip[k] = (float)(0.4 * (urand() - 0.5));
    return s;
}

typedef struct { float *buf; } grab;
static int grab_hook(const tensor_view *t, void *user)
{
    memcpy(((grab *)user)->buf, t->data, (size_t)tensor_numel(t) * sizeof(float));
    return 0;
}

/* The independent side: the real forward with hooks, the pre-activations computed here. */
static void check_complete(int layers, sae_model *const *tc, const char *what)
{
    gpt2_model *m = tiny_model(layers);
    CHECK(m != NULL, "model");
    if (!m) return;
    int ids[T];
    rs = 5;
    for (int t = 0; t < T; t++) ids[t] = (int)(urand() * V);
    ana_graph_params p = {.logit_prob = 0.95, .max_logits = 10, .max_feature_nodes = 4096};
    ana_graph g;
    int rc = ana_graph_build(m, tc, ids, T, &p, &g);
    CHECK(rc == OK, "%s: build: %s", what, err_msg());
    if (rc) {
        gpt2_free(m);
        return;
    }
    float *x = mem_alloc((size_t)layers * T * C * sizeof *x), *f = mem_alloc((size_t)T * D * sizeof *f);
    grab gr[4];
    gpt2_hook_clear(m);
    for (int l = 0; l < layers; l++) {
        char nm[64];
        snprintf(nm, sizeof nm, "blocks.%d.ln2.hook_normalized", l);
        gr[l].buf = x + (size_t)l * T * C;
        gpt2_hook_add(m, nm, grab_hook, &gr[l]);
    }
    CHECK(gpt2_forward(m, ids, 1, T, 1) == OK, "forward");
    gpt2_hook_clear(m);
    const float *logits = gpt2_logits(m) + (size_t)(T - 1) * V;
    /* the feature nodes are exactly the active latents, in (layer, pos, latent) order (values to
       float rounding: the graph's forward has more hooks, which changes the summation order) */
    int k = 0, order_ok = 1, count_ok = 1;
    double worst = 0;
    for (int l = 0; l < layers; l++) {
        sae_encode(tc[l], x + (size_t)l * T * C, T, f);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < D; i++) {
                if (f[t * D + i] == 0) continue;
                if (k >= g.n_features) {
                    count_ok = 0;
                    continue;
                }
                const ana_graph_node *nd = &g.nodes[k++];
                order_ok &= nd->kind == ANA_NODE_FEATURE && nd->layer == l && nd->pos == t && nd->id == i &&
                            fabs(nd->activation - f[t * D + i]) <= 1e-5 * fabs(f[t * D + i]);
                double pre = tc[l]->b_enc[i];
                for (int q = 0; q < C; q++) pre += (double)x[(size_t)l * T * C + t * C + q] * tc[l]->W_enc[q * D + i];
                double s = nd->bias;
                for (int j = 0; j < g.n; j++) s += g.adj[(size_t)(k - 1) * g.n + j];
                double e = fabs(s - pre) / fabs(pre);
                if (e > worst) worst = e;
            }
    }
    CHECK(count_ok && k == g.n_features, "%s: %d feature nodes, %d active", what, g.n_features, k);
    /* more targets than one batch of 64 in the 2-block case: the batches run on several threads */
    CHECK(layers == 1 || g.n_features + g.n_logits > 64, "%s: only %d targets", what,
          g.n_features + g.n_logits);
    CHECK(order_ok, "%s: feature nodes out of order", what);
    CHECK(worst < 1e-4, "%s: feature completeness %.3g", what, worst);
    /* logits: the most probable first, their sum reaches 0.95 or there are 10 */
    double cum = 0, lw = 0;
    int sorted = 1;
    for (int j = 0; j < g.n_logits; j++) {
        int i = g.n - g.n_logits + j;
        const ana_graph_node *nd = &g.nodes[i];
        cum += nd->activation;
        if (j && nd->activation > g.nodes[i - 1].activation) sorted = 0;
        double s = nd->bias;
        for (int q = 0; q < g.n; q++) s += g.adj[(size_t)i * g.n + q];
        double e = fabs(s - logits[nd->id]) / fabs(logits[nd->id]);
        if (e > lw) lw = e;
    }
    CHECK(sorted && g.n_logits >= 1 && (cum >= 0.95 - 1e-12 || g.n_logits == 10), "%s: %d logits, p %.3f",
          what, g.n_logits, cum);
    CHECK(cum - g.nodes[g.n - 1].activation < 0.95, "%s: the logit set is not the smallest", what);
    CHECK(lw < 1e-4, "%s: logit completeness %.3g", what, lw);
    CHECK(g.max_rel_err < 1e-4, "%s: the graph's own check %.3g", what, g.max_rel_err);
    /* its definition: relative to max(|value|, |bias| + sum |edges|), not |value| alone */
    double rel = 0;
    for (int i = 0; i < g.n; i++) {
        const ana_graph_node *nd = &g.nodes[i];
        if (nd->kind != ANA_NODE_FEATURE && nd->kind != ANA_NODE_LOGIT) continue;
        double s = nd->bias, sc = fabs(nd->bias);
        for (int q = 0; q < g.n; q++) {
            s += g.adj[(size_t)i * g.n + q];
            sc += fabs(g.adj[(size_t)i * g.n + q]);
        }
        sc = fmax(sc, fabs(nd->value));
        if (sc > 0) rel = fmax(rel, fabs(s - nd->value) / sc);
    }
    CHECK(rel == g.max_rel_err, "%s: max_rel_err %.17g, by its definition %.17g", what, g.max_rel_err, rel);
    /* causality: nothing flows from a later position, errors and embeddings have no inputs */
    int causal = 1, sources = 1;
    for (int i = 0; i < g.n; i++)
        for (int j = 0; j < g.n; j++) {
            double a = g.adj[(size_t)i * g.n + j];
            if (a == 0) continue;
            if (g.nodes[j].pos > g.nodes[i].pos) causal = 0;
            if (g.nodes[i].kind == ANA_NODE_ERROR || g.nodes[i].kind == ANA_NODE_EMBED) sources = 0;
            if (g.nodes[i].kind == ANA_NODE_FEATURE && g.nodes[j].kind != ANA_NODE_EMBED &&
                g.nodes[j].layer >= g.nodes[i].layer)
                causal = 0;
        }
    CHECK(causal, "%s: an edge against the causal order", what);
    CHECK(sources, "%s: an edge into an error or embedding node", what);
    /* pruning keeps tokens and logits, and at threshold 1 every node with a path to a logit */
    CHECK(ana_graph_prune(&g, 0.8, 0.98) == OK, "prune");
    int keep_ok = 1;
    for (int i = g.n_features + layers * T; i < g.n; i++) keep_ok &= g.nodes[i].kept;
    CHECK(keep_ok, "%s: a token or logit node was pruned", what);
    CHECK(g.n_kept < g.n && g.n_edges_kept > 0 && g.n_edges_kept < g.n_edges, "%s: kept %d/%d nodes, %lld/%lld edges",
          what, g.n_kept, g.n, (long long)g.n_edges_kept, (long long)g.n_edges);
    for (int i = 0; i < g.n * g.n; i++)
        if (g.edge_kept[i] && (!g.nodes[i / g.n].kept || !g.nodes[i % g.n].kept)) keep_ok = 0;
    CHECK(keep_ok, "%s: a kept edge touches a pruned node", what);
    mem_free(x);
    mem_free(f);
    ana_graph_free(&g);
    gpt2_free(m);
}

static void test_complete(void)
{
    sae_model *a = tiny_tc(0, SAE_TOPK, 0, 3);
    check_complete(1, &a, "1 block topk");
    sae_free(a);
    sae_model *two[2] = {tiny_tc(0, SAE_RELU, 0, 4), tiny_tc(1, SAE_JUMPRELU, 1, 5)};
    check_complete(2, two, "2 blocks relu + skip jumprelu");
    sae_free(two[0]);
    sae_free(two[1]);
}

/* A hand-made DAG (rows targets): logit 4 <- 2 (weight 3), 3 (-1); 2 <- 0 (1), 1 (1); 3 <- 1 (2).
 * Normalised: row 4 = [0 0 .75 .25 0], row 2 = [.5 .5 0 0 0], row 3 = [0 1 0 0 0].
 * w = e4: wA = [0 0 .75 .25 0]; wA^2 = [.375 .375+.25 0 0 0]; then 0. */
static void test_influence(void)
{
    double A[25] = {0};
    A[4 * 5 + 2] = 3, A[4 * 5 + 3] = -1, A[2 * 5 + 0] = 1, A[2 * 5 + 1] = 1, A[3 * 5 + 1] = 2;
    double w[5] = {0, 0, 0, 0, 1}, out[5];
    CHECK(ana_graph_influence(A, 5, w, out) == OK, "influence");
    double want[5] = {0.375, 0.625, 0.75, 0.25, 0};
    for (int i = 0; i < 5; i++) CHECK_NEAR(out[i], want[i], 1e-12);
    /* a cycle never vanishes */
    double cyc[4] = {0, 1, 1, 0}, w2[2] = {1, 0}, o2[2];
    CHECK(ana_graph_influence(cyc, 2, w2, o2) == ERR_ARG, "a cycle is refused");
    /* thresholds: sorted 4 3 2 1 (total 10): cumulative .4 .7 .9 1 */
    double s[4] = {1, 3, 4, 2};
    CHECK_NEAR(ana_graph_threshold(s, 4, 0.4), 4, 0);
    CHECK_NEAR(ana_graph_threshold(s, 4, 0.5), 3, 0);
    CHECK_NEAR(ana_graph_threshold(s, 4, 0.8), 2, 0);
    CHECK_NEAR(ana_graph_threshold(s, 4, 0.95), 1, 0);
    CHECK_NEAR(ana_graph_threshold(s, 4, 1.0), 1, 0);
    CHECK_NEAR(ana_graph_threshold(s, 4, 0.0), 4, 0);
}

/* Pruning on a graph of 1 block, 2 positions: features f0 (pos 0), f1 (pos 1), f2 (pos 1),
 * errors e0 e1, embeddings t0 t1, one logit (p 1). f2 has the weakest path; e0 feeds nothing. */
static void test_prune(void)
{
    ana_graph g = {.n = 8, .n_features = 3, .n_layers = 1, .n_pos = 2, .n_logits = 1};
    g.nodes = mem_calloc(8, sizeof *g.nodes);
    g.adj = mem_calloc(64, sizeof *g.adj);
    int kinds[8] = {0, 0, 0, 1, 1, 2, 2, 3}, pos[8] = {0, 1, 1, 0, 1, 0, 1, 1};
    for (int i = 0; i < 8; i++) g.nodes[i] = (ana_graph_node){.kind = kinds[i], .pos = pos[i]};
    g.nodes[7].activation = 1;
#define E(t, s, v) g.adj[(t) * 8 + (s)] = (v)
    E(7, 0, 4), E(7, 1, -5), E(7, 2, 0.05), E(7, 4, 1), E(7, 6, 0.5);
    E(0, 5, 2), E(1, 5, 1), E(1, 6, 3), E(2, 6, 1);
#undef E
    g.n_edges = 9;
    CHECK(ana_graph_prune(&g, 0.8, 0.98) == OK, "prune");
    int want[8] = {1, 1, 0, 0, 0, 1, 1, 1}; /* f2 and both errors go (e1: its edge is too weak) */
    for (int i = 0; i < 8; i++) CHECK(g.nodes[i].kept == want[i], "node %d kept %d", i, g.nodes[i].kept);
    CHECK(g.edge_kept[7 * 8 + 1] && g.edge_kept[7 * 8 + 0] && !g.edge_kept[7 * 8 + 2], "logit edges");
    /* with both thresholds at 1 every node with an edge on a path to the logit stays */
    CHECK(ana_graph_prune(&g, 1.0, 1.0) == OK, "prune 1");
    for (int i = 0; i < 8; i++) CHECK(g.nodes[i].kept == (i != 3), "threshold 1: node %d kept %d", i, g.nodes[i].kept);
    CHECK(g.n_edges_kept == 9, "threshold 1: %lld edges", (long long)g.n_edges_kept);
    CHECK(ana_graph_prune(&g, 1.5, 0.9) == ERR_ARG, "threshold above 1");
    ana_graph_free(&g);
}

static void test_refusals(void)
{
    gpt2_model *m = tiny_model(2);
    sae_model *a = tiny_tc(0, SAE_TOPK, 0, 3), *b = tiny_tc(1, SAE_TOPK, 0, 4);
    int ids[T] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    ana_graph_params p = {.logit_prob = 0.95, .max_logits = 10, .max_feature_nodes = 4096};
    ana_graph g;
    sae_model *missing[2] = {a, NULL}, *swapped[2] = {b, a}, *ok[2] = {a, b};
    CHECK(ana_graph_build(m, missing, ids, T, &p, &g) == ERR_ARG, "a block without a transcoder");
    CHECK(strstr(err_msg(), "block 1") != NULL, "%s", err_msg());
    CHECK(ana_graph_build(m, swapped, ids, T, &p, &g) == ERR_ARG, "transcoders on the wrong blocks");
    ids[3] = V;
    CHECK(ana_graph_build(m, ok, ids, T, &p, &g) == ERR_ARG, "a token outside the vocabulary");
    ids[3] = 4;
    CHECK(ana_graph_build(m, ok, ids, 0, &p, &g) == ERR_ARG, "no tokens");
    p.max_feature_nodes = 10;
    CHECK(ana_graph_build(m, ok, ids, T, &p, &g) == ERR_ARG, "too many feature nodes");
    CHECK(strstr(err_msg(), "--max-feature-nodes") != NULL, "%s", err_msg());
    p.max_feature_nodes = 4096;
    volatile int stop = 1;
    p.stop = &stop;
    CHECK(ana_graph_build(m, ok, ids, T, &p, &g) == ERR_ABORTED, "stop flag");
    p.stop = NULL;
    a->cfg.transcoder = SAE_NOT_TRANSCODER;
    CHECK(ana_graph_build(m, ok, ids, T, &p, &g) == ERR_ARG, "an SAE is not a transcoder");
    sae_free(a);
    sae_free(b);
    gpt2_free(m);
}

/* The picture: a small graph is drawn and its file written; bad nodes and edges are refused. */
static void test_picture(void)
{
    char path[] = "/tmp/saelite_graph_png_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    rep_graph_node nodes[4] = {{REP_GNODE_EMBED, 0, 0, NULL}, {REP_GNODE_FEATURE, 1, 1, "7"},
                               {REP_GNODE_ERROR, 1, 1, "err"}, {REP_GNODE_LOGIT, 2, 1, "x 0.50"}};
    rep_graph_edge edges[3] = {{0, 1, 2.0}, {1, 3, -1.0}, {2, 3, 0.5}};
    const char *rows[3] = {"embeddings", "block 0", "logits"}, *cols[2] = {"a", "b"};
    CHECK(rep_plot_graph(path, NULL, 0, "t", nodes, 4, edges, 3, 3, 2, rows, cols) == OK, "%s", err_msg());
    FILE *fp = fopen(path, "rb");
    unsigned char sig[8] = {0};
    CHECK(fp && fread(sig, 1, 8, fp) == 8 && sig[1] == 'P' && sig[2] == 'N' && sig[3] == 'G', "a PNG file");
    if (fp) fclose(fp);
    edges[2].dst = 4;
    CHECK(rep_plot_graph(path, NULL, 0, "t", nodes, 4, edges, 3, 3, 2, rows, cols) == ERR_ARG, "edge outside");
    edges[2].dst = 3;
    nodes[1].col = 2;
    CHECK(rep_plot_graph(path, NULL, 0, "t", nodes, 4, edges, 3, 3, 2, rows, cols) == ERR_ARG, "node outside");
    CHECK(rep_plot_graph(path, NULL, 0, "t", nodes, 4, edges, 3, 1, 2, rows, cols) == ERR_ARG, "one row");
    unlink(path);
}

static const cJSON *field(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* The runners' fixture under root: a 2-block model over the byte tokenizer in md and a
 * transcoder per block in t0 (TopK) and t1 (ReLU, skip). Returns the save's code. */
static int graph_fixture(const char *root, char *md, char *t0, char *t1, gpt2_model **m,
                         sae_model **a, sae_model **b)
{
    snprintf(md, 256, "%s/m", root);
    snprintf(t0, 256, "%s/tc0", root);
    snprintf(t1, 256, "%s/tc1", root);
    *m = tiny_model_v(2, 256);
    *a = tiny_tc(0, SAE_TOPK, 0, 3);
    *b = tiny_tc(1, SAE_RELU, 1, 4);
    int rc = gpt2_save(*m, md, ST_F32, 0);
    if (!rc) rc = fixture_byte_tokenizer(md);
    if (!rc) rc = sae_save(*a, t0);
    if (!rc) rc = sae_save(*b, t1);
    return rc;
}

/* The runner on files: a 2-block model over the byte tokenizer, the JSON graph parsed back with
 * cJSON, the tables counted, and the refusals of its inputs. */
static void test_runner(void)
{
    char root[] = "/tmp/saelite_graph_XXXXXX", md[256], t0[256], t1[256], out[256], db[256], js[300];
    if (!mkdtemp(root)) {
        CHECK(0, "mkdtemp");
        return;
    }
    snprintf(out, sizeof out, "%s/out", root);
    snprintf(db, sizeof db, "%s/g.db", root);
    snprintf(js, sizeof js, "%s/graph.json", out);
    gpt2_model *m;
    sae_model *a, *b;
    int rc = graph_fixture(root, md, t0, t1, &m, &a, &b);
    CHECK(rc == OK, "fixtures: %s", err_msg());
    char tcs[600];
    snprintf(tcs, sizeof tcs, "%s,%s", t1, t0); /* any order: each goes to the block it names */
    ana_graph_run_opts o;
    ana_graph_run_defaults(&o);
    o.model_dir = md;
    o.tc_dirs = tcs;
    o.text = "a \"quoted\" cat";
    o.out_dir = out;
    o.db = db;
    ana_graph_run_result res;
    rc = ana_graph_run(&o, &res);
    CHECK(rc == OK, "run: %s", err_msg());
    if (rc) goto done;
    CHECK(res.T == 14 && res.g.max_rel_err < 1e-4, "T %d, completeness %.3g", res.T, res.g.max_rel_err);
    size_t n = 0;
    char *text = NULL;
    FILE *fp = fopen(js, "rb");
    if (fp) {
        text = malloc(1 << 22);
        n = fread(text, 1, (1 << 22) - 1, fp);
        text[n] = 0;
        fclose(fp);
    }
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    CHECK(j != NULL, "graph.json does not parse");
    if (j) {
        const cJSON *meta = field(j, "metadata"), *nodes = field(j, "nodes"), *links = field(j, "links");
        CHECK(cJSON_IsObject(meta) && cJSON_IsArray(nodes) && cJSON_IsArray(links) && cJSON_IsObject(field(j, "qParams")),
              "top-level fields");
        CHECK(cJSON_IsString(field(meta, "prompt")) && !strcmp(field(meta, "prompt")->valuestring, o.text), "prompt");
        CHECK(cJSON_GetArraySize(field(meta, "prompt_tokens")) == res.T, "prompt_tokens");
        CHECK(cJSON_GetArraySize(field(meta, "transcoder_list")) == 2, "transcoder_list");
        CHECK(cJSON_GetArraySize(nodes) == res.g.n_kept, "%d nodes, %d kept", cJSON_GetArraySize(nodes), res.g.n_kept);
        CHECK(cJSON_GetArraySize(links) == res.g.n_edges_kept, "%d links", cJSON_GetArraySize(links));
        int types_ok = 1, targets = 0, ends_ok = 1;
        const cJSON *nd;
        cJSON_ArrayForEach(nd, nodes)
        {
            const cJSON *ft = field(nd, "feature_type");
            types_ok &= cJSON_IsString(ft) && cJSON_IsString(field(nd, "node_id")) && cJSON_IsString(field(nd, "layer")) &&
                        cJSON_IsNumber(field(nd, "ctx_idx")) && cJSON_IsNumber(field(nd, "feature")) &&
                        (!strcmp(ft->valuestring, "cross layer transcoder") || !strcmp(ft->valuestring, "mlp reconstruction error") ||
                         !strcmp(ft->valuestring, "embedding") || !strcmp(ft->valuestring, "logit"));
            targets += cJSON_IsTrue(field(nd, "is_target_logit"));
        }
        const cJSON *ln;
        cJSON_ArrayForEach(ln, links)
        {
            int src = 0, dst = 0;
            cJSON_ArrayForEach(nd, nodes)
            {
                src |= !strcmp(field(nd, "node_id")->valuestring, field(ln, "source")->valuestring);
                dst |= !strcmp(field(nd, "node_id")->valuestring, field(ln, "target")->valuestring);
            }
            ends_ok &= src && dst && cJSON_IsNumber(field(ln, "weight")) && field(ln, "weight")->valuedouble != 0;
        }
        CHECK(types_ok && targets == 1, "node fields (%d target logits)", targets);
        CHECK(ends_ok, "a link names a node that is not in the graph");
        cJSON_Delete(j);
    }
    free(text);
    store *s = NULL;
    CHECK(store_open(&s, db, STORE_READONLY) == OK, "db: %s", err_msg());
    if (s) {
        int64_t v = 0;
        store_query_i64(s, "SELECT count(*) FROM graph_nodes", &v);
        CHECK(v == res.g.n, "%lld node rows", (long long)v);
        store_query_i64(s, "SELECT count(*) FROM graph_edges", &v);
        CHECK(v == res.g.n_edges, "%lld edge rows", (long long)v);
        store_query_i64(s, "SELECT sum(kept) FROM graph_edges", &v);
        CHECK(v == res.g.n_edges_kept, "%lld kept edge rows", (long long)v);
        store_query_i64(s, "SELECT count(*) FROM graphs WHERE n_nodes_kept = (SELECT sum(kept) FROM graph_nodes)", &v);
        CHECK(v == 1, "graphs row");
        store_close(s);
    }
    ana_graph_run_free(&res);
    /* refusals */
    o.tc_dirs = t0;
    CHECK(ana_graph_run(&o, &res) == ERR_ARG && strstr(err_msg(), "block 1"), "a block missing: %s", err_msg());
    snprintf(tcs, sizeof tcs, "%s,%s", t0, t0);
    o.tc_dirs = tcs;
    CHECK(ana_graph_run(&o, &res) == ERR_ARG && strstr(err_msg(), "second transcoder"), "twice: %s", err_msg());
    snprintf(tcs, sizeof tcs, "%s,", t0);
    CHECK(ana_graph_run(&o, &res) == ERR_ARG, "an empty directory in the list");
    o.tc_dirs = md;
    CHECK(ana_graph_run(&o, &res) != OK, "a model directory is no transcoder");
    snprintf(tcs, sizeof tcs, "%s,%s", t0, t1);
    o.tc_dirs = tcs;
    o.text = "";
    CHECK(ana_graph_run(&o, &res) == ERR_ARG, "no tokens");
    o.text = "x";
    o.node_threshold = 2;
    CHECK(ana_graph_run(&o, &res) == ERR_ARG, "threshold 2");
done:
    sae_free(a);
    sae_free(b);
    gpt2_free(m);
    if (harness_rmtree(root)) fprintf(stderr, "could not remove %s\n", root);
}

/* Entries of dir: how many, and how many staging files (".tmp.") among them. */
static int count_entries(const char *dir, int *tmp)
{
    DIR *d = opendir(dir);
    int n = 0;
    *tmp = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            n++;
            *tmp += strstr(e->d_name, ".tmp.") != NULL;
        }
    if (d) closedir(d);
    return n;
}

static int is_file(const char *dir, const char *name)
{
    char p[600];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0;
}

/* rep_graph_run (reports/report_run.h): the analysis, the ranking the command prints, graph.png
 * with its text chunks next to graph.json; a graph.png that cannot be written leaves neither file
 * but keeps the analysis and the committed rows (graph_id); a failing analysis leaves nothing;
 * every allocation made to fail leaves both files or neither. */
static void test_rep_runner(void)
{
    char root[64], md[256], t0[256], t1[256], tcs[600], out[256], bad[256], db[256], png[300];
    if (!harness_tmpdir(root, sizeof root, "rgraph")) return;
    gpt2_model *m;
    sae_model *a, *b;
    int rc = graph_fixture(root, md, t0, t1, &m, &a, &b);
    snprintf(tcs, sizeof tcs, "%s,%s", t0, t1);
    snprintf(out, sizeof out, "%s/out", root);
    snprintf(bad, sizeof bad, "%s/bad", root);
    snprintf(db, sizeof db, "%s/g.db", root);
    snprintf(png, sizeof png, "%s/graph.png", out);
    CHECK(rc == OK, "fixtures: %s", err_msg());
    ana_graph_run_opts o;
    ana_graph_run_defaults(&o);
    o.model_dir = md;
    o.tc_dirs = tcs;
    o.text = "the cat sat";
    o.out_dir = out;
    o.db = db;
    o.json_out = "/nonexistent/x.json"; /* not read: the runner stages graph.json itself */
    rep_graph_result r;
    rc = rep_graph_run(&o, &r);
    CHECK(rc == OK && r.analysed, "run: %s", err_msg());
    if (rc) goto done;
    const ana_graph *g = &r.run.g;
    int tmp, n = count_entries(out, &tmp);
    CHECK(n == 2 && tmp == 0 && is_file(out, "graph.json") && is_file(out, "graph.png"),
          "%d files (%d staged): graph.json and graph.png", n, tmp);
    CHECK(r.run.graph_id == 1, "graph_id %lld", (long long)r.run.graph_id);
    char js[300], *text = malloc(1 << 22);
    snprintf(js, sizeof js, "%s/graph.json", out);
    FILE *fp = text ? fopen(js, "rb") : NULL;
    size_t len = fp ? fread(text, 1, (1 << 22) - 1, fp) : 0;
    if (fp) fclose(fp);
    if (text) text[len] = 0;
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    CHECK(j && cJSON_GetArraySize(field(j, "nodes")) == g->n_kept, "graph.json: the %d kept nodes", g->n_kept);
    cJSON_Delete(j);
    free(text);
    /* the ranking: the kept features and errors, by influence */
    int nf = 0, ne = 0, sorted = 1, kinds = 1;
    for (int i = 0; i < g->n; i++) {
        nf += g->nodes[i].kept && g->nodes[i].kind == ANA_NODE_FEATURE;
        ne += g->nodes[i].kept && g->nodes[i].kind == ANA_NODE_ERROR;
    }
    for (int k = 0; k < r.n_ranked; k++) {
        const ana_graph_node *q = &g->nodes[r.ranked[k]];
        kinds &= q->kept && (q->kind == ANA_NODE_FEATURE || q->kind == ANA_NODE_ERROR);
        if (k) sorted &= g->nodes[r.ranked[k - 1]].influence >= q->influence;
    }
    CHECK(r.n_kept_features == nf && r.n_kept_errors == ne && r.n_ranked == nf + ne && nf + ne > 0,
          "%d features, %d errors kept; %d ranked", r.n_kept_features, r.n_kept_errors, r.n_ranked);
    CHECK(sorted && kinds, "ranked by influence, kept features and errors only");
    /* the picture's text chunks */
    rep_image im = {0};
    CHECK(rep_png_read_meta(png, &im) == OK, "%s", err_msg());
    const char *sw = rep_image_meta(&im, "Software"), *title = rep_image_meta(&im, "Title");
    char want[128];
    snprintf(want, sizeof want, "attribution graph (%d of %d nodes, %lld of %lld edges; node 0.80, edge 0.98)",
             g->n_kept, g->n, (long long)g->n_edges_kept, (long long)g->n_edges);
    CHECK(sw && !strcmp(sw, "saelite graph"), "Software %s", sw ? sw : "(none)");
    CHECK(title && !strncmp(title, want, strlen(want)) && strstr(title, "\"the cat sat\""), "Title %s",
          title ? title : "(none)");
    CHECK(im.width > 0 && im.height > 0, "size %dx%d", im.width, im.height);
    rep_image_free(&im);
    rep_graph_run_free(&r);
    CHECK(r.ranked == NULL && r.run.graph_id == -1, "freed");

    /* a graph.png that cannot be written (a directory): neither file, the graph and its rows kept */
    char pdir[300];
    snprintf(pdir, sizeof pdir, "%s/graph.png", bad);
    CHECK(file_mkdir_p(pdir) == OK, "%s", err_msg());
    o.out_dir = bad;
    rc = rep_graph_run(&o, &r);
    CHECK(rc != OK && strstr(err_msg(), pdir) && !strstr(err_msg(), ".tmp."), "graph.png a directory: %d %s",
          rc, err_msg());
    CHECK(r.analysed && r.run.graph_id == 2 && r.run.g.n > 0 && r.n_ranked == nf + ne,
          "the analysis kept (graph %lld)", (long long)r.run.graph_id);
    n = count_entries(bad, &tmp);
    CHECK(n == 1 && tmp == 0 && !is_file(bad, "graph.json"), "only the directory graph.png is left (%d, %d)", n, tmp);
    rep_graph_run_free(&r);
    store *s = NULL;
    if (store_open(&s, db, STORE_READONLY) == OK) {
        int64_t v = 0;
        store_query_i64(s, "SELECT count(*) FROM graphs", &v);
        CHECK(v == 2, "%lld graphs rows", (long long)v);
        store_close(s);
    } else CHECK(0, "%s", err_msg());

    /* a failing analysis: nothing analysed, no rows named, no files */
    o.tc_dirs = t0;
    rc = rep_graph_run(&o, &r);
    CHECK(rc == ERR_ARG && !r.analysed && r.run.graph_id == -1 && r.ranked == NULL, "a block missing: %s",
          err_msg());
    rep_graph_run_free(&r);
    o.tc_dirs = tcs;

    /* every allocation made to fail in turn (the ranking and the picture densely): both files or
       neither, never a staged file (without db: SQLite does not allocate through mem.h) */
    char fo[256];
    snprintf(fo, sizeof fo, "%s/fault", root);
    o.out_dir = fo;
    o.db = NULL;
    mem_fail_at(0);
    (void)mem_alloc_count();
    mem_fail_at(1000000000L); /* counts without failing */
    rc = rep_graph_run(&o, &r);
    long total = mem_alloc_count();
    mem_fail_at(0);
    rep_graph_run_free(&r);
    CHECK(rc == OK, "%s", err_msg());
    int bad_rc = 0, torn = 0, late = 0, ok = 0;
    long step = total > 60 ? total / 60 : 1;
    for (long k = 1; k <= total; k += k > total - 150 ? 1 : step) {
        mem_fail_at(k);
        rc = rep_graph_run(&o, &r);
        mem_fail_at(0);
        int j = is_file(fo, "graph.json"), p = is_file(fo, "graph.png");
        if (rc == OK) {
            ok++;
            torn += !(j && p);
        } else {
            bad_rc += rc != ERR_NOMEM;
            torn += j || p;
            late += r.analysed;
        }
        rep_graph_run_free(&r);
        char f[300];
        snprintf(f, sizeof f, "%s/graph.json", fo);
        unlink(f);
        snprintf(f, sizeof f, "%s/graph.png", fo);
        unlink(f);
    }
    count_entries(fo, &tmp);
    CHECK(bad_rc == 0 && torn == 0 && tmp == 0 && late > 0,
          "%ld allocations: %d ok, %d other codes, %d torn groups, %d staged left, %d failed after the analysis",
          total, ok, bad_rc, torn, tmp, late);
done:
    sae_free(a);
    sae_free(b);
    gpt2_free(m);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
}

int main(void)
{
    test_influence();
    test_prune();
    test_complete();
    test_refusals();
    test_runner();
    test_rep_runner();
    test_picture();
    return harness_report("test_graph");
}
