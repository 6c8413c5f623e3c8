/* eval.h - SAEBench-style evaluations of an SAE without an LLM judge (`saelite eval`):
 * sparse probing, feature absorption, SCR and TPP on the stored activations of a Brown database,
 * plus the pieces they are built from (probes, splits, the absorption metric) for tests and the
 * synthetic check, and `saelite sae-eval`'s runner (eval_sae_run: ground-truth MMCS, the
 * synthetic check and reconstruction metrics of one SAE, from files; at the end).
 * Definitions, sources and every departure from SAEBench: docs/eval.md.
 *
 * eval_run: resolves the SAE (a directory, or a sae_registry id of the database), splits the
 * documents into train and test per genre (seeded; a probe never sees its test documents),
 * samples sequences and token positions, reads their activations once, encodes them with the SAE
 * and (unless no_random) with a random-weight SAE of the same shape, runs the suites (SCR adds
 * its own sample per prose kind x tense cell) and only then writes config, per-task
 * rows and summary into the schema part "eval" (store/store_eval.h) in one short transaction keyed
 * by sae_registry.id (the SAE is registered when the database does not know it; a registered one
 * must match its row, sae_check_registered). A rerun of the same (SAE, suite) replaces its rows.
 * Probes: L2-regularised logistic regression (LIBLINEAR's L2R_LR, C = 1 as SAEBench's sklearn
 * default; the bias is a feature of value 1, so it is regularised too) and, for the absorption
 * suite's latent ranking, L1-regularised logistic regression (L1R_LR). LIBLINEAR's errors and
 * degenerate inputs are converted here (ERR_ARG / ERR_NOMEM); its printing is silenced.
 * Ownership: opts strings are borrowed; results are plain data; eval_probe owns its w (eval_probe_free).
 * Errors: err.h codes (ERR_ARG, ERR_NOTFOUND, ERR_SHAPE, ERR_NOMEM, ERR_SQL, ERR_IO; ERR_ABORTED
 * when *stop became non-zero: nothing is written).
 * Threads: one run at a time (LIBLINEAR's print hook is process-wide); the SAE encoder uses BLAS.
 * Progress: common/progress.h lines on stderr.
 */
#ifndef SAELITE_EVAL_H
#define SAELITE_EVAL_H
#include <stddef.h>
#include <stdint.h>

#include "common/rng.h"
#include "sae/metrics.h"
#include "sae/sae.h"
#include "sae/synth.h"

typedef struct eval_memo eval_memo; /* fitted probes by problem content (below) */
enum { EVAL_NK = 5 };        /* k in {1, 2, 5, 10, 20} */
extern const int eval_k_values[EVAL_NK];
enum { EVAL_NN = 7 };        /* SCR/TPP ablation sizes N in {2, 5, 10, 20, 50, 100, 500} */
extern const int eval_n_values[EVAL_NN];
enum { EVAL_SUITE_SPARSE_PROBING = 1, EVAL_SUITE_ABSORPTION = 2, EVAL_SUITE_SCR = 4, EVAL_SUITE_TPP = 8 };
/* The suites' names, one owner: eval_suite_names[i] is the suite of bit 1 << i. */
enum { EVAL_NSUITES = 4 };
extern const char *const eval_suite_names[EVAL_NSUITES];

typedef struct {
    const char *db;          /* store with the activations; written: eval_* tables (and the registry) */
    const char *sae;         /* SAE directory, or a sae_registry id of db */
    const char *suites;      /* comma-separated: sparse_probing, absorption, scr, tpp, or "all"
                                (which skips the suites the database has no data for) */
    uint64_t seed;           /* document split, sampling, random SAE, the se's resamples */
    double test_frac;        /* fraction of each genre's documents held out for testing */
    int seqs_per_genre;      /* sequences sampled per genre (the positions come from these) */
    int train_per_class;     /* POS tokens per class in the train pool (and genre sequences cap) */
    int test_per_class;      /* ... in the test pool */
    double C;                /* L2 probe regularisation (LIBLINEAR C), in [EVAL_C_MIN, EVAL_C_MAX] */
    int no_random;           /* skip the random-weight SAE baseline (it doubles the encoding) */
    int skip_missing;        /* skip (as "all" does) the named suites the database has no data for */
    volatile int *stop;      /* polled per sequence and before every probe fit; may be NULL */
    eval_memo *memo;         /* reuse of the probes on raw activations across runs (may be NULL;
                                the results are the same bits either way) */
    double ckpt_secs;        /* the read pass saves its rows this often (seconds; <= 0: never)
                                beside the database, and a rerun with the same inputs continues
                                from them (eval.c: the file, its key) */
    /* called with a one-line notice (continuing from a checkpoint, or why not); may be NULL */
    void (*notice)(const char *msg, void *user);
    void *user;
} eval_opts;

