/* cmd_graph.c - `saelite graph`: flags for ana_graph_run (analysis/graph.h), a summary printed,
 * the pruned graph drawn with reports/dashboard.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/graph.h"
#include "cli/cli.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "reports/dashboard.h"

CLI_COMMAND(graph, "Attribution graph of a prompt over per-block transcoders (circuit-tracer's method)",
            "saelite graph --model DIR --transcoder DIR[,DIR...] --text S [--out DIR] [--db DB] "
            "[--node-threshold 0.8] [--edge-threshold 0.98]")

static int draw(const char *path, const ana_graph_run_opts *o, const ana_graph_run_result *res)
{
    const ana_graph *g = &res->g;
    const int rows = g->n_layers + 2;
    int *map = mem_alloc((size_t)g->n * sizeof *map);
    rep_graph_node *nodes = mem_calloc((size_t)g->n, sizeof *nodes);
    rep_graph_edge *edges = mem_alloc(((size_t)g->n_edges_kept + 1) * sizeof *edges);
    char **labels = mem_calloc((size_t)g->n, sizeof *labels), **rl = mem_calloc((size_t)rows, sizeof *rl);
    int rc = OK, nn = 0, ne = 0;
    if (!map || !nodes || !edges || !labels || !rl) rc = err_set(ERR_NOMEM, "out of memory");
    for (int i = 0; !rc && i < g->n; i++) {
        const ana_graph_node *q = &g->nodes[i];
        map[i] = -1;
        if (!q->kept) continue;
        char s[96];
        switch (q->kind) {
        case ANA_NODE_FEATURE: snprintf(s, sizeof s, "%d", q->id); break;
        case ANA_NODE_ERROR: snprintf(s, sizeof s, "err"); break;
        case ANA_NODE_EMBED: s[0] = 0; break;
        default: snprintf(s, sizeof s, "%s %.2f", res->logit_text[i - (g->n - g->n_logits)], q->activation);
        }
        labels[nn] = s[0] ? mem_strdup(s) : NULL;
        int row = q->kind == ANA_NODE_EMBED ? 0 : q->kind == ANA_NODE_LOGIT ? rows - 1 : q->layer + 1;
        nodes[nn] = (rep_graph_node){q->kind, row, q->pos, labels[nn]};
        map[i] = nn++;
    }
    for (int t = 0; !rc && t < g->n; t++)
        for (int s = 0; s < g->n; s++)
            if (g->edge_kept[(size_t)t * g->n + s] && map[s] >= 0 && map[t] >= 0)
                edges[ne++] = (rep_graph_edge){map[s], map[t], g->adj[(size_t)t * g->n + s]};
    for (int r = 0; !rc && r < rows; r++) {
        char s[32];
        if (r == 0) snprintf(s, sizeof s, "embeddings");
        else if (r == rows - 1) snprintf(s, sizeof s, "logits");
        else snprintf(s, sizeof s, "block %d", r - 1);
        if (!(rl[r] = mem_strdup(s))) rc = err_set(ERR_NOMEM, "out of memory");
    }
    if (!rc) {
        char title[512];
        snprintf(title, sizeof title, "attribution graph (%d of %d nodes, %lld of %lld edges; node %.2f, "
                 "edge %.2f): \"%.300s\"", g->n_kept, g->n, (long long)g->n_edges_kept,
                 (long long)g->n_edges, o->node_threshold, o->edge_threshold, o->text);
        rep_kv meta[] = {{"Software", "saelite graph"}, {"Title", title}};
        rc = rep_plot_graph(path, meta, 2, title, nodes, nn, edges, ne, rows, res->T,
                            (const char *const *)rl, (const char *const *)res->tok_text);
    }
    for (int i = 0; labels && i < g->n; i++) mem_free(labels[i]);
    for (int r = 0; rl && r < rows; r++) mem_free(rl[r]);
    mem_free(labels);
    mem_free(rl);
    mem_free(map);
    mem_free(nodes);
    mem_free(edges);
    return rc;
}

typedef struct { double v; int i; } ranked;
static int cmp_ranked(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->i - y->i;
}

int cmd_graph(int argc, char **argv)
{
    ana_graph_run_opts o;
    ana_graph_run_defaults(&o);
    int top = 15;
    arg_spec spec[] = {
        {"--model", ARG_STR, &o.model_dir, "model directory", ARG_REQUIRED},
        {"--transcoder", ARG_STR, &o.tc_dirs,
         "transcoder directories, one per block (blocks.L.ln2.hook_normalized -> blocks.L.hook_mlp_out), comma-separated",
         ARG_REQUIRED},
        {"--text", ARG_STR, &o.text, "the prompt (no <|endoftext|> is prepended)", ARG_REQUIRED},
        {"--tokenizer", ARG_STR, &o.tok_dir, "tokenizer directory", ARG_DEFAULT("the model directory")},
        {"--out", ARG_STR, &o.out_dir, "write DIR/graph.json and DIR/graph.png (the pruned graph)"},
        {"--db", ARG_STR, &o.db, "database for the graphs, graph_nodes and graph_edges tables (created if missing)"},
        {"--slug", ARG_STR, &o.slug, "the graph's name (JSON metadata.slug, graphs.slug)", ARG_DEFAULT("graph")},
        {"--node-threshold", ARG_FLOAT, &o.node_threshold, "keep nodes covering this fraction of the influence",
         ARG_RANGE(0, 1)},
        {"--edge-threshold", ARG_FLOAT, &o.edge_threshold, "keep edges covering this fraction of the edge scores",
         ARG_RANGE(0, 1)},
        {"--logit-prob", ARG_FLOAT, &o.p.logit_prob, "logit nodes: the most probable tokens up to this total",
         ARG_ABOVE(0), ARG_MAX(1)},
        {"--max-logits", ARG_INT, &o.p.max_logits, "at most this many logit nodes", ARG_MIN(1)},
        {"--max-feature-nodes", ARG_INT, &o.p.max_feature_nodes,
         "refuse prompts with more active features (n nodes take about 25 n^2 bytes)", ARG_MIN(1)},
        {"--top", ARG_INT, &top, "kept nodes printed, by influence", ARG_MIN(0)},
        {NULL},
    };
    int rc = args_parse("graph", argc, argv, spec, NULL, 0, NULL);
    if (rc) return rc;
    /* the database is written after graph.json: a new one's bad path fails before anything is */
    static const char *const db_flag[] = {"--db"};
    if (o.db && access(o.db, F_OK) != 0 && (rc = cli_check_outputs("graph", 1, &o.db, db_flag)))
        return rc;
    cli_catch_signals();
    o.p.stop = &cli_stop_flag;
    /* graph.json and graph.png: both or neither (a failed picture left the JSON) */
    file_group fg = {0};
    char jpath[4096] = "", ppath[4096] = "";
    const char *pw = NULL;
    if (o.out_dir) {
        if (path_join(jpath, sizeof jpath, o.out_dir, "graph.json") ||
            path_join(ppath, sizeof ppath, o.out_dir, "graph.png"))
            return cli_fail("graph");
        /* both files checked before the database is written: a graph.png that was a directory
           failed after the graph was committed to --db, exit 1 (an audit) */
        static const char *const out_flag[] = {"--out (graph.json)", "--out (graph.png)"};
        const char *outs[2] = {jpath, ppath};
        struct stat sb;
        if (file_check_creatable_dir(o.out_dir)) return cli_fail("graph");
        if (stat(o.out_dir, &sb) == 0 && (rc = cli_check_outputs("graph", 2, outs, out_flag))) return rc;
        o.json_out = file_group_add(&fg, jpath);
        pw = file_group_add(&fg, ppath);
    }
    ana_graph_run_result res;
    if (ana_graph_run(&o, &res)) {
        file_group_abort(&fg);
        return cli_fail("graph");
    }
    const ana_graph *g = &res.g;
    int nfk = 0, nek = 0;
    for (int i = 0; i < g->n; i++) {
        nfk += g->nodes[i].kept && g->nodes[i].kind == ANA_NODE_FEATURE;
        nek += g->nodes[i].kept && g->nodes[i].kind == ANA_NODE_ERROR;
    }
    printf("graph: %d tokens, %d blocks: %d nodes (%d features, %d errors, %d embeddings, %d logits), "
           "%lld edges in %.2f s\n", res.T, g->n_layers, g->n, g->n_features, g->n_layers * g->n_pos,
           g->n_pos, g->n_logits, (long long)g->n_edges, res.seconds);
    printf("completeness (edges + bias vs the real forward): max relative error %.3g, max absolute %.3g\n",
           g->max_rel_err, g->max_abs_err);
    printf("pruned (node %.2f, edge %.2f): %d nodes (%d features, %d errors), %lld edges\n",
           o.node_threshold, o.edge_threshold, g->n_kept, nfk, nek, (long long)g->n_edges_kept);
    printf("logits at position %d:", res.T - 1);
    for (int j = 0; j < g->n_logits; j++)
        printf(" \"%s\" %.3f", res.logit_text[j], g->nodes[g->n - g->n_logits + j].activation);
    printf("\n");
    ranked *rk = mem_alloc((size_t)g->n * sizeof *rk);
    int nr = 0;
    for (int i = 0; rk && i < g->n; i++)
        if (g->nodes[i].kept && (g->nodes[i].kind == ANA_NODE_FEATURE || g->nodes[i].kind == ANA_NODE_ERROR))
            rk[nr++] = (ranked){g->nodes[i].influence, i};
    if (rk) qsort(rk, (size_t)nr, sizeof *rk, cmp_ranked);
    if (top > 0 && nr > 0) printf("%-16s %5s  %-14s %10s %10s\n", "node", "pos", "token", "activation", "influence");
    for (int k = 0; k < nr && k < top; k++) {
        const ana_graph_node *q = &g->nodes[rk[k].i];
        char id[64];
        ana_graph_node_id(g, rk[k].i, id, sizeof id);
        if (q->kind == ANA_NODE_FEATURE)
            printf("%-16s %5d  %-14.14s %10.4f %10.4f\n", id, q->pos, res.tok_text[q->pos], q->activation, q->influence);
        else printf("%-16s %5d  %-14.14s %10s %10.4f\n", id, q->pos, res.tok_text[q->pos], "error", q->influence);
    }
    mem_free(rk);
    if (res.graph_id >= 0) fprintf(stderr, "wrote graph %lld into %s\n", (long long)res.graph_id, o.db);
    rc = 0;
    if (o.out_dir) {
        if (draw(pw, &o, &res) || file_group_commit(&fg)) {
            file_group_abort(&fg);
            rc = cli_fail("graph");
        } else fprintf(stderr, "wrote %s and %s\n", jpath, ppath);
    }
    ana_graph_run_free(&res);
    return rc;
}
