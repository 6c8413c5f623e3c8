/* toy.h - toy models of superposition and packing of nearly orthogonal directions.
 *
 * sup_ (superpose.c): the experiment of Elhage et al., "Toy Models of Superposition" (2022).
 *   n sparse features x (each 0 with probability S, else uniform in [0,1]), importance
 *   I_i = r^i, squeezed into m < n dimensions and read back:
 *       h = x W            x [B,n], W [n,m] (row i = W_i, feature i's direction)
 *       x' = ReLU(h W^T + b)
 *   trained with Adam (lr, betas 0.9/0.999) to minimise mean_batch sum_i I_i (x_i - x'_i)^2.
 *   A fixed seed gives identical results (single-threaded float arithmetic; OpenBLAS sgemm is
 *   deterministic for fixed sizes and thread count).
 * pack_ (pack.c): count unit vectors in dim dimensions optimised to minimise the largest
 *   |cos| between any two (projected gradient descent on a smoothed maximum), measured against
 *   random unit vectors and the Welch lower bound. Works in row blocks so memory is
 *   O(block * count), never the full count x count Gram matrix.
 * toy_nearest, toy_embed_ (nearest.c, embed_run.c): embedding arithmetic, the rows nearest by
 *   cosine to a signed sum of rows ("king - man + woman"); the caller supplies the matrix and
 *   the word -> ids lookup, so no model or tokenizer is loaded here.
 *
 * Ownership: the caller owns every output buffer; sup_model_free releases a trained model,
 * toy_embed_result_free an embed result.
 * Errors: ERR_ARG for bad sizes or settings, ERR_NOMEM, ERR_ABORTED when the progress
 * callback returns non-zero. Thread safety: functions share no state.
 */
#ifndef SAELITE_TOY_H
#define SAELITE_TOY_H
#include <stdint.h>

/* Progress callback: step done (1-based), of total, current loss. Non-zero aborts. */
typedef int (*toy_progress_fn)(int step, int total, double loss, void *user);

/* ---- toy models of superposition ----------------------------------------------------- */
/* Samples of the reported loss: its standard error is about 1% of it at S = 0.9 (an audit
 * measured 0.96% at n 5, m 2; 8192 gave 5%, and the same set also chose the best instance,
 * which read 9% low). */
#define SUP_EVAL_SAMPLES (1 << 18)
typedef struct {
    int n_features, n_hidden; /* n, m */
    double sparsity;          /* S in [0,1): probability a feature is zero */
    double importance_decay;  /* r in (0,1]: I_i = r^i */
    int steps, batch;         /* e.g. 10000, 1024 (the paper's values) */
    double lr;                /* e.g. 1e-3 */
    int instances;            /* independent runs (seeds seed, seed+1, ...); the one with the
                                 lowest evaluation loss is kept (small models have local minima) */
    uint64_t seed;
} sup_config;

typedef struct {
    int n, m;
    float *W;          /* [n,m] row i = W_i */
    float *b;          /* [n] */
    double final_loss; /* on a fresh evaluation set of SUP_EVAL_SAMPLES samples from the same
                          distribution, drawn apart from the 8192 that chose among instances
                          (both fewer, at least 1024, where 4 n m flops a sample pass 2e11) */
} sup_model;

/* Paper defaults for n, m: steps 10000, batch 1024, lr 1e-3, r = 0.7, S = 0, 1 instance,
 * seed 0. The progress callback sees steps counted over all instances. */
void sup_config_default(sup_config *c, int n, int m);
int sup_train(const sup_config *c, sup_model **out, toy_progress_fn cb, void *user);
void sup_model_free(sup_model *s);
/* Importance-weighted loss of s on `samples` fresh samples drawn with seed. */
int sup_eval(const sup_model *s, const sup_config *c, int samples, uint64_t seed, double *loss);

typedef struct {
    float norm;          /* ||W_i|| */
    float superposition; /* sum_{j != i} (W_i_hat . W_j)^2: 0 = dedicated direction */
    float dimensionality;/* D_i = ||W_i||^2 / sum_j (W_i_hat . W_j)^2, 0 when ||W_i|| ~ 0 */
} sup_feature;

/* Per-feature statistics (feat[n]). */
void sup_features(const sup_model *s, sup_feature *feat);
/* The n x n Gram matrix W W^T (the paper's W^T W in its [m,n] layout). */
void sup_gram(const sup_model *s, float *G /*[n,n]*/);
/* The paper's "dimensions per feature": m / ||W||_F^2. */
double sup_dims_per_feature(const sup_model *s);
/* Number of features with ||W_i|| > 0.5 (represented). */
int sup_represented(const sup_model *s);