void eval_defaults(eval_opts *o);
/* The range of C eval_run accepts: sklearn/SAEBench users sweep 1e-4..1e4 around the default 1;
 * at C 1e300 LIBLINEAR's trust-region solver never converges (and cannot be interrupted). */
#define EVAL_C_MIN 1e-6
#define EVAL_C_MAX 1e6
/* The largest |value| eval_run accepts in the hook activations and the SAE's codes: beyond it
 * the probes' Newton steps overflow (LIBLINEAR looped for ever at 1e38) and no probe result
 * would mean anything; activations of a real model are many orders of magnitude smaller. */
#define EVAL_MAX_ABS 1e15
/* The smallest sets a task is scored on (docs/eval.md, "Minimum sizes"): at least
 * EVAL_MIN_TRAIN_POS train positives (and as many negatives: the largest sparse probe reads 20
 * inputs, and fewer rows than inputs let it memorise) and EVAL_MIN_TEST_POS test positives (and
 * negatives: with n_test >= 10 one example moves an accuracy by at most 0.1). A task below them
 * is skipped with a note (eval_result.notes), not scored; --train-per-class and --test-per-class
 * below them are refused (ERR_ARG), since then no task could be scored. */
enum { EVAL_MIN_TRAIN_POS = 20, EVAL_MIN_TEST_POS = 5 };

typedef struct {
    int64_t sae_id;                 /* sae_registry.id the rows are keyed by */
    int registered;                 /* 1 when this run added the SAE to the registry */
    char hook[128];
    int suites;                     /* EVAL_SUITE_* bits that ran */
    int skipped;                    /* with "all": suites the database has no data for (no POS
                                       tags: absorption; no tense or prose-kind cells: scr) */
    size_t n_seqs;                  /* sequences read */
    int resumed_seqs;               /* of them, read by an earlier run (its checkpoint) */
    int resumed_probes;             /* probes an earlier run fitted, taken from its checkpoint */
    int n_train_docs, n_test_docs;
    /* sparse probing: mean test accuracy over tasks (POS and genre together) per k */
    int n_tasks, n_pos_tasks, n_genre_tasks;
    double sae_acc[EVAL_NK], rnd_acc[EVAL_NK], neuron_acc[EVAL_NK]; /* rnd_acc NaN with no_random */
    double full_acc;                /* probe on the full hook activations */
    double sae_full_acc;            /* probe on every SAE latent */
    /* their standard errors (eval_boot over the test documents; NaN where not known) */
    double sae_acc_se[EVAL_NK], rnd_acc_se[EVAL_NK], neuron_acc_se[EVAL_NK], full_acc_se, sae_full_acc_se;
    /* absorption */
    int abs_parents, abs_included;  /* POS classes scored (all in the means) / with GT-probe F1
                                       above the minimum (SAEBench's count, not a gate) */
    double abs_mean_frac, abs_full_rate, abs_mean_split;
    double abs_mean_frac_nogate;    /* absorption_mean_frac_nogate: the fraction without the 40% gate */
    double abs_mean_frac_se, abs_full_rate_se, abs_mean_frac_nogate_se; /* their standard errors */
    /* SCR: genre group (Brown's informative / imaginative prose) x tense (past / present) */
    int scr_dir;                    /* the reported direction: 1 = tense ablated, 2 = genre group */
    double scr_phi;                 /* correlation of the two labels over the sampled sequences */
    int scr_cells[4];               /* stored sequences: informative-present, -past, imaginative-present, -past */
    double scr[EVAL_NN];            /* scr_metric_threshold_N */
    /* TPP: the total metric averaged per dataset (POS classes, genres), then over the datasets
       (SAEBench); tpp_pos / tpp_genre the per-dataset means (NaN without that dataset) */
    int tpp_classes;
    double tpp[EVAL_NN], tpp_pos[EVAL_NN], tpp_genre[EVAL_NN];
    double seconds, t_read, t_probe, t_absorb, t_ablate;
    /* what the numbers above leave out, one line each ('\n'-terminated; "..." when it overflowed):
       tasks skipped as too small, SCR directions left NULL. For the caller to print. */
    char notes[4096];
} eval_result;

