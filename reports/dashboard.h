/* dashboard.h - the pictures `saelite report` writes: per-feature dashboards, pictures of the
 * whole SAE, and the index.html that links them. Built on reports/report.h.
 *
 * Everything takes plain structs and arrays (no database types), so tests and other commands
 * can render from synthetic data; rep_run (reports/report_run.c) fills them from
 * store/store_report.h. Each picture function writes one PNG atomically (see rep_png_write) with
 * the caller's key/value metadata (feature id, SAE, database, saelite version), rep_write_index
 * the HTML page; all return OK or an err.h code.
 * Pointers are borrowed for the duration of the call only. Thread safety: independent calls
 * may run concurrently from different threads.
 */
#ifndef SAELITE_DASHBOARD_H
#define SAELITE_DASHBOARD_H
#include <stdint.h>

#include "reports/report.h"

/* One context: tokens[n] (raw token text, any bytes) and the feature's activation at each;
 * mark is the position of the token the context was chosen for (the max), -1 if none. */
typedef struct {
    const char *const *tokens;
    const float *acts;
    int n;
    int mark;
} rep_context;

/* Contexts sampled from an activation interval [lo, hi] (absolute activation values); name
 * (may be NULL) heads the section, e.g. "quantile band 3 of 5". */
typedef struct {
    const char *name;
    double lo, hi;
    const rep_context *ctx;
    int nctx;
} rep_interval;

typedef struct {
    int64_t feature;
    const char *sae;            /* shown in the header, e.g. "sae 3 (blocks.6.hook_resid_pre)" */
    const char *transcoder_out; /* a transcoder's output hook, NULL for an SAE: the contexts are
                                   then labelled its input side, the logit effects (W_dec through
                                   the unembedding) its output side */
    int sampled_only;           /* the analysis stored samples, not every activation (analyze
                                   without --all-acts): a context's other tokens are white
                                   whatever they hold, and the caption says so */
    double density;             /* fraction of tokens with activation > 0 */
    double max_act, mean_act;   /* mean over the active tokens; NaN: unknown */
    const char *best_tag;       /* best POS tag, NULL when the corpus has no tags */
    double best_tag_precision;
    int64_t nearest;            /* nearest other feature by decoder cosine, -1 if unknown */
    double nearest_cos;
    const rep_context *top;     /* top activating contexts, best first (about 20) */
    int ntop;
    const rep_interval *intervals; /* lower quantile intervals, highest first */
    int nintervals;
    const double *hist_edges;   /* activation histogram: edges[hist_bins+1], counts[hist_bins] */
    const double *hist_counts;
    int hist_bins;
    int hist_log_x;             /* edges are log-spaced */
    const char *const *logit_pos; /* top positive logit effects: token text and value */
    const double *logit_pos_val;
    int nlogit_pos;
    const char *const *logit_neg; /* most negative first */
    const double *logit_neg_val;
    int nlogit_neg;
    const char *const *tags;    /* POS tag distribution over the top activations (fractions) */
    const double *tag_frac;
    int ntags;
} rep_feature;

/* The per-feature dashboard: header, activation map (top contexts and interval samples),
 * activation histogram (log counts), positive/negative logit bars, POS distribution. */
int rep_feature_dashboard(const rep_feature *f, const char *path, const rep_kv *meta, int nmeta);
/* Absorbs into the 128-bit key h (common/hash.h) everything of f that rep_feature_dashboard
 * draws, so that equal keys (with equal metadata) mean the same picture: report keeps a
 * dashboard already drawn for the same content instead of drawing it again. */
void rep_feature_key(const rep_feature *f, uint64_t h[2]);

/* Feature density histogram over log10(density); features with density <= dead_below are
 * counted as dead (density 0 cannot sit on a log axis: the count is in the legend and a
 * marker shows the threshold), those >= dense_above as dense. */
int rep_plot_density(const char *path, const rep_kv *meta, int nmeta, const char *title,
                     const double *density, int n, double dead_below, double dense_above);

/* Decoder geometry: histogram of pairwise decoder angles (degrees != 0: edges[nbins+1] in
 * degrees over [0,180]; else cosines over [-1,1]; counts[nbins]) against random unit vectors in
 * dimension d_in (rand_counts, or NULL: the exact distribution for two random unit vectors,
 * density (1-c^2)^((d-3)/2) in cosine, sin^(d-2) in angle, scaled to the same total), and max
 * |cos| per feature (maxcos[n], NULL to omit) sorted. */
int rep_plot_decoder_angles(const char *path, const rep_kv *meta, int nmeta, const char *title,
                            const double *edges, const double *counts, const double *rand_counts,
                            int nbins, int degrees, int d_in, const double *maxcos, int n);

/* Training curves against tokens seen: MSE, explained variance, L0, dead fraction (any array
 * may be NULL and its panel says "no data"). */
int rep_plot_training(const char *path, const rep_kv *meta, int nmeta, const char *title,
                      const double *tokens, const double *mse, const double *expl_var,
                      const double *l0, const double *dead_frac, int n);

/* Synthetic data: cos[n_true * n_sae] (row-major; NULL to omit the heat map) between true and
 * recovered features (pass a subset: a heat map wider than ~200 cells is unreadable), and
 * best_cos[n_best] (best signed cos of every true feature, sae/metrics.h's MMCS) drawn sorted. */
int rep_plot_recovery(const char *path, const rep_kv *meta, int nmeta, const char *title,
                      const double *cos, int n_true, int n_sae, const double *best_cos,
                      int n_best);

/* Best-tag precision of SAE features vs raw neurons: overlaid histograms and sorted curves.
 * top_n: the examples each precision was taken over (bins centre on k/top_n); 0 if unknown. */
int rep_plot_pos_compare(const char *path, const rep_kv *meta, int nmeta, const char *title,
                         const double *sae_prec, int n_sae, const double *neuron_prec,
                         int n_neuron, int top_n);

/* Attribution heat map (`saelite attribute`): v[rows*cols] row-major, one row per node (feature
 * or error), one column per token; diverging colours symmetric about 0 (red: raises the metric,
 * blue: lowers it), row and column labels drawn when they fit. */
int rep_plot_attribution(const char *path, const rep_kv *meta, int nmeta, const char *title,
                         const double *v, int rows, int cols, const char *const *row_labels,
                         const char *const *col_labels);

/* Attribution graph (`saelite graph`): rows bottom to top (row 0 the token embeddings, then one
 * per block, the top row the logits), one column per token. Nodes of one cell sit side by side;
 * logits spread about their column. Edges are drawn source to target, width by |weight| relative
 * to the largest drawn edge, red positive, blue negative. Node label (may be NULL) is drawn small
 * beside it; col_labels[cols] under the bottom row, row_labels[rows] at the left. */
enum { REP_GNODE_FEATURE, REP_GNODE_ERROR, REP_GNODE_EMBED, REP_GNODE_LOGIT };
typedef struct { int kind, row, col; const char *label; } rep_graph_node;
typedef struct { int src, dst; double weight; } rep_graph_edge;
int rep_plot_graph(const char *path, const rep_kv *meta, int nmeta, const char *title,
                   const rep_graph_node *nodes, int n, const rep_graph_edge *edges, int ne,
                   int rows, int cols, const char *const *row_labels,
                   const char *const *col_labels);

/* index.html in dir linking every picture (file names relative to dir) with its caption,
 * written atomically; text is HTML-escaped. */
typedef struct { const char *file, *caption; } rep_index_entry;
int rep_write_index(const char *dir, const char *title, const char *intro,
                    const rep_index_entry *e, int n);

#endif
