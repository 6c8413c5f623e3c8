/* report_run.h - `saelite report` as a library call: read the analysis tables of one analysed
 * dictionary (store/store_report.h) and write per-feature dashboards, the SAE-wide pictures and
 * index.html into a directory (reports/dashboard.h). Also `saelite attention` (rep_attention_run,
 * reports/attention.c): one text through a model, one layer's attention pattern as a PNG.
 *
 * Dashboards render on `threads` threads, each with its own read-only store handle; every file
 * is written atomically, so an interrupted or failed run leaves only complete pictures. Each
 * dashboard carries a content key (PNG text "saelite-key": a hash of what it draws and its
 * metadata); a dashboard already in the directory under the key it would get is kept, not drawn
 * again, so a killed report continues and a rerun draws only what changed.
 * Errors: err.h codes with a message naming the database, feature or file.
 * Thread safety: rep_run itself may be called from one thread at a time per output directory;
 * rep_attention_run owns its model, tokenizer and canvas: calls writing other files may overlap.
 */
#ifndef SAELITE_REPORT_RUN_H
#define SAELITE_REPORT_RUN_H
#include <stdint.h>

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

#endif