int eval_run(const eval_opts *o, eval_result *res);
/* The --suite list: *bits the EVAL_SUITE_* named, *all = 1 when "all" named them. ERR_ARG
 * naming an unknown suite, or none given. */
int eval_parse_suites(const char *s, int *bits, int *all);

/* ---- building blocks (also used by the tests) ---------------------------------------------- */

/* Sparse rows (CSR): row i holds idx/val[off[i] .. off[i+1]). */
typedef struct {
    int n, width;
    size_t *off;              /* [n+1] */
    int *idx;
    float *val;
    size_t cap;
} eval_csr;
int eval_csr_push(eval_csr *c, const float *row, int width); /* append a dense row (zeros dropped) */
void eval_csr_free(eval_csr *c);

/* Fitted probes kept by the content of their LIBLINEAR problem (rows, labels, solver, C; a
 * 128-bit hash): a fit whose problem was fitted before gets the same weights back without
 * training. For the fits that do not depend on the SAE (the probes on raw activations): a sweep
 * evaluates many SAEs on the same rows. Owned by the caller; one run at a time. */
int eval_memo_new(eval_memo **out);
void eval_memo_free(eval_memo *m);
void eval_memo_counts(const eval_memo *m, int64_t *hits, int64_t *fits); /* lookups that hit / missed */
/* The suites' part of eval's checkpoint. After eval_memo_journal the memo keeps every fit, on
 * sparse rows too, and every secs writes all it holds to path (atomically, checksummed, keyed by
 * key: what the caller's inputs were); a failed write stops the writes (eval_memo_journal_error
 * then has its message, else NULL). eval_memo_resume adds such a file's fits to the memo and
 * returns how many; a file that is not there gives 0, one with another key or failing a check
 * (sizes, checksum, weights not finite) gives 0 and *why (a phrase: "is damaged (...)"). Entries
 * answer only the problems whose content they were fitted on (the memo's own key). secs 0: every
 * fit kept, nothing written. */
int eval_memo_journal(eval_memo *m, const char *path, const uint64_t key[2], double secs);
int eval_memo_resume(eval_memo *m, const char *path, const uint64_t key[2], const char **why);
const char *eval_memo_journal_error(const eval_memo *m);
/* Whether the journal's file was written since eval_memo_journal (a stopped eval's message). */
int eval_memo_journal_saved(const eval_memo *m);
/* No more saves; fits on sparse rows no longer kept, and those of the journal's run (on sparse
 * rows, or loaded from its file) dropped: a sweep's memo keeps the raw rows' probes only. */
void eval_memo_journal_end(eval_memo *m);

/* A sample set: dense rows (width d) and/or sparse rows; a probe reads one of them. */
typedef struct {
    const float *dense;       /* [n, d] or NULL */
    int d;
    const eval_csr *sparse;   /* or NULL */
    eval_memo *memo;          /* probes on the dense rows go through it, on sparse rows too when
                                 it journals (eval_memo_journal) (may be NULL) */
    double eps;               /* LIBLINEAR's stopping tolerance for fits on these rows (0: its
                                 0.001; absorption's probes: 1e-6, see eval_absorption_class) */
    volatile int *stop;       /* eval_logreg refuses to start a fit once *stop (ERR_ABORTED; may be
                                 NULL): LIBLINEAR cannot be interrupted, so Ctrl-C and SIGTERM
                                 take effect between fits */
} eval_feats;

typedef struct {
    int d;        /* input width */
    double *w;    /* [d] weight per input feature (positive class = label 1) */
    double b;     /* bias */
} eval_probe;
void eval_probe_free(eval_probe *p);
double eval_probe_score(const eval_probe *p, const eval_feats *f, int row); /* w.x + b */

/* Logistic regression on rows[0..n) of f with labels y[n] (0/1), on the columns cols[0..ncols)
 * (cols NULL: all columns; the probe is then as wide as f, else ncols wide, in cols order).
 * l1 = 0: L2R_LR, l1 = 1: L1R_LR. C > 0. Both classes must be present (ERR_ARG otherwise).
 * Dense f with a memo: a problem fitted before is answered from it, a new one is kept in it.
 * ERR_ABORTED (nothing fitted) when f->stop is set. */
int eval_logreg(const eval_feats *f, const int *rows, const unsigned char *y, int n,
                const int *cols, int ncols, double C, int l1, eval_probe *out);