/* ---- `saelite superpose` as a library call (sup_run.c) ---------------------------------- */
/* One model per sparsity (sup_train, the paper's settings from the options), their statistics,
 * and with out_dir their files: W_S<name>.npy [n,m], b_S<name>.npy [n], gram_S<name>.npy [n,n],
 * features.csv, summary.csv, superpose.png, dimensionality.png (the directory is made only after
 * the last model, so a run stopped before leaves none).
 * Continuing after a kill (out_dir and ckpt): after each model, the models finished so far are
 * saved to OUT.superpose-ckpt beside the directory (atomic, checksummed, keyed on every setting
 * and OpenBLAS's thread count); the same run again loads them instead of training them, and
 * ends with the same files, byte for byte. A file with another key or failing a check is a fresh
 * start with a notice; one that cannot be written stops the saves, not the run; the file goes
 * once the outputs are written. Errors: err.h codes; ERR_ABORTED when *stop is set (between
 * steps). Only the caller prints: row() gets each model as it is done. */
typedef struct {
    sup_config c;              /* every model's settings (sup_config_default(20, 5)); its sparsity
                                  is each model's from the list below */
    const double *sparsity;    /* [ns], distinct, in [0, 1) */
    const char *const *names;  /* [ns] their names in file names ("0.9") */
    int ns;
    const char *out_dir;       /* NULL: nothing written, no checkpoint */
    int ckpt;                  /* keep OUT.superpose-ckpt (default 1) */
    volatile int *stop;        /* optional: non-zero stops the run */
    /* optional: model k done (resumed: loaded from the checkpoint), feat[n] its statistics */
    void (*row)(void *user, int k, const sup_model *s, const sup_feature *feat, int resumed);
    void (*notice)(const char *msg, void *user); /* optional: progress_notice's sink */
    void *user;
} sup_run_opts;

typedef struct {
    sup_model **models;        /* [ns] */
    sup_feature *feat;         /* [ns * n] */
    int ns;
    int resumed;               /* models loaded from a killed run's checkpoint */
    double seconds;
} sup_run_result;

void sup_run_defaults(sup_run_opts *o);
int sup_run(const sup_run_opts *o, sup_run_result *res);
void sup_run_result_free(sup_run_result *r);

/* ---- packing nearly orthogonal directions --------------------------------------------- */
typedef struct {
    int dim, count;
    int steps;       /* gradient steps, e.g. 300 */
    double lr;       /* initial step length on the sphere in radians, 0.2 (decays
                        geometrically to 0.1% of it over the run) */
    double sharpness;/* the smoothed maximum uses exp(sharpness * |cos| / current max): 20 */
    uint64_t seed;   /* for the random start */
} pack_config;

void pack_config_default(pack_config *c, int dim, int count);
/* Fill V[count,dim] with independent uniformly random unit vectors. */
void pack_random(float *V, int count, int dim, uint64_t seed);
/* Optimise V in place (start: pack_random when `init` is 0, else the given V, normalised).
 * Keeps and returns the best iterate seen (by largest |cos|). */
int pack_optimize(const pack_config *c, float *V, int init, toy_progress_fn cb, void *user);

typedef struct {
    double max_abs_cos;   /* largest |cos| over pairs i < j */
    double mean_abs_cos;
    double rms_cos;
    double min_angle_deg, max_angle_deg; /* over pairs (angles in [0,180]) */
    int64_t pairs;
} pack_stats;

/* Statistics of all pairs; hist (may be NULL) gets counts of pair angles in nbins equal bins
 * over [0,180] degrees. ERR_ARG for a NaN cosine (non-finite vectors), or sizes whose passes
 * exceed PACK_MAX_WORK (count^2 dim). pack_measure_cb calls cb(rows done, count, max |cos| so
 * far) after each block of rows; a non-zero return stops it with ERR_ABORTED. */
#define PACK_MAX_WORK 2e12
int pack_measure(const float *V, int count, int dim, pack_stats *st, int64_t *hist, int nbins);
int pack_measure_cb(const float *V, int count, int dim, pack_stats *st, int64_t *hist, int nbins,
                    toy_progress_fn cb, void *user);
/* Welch bound: no count unit vectors in dim dimensions have max |cos| below this
 * sqrt((count-dim) / (dim (count-1))) (0 when count <= dim). */
double pack_welch_bound(int count, int dim);
/* Random-vector (Johnson-Lindenstrauss style) guarantee: with P(|cos| >= e) <= 2 exp(-dim e^2/2)
 * and a union bound over pairs, count random vectors have all |cos| < sqrt(4 ln(count) / dim)
 * with positive probability. */
double pack_jl_eps(int count, int dim);
/* Dimensions that guarantee reaches |cos| <= eps for count random vectors: 4 ln(count) / eps^2. */
double pack_jl_dim(int count, double eps);

/* ---- `saelite pack` as a library call (pack_run.c) ----------------------------------------- */
/* Random unit vectors (pack_random, c.seed) and the same set optimised (pack_optimize), both
 * measured over every pair (hist_*: PACK_NBINS bins of 0.1 degree over [0, 180]); with out_dir:
 * vectors.npy [count, dim] (the optimised set), angles.csv (the two histograms' non-empty bins)
 * and angles.png (range_lo..range_hi degrees marked), the directory made only after the work.
 * ERR_ABORTED when *stop is set (between steps or measured rows). */
