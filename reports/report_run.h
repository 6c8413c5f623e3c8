/* report_run.h - `saelite report` as a library call: read the analysis tables of one analysed
 * dictionary (store/store_report.h) and write per-feature dashboards, the SAE-wide pictures and
 * index.html into a directory (reports/dashboard.h).
 *
 * Dashboards render on `threads` threads, each with its own read-only store handle; every file
 * is written atomically, so an interrupted or failed run leaves only complete pictures. Each
 * dashboard carries a content key (PNG text "saelite-key": a hash of what it draws and its
 * metadata); a dashboard already in the directory under the key it would get is kept, not drawn
 * again, so a killed report continues and a rerun draws only what changed.
 * Errors: err.h codes with a message naming the database, feature or file.
 * Thread safety: rep_run itself may be called from one thread at a time per output directory.
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

#endif