/* Scores of rows under a probe fitted with the same cols (score[n]). */
void eval_scores(const eval_probe *p, const eval_feats *f, const int *rows, int n,
                 const int *cols, int ncols, double *score);
/* Accuracy and F1 (label 1) of scores > 0 against y. */
double eval_accuracy(const double *score, const unsigned char *y, int n);
double eval_f1(const double *score, const unsigned char *y, int n);

/* The probing baseline's random-weight SAE of m's shape and architecture (*out, sae_free):
 * decoder rows random unit vectors from seed, the encoder their transpose, b_enc 0, thresholds 0,
 * m's trained b_dec; a centred m's (cfg.center_input) reads C x as m does (sae_center_encoder). */
int eval_random_sae(const sae_model *m, uint64_t seed, sae_model **out);

/* The k columns with the largest |mean over positives - mean over negatives| (SAEBench
 * get_top_k_mean_diff_mask), descending; ties to the lower index. k <= width. */
int eval_top_mean_diff(const eval_feats *f, const int *rows, const unsigned char *y, int n,
                       int k, int *cols);

/* Train/test split by document, stratified by group: the documents of each group (ordered by id)
 * are shuffled with the seed and the first max(1, round(test_frac * n_g)) become test (none when
 * the group has one document). doc[n] ids (distinct), group[n]; is_test[n] out. */
int eval_split_docs(const int64_t *doc, const int *group, size_t n, double test_frac,
                    uint64_t seed, unsigned char *is_test);

/* One-vs-rest balanced sample (SAEBench prepare_probe_data): every row of class c (cls[i] == c;
 * at most max_pos, a seeded choice) as positives, ceil(n_pos / (n_classes - 1)) from each other
 * class as negatives, the positives cut to the negatives' count if fewer; shuffled. rows[cap]
 * and y[cap] out (cap >= 2 * min(max_pos, count of c)); *n out. */
int eval_balance(const int *cls, int n_all, int c, int n_classes, int max_pos, uint64_t seed,
                 int *rows, unsigned char *y, int *n);

/* 1 when a balanced task's sets are large enough to score (EVAL_MIN_TRAIN_POS positives and
 * negatives in train, EVAL_MIN_TEST_POS in test), else 0. */
int eval_sets_big_enough(int train_pos, int train_neg, int test_pos, int test_neg);

/* SCR's normalised score of one direction, (ablated - orig) / (clean - orig), accuracies on a
 * test set of n_test rows; NAN (stored NULL, left out of the headline) unless the clean probe
 * beats the biased one by more than one test example, clean - orig > 1 / n_test: otherwise the
 * ratio changes sign or divides by noise (docs/eval.md, a departure from SAEBench). */
double eval_scr_score(double ablated, double orig, double clean, int n_test);

/* The mean of per-dataset means (SAEBench's average over datasets of the per-dataset averages;
 * TPP's headline): sum[i] / n[i] averaged over the ndatasets with n[i] > 0; NAN when none. */
double eval_mean_of_means(const double *sum, const int *n, int ndatasets);

/* ---- standard errors (eval_boot.c; docs/eval.md, "Standard errors") ------------------------
 * The bootstrap of a mean over tasks of per-task means over test rows, by test *document* (the
 * split's unit: a document's tokens and sequences are not independent): a replicate draws, within
 * each stratum of n documents, n - 1 of them with replacement, each draw weighing n / (n - 1)
 * (Rao and Wu's rescaled bootstrap: the unbiased stratified variance, where n draws of weight 1
 * give (n - 1) / n of it), and reweights every task's rows by their document's weight; nothing is
 * fitted again. Tasks are resampled jointly (one draw per
 * replicate for all), so correlated tasks are not counted as independent. Strata of one document
 * are drawn together (one such is drawn with the first stratum of several): alone, a document
 * would be drawn every time and its variance never seen. The se of a series is the standard
 * deviation of its replicates. The same inputs and seed give the same bits. */
enum { EVAL_BOOT_N = 200 }; /* resamples: the se's own Monte Carlo error ~ 1/sqrt(2*200) = 5% */
typedef struct eval_boot eval_boot;
/* n_docs documents, stratum[d] >= 0 its stratum (NULL: one stratum), -1: never drawn (a train
 * document). ERR_ARG (n_docs < 1), ERR_NOMEM. */
