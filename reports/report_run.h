/* report_run.h - `saelite report` as a library call: read the analysis tables of one analysed
 * dictionary (store/store_report.h) and write per-feature dashboards, the SAE-wide pictures and
 * index.html into a directory (reports/dashboard.h). Also `saelite attention` (rep_attention_run,
 * reports/attention.c): one text through a model, one layer's attention pattern as a PNG.
 * And `saelite graph` and `saelite attribute` (rep_graph_run, reports/graph.c; rep_attr_run,
 * reports/attribution.c): the analysis/ runners, their pictures drawn, their files one group.
 *
 * Dashboards render on `threads` threads, each with its own read-only store handle; every file
 * is written atomically, so an interrupted or failed run leaves only complete pictures. Each
 * dashboard carries a content key (PNG text "saelite-key": a hash of what it draws and its
 * metadata); a dashboard already in the directory under the key it would get is kept, not drawn
 * again, so a killed report continues and a rerun draws only what changed.
 * Errors: err.h codes with a message naming the database, feature or file.
 * Thread safety: rep_run itself may be called from one thread at a time per output directory;
 * rep_attention_run owns its model, tokenizer and canvas: calls writing other files may overlap;
 * so do rep_graph_run and rep_attr_run.
 */
#ifndef SAELITE_REPORT_RUN_H
#define SAELITE_REPORT_RUN_H
#include <stdint.h>

#include "analysis/attribute.h"
#include "analysis/graph.h"

enum { REP_BY_DENSITY, REP_BY_MAX, REP_BY_ALIGNMENT };

typedef struct {
    const char *db;            /* database path */
    const char *sae;           /* SAE registry id, name/directory, or "neurons[@HOOK]" */
    const char *hook, *split;  /* optional disambiguation (NULL: any, most recent) */
    const char *out_dir;       /* created when missing (one level) */
    const int *features;       /* explicit feature list, or NULL to use top/by */
    int nfeatures;
    int top, by;               /* --top N features ranked by REP_BY_* */
    int contexts;              /* top-activation rows per dashboard (default 20) */
    int per_interval;          /* rows per quantile interval (default 3) */
    int bands;                 /* quantile intervals shown, evenly spread from the highest (default 5) */
    int threads;               /* dashboard threads (default 2) */
    int global;                /* also write the SAE-wide pictures (default 1) */
    const char *ground_truth;  /* optional .npy [n_true, d_in] of true directions (synthetic data) */
    const char *training_log;  /* sae-train's training_log.csv; NULL: <SAE directory>/training_log.csv
                                  when the analysed SAE's name is a directory that has one */
    const char *version;       /* written into the PNG metadata */
    int redraw;                /* draw every dashboard, also those the directory has already
                                  (default 0: keep a dashboard whose saelite-key matches) */
    volatile int *stop;        /* optional: non-zero asks the run to stop early (Ctrl-C) */
} rep_run_opts;

void rep_run_defaults(rep_run_opts *o);

typedef struct {
    int dashboards, pictures;
    int kept;                  /* of the dashboards: already there with the same content key */
    int unranked;              /* --top: slots left empty, the features there having no value for
                                  --by (dead ones for max; all of them for alignment without POS tags) */
    double seconds, dashboard_seconds; /* total, and the dashboards alone */
    char dict_name[256];
} rep_run_result;

int rep_run(const rep_run_opts *o, rep_run_result *res);
/* The quantile bands a dashboard shows: of the bands 0..nbands-1 with has[b] set, at most `want`
 * (and 16) evenly spread, highest first, into pick[]; returns how many. */
int rep_pick_bands(const unsigned char *has, int nbands, int want, int pick[16]);

