/* sweep.h - `saelite sweep`: every dictionary architecture trained on the same activations at a
 * few sparsity settings, each evaluated, one row per run in the store, the frontiers as PNGs.
 *
 * The grid: families relu, topk, batchtopk, jumprelu, gated, matryoshka on `hook`; with tc_hook
 * and tc_hook_out also transcoder and skip_transcoder (TopK activation) mapping tc_hook to
 * tc_hook_out, and a TopK SAE on tc_hook_out (family "topk@<tc_hook_out>", the SAE baseline of
 * the transcoder frontier). k-families (topk, batchtopk, matryoshka, the transcoders, the target
 * SAE) take the values ks[]; relu, gated and jumprelu their coefficient lists (jumprelu: the L0
 * coefficient). Every run has the same d_sae, token budget, batch and seed.
 * Per run (in that order): sae_train_run into OUT/<name>/ (registered in the store), then
 * sweep_eval_run: held-out EV / MSE / L0 / dead fraction from sae-train's evaluation and the
 * downstream CE / KL scores from ana_run (the SAE spliced in at its hook, a transcoder in place
 * of the MLP) on the held-out sequences (the same val_frac split as training), then the
 * sweep_runs row (store/store_sweep.h). After the grid, the frontiers are drawn from the rows:
 * OUT/frontier_ev.png (L0 vs explained variance), OUT/frontier_ce.png (L0 vs CE loss score),
 * OUT/frontier_transcoders.png (CE loss score and EV of the target hook against L0, for the
 * transcoder families), and OUT/frontier_<metric>.png for every metric of the view
 * eval_summary(sae_id, suite, metric, value) when the database has it (not created here).
 * Resume: a run with its row is skipped (its settings must equal the row's config, the eval
 * suites' included, else ERR_ARG naming the first setting that differs);
 * a run with OUT/<name>/checkpoint.bin continues from it (sae_train_run resumes bit for bit; a
 * finished checkpoint is only evaluated again), others start fresh. So a killed sweep rerun with
 * the same options continues with the SAE in progress.
 * Ownership: opts strings are borrowed; sweep_result_free releases the result's rows.
 * Stopping: after max_runs trained runs, or max_steps steps into the first run trained, the call
 * returns OK with finished 0 (the run in progress keeps its checkpoint); PNGs only when finished.
 * Errors: err.h codes naming the run; ERR_ABORTED when *stop became non-zero (the runner's
 * checkpoint is written first).
 * Threads: one sweep per output directory (OUT/.sweep.lock, flock: a second one gets ERR_BUSY);
 * the runners use sae/'s threads and BLAS.
 * Progress: a common/progress.h line over the runs (rate, ETA) on stderr, besides the runners'
 * own; on_run (may be NULL) is called after every run, also for runs done before.
 */
#ifndef SAELITE_SWEEP_H
#define SAELITE_SWEEP_H
#include <stddef.h>
#include <stdint.h>

#include "store/store_sweep.h"

#define SWEEP_MAX_SETTINGS 8
#define SWEEP_MAX_PNGS 16

typedef struct {
    const char *db;             /* store with the activations (written: registry, ana_*, sweep_runs) */
    const char *hook;           /* the SAEs' hook */
    const char *tc_hook, *tc_hook_out; /* transcoders: input and target hook (NULL: none) */
    const char *model_dir;      /* downstream pass; NULL: the model the store recorded */
    const char *tok_dir;        /* NULL: the model's directory */
    const char *out;            /* sweep directory (created): OUT/<run>/, the PNGs */
    const char *families;       /* comma-separated subset of the families; NULL = all */
    int ks[SWEEP_MAX_SETTINGS], n_ks;
    double relu_l1[SWEEP_MAX_SETTINGS], gated_l1[SWEEP_MAX_SETTINGS], jumprelu_l1[SWEEP_MAX_SETTINGS];
    int n_relu_l1, n_gated_l1, n_jumprelu_l1;
    double expansion;           /* d_sae = lround(expansion * d_in of the SAEs' hook) ... */
    int d_sae;                  /* ... unless > 0: every run's latents */
    int64_t tokens;             /* training tokens per run */
    int batch;
    uint64_t seed;
    int checkpoint_every;       /* steps (0: at the end only) */
    double val_frac;            /* held-out sequences, for training's eval and the downstream pass */
    int64_t eval_tokens;        /* held-out tokens of sae-train's evaluation */
    int ce_seqs, max_seqs;      /* downstream pass: sequences for CE/KL; analysed sequences */
    int max_runs;               /* stop after training this many runs (0: no limit) */
    int64_t max_steps;          /* stop the first run trained after this many steps (0: off) */
    int no_png;                 /* do not draw the frontiers */
    const char *eval_suites;    /* `saelite eval` suites run on every SAE of the grid (not the
                                   transcoders) after its core metrics, skipping those the database
                                   has no data for; NULL or "": none */
    int eval_seqs_per_genre;    /* the suites' sample (eval_opts.seqs_per_genre) */
    volatile int *stop;         /* polled by the runners; may be NULL */
    void (*on_run)(const store_sweep_row *row, int index, int total, int done_before, void *user);
    /* a one-line notice from a run's analysis or eval (continuing from a checkpoint, or why not);
       may be NULL */
    void (*notice)(const char *msg, void *user);
    void *user;
} sweep_opts;