int eval_boot_new(eval_boot **out, int n_docs, const int *stratum);
void eval_boot_free(eval_boot *b);
/* One task of a series (0..): n test rows, row i of document doc[i] with value v[i] (1/0 for a
 * correct / wrong prediction, or a per-row metric); NaN values are not rows of the task. The
 * task's value is its rows' mean. ERR_ARG when a row's document is out of range or not drawn. */
int eval_boot_add(eval_boot *b, int series, const int *doc, const double *v, int n);
/* se[s] for series 0..n_series-1: the standard deviation over n_boot replicates (>= 2) of the mean
 * over the series' tasks (a task with no drawn document sits a replicate out); NaN for a series
 * without tasks or whose rows are all in one document, and for all when fewer than two documents
 * can be drawn. */
int eval_boot_se(const eval_boot *b, int n_series, uint64_t seed, int n_boot, double *se);

/* Fisher-Yates shuffle of a[n] with r (the order every seeded sample here uses). */
void eval_shuffle(int *a, int n, rng_state *r);

/* Coarse POS class of a Brown tag (noun, verb, ...), or -1 (punctuation, foreign, unknown). */
enum { EVAL_NPOS = 10 };
extern const char *const eval_pos_names[EVAL_NPOS];
int eval_pos_class(const char *brown_tag);
/* Tense of a finite verb's Brown tag: 1 past (vbd bed bedz hvd dod), 0 present (vbz bez bem ber
 * hvz doz), -1 anything else (base forms, participles, modals, other words); in a contraction
 * (pps+bez, ppss+hvd) the first part that is a finite verb. */
int eval_tense(const char *brown_tag);
/* 1 when a Brown genre is imaginative prose (sections K-R: fiction, mystery, science_fiction,
 * adventure, romance, humor), 0 for informative prose (A-J), -1 when not a Brown genre. */
int eval_imaginative(const char *genre);

/* ---- absorption (SAEBench's metric; docs/eval.md) ------------------------------------------ */
typedef struct {
    double min_gt_f1;         /* 0.6: sets eval_abs_class.included (SAEBench's min_GT_probe_f1) */
    int max_k;                /* 10 */
    double f1_jump;           /* 0.03 */
    double l1_decay;          /* 0.01: the L1 probe's C = 1 / (l1_decay * n_train) */
    double C;                 /* 1: the GT probe and the k-sparse L2 probes */
    double prop;              /* 0.4: SAEBench's probe_projection_proportion_threshold, the share
                                 of P the absorbers must carry (both metrics; mean_frac_nogate
                                 is always computed with 0 beside it, docs/eval.md) */
} eval_abs_params;
void eval_abs_defaults(eval_abs_params *p);

typedef struct {
    double gt_f1, split_f1;   /* test F1 of the ground-truth probe and of the k-sparse probe */
    int n_split;              /* split features (the accepted k) */
    int split[32];            /* their latent ids */
    int n_tp, n_fn;           /* probe true positives (counted rows); false negatives among them */
    double mean_frac, full_rate; /* sums over the probe true positives / n_tp */
    double mean_frac_nogate;  /* the fraction with prop 0 (no 40% gate): ours, beside SAEBench's;
                                 on the synthetic check it reports the exact partial absorption */
    int included;             /* gt_f1 > min_gt_f1: counted, not a gate (every parent is in the
                                 means, as in SAEBench; docs/eval.md) */
} eval_abs_class;

/* One parent: the GT probe on raw rows (dense, width d), the k-sparse probes on codes (sparse,
 * width d_sae), the metric on the test rows with y = 1 and GT score > 0; count[i] (may be NULL)
 * restricts which test positives are counted. W_dec [d_sae, d] (rows of any norm). rows (may
 * be NULL; each array may be NULL) receives each test row's absorption fraction, fraction without
 * the gate and full absorption (1/0) [n_te] (NAN where not counted: the class's means are these
 * arrays' means over the counted rows). */
typedef struct {
    double *frac, *frac_nogate, *full;
} eval_abs_rows;
int eval_absorption_class(const eval_feats *train, const int *tr_rows, const unsigned char *tr_y,
                          int n_tr, const eval_feats *test, const int *te_rows,
                          const unsigned char *te_y, const unsigned char *count, int n_te,
                          const float *W_dec, int d_sae, const eval_abs_params *p,
                          eval_abs_class *out, const eval_abs_rows *rows);

