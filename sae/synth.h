/* synth.h - synthetic superposition data with known ground-truth features.
 *
 * Follows the toy setup of Sharkey, Braun & Millidge (2022, "Taking features out of superposition
 * with sparse autoencoders"): n_features random unit directions in R^d; feature i fires with
 * probability p_i proportional to decay^i, scaled so that on average `active` features fire per
 * sample; firing is correlated through a Gaussian copula: feature i fires when z_i < Phi^-1(p_i)
 * with z ~ N(0, C), C = A A^T + diag(1 - |a_i|^2) a random correlation matrix (A [n_features,
 * rank] with random signs, |a_i|^2 ~ U(0, corr)); a firing feature gets magnitude U(0,1)*U(0,1);
 * x = sum_i c_i d_i. Marginal firing probabilities are exactly p_i.
 * Hierarchy (parents > 0, as in the Matryoshka papers' toy setups): the first parents * (1 +
 * children) features form groups, a parent followed by its children; a child fires only in a
 * sample where its parent fires, then with probability child_p (its own draw replaces the
 * copula's; the parent keeps p_i); their magnitudes are 0.5 + 0.5 sqrt(u1 u2) (at least 0.5).
 * parents 0 leaves the stream as it was.
 * Deterministic for a seed. Ownership: the generator owns its arrays. Errors: err.h codes.
 * Thread safety: one generator per thread.
 */
#ifndef SAELITE_SYNTH_H
#define SAELITE_SYNTH_H
#include <stdint.h>

#include "sae/sae_train.h"

typedef struct {
    int d, n_features;
    double active; /* expected firing features per sample */
    double decay;  /* 0.99 */
    int rank;      /* rank of the correlation factor (default 8; 0 = independent) */
    double corr;   /* max |a_i|^2 (default 0.5) */
    uint64_t seed;        /* dictionary and sample stream */
    uint64_t sample_seed; /* 0: samples follow seed; else an independent stream, same features */
    int parents, children; /* hierarchy: groups of a parent and its children (0: none) */
    double child_p;        /* a child's firing probability given its parent (default 0.4) */
} synth_config;

void synth_defaults(synth_config *c);

/* The generator's configuration as a JSON object in a file (`saelite synth --spec` writes it,
 * `sae-eval --synth` reads it back to rebuild the same directions and samples): d, features,
 * active, decay, rank, corr, seed, parents, children, child_p (sample_seed is not kept: 0).
 * save: atomic (common/fileio.h); seeds above SAE_SYNTH_SPEC_MAX_SEED (2^53) are refused
 * (ERR_ARG), JSON numbers would not keep them. load: at most 64 KB; a missing key keeps
 * synth_defaults' value; an unknown key, a wrong type, a fraction where a whole number belongs,
 * or a configuration sae_synth_new refuses is ERR_FORMAT naming the file and the key. */
#define SAE_SYNTH_SPEC_MAX_SEED ((uint64_t)1 << 53)
int sae_synth_spec_save(const synth_config *c, const char *path);
int sae_synth_spec_load(synth_config *c, const char *path);

typedef struct sae_synth sae_synth;
int sae_synth_new(sae_synth **out, const synth_config *c);
void sae_synth_free(sae_synth *s);
const float *sae_synth_directions(const sae_synth *s); /* [n_features, d], unit rows */
const double *sae_synth_probs(const sae_synth *s);     /* [n_features] */
/* Next N samples into x [N,d]; active (may be NULL) receives the firing count per sample. */
int sae_synth_sample(sae_synth *s, float *x, int N, int *active);
/* The same with the true codes c [N, n_features] (magnitudes, 0 where a feature is off). */
int sae_synth_sample_codes(sae_synth *s, float *x, int N, float *codes);

/* Feature absorption against a hierarchical ground truth (exact): for each parent, its latent is
 * the SAE latent whose decoder row has the largest cosine with the parent's direction; on the
 * samples x [N,d] with codes [N,F] where the parent and at least one child fire, absorption is the
 * fraction on which that latent does not fire (the child's latents have taken the parent over);
 * parent_alone is the latent's recall where the parent fires without a child. Both are means over
 * the parents (those with samples). */
typedef struct {
    double absorption, parent_alone, parent_cos;
    double partial; /* on the same samples: the share of the parent's true part (magnitude m_p
                       along d_p) its latent does not carry, clip(1 - f (W_dec . d_p) / m_p, 0, 1)
                       (1 where it is silent), mean per parent, then over parents */
    double alone_carried; /* where the parent fires without a child: the share its latent
                             carries, clip(f (W_dec . d_p) / m_p, 0, 1), mean per parent, then
                             over parents (below 1, the latent carries less than the parent even
                             without children: not absorption, but partial counts it) */
    int n_parents;
} sae_absorption_result;
int sae_absorption(const sae_model *m, const synth_config *c, const float *dirs, const float *x,
                   const float *codes, int N, sae_absorption_result *out);
/* The same, with each sample's partial absorption per parent in rows [N, parents] (-1 where the
 * parent does not fire with a child): what the means are made of (bench_absorption_parents). */
int sae_absorption_rows(const sae_model *m, const synth_config *c, const float *dirs, const float *x,
                        const float *codes, int N, sae_absorption_result *out, float *rows);
/* A batch source generating samples forever (owns a generator with config c). */
int sae_source_synth(sae_source **out, const synth_config *c);
/* The true directions [n_features, d] of a source made by sae_source_synth (NULL for any other
 * source): what `sae-train --synth --truth-out` writes. */
const float *sae_source_synth_directions(const sae_source *s);

/* ---- `saelite synth` as a library call (synth_run.c) ------------------------------------- */
/* tokens samples of generator c into out ([tokens, d] float32 .npy) and its directions into truth
 * ([n_features, d]), with spec_out the generator's JSON (sae_synth_spec_save); with db also the
 * samples as rows of hook `hook` in that store (model 'import', seq_len tokens a sequence, through
 * ext_import_npy). An existing store that does not open, or whose hook has another width or
 * sequence length, is refused before anything is written. The activations are written first, so
 * a kill while they are written leaves an earlier pair as it was. Progress lines on stderr.
 * Errors: err.h codes; ERR_ABORTED ("interrupted; nothing written") when *stop is set while
 * sampling. */
typedef struct {
    synth_config c;
    int64_t tokens;
    const char *out, *truth;   /* required */
    const char *spec_out;      /* optional */
    const char *db;            /* optional */
    const char *hook;          /* with db: a non-empty name */
    int seq_len;               /* with db: tokens per stored sequence */
    volatile int *stop;        /* optional */
} sae_synth_run_opts;

typedef struct {
    double mean_active;        /* firing features per sample, measured */
    int64_t rows, seqs;        /* with db: tokens and sequences stored by this run */
    int64_t held;              /* with db: the hook's tokens afterwards (more: rows of other runs) */
} sae_synth_run_result;

int sae_synth_run(const sae_synth_run_opts *o, sae_synth_run_result *r);
#endif