/* ---- `saelite attention` as a library call (attention.c) ----------------------------------- */
/* Loads the model and tokenizer, checks layer and head against the model (ERR_ARG "--layer L:
 * the model has layers 0..N", "--head H: ..."), tokenizes the text (ERR_ARG unless 1..n_ctx
 * tokens; ERR_SHAPE for a token outside the model's vocabulary: wrong tokenizer), runs one
 * forward pass with a hook on blocks.L.attn.hook_pattern and draws the chosen head, or every
 * head in a grid of up to 4 columns, as a T x T heat map (rows: query, columns: key; masked
 * future keys grey) labelled with the tokens' bytes. Writes out (PNG, text chunks Software,
 * layer, text) and npy ([H,T,T] float32, every head whatever `head` draws) as one file group:
 * both or neither. One forward pass of at most n_ctx tokens: no stop flag. */
typedef struct {
    const char *model;         /* model directory */
    const char *tokenizer;     /* tokenizer directory; NULL: the model directory */
    const char *text;          /* the text to run (also the PNG's "text" chunk) */
    int layer;                 /* block index */
    int head;                  /* only this head; -1: every head (0 is head 0, not every head) */
    const char *out;           /* the PNG */
    const char *npy;           /* optional: the pattern as .npy */
} rep_attention_opts;

typedef struct {
    int layer;                 /* the layer drawn */
    int heads;                 /* heads drawn: 1 or the model's n_head */
    int tokens;                /* T, the text's tokens */
} rep_attention_result;

int rep_attention_run(const rep_attention_opts *o, rep_attention_result *r);

/* ---- `saelite graph` and `saelite attribute` as library calls (graph.c, attribution.c) ------ */
/* rep_graph_run: ana_graph_run (analysis/graph.h: the graph built, pruned, written into db),
 * graph.json staged, then the pruned graph drawn (rep_plot_graph; PNG text chunks Software and
 * Title) into out_dir/graph.png; graph.json and graph.png are one file group, both or neither.
 * o->json_out is not read (the runner stages graph.json itself). ERR_ABORTED when *o->p.stop is
 * set. On success the result holds the graph and the ranking; on an error after the analysis
 * (the ranking, the picture, the rename) analysed is 1 and the result still holds the graph, and
 * run.graph_id names the rows already committed to db (-1: none, also after an error in
 * ana_graph_run). rep_graph_run_free in every case. */
typedef struct {
    ana_graph_run_result run;  /* the graph, tokens, logit texts, graph_id, seconds (the analysis) */
    int analysed;              /* 1 once ana_graph_run succeeded (also when the picture failed) */
    int n_kept_features, n_kept_errors; /* of the pruned graph */
    int *ranked;               /* [n_ranked] the kept features and error nodes (run.g.nodes
                                  indices) by influence, highest first; ties by index */
    int n_ranked;
} rep_graph_result;

int rep_graph_run(const ana_graph_run_opts *o, rep_graph_result *r);
void rep_graph_run_free(rep_graph_result *r);

/* rep_attr_run: ana_attr_run (analysis/attribute.h: the attributions, run.csv and run.npy
 * written), the nodes ranked, then the heat map of its rows (rep_plot_attribution; PNG text
 * chunks Software and Title) into png; the CSV, the .npy and the PNG are one file group, all or
 * none. No stop flag (ana_attr_run has none). On an error after the analysis analysed is 1 and
 * the result still holds it (nodes NULL when their ranking failed). rep_attr_run_free in every
 * case. */
typedef struct {
    ana_attr_run_opts run;     /* the analysis; run.csv, run.npy optional outputs */
    const char *png;           /* optional: the heat map */
} rep_attr_opts;

typedef struct {
    double attr;               /* the node's attribution */
    int pos;                   /* token position */
    int feature;               /* SAE feature; -1: the position's error node */
} rep_attr_node;

typedef struct {
    ana_attr_run_result run;   /* metric, attributions, tokens, target texts, heat-map rows */
    int analysed;              /* 1 once ana_attr_run succeeded (also when the picture failed) */
    rep_attr_node *nodes;      /* [n_nodes] every non-zero attribution and error node, by
                                  |attribution| descending; ties by position, then feature */
    int n_nodes;
} rep_attr_result;

int rep_attr_run(const rep_attr_opts *o, rep_attr_result *r);
void rep_attr_run_free(rep_attr_result *r);

#endif