/* The synthetic check: samples of a hierarchical generator (c->parents > 0), parent p's label =
 * "p fires"; train on n_train samples, test on n_test fresh ones (sample_seed); counted test
 * positives are those where a child fires too (the set sae_absorption measures on). Means over
 * the parents in *mean; per (may be NULL) receives each parent's result [c->parents] (zeroed
 * where a parent had too few samples); exact (sae_absorption on the same test samples) may be
 * NULL; sample_frac (may be NULL) receives the fraction of each test sample per parent
 * [n_test, c->parents] (NAN where not counted; the test samples are the generator's with
 * sample_seed = (c->sample_seed or c->seed) ^ 0x7e57). */
int eval_absorption_synth(const sae_model *m, const synth_config *c, int n_train, int n_test,
                          const eval_abs_params *p, eval_abs_class *mean, eval_abs_class *per,
                          sae_absorption_result *exact, float *sample_frac);


/* ---- `saelite sae-eval` as a library call (eval_sae.c) ------------------------------------- */
/* Loads the SAE (sae_load), then runs the parts asked for, in this order, stopping at the first
 * failure: truth, the decoder rows' MMCS against true directions [features, d_out] (finite, no
 * row of zeros: sae_truth_check); synth, the generator of a spec (sae_synth_spec_load) rebuilt:
 * MMCS against its directions and, when it has a hierarchy, eval_absorption_synth on
 * synth_samples training and as many fresh test samples (eval_abs_defaults); acts, the
 * reconstruction metrics (sae_metrics_eval) on its first max_tokens rows (0: all), for a
 * transcoder each joined with its target row of acts_out (sae_pairs_join). The result keeps
 * what finished (done) even when a later part fails, so a caller can show it before the error.
 * Activations that do not fit the SAE are ERR_ARG with misuse set: a transcoder's acts without
 * acts_out, acts_out for an SAE that is no transcoder (nothing else runs). */
typedef struct {
    const char *sae;         /* SAE directory (SAELens layout) */
    const char *truth;       /* true directions [features, d_out] .npy, or NULL */
    const char *synth;       /* generator spec (`saelite synth --spec`), or NULL */
    int synth_samples;       /* synth: training (and test) samples of the absorption probes */
    double thr;              /* the cosine above which a true direction counts as recovered */
    const char *acts;        /* activations [tokens, d_in] .npy, or NULL */
    const char *acts_out;    /* transcoders: the targets [tokens, d_out] of the acts rows */
    int64_t max_tokens;      /* rows of acts used (0: all) */
    volatile int *stop;      /* polled between the parts (ERR_ABORTED); may be NULL */
} eval_sae_opts;

void eval_sae_defaults(eval_sae_opts *o); /* synth_samples 16384, thr 0.9, the rest 0 / NULL */

enum { EVAL_SAE_LOADED = 1, EVAL_SAE_TRUTH = 2, EVAL_SAE_GENERATOR = 4, EVAL_SAE_ABSORPTION = 8,
       EVAL_SAE_RECON = 16 };
enum { EVAL_SAE_NEEDS_TARGETS = 1, EVAL_SAE_TARGETS_UNUSED = 2 };

typedef struct {
    int done;                  /* EVAL_SAE_* bits of the parts that finished */
    int misuse;                /* EVAL_SAE_NEEDS_TARGETS / EVAL_SAE_TARGETS_UNUSED (ERR_ARG), or 0 */
    sae_config sae;            /* LOADED: the SAE's configuration, as it runs (a BatchTopK SAE
                                  saved by sae-train runs as JumpReLU) */
    sae_config trained;        /* LOADED: the same as sae-train trained it (sae_load_config) */
    int64_t truth_features;    /* TRUTH: rows of the truth file */
    double truth_mmcs, truth_recovered; /* ... its MMCS and the fraction recovered (sae_mmcs) */
    synth_config gen;          /* GENERATOR: the spec's configuration (a hierarchy when
                                  gen.parents and gen.children are both >= 1) */
    double gen_mmcs, gen_recovered;
    int abs_samples;           /* ABSORPTION: training samples, and as many test ones */
    eval_abs_params abs_params;       /* the metric's parameters (eval_abs_defaults) */
    eval_abs_class abs_saebench;      /* SAEBench's metric, means over the parents */
    sae_absorption_result abs_exact;  /* the generator's exact absorption on the test samples */
    sae_metrics_summary recon; /* RECON: reconstruction on the rows used (recon.n) */
} eval_sae_result;

int eval_sae_run(const eval_sae_opts *o, eval_sae_result *r);

#endif
