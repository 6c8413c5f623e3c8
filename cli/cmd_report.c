/* cmd_report.c - `saelite report`: PNG dashboards and pictures from the analysis tables. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "reports/report.h"
#include "reports/report_run.h"

CLI_COMMAND(report, "Render feature dashboards and SAE pictures (PNG + index.html)",
            "saelite report --db FILE --sae ID|DIR (--features 0,5,7-9 | --top N [--by density|max|alignment]) --out DIR")

int cmd_report(int argc, char **argv)
{
    rep_run_opts o;
    rep_run_defaults(&o);
    const char *features = NULL, *by = "density";
    int no_global = 0;
    arg_spec spec[] = {
        {"--db", ARG_STR, &o.db, "database written by extract + analyze", ARG_REQUIRED},
        {"--sae", ARG_STR, &o.sae, "SAE registry id, SAE name/directory, or 'neurons[@HOOK]'",
         ARG_REQUIRED},
        {"--features", ARG_STR, &features, "features to draw, e.g. 0,5,7-9"},
        {"--top", ARG_INT, &o.top, "draw the top N features ranked by --by", ARG_RANGE(1, 1000000),
         ARG_DEFAULT("20")},
        {"--by", ARG_STR, &by, "ranking for --top (alignment: POS precision)",
         ARG_CHOICES("density|max|alignment")},
        {"--out", ARG_STR, &o.out_dir, "output directory (created; index.html lists everything)",
         ARG_REQUIRED},
        {"--hook", ARG_STR, &o.hook, "hook, when the SAE was analysed at several"},
        {"--split", ARG_STR, &o.split, "analysed split (val|all, val+bos|all+bos for --keep-bos) when several exist",
         ARG_DEFAULT("the latest")},
        {"--contexts", ARG_INT, &o.contexts, "top-activation rows per dashboard", ARG_RANGE(1, 200)},
        {"--per-interval", ARG_INT, &o.per_interval, "rows per quantile band", ARG_RANGE(0, 50)},
        {"--bands", ARG_INT, &o.bands, "quantile bands shown, evenly spread from the highest",
         ARG_RANGE(0, 16)},
        {"--threads", ARG_INT, &o.threads, "rendering threads", ARG_RANGE(1, 64)},
        {"--ground-truth", ARG_STR, &o.ground_truth, "true directions .npy [n, d_in] (synthetic data): recovery picture"},
        {"--training-log", ARG_STR, &o.training_log, "sae-train's training_log.csv",
         ARG_DEFAULT("the SAE directory's")},
        {"--no-global", ARG_FLAG, &no_global, "only the feature dashboards, not the SAE-wide pictures"},
        {"--redraw", ARG_FLAG, &o.redraw,
         "draw every dashboard again (default: keep those --out has for the same content)"},
        {NULL, 0, NULL, NULL}};
    int rc = args_parse(argv[0], argc, argv, spec, NULL, 0, NULL);
    if (rc) return rc;
    if (features && o.top) return cli_usage_error(argv[0], "give either --features or --top, not both");
    o.by = !strcmp(by, "max") ? REP_BY_MAX : !strcmp(by, "alignment") ? REP_BY_ALIGNMENT
                                                                      : REP_BY_DENSITY;
    int *list = NULL, nlist = 0;
    if (features) {
        if (args_int_list(features, &list, &nlist))
            return cli_usage_error(argv[0], "--features: %s", err_msg());
        o.features = list;
        o.nfeatures = nlist;
    }
    /* a --db named like one of the pictures or the index inside --out was replaced by it
       (`--db rr/index.html --out rr`, an audit); a database elsewhere in --out is fine */
    const char *base = strrchr(o.db, '/');
    base = base ? base + 1 : o.db;
    size_t bl = strlen(base);
    char same[4096];
    if ((!strcmp(base, "index.html") || (bl > 4 && !strcmp(base + bl - 4, ".png"))) &&
        !path_join(same, sizeof same, o.out_dir, base) && file_same(same, o.db))
        return cli_usage_error(argv[0], "--db %s is a file report writes in --out %s; move the "
                               "database or write the report elsewhere", o.db, o.out_dir);
    err_clear(); /* a path too long to join is no such file */
    o.global = !no_global;
    o.version = SAELITE_VERSION;
    o.stop = &cli_stop_flag;
    cli_catch_signals();
    rep_run_result res;
    rc = rep_run(&o, &res);
    mem_free(list);
    rep_cleanup();
    if (rc) return cli_fail(argv[0]);
    char kept[96] = "";
    if (res.kept)
        snprintf(kept, sizeof kept, " (%d already there with the same content, kept)", res.kept);
    printf("report: %d feature dashboards%s and %d SAE pictures of '%s' in %s/ (index.html), %.2f s; "
           "%d drawn, %.1f/s on %d thread%s\n",
           res.dashboards, kept, res.pictures, res.dict_name, o.out_dir, res.seconds,
           res.dashboards - res.kept,
           res.dashboard_seconds > 0 ? (res.dashboards - res.kept) / res.dashboard_seconds : 0.0,
           o.threads, o.threads == 1 ? "" : "s");
    /* "0 feature dashboards" and exit 0 said nothing of why (--by alignment without POS tags) */
    if (res.unranked > 0)
        printf("note: %d of the --top %d have no value for --by %s (%s), left out\n", res.unranked,
               o.top > 0 ? o.top : 20, by, o.by == REP_BY_ALIGNMENT ? "no POS-tag precision: no POS tags stored, or "
               "the feature never fired" : "features that never fired");
    return 0;
}