#define PACK_NBINS 1800
typedef struct {
    pack_config c;             /* dim, count, steps, lr, sharpness, seed */
    double range_lo, range_hi; /* degrees marked on the picture */
    const char *out_dir;       /* NULL: nothing written */
    volatile int *stop;        /* optional */
} pack_run_opts;

typedef struct {
    float *V;                  /* [count, dim] the optimised set */
    pack_stats random, opt;
    int64_t *hist_random, *hist_opt; /* [PACK_NBINS] */
    double seconds;            /* the optimisation */
} pack_run_result;

int pack_run(const pack_run_opts *o, pack_run_result *r);
void pack_run_result_free(pack_run_result *r);

/* ---- embedding arithmetic (nearest.c) ----------------------------------------------------- */
/* The `top` rows of E[V,C] with the largest cosine to q[C], best first (ties: lower id),
 * skipping rows v with exclude[v] != 0 (exclude may be NULL). Writes ids[top], cos[top] and the
 * number found (<= top) to *nout. ERR_ARG when q is zero; ERR_NOMEM. */
int toy_nearest(const float *E, int V, int C, const float *q, const unsigned char *exclude,
                int top, int *ids, float *cos, int *nout);

/* ---- `saelite embed` as a library call (embed_run.c) ---------------------------------------- */
/* An expression is terms separated by '+' and '-' ("king - man + woman"); the first term may
 * carry a sign, a run of operators multiplies their signs ("a - - b" is a + b), blanks around a
 * term are dropped. toy_embed_parse fills t[TOY_EMBED_MAX_TERMS] (ids NULL) and *nt; ERR_ARG for
 * no terms ("", "-"), an operator at the end ("king -"), more than TOY_EMBED_MAX_TERMS terms or
 * one of TOY_EMBED_TERM_MAX bytes or more. */
#define TOY_EMBED_MAX_TERMS 64
#define TOY_EMBED_TERM_MAX 256
typedef struct {
    int sign;                      /* +1 or -1 */
    char text[TOY_EMBED_TERM_MAX]; /* the term, blanks trimmed */
    int *ids;                      /* the lookup's ids (toy_embed_run), their rows' mean counts */
    size_t nids;
} toy_embed_term;

int toy_embed_parse(const char *s, toy_embed_term *t, int *nt);

/* Word -> ids, e.g. a tokenizer's encode: *ids allocated with mem_alloc (NULL when *n is 0),
 * owned by the runner from then on, also when the call fails (err_set code). */
typedef int (*toy_embed_lookup_fn)(const char *text, int **ids, size_t *n, void *user);

/* toy_embed_parse, then each term looked up (" " + text unless no_space: GPT-2 words inside a
 * sentence start with a space) and the query q = sum_k sign_k mean(rows of term k's ids) built;
 * the `top` rows of E nearest to q by cosine (toy_nearest), the terms' ids excluded. Only rows
 * below min(rows, vocab) are searched (rows past the lookup's ids have no text). Errors: the
 * parser's ERR_ARG; the lookup's; ERR_ARG for a term with no ids and for a zero query (the
 * terms cancel: |q| <= 1e-6 sum_k sqrt(sum of term k's rows' squared norms)); ERR_SHAPE for an
 * id at or past that limit (the message names lookup_name and vocab: a tokenizer of another
 * model); ERR_NOMEM. Every term is looked up before the search: an error leaves no result. */
typedef struct {
    const char *expr;
    const float *E;          /* [rows, dim] e.g. a model's wte or lm_head */
    int rows, dim;
    int vocab;               /* ids the lookup knows (a tokenizer's size) */
    int top;                 /* >= 1 */
    int no_space;
    toy_embed_lookup_fn lookup;
    void *user;
    const char *lookup_name; /* for messages, e.g. the tokenizer directory */
} toy_embed_opts;

typedef struct {
    toy_embed_term *terms;   /* [nterms] with their ids */
    int nterms;
    int *ids;                /* [found] the nearest rows, best first (ties: lower id) */
    float *cos;              /* [found] their cosines to the query */
    int found;               /* <= top: fewer rows than top are left after the exclusions */
} toy_embed_result;

int toy_embed_run(const toy_embed_opts *o, toy_embed_result *r);
void toy_embed_result_free(toy_embed_result *r);

/* ---- pictures (render.c, through reports/report.h), written atomically as PNG ---------- */
/* One row per sparsity: W^T W heat map, bias, norm bars coloured by superposition, and for
 * m == 2 the feature directions in the plane. */
int sup_render(const char *path, sup_model *const *models, const double *sparsity, int ns,
               double importance_decay);
/* D_i of represented features and m / ||W||_F^2 against 1/(1-S). */
int sup_render_dimensionality(const char *path, sup_model *const *models, const double *sparsity,
                              int ns);
/* Overlaid histograms of pair angles (bins of hist_*[nbins] over [0,180] degrees), with the
 * range [range_lo, range_hi] and the Welch angles marked. */
int pack_render(const char *path, int count, int dim, const int64_t *hist_random,
                const int64_t *hist_opt, int nbins, double range_lo, double range_hi);

#endif
