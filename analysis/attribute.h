/* attribute.h - attribution of a logit (or logit difference) to SAE features and error nodes.
 *
 * Nodes: every (position t, feature i) of the SAE at its hook, plus one error node per position
 * (e_t = x_t - xhat_t). The SAE is spliced in with its error term, x_t = b_dec + sum_i f_ti
 * W_dec[i] + e_t, which is the clean activation, so the model's output is exact.
 * Metric M = logit[pos][target] (- logit[pos][target_b] for a difference).
 * Gradient x activation (ig_steps = 0):  attr_ti = f_ti * W_dec[i] . g_t,  err_t = e_t . g_t,
 *   g = dM/dx at the clean activations (gpt2_hook_grad: the model's backward pass).
 * Integrated gradients (ig_steps = N): the path x(a) = b_dec + a (x - b_dec) scales every node
 *   of every position together from the baseline (all features and errors zero: the hook rows are
 *   b_dec) to the clean point; G_t = the midpoint rule (1/N) sum_k g_t((k + 1/2)/N), and
 *   attr_ti = f_ti W_dec[i] . G_t, err_t = e_t . G_t. Completeness: sum of all attributions and
 *   error nodes = M(clean) - M(baseline) up to the midpoint rule's O(1/N^2) error.
 * Ownership: ana_attr_result arrays are mem_alloc'd; ana_attr_result_free releases them.
 * Errors: ERR_ARG (bad position/target, unsupported hook for gradients), ERR_SHAPE, ERR_NOMEM.
 * Threads: uses the model (enables its training buffers: gpt2_train_enable).
 */
#ifndef SAELITE_ANA_ATTRIBUTE_H
#define SAELITE_ANA_ATTRIBUTE_H
#include <stddef.h>
#include <stdint.h>

#include "model/gpt2.h"
#include "sae/sae.h"

typedef struct {
    const int *tokens;
    int T;
    int pos;             /* position whose logits M reads (< 0: the last) */
    int target;          /* token of M */
    int target_b;        /* < 0: none; else M = logit[target] - logit[target_b] */
    int ig_steps;        /* 0: gradient x activation; N > 0: integrated gradients */
    const char *hook;    /* NULL: the SAE's hook_name */
} ana_attr_opts;

typedef struct {
    int T, d_sae, pos;
    float *f;           /* [T, d_sae] feature activations */
    float *attr;        /* [T, d_sae] attributions (0 where f = 0) */
    float *err;         /* [T] error-node attributions */
    double metric;      /* M at the clean point */
    double metric_base; /* M at the baseline (ig_steps > 0; NaN otherwise) */
    double total;       /* sum of attr and err */
} ana_attr_result;

int ana_attribute(gpt2_model *m, const sae_model *s, const ana_attr_opts *o, ana_attr_result *r);
void ana_attr_result_free(ana_attr_result *r);

/* ---- `saelite attribute` as a runner -------------------------------------------------------- */
/* Loads the model, tokenizer and SAE, encodes text (no <|endoftext|> prepended), resolves the
 * target tokens (TOKEN: text that encodes to exactly one token, or "#ID"; none: the model's top
 * prediction at pos), runs ana_attribute and writes csv (one row per active feature and position
 * plus one error row per position: position,token,token_text,feature,activation,attribution;
 * feature -1 = error node) and npy ([T, d_sae + 1] float32, the last column the error nodes),
 * each when its path is given. Heat-map rows for the caller's picture: the top_rows features by
 * sum over positions of |attribution|, then the error nodes. */
typedef struct {
    const char *model_dir, *sae_dir, *tok_dir; /* tok_dir NULL: the model directory */
    const char *text, *target, *target_diff;   /* target_diff "A,B": M = logit[A] - logit[B] */
    const char *hook;                          /* NULL: the SAE's hook_name; another hook
                                                  than the one it names: ERR_ARG */
    int pos, ig_steps, top_rows;
    const char *csv, *npy;                     /* outputs, may be NULL */
} ana_attr_run_opts;

typedef struct {
    ana_attr_result r;
    int T, target, target_b;
    int *tokens;             /* [T] */
    char **tok_text;         /* [T] token bytes as strings */
    char target_text[64], target_b_text[64];
    char hook[128];
    int n_rows;              /* heat-map rows: top features then "error" */
    int *row_feature;        /* [n_rows] feature id, -1 for the error row */
    double *rows;            /* [n_rows, T] attributions */
} ana_attr_run_result;

int ana_attr_run(const ana_attr_run_opts *o, ana_attr_run_result *res);
void ana_attr_run_free(ana_attr_run_result *res);

#endif
