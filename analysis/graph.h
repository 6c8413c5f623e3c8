/* graph.h - attribution graphs over per-layer transcoders (the method of Anthropic's
 * circuit-tracer, Ameisen et al. 2025), and `saelite graph` as a runner.
 *
 * Replacement model: block l's MLP output is replaced by its transcoder (input
 * blocks.l.ln2.hook_normalized, output blocks.l.hook_mlp_out) plus an error node per position,
 * e = mlp_out - transcoder(ln2), so one forward is exact. With the attention patterns and the
 * LayerNorm scales (1/sqrt(var + eps) of ln_1, ln_2, ln_f) frozen at their values in that
 * forward, everything between two node layers is affine, and each node's value is the sum of
 * its incoming direct effects plus a bias (the constant terms: LN biases, attention biases,
 * transcoder b_dec and b_enc, the positional embeddings). Nodes, in circuit-tracer's order (adjacency rows = targets,
 * columns = sources):
 *   [active transcoder features (layer, pos, latent), ascending] [error nodes, layer * T + pos]
 *   [token embeddings (wte[tok]; wpe[pos] is a constant of the prompt's length: bias), pos]
 *   [salient logits at the last position: the smallest set of most probable tokens whose
 *    probabilities reach logit_prob, at most max_logits].
 * Feature values are pre-activations (ln2 @ W_enc + b_enc); logit values are plain logits (not
 * circuit-tracer's demeaned ones). Edges come from one backward through the frozen linear model
 * per target (batched), for any depth: the MLPs pass no gradient (the transcoders and error nodes
 * stand in for them; a skip transcoder's W_skip path does pass, as circuit-tracer's skip does).
 * Pruning (ana_graph_prune) follows circuit-tracer's graph.py: influence = w A + w A^2 + ... on
 * the row-normalised |A|, w = the logit probabilities; nodes whose influence is above the value
 * where the sorted cumulative influence reaches node_threshold are kept (tokens and logits
 * always), then edges scored by normalised weight x (target influence + w) likewise with
 * edge_threshold, then features and errors without kept outgoing edges and features without kept
 * incoming edges are dropped until nothing changes.
 * Ownership: ana_graph arrays are mem_alloc'd; ana_graph_free releases them.
 * Errors: ERR_ARG (bad text, transcoders that do not cover every layer once, too many feature
 * nodes), ERR_SHAPE (widths), ERR_NOMEM, ERR_ABORTED (*stop set), the loaders' and store's codes.
 * Threads: uses the model (its forward buffers) and OpenBLAS; one graph per model at a time.
 */
#ifndef SAELITE_ANA_GRAPH_H
#define SAELITE_ANA_GRAPH_H
#include <stddef.h>
#include <stdint.h>

#include "model/gpt2.h"
#include "sae/sae.h"

enum { ANA_NODE_FEATURE, ANA_NODE_ERROR, ANA_NODE_EMBED, ANA_NODE_LOGIT };

typedef struct {
    int kind;          /* ANA_NODE_* */
    int layer;         /* features and errors: block; embeddings -1; logits n_layer */
    int pos;           /* token position (logits: the last) */
    int id;            /* features: latent; embeddings and logits: token id; errors: -1 */
    double activation; /* features: f; logits: probability; others 0 */
    double value;      /* features: pre-activation, logits: logit (real forward); else NaN */
    double bias;       /* features and logits: the constant part under the frozen model */
    double influence;  /* sum over paths to the logits (pruning's node influence) */
    double cum;        /* cumulative influence fraction at this node's rank (circuit-tracer's) */
    int kept;          /* in the pruned graph */
} ana_graph_node;

typedef struct {
    int n, n_features, n_layers, n_pos, n_logits; /* errors = n_layers * n_pos, embeddings n_pos */
    ana_graph_node *nodes;  /* [n] */
    double *adj;            /* [n, n]: adj[t * n + s] = direct effect of source s on target t */
    unsigned char *edge_kept; /* [n, n] after ana_graph_prune, else NULL */
    int64_t n_edges;        /* non-zero entries of adj */
    int64_t n_edges_kept;
    int n_kept;
    double max_rel_err;     /* max over features and logits of |edges + bias - value| /
                               max(|value|, |bias| + sum |edges|) */
    double max_abs_err;
} ana_graph;

typedef struct {
    double logit_prob;     /* 0.95 */
    int max_logits;        /* 10 */
    int max_feature_nodes; /* refuse prompts with more active features (about 25 n^2 bytes) */
    volatile int *stop;    /* polled per batch of targets; may be NULL */
} ana_graph_params;

/* Whether s can be block l's transcoder in a graph of m: it reads blocks.l.ln2.hook_normalized
 * and writes blocks.l.hook_mlp_out at the model's width, and is not gated (ERR_ARG or ERR_SHAPE
 * naming the block; s NULL: none given). ana_graph_build checks every block with it. */
int ana_graph_check_transcoder(const gpt2_model *m, const sae_model *s, int l);
/* tc[l] is block l's transcoder (l = 0 .. n_layer-1, all present). tokens [T] in the vocabulary. */
int ana_graph_build(gpt2_model *m, sae_model *const *tc, const int *tokens, int T,
                    const ana_graph_params *p, ana_graph *g);
/* Prune as circuit-tracer does (thresholds in [0,1]); sets kept, influence, cum, edge_kept. */
int ana_graph_prune(ana_graph *g, double node_threshold, double edge_threshold);
void ana_graph_free(ana_graph *g);

/* The pieces of the pruning, for tests: out[n] = w A + w A^2 + ... with A [n,n] (rows targets)
 * row-normalised |A| (ERR_ARG when it does not vanish within n + 1 terms: a cycle);
 * the score above which the sorted scores' cumulative sum first reaches threshold x total. */
int ana_graph_influence(const double *A, int n, const double *w, double *out);
double ana_graph_threshold(const double *scores, size_t n, double threshold);

/* ---- `saelite graph` as a runner ------------------------------------------------------------ */
/* Loads the model, tokenizer and transcoders (tc_dirs: comma-separated, one per block in any
 * order, each naming blocks.L.ln2.hook_normalized -> blocks.L.hook_mlp_out), encodes text (no
 * <|endoftext|> prepended), builds and prunes the graph, writes OUT/graph.json (docs/explore.md
 * has the format) when out_dir is given and the graphs/graph_nodes/graph_edges tables when db
 * is given (store/store_graph.h). */
typedef struct {
    const char *model_dir, *tok_dir, *tc_dirs, *text;
    const char *out_dir, *db, *slug; /* may be NULL (slug: "graph") */
    const char *json_out; /* with out_dir: write the JSON here instead of out_dir/graph.json (the
                             CLI's staging name; NULL: the default) */
    double node_threshold, edge_threshold;
    ana_graph_params p;
} ana_graph_run_opts;

void ana_graph_run_defaults(ana_graph_run_opts *o);

typedef struct {
    ana_graph g;
    int T;
    int *tokens;        /* [T] */
    char **tok_text;    /* [T] token bytes as strings */
    char **logit_text;  /* [g.n_logits] */
    int64_t graph_id;   /* graphs.id (-1 without db) */
    double seconds;
} ana_graph_run_result;

int ana_graph_run(const ana_graph_run_opts *o, ana_graph_run_result *res);
void ana_graph_run_free(ana_graph_run_result *res);
/* "L_F_P" style circuit-tracer node ids into out[cap] (see docs/explore.md). */
void ana_graph_node_id(const ana_graph *g, int i, char *out, size_t cap);

#endif
