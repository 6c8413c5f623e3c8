/* cmd_serve.c - `saelite serve`: the feature browser over a database (serve/serve.h,
 * docs/serve.md). Flags only; srv_run does the work. */
#include <stdio.h>

#include "cli/cli.h"
#include "common/err.h"
#include "serve/serve.h"

CLI_COMMAND(serve, "Browse a database's features in a web browser (HTTP server)",
            "saelite serve --db FILE [--sae DIR|ID] [--model DIR] [--report DIR] [--host 127.0.0.1] "
            "[--port 8080] [--threads 256] [--query-timeout 30] [--request-deadline 30]")

static void ready(void *user, const char *url, const srv_result *res)
{
    fprintf(stderr, "serve: search index (%s) built in %.2f s\n", res->fts5 ? "FTS5" : "LIKE",
            res->index_seconds);
    if (res->test_sae[0] && res->test_dict < 0 && res->stale[0])
        fprintf(stderr, "serve: warning: the SAE %s: %s: test your text runs, but no live "
                "activations, steering or feature links until 'saelite analyze' runs on it again\n",
                res->test_sae, res->stale);
    else if (res->test_sae[0] && res->test_dict < 0)
        fprintf(stderr, "serve: warning: the SAE %s has no analysis in this database (analysed: %s): "
                "test your text runs, but no live activations, steering or feature links\n",
                res->test_sae, res->analysed);
    if (res->slow_acts)
        fprintf(stderr, "serve: note: %s was analysed with --all-acts before the index "
                "ana_acts_kind existed: feature pages read every stored activation of a feature; "
                "'saelite analyze' on it once adds the index\n", (const char *)user);
    if (res->dashboards) fprintf(stderr, "serve: %d feature dashboards in the report directory\n", res->dashboards);
    printf("serve: open %s in a browser (Ctrl-C stops)\n", url);
    fflush(stdout);
}

int cmd_serve(int argc, char **argv)
{
    srv_opts o;
    srv_defaults(&o);
    arg_spec spec[] = {
        {"--db", ARG_STR, &o.db, "database written by extract + analyze (opened read-only)",
         ARG_REQUIRED},
        {"--sae", ARG_STR, &o.sae, "SAE directory or registry id that \"test your text\" runs",
         ARG_DEFAULT("the newest analysed SAE")},
        {"--model", ARG_STR, &o.model_dir, "model directory: turns on \"test your text\" and steering"},
        {"--report", ARG_STR, &o.report_dir, "a `saelite report` directory: its dashboards on the feature pages"},
        {"--host", ARG_STR, &o.host, "address to listen on", ARG_DEFAULT("127.0.0.1")},
        {"--port", ARG_INT, &o.port, "port (0: any free one)", ARG_RANGE(0, 65535),
         ARG_DEFAULT("8080")},
        {"--threads", ARG_INT, &o.threads,
         "connections at most, each with its own thread (a slow request holds only its own)",
         ARG_RANGE(8, 4096), ARG_DEFAULT("256")},
        {"--query-timeout", ARG_FLOAT, &o.query_timeout,
         "seconds one of serve's own queries may run before it answers 500 (the SQL console has "
         "its own 2 s)", ARG_RANGE(0.1, 3600), ARG_DEFAULT("30")},
        {"--request-deadline", ARG_FLOAT, &o.request_deadline,
         "seconds a client may take to send one request, and again to read its answer (not "
         "counting the handler's own time); a slower connection is closed", ARG_RANGE(0.5, 3600),
         ARG_DEFAULT("30")},
        {NULL, 0, NULL, NULL}};
    int rc = args_parse(argv[0], argc, argv, spec, NULL, 0, NULL);
    if (rc) return rc;
    /* as eval refuses it: an empty --sae silently served the default SAE (an audit) */
    if (o.sae && !o.sae[0]) return cli_usage_error("serve", "--sae is empty: give an SAE directory or a registry id");
    o.stop = &cli_stop_flag;
    o.on_ready = ready;
    o.user = (void *)o.db;
    cli_catch_signals();
    srv_result res;
    rc = srv_run(&o, &res);
    if (rc) return cli_fail(argv[0]);
    if (res.cut)
        fprintf(stderr, "serve: %lld connection%s closed at the %g s request deadline\n",
                (long long)res.cut, res.cut == 1 ? "" : "s", o.request_deadline);
    printf("serve: stopped after %lld requests\n", (long long)res.requests);
    return 0;
}
