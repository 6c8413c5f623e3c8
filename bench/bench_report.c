/* bench_report.c - dashboards per second from a database, DB reads included.
 *
 * Builds a synthetic analysed store (tests/report_fixture.h: 512 features, 400 sequences of 64
 * tokens) in a temporary directory, then times `saelite report --top 120` the library way
 * (rep_run) with 1 and 2 threads. Target (issue 7): >= 20 dashboards/s on 2 cores. Prints the
 * rate and, as a machine-relative figure, the time per dashboard against the time to PNG-encode
 * one blank dashboard-sized canvas measured in the same run.
 * SAELITE_BENCH_KEEP=DIR keeps the pictures there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../tests/report_fixture.h"
#include "common/progress.h"
#include "reports/report.h"
#include "reports/report_run.h"

int main(void)
{
    const char *sql = "store/schema_analysis.sql";
    if (access(sql, R_OK) != 0) {
        printf("bench_report: skipped (store/schema_analysis.sql not in this tree)\n");
        return 0;
    }
    char dir[] = "/tmp/saelite_bench_reportXXXXXX";
    if (!mkdtemp(dir)) return 1;
    char db[256], out[256];
    snprintf(db, sizeof db, "%s/bench.db", dir);
    const char *keep = getenv("SAELITE_BENCH_KEEP");
    snprintf(out, sizeof out, "%s", keep ? keep : dir);
    if (fix_make_db(db, 512, 400, sql)) {
        fprintf(stderr, "bench_report: %s\n", err_msg());
        return 1;
    }
    /* reference: encode one blank 1240x1100 canvas */
    rep_canvas *c;
    rep_canvas_new(&c, 1240, 1100, rep_rgb(0xffffff));
    char ref[300];
    snprintf(ref, sizeof ref, "%s/ref.png", dir);
    double t0 = now_seconds();
    for (int i = 0; i < 10; i++) rep_png_write(c, ref, NULL, 0);
    double enc = (now_seconds() - t0) / 10;
    rep_canvas_free(c);
    unlink(ref);
    int rc = 0;
    /* Wall-clock rates depend on what else runs; say how busy the machine was. */
    FILE *la = fopen("/proc/loadavg", "r");
    double load = -1;
    if (la) {
        if (fscanf(la, "%lf", &load) != 1) load = -1;
        fclose(la);
    }
    printf("report: machine load average %.1f on %ld cores while measuring\n", load, sysconf(_SC_NPROCESSORS_ONLN));
    for (int th = 1; th <= 2; th++) {
        rep_run_opts o;
        rep_run_defaults(&o);
        o.db = db;
        o.sae = "1";
        o.out_dir = out;
        o.top = 120;
        o.threads = th;
        o.global = th == 2;
        o.version = "bench";
        o.redraw = 1; /* the second run would keep the first's dashboards: time the drawing */
        rep_run_result res;
        struct timespec c0, c1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        if (rep_run(&o, &res)) {
            fprintf(stderr, "bench_report: %s\n", err_msg());
            rc = 1;
            break;
        }
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        double cpu = (double)(c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9;
        double rate = res.dashboards / res.dashboard_seconds;
        printf("report: %d dashboards on %d thread%s: %.1f dashboards/s (%.1f ms each, %.1fx the PNG "
               "encode of a blank canvas, %.1f ms)%s\n", res.dashboards, th, th > 1 ? "s" : "", rate,
               1e3 / rate, (1 / rate) / enc, enc * 1e3,
               th == 2 ? (rate >= 20 ? "  [target >= 20/s: met]" : "  [target >= 20/s: NOT met]") : "");
        /* The wall rate depends on what else the machine runs; CPU time per dashboard does not
         * (much): 2 / cpu_per_dashboard is the rate two idle cores would give. */
        double cpd = cpu / (res.dashboards + (o.global ? 4 : 0));
        printf("report: CPU time %.1f ms per picture (%d threads) -> %.0f dashboards/s on 2 idle cores\n",
               cpd * 1e3, th, 2 / cpd);
    }
    if (!keep) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) rc = 1;
    } else {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "cp '%s' '%s/' && rm -rf '%s'", db, keep, dir);
        if (system(cmd) != 0) rc = 1;
    }
    return rc;
}