/* The defaults `saelite sweep` documents (k 8,16,32,64; relu l1 1.25,2.5,5,10; gated l1
 * 2.5,5,10,20; jumprelu 0.5,1,2,4; d_sae 1024 for every run; 1M tokens; batch 2048; seed 42; eval suites sparse_probing and
 * absorption on 50 sequences per genre, without the random-SAE baseline). */
void sweep_defaults(sweep_opts *o);

typedef struct {
    int n_runs;                 /* in the grid */
    int done_before;            /* skipped: their rows were there */
    int reevaluated;            /* of those, evaluated again: another `eval` had replaced their
                                   suites' rows with another sample's */
    int lost;                   /* recorded done, but the directory no longer held that SAE
                                   (removed or changed since): trained again */
    int trained;                /* trained (or resumed) and evaluated by this call */
    int finished;               /* every run of the grid has its row (then the PNGs are drawn) */
    char stopped_in[64];        /* max_steps: the run left at a checkpoint ("" when none) */
    int64_t stopped_step, stopped_total;
    double seconds;
    store_sweep_row *rows;      /* the runs of this grid in the store [n_rows] */
    size_t n_rows;
    int n_other;                /* rows of the directory from other grids (not in rows) */
    int have_eval;              /* the database has eval_summary */
    int n_png;
    char png[SWEEP_MAX_PNGS][640];
    int unlocked;               /* OUT's filesystem has no flock: ran without .sweep.lock */
} sweep_result;

int sweep_run(const sweep_opts *o, sweep_result *res);
/* The options alone, before any file is opened (sweep_run checks them first): ERR_ARG naming the
 * setting (a k or l1 given twice, an unknown family, ...), so a caller can report a usage error. */
int sweep_check_opts(const sweep_opts *o);
void sweep_result_free(sweep_result *res);

/* Frontier arithmetic over the rows of one family, on its Pareto front (sweep_pareto: runs
 * another run of the family beats at no more L0 are left out), points sorted by L0, linear in
 * log L0: the metric at L0 l0 (NaN outside the front's L0 range), and the smallest L0 at which
 * the metric reaches target (NaN when it never does; when the front's sparsest run is already
 * past it, *below (may be NULL) is set and that run's L0 returned). metric: a name
 * sweep_row_metric knows. */
double sweep_metric_at_l0(const store_sweep_row *rows, size_t n, const char *family,
                          const char *metric, double l0);
double sweep_l0_at_metric(const store_sweep_row *rows, size_t n, const char *family,
                          const char *metric, double target, int *below);
/* 1 when less of the metric is better: mse, dead_frac, l0 and the absorption rates. */
int sweep_metric_lower_better(const char *metric);
/* Pareto front of n points (L0, y): on[i] = 1 unless another point has L0 <= and y at least
 * as good (lower_better: as low), one of the two strictly (of equal points the first is kept);
 * points with NaN or L0 <= 0 are off it. Returns how many are on it. */
int sweep_pareto(const double *l0, const double *y, int n, int lower_better, unsigned char *on);
/* A core metric of a row by name: "ev", "mse", "l0", "dead_frac", "ce_score", "kl_score"
 * (NaN for other names). */
double sweep_row_metric(const store_sweep_row *r, const char *metric);

#endif
