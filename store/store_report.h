/* store_report.h - the read-only queries `saelite report` needs from the analysis tables
 * (store/schema_analysis.sql, written by `saelite analyze`) and the core store (tokens).
 *
 * Purpose: keep SQL out of reports/ and cli/; every function here only reads.
 * Ownership: arrays returned through pointer-to-pointer arguments are mem_alloc'd and owned by
 * the caller (free them with mem_free, or the matching *_free function).
 * Errors: err.h codes; ERR_NOTFOUND (message lists what exists) for an unknown dictionary or
 * feature, ERR_FORMAT when the database has no analysis tables ("run saelite analyze first").
 * Thread safety: one store handle per thread (store.h); these functions keep no state.
 */
#ifndef SAELITE_STORE_REPORT_H
#define SAELITE_STORE_REPORT_H
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* One analysed dictionary (a row of ana_dicts). */
typedef struct {
    int64_t id, sae_id;     /* sae_id < 0 for the neuron basis */
    char kind[16];          /* "sae" or "neurons" */
    char name[256], hook_name[128], split[16];
    int d_in, d_sae, top_n;
    int64_t n_seqs, n_tokens;
    /* a transcoder (from its sae_registry config): "transcoder" or "skip_transcoder" and the hook
       it writes; both "" for an SAE, the neuron basis, or an SAE the registry does not know */
    char transcoder[24], hook_out[128];
} store_rep_dict;

/* The SAE in the directory report's --sae names, as far as report reads it: the checksum of its
 * sae_weights.safetensors (sae_weights_checksum; "" when unknown) and its cfg.json's hook ("":
 * none) and width (0: unknown). */
typedef struct {
    char weights[17];
    char hook[128];
    int d_sae;
} store_rep_sae;

/* Finds the analysed dictionary for `sae`: an SAE registry id ("3", else the analysis id
 * ana_dicts.id that analyze prints as "dict id N"), a name or directory as stored in
 * ana_dicts.name, or "neurons" / "neurons@HOOK" for the neuron basis. hook and split may be
 * NULL (any); among several matches the most recent analysis wins. w (NULL: not a directory
 * holding an SAE): with it the analysis recorded with those weights at that hook and width is
 * found under any name, and a name's analysis of other weights is refused (ERR_NOTFOUND, saying
 * so); a registry id is checked the same way against the registry row's weights. */
int store_rep_dict_find(store *s, const char *sae, const store_rep_sae *w, const char *hook,
                        const char *split, store_rep_dict *out);
/* The neuron-basis dictionary analysed at the same hook and split as d, or ERR_NOTFOUND. */
int store_rep_dict_neurons_for(store *s, const store_rep_dict *d, store_rep_dict *out);

/* Per-feature statistics (a row of ana_features); NaN for NULL values, nearest -1 if NULL,
 * best_tag "" when untagged. */
typedef struct {
    int64_t feature, n_active, nearest;
    double density, mean_act, max_act, nearest_cos, best_tag_precision;
    char best_tag[32];
} store_rep_feature;
/* All features of a dictionary ordered by feature index. */
int store_rep_features(store *s, int64_t dict_id, store_rep_feature **out, size_t *n);

/* Per-feature reader: prepared statements for one dictionary, reused across features (a
 * dashboard needs about ten queries; preparing them once keeps that at well under a ms). */
typedef struct store_rep store_rep;
int store_rep_open(store_rep **out, store *s, int64_t dict_id);
void store_rep_close(store_rep *r);

int store_rep_feature_get(store_rep *r, int64_t feature, store_rep_feature *out);
/* Stored activations of one feature (ana_acts) of kinds 'top' and 'quantile', ordered by kind,
 * interval, rank. */
enum { STORE_REP_TOP = 0, STORE_REP_QUANTILE = 1, STORE_REP_ALL = 2 };
typedef struct {
    int kind, interval, rank; /* interval/rank -1 when NULL */
    int64_t seq_id;
    int pos, token;
    float value;
} store_rep_act;
int store_rep_acts(store_rep *r, int64_t feature, store_rep_act **out, size_t *n);
/* 1 when ana_acts holds the feature's complete non-zeros (kind 'all', analyze --all-acts).
 * Walks only that feature's rows (index ana_acts_feature). */
int store_rep_has_all(store_rep *r, int64_t feature, int *has);
/* Every stored non-zero ('all') activation of a feature in sequence positions [lo, hi]:
 * pos[*n], val[*n] into caller arrays of capacity cap. */
int store_rep_seq_acts(store_rep *r, int64_t feature, int64_t seq_id, int lo, int hi, int *pos,
                       float *val, int cap, int *n);
/* Activation histogram bins of a feature: lo[n], hi[n], count[n] in bin order (only the
 * stored, non-empty bins). */
int store_rep_hist(store_rep *r, int64_t feature, double **lo, double **hi, double **count,
                   size_t *n);
/* Logit effects of a feature for sign +1 or -1, strongest first. */
int store_rep_logits(store_rep *r, int64_t feature, int sign, int **tokens, double **values,
                     size_t *n);
/* POS tag counts over a feature's top activations, largest first; tags[n][16]. */
int store_rep_pos(store_rep *r, int64_t feature, char (**tags)[16], double **count, size_t *n);
/* Token ids of sequence positions [pos - before, pos + after] (clipped): ids[*n], and the index
 * of pos in them (*center); -1 for sequences imported without token ids. ERR_NOTFOUND for an
 * unknown sequence. */
int store_rep_seq_window(store_rep *r, int64_t seq_id, int pos, int before, int after,
                         int **ids, int *n, int *center);

/* ---- whole-dictionary queries ----------------------------------------------------------- */
/* Vocabulary text (ana_vocab's raw token bytes as display text, utf8_for_display: a control or
 * lone byte, NUL included, as "\xHH"): text[n], NULL for ids without a row; *n == 0 when the
 * table is empty. Free with store_rep_vocab_free. */
int store_rep_vocab(store *s, char ***text, int *n);
void store_rep_vocab_free(char **text, int n);
/* Token text of positions [lo, hi] of a sequence from the core tokens table (UTF-8), text[hi-lo+1]
 * (entries may be NULL). For databases without ana_vocab. */
int store_rep_token_text(store *s, int64_t seq_id, int lo, int hi, char ***text);
/* Pairwise-angle histogram of a dictionary, source "decoder" or "random" (degrees). */
int store_rep_geometry(store *s, int64_t dict_id, const char *source, double **lo_deg,
                       double **hi_deg, double **count, size_t *n);
/* Decoder rows [d_sae * d_in] float32 (ERR_NOTFOUND when not stored). */
int store_rep_decoder(store *s, int64_t dict_id, int d_sae, int d_in, float **out);
/* A scalar metric of a dictionary; ERR_NOTFOUND when absent. */
int store_rep_metric(store *s, int64_t dict_id, const char *name, double *value);

#endif
