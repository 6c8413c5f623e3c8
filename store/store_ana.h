/* store_ana.h - the analysis tables (store/schema_analysis.sql, schema part "analysis"):
 * writing the results of `saelite analyze` and reading the per-token POS tags it needs.
 * Version 2 (views sae_metrics_view and feature_pos; ana_dicts_key includes name) and version 3
 * (ana_effects, ana_effect_logits) upgrade an older database in place when analyze opens it.
 *
 * Usage: store_ana_init once per open store (creates/checks the tables); inside one
 * store_begin/store_commit transaction: store_ana_writer_open -> store_ana_dict_begin (removes an
 * earlier analysis with the same key) -> the put functions -> store_ana_writer_close; roll back on
 * any error so nothing is half-written.
 * Ownership: the writer owns its prepared statements; strings are copied by SQLite.
 * Errors: err.h codes (ERR_SQL, ERR_IO, ERR_NOMEM) naming the database.
 * Thread safety: like the store, one thread per handle.
 */
#ifndef SAELITE_STORE_ANA_H
#define SAELITE_STORE_ANA_H
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

#define STORE_ANA_VERSION 4

/* Creates (or checks the version of) the analysis tables. */
int store_ana_init(store *s);

/* Bytes one `analyze --all-acts` row takes in the database, its three indexes included (the
 * table alone is about 35): dbstat over 8.2M rows of the demo SAE on 250k tokens gave 703 MB,
 * 86 a row (an audit: the notice said 40, half of what the run wrote). */
#define STORE_ANA_ALL_ROW_BYTES 86

typedef struct {
    const char *kind;      /* "sae" or "neurons" */
    int64_t sae_id;        /* registry id, or < 0 for none (stored as NULL) */
    const char *name, *hook_name, *split;
    int d_in, d_sae, top_n;
    int64_t n_seqs, n_tokens;
    const char *weights;   /* the SAE's weights checksum (sae_weights_checksum); NULL stores NULL */
} store_ana_dict;

typedef struct store_ana_writer store_ana_writer;
int store_ana_writer_open(store_ana_writer **out, store *s);
void store_ana_writer_close(store_ana_writer *w);
/* Deletes any analysis with the same (kind, sae_id, name, hook_name, split) and inserts d. */
/* *replaced_seqs (may be NULL): the n_seqs of the analysis it replaced, -1 when none. */
int store_ana_dict_begin(store_ana_writer *w, const store_ana_dict *d, int64_t *dict_id,
                         int64_t *replaced_seqs);
int store_ana_dict_seconds(store_ana_writer *w, int64_t dict_id, double seconds);
int store_ana_metric(store_ana_writer *w, int64_t dict_id, const char *name, double value);
/* mean_act/max_act/nearest_cos/best_tag_precision: NAN stores NULL; nearest < 0 and best_tag
 * NULL store NULL. */
int store_ana_feature(store_ana_writer *w, int64_t dict_id, int feature, int64_t n_active,
                      double density, double mean_act, double max_act, int nearest,
                      double nearest_cos, const char *best_tag, double best_tag_precision);
int store_ana_hist(store_ana_writer *w, int64_t dict_id, int feature, int bin, double lo,
                   double hi, int64_t count);
/* kind "top", "quantile" or "all"; interval/rank < 0 store NULL. */
int store_ana_act(store_ana_writer *w, int64_t dict_id, int feature, const char *kind,
                  int interval, int rank, int64_t seq_id, int pos, int token, double value);
int store_ana_logit(store_ana_writer *w, int64_t dict_id, int feature, int sign, int rank,
                    int token, double value);
/* ana_effects row; rank_corr NAN stores NULL. */
int store_ana_effect(store_ana_writer *w, int64_t dict_id, int feature, int64_t n_contexts,
                     double mean_act, double mean_kl, double mean_dloss, double rank_corr);
int store_ana_effect_logit(store_ana_writer *w, int64_t dict_id, int feature, int sign, int rank,
                           int token, double value);
int store_ana_geometry(store_ana_writer *w, int64_t dict_id, const char *source, int bin,
                       double lo_deg, double hi_deg, int64_t count);
int store_ana_decoder(store_ana_writer *w, int64_t dict_id, int feature, const float *vec, int d);
int store_ana_pos(store_ana_writer *w, int64_t dict_id, int feature, const char *tag, int64_t n);
int store_ana_vocab(store_ana_writer *w, int token, const char *bytes, size_t len);

/* POS tags of positions 0..T-1 of a sequence (tokens.pos_tag) into tags[T][16] ("" when
 * untagged or when the sequence has no token rows). *any = 1 when some position is tagged.
 * cont (NULL or [T]): 1 where the token continues the word of the token before it (the same
 * tag, its bytes right after that token's, its text not starting with a blank): a word's BPE
 * pieces after its first. */
int store_ana_seq_tags(store *s, int64_t seq_id, int T, char (*tags)[16], int *any,
                       unsigned char *cont);

#endif
