/* cmd_graph.c - `saelite graph`: flags for rep_graph_run (reports/report_run.h: ana_graph_run
 * and the pruned graph's picture), a summary and the top nodes printed. */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/graph.h"
#include "cli/cli.h"
#include "common/fileio.h"
#include "reports/report_run.h"

CLI_COMMAND(graph, "Attribution graph of a prompt over per-block transcoders (circuit-tracer's method)",
            "saelite graph --model DIR --transcoder DIR[,DIR...] --text S [--out DIR] [--db DB] "
            "[--node-threshold 0.8] [--edge-threshold 0.98]")

/* The summary of the analysis and the top ranked nodes, on stdout. */
static void print_graph(const ana_graph_run_opts *o, const rep_graph_result *r, int top)
{
    const ana_graph_run_result *res = &r->run;
    const ana_graph *g = &res->g;
    printf("graph: %d tokens, %d blocks: %d nodes (%d features, %d errors, %d embeddings, %d logits), "
           "%lld edges in %.2f s\n", res->T, g->n_layers, g->n, g->n_features, g->n_layers * g->n_pos,
           g->n_pos, g->n_logits, (long long)g->n_edges, res->seconds);
    printf("completeness (edges + bias vs the real forward): max relative error %.3g, max absolute %.3g\n",
           g->max_rel_err, g->max_abs_err);
    printf("pruned (node %.2f, edge %.2f): %d nodes (%d features, %d errors), %lld edges\n",
           o->node_threshold, o->edge_threshold, g->n_kept, r->n_kept_features, r->n_kept_errors,
           (long long)g->n_edges_kept);
    printf("logits at position %d:", res->T - 1);
    for (int j = 0; j < g->n_logits; j++)
        printf(" \"%s\" %.3f", res->logit_text[j], g->nodes[g->n - g->n_logits + j].activation);
    printf("\n");
    if (top > 0 && r->n_ranked > 0) printf("%-16s %5s  %-14s %10s %10s\n", "node", "pos", "token", "activation", "influence");
    for (int k = 0; k < r->n_ranked && k < top; k++) {
        const ana_graph_node *q = &g->nodes[r->ranked[k]];
        char id[64];
        ana_graph_node_id(g, r->ranked[k], id, sizeof id);
        if (q->kind == ANA_NODE_FEATURE)
            printf("%-16s %5d  %-14.14s %10.4f %10.4f\n", id, q->pos, res->tok_text[q->pos], q->activation, q->influence);
        else printf("%-16s %5d  %-14.14s %10s %10.4f\n", id, q->pos, res->tok_text[q->pos], "error", q->influence);
    }
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
    char jpath[4096] = "", ppath[4096] = "";
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
        /* --db G/graph.json was replaced by the JSON, graphs and all (an audit) */
        const char *in[1] = {o.db};
        if (o.db && (rc = cli_check_not_inputs("graph", 2, outs, out_flag, 1, in, 0, NULL))) return rc;
    }
    rep_graph_result res;
    rc = rep_graph_run(&o, &res);
    /* printed also when the picture or the file group fails after the analysis (as before): the
       rows in --db are committed by then */
    if (res.analysed) print_graph(&o, &res, top);
    if (res.run.graph_id >= 0) fprintf(stderr, "wrote graph %lld into %s\n", (long long)res.run.graph_id, o.db);
    if (rc) rc = cli_fail("graph");
    else if (o.out_dir) fprintf(stderr, "wrote %s and %s\n", jpath, ppath);
    rep_graph_run_free(&res);
    return rc;
}
