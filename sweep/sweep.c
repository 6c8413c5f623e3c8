/* sweep.c - the architecture sweep: the grid, one run (train, evaluate, row), resume, progress
 * (see sweep.h). The frontier pictures are in frontier.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis/ana_run.h"
#include "analysis/eval.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "common/progress.h"
#include "sae/sae_run.h"
#include "store/store.h"
#include "store/store_eval.h"
#include "store/store_sae.h"
#include "store/store_sweep.h"
#include "sweep/sweep.h"
#include "sweep/sweep_internal.h"

void sweep_defaults(sweep_opts *o)
{
    *o = (sweep_opts){.ks = {8, 16, 32, 64}, .n_ks = 4,
                      .relu_l1 = {1.25, 2.5, 5, 10}, .n_relu_l1 = 4,
                      .gated_l1 = {2.5, 5, 10, 20}, .n_gated_l1 = 4,
                      .jumprelu_l1 = {0.5, 1, 2, 4}, .n_jumprelu_l1 = 4,
                      .d_sae = 1024, .expansion = 4, .tokens = 1000000, .batch = 2048, .seed = 42,
                      .checkpoint_every = 100, .val_frac = STORE_VAL_FRAC_DEFAULT, .eval_tokens = 65536,
                      .ce_seqs = 256, .max_seqs = 512,
                      .eval_suites = "sparse_probing,absorption", .eval_seqs_per_genre = 50};
}

/* The families in drawing order. target: the SAE is trained on tc_hook_out. */
static const sweep_family families[] = {
    {"relu", SAE_RELU, SAE_NOT_TRANSCODER, 0, 0},
    {"topk", SAE_TOPK, SAE_NOT_TRANSCODER, 0, 1},
    {"batchtopk", SAE_BATCHTOPK, SAE_NOT_TRANSCODER, 0, 1},
    {"jumprelu", SAE_JUMPRELU, SAE_NOT_TRANSCODER, 0, 0},
    {"gated", SAE_GATED, SAE_NOT_TRANSCODER, 0, 0},
    {"matryoshka", SAE_MATRYOSHKA, SAE_NOT_TRANSCODER, 0, 1},
    {"transcoder", SAE_TOPK, SAE_TRANSCODER, 0, 1},
    {"skip_transcoder", SAE_TOPK, SAE_SKIP_TRANSCODER, 0, 1},
    {"target_topk", SAE_TOPK, SAE_NOT_TRANSCODER, 1, 1},
};
enum { NFAM = sizeof families / sizeof families[0] };


int sweep_family_index(const char *label)
{
    for (int i = 0; i < NFAM; i++)
        if (!strcmp(families[i].name, label)) return i;
    return strncmp(label, "topk@", 5) ? -1 : NFAM - 1;
}

int sweep_family_count(void) { return NFAM; }
const sweep_family *sweep_family_at(int i) { return &families[i]; }

/* One planned run of the grid. */
typedef struct {
    const sweep_family *f;
    double value;
    char name[64], label[96], dir[600], config[1024];
} plan_run;

/* The sweep's hooks, in the order of check_store's rows[]: --hook, --tc-hook, --tc-hook-out. */
static void sweep_hooks(const sweep_opts *o, const char *hooks[3])
{
    hooks[0] = o->hook;
    hooks[1] = o->tc_hook;
    hooks[2] = o->tc_hook_out;
}

/* Which of them a family's runs train on: a transcoder --tc-hook (--tc-hook-out its target beside
 * it), the target's SAE --tc-hook-out, the others --hook. */
static int run_hook_index(const sweep_family *f) { return f->transcoder ? 1 : f->target ? 2 : 0; }

static const char *run_hook(const sweep_opts *o, const sweep_family *f)
{
    const char *hooks[3];
    sweep_hooks(o, hooks);
    return hooks[run_hook_index(f)];
}

static int wanted(const sweep_opts *o, const char *name)
{
    if (!o->families) return 1;
    size_t n = strlen(name);
    for (const char *p = o->families; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return 1;
        p += len + (e ? 1 : 0);
    }
    return 0;
}

static int check_families(const sweep_opts *o)
{
    if (!o->families) return OK;
    /* --families '' failed later, exit 1, as "the grid is empty" */
    if (!o->families[0]) return err_set(ERR_ARG, "--families: no family given");
    for (const char *p = o->families; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        int ok = 0;
        for (int i = 0; i < NFAM; i++)
            ok |= strlen(families[i].name) == len && !strncmp(p, families[i].name, len);
        if (!ok)
            return err_set(ERR_ARG, "unknown family '%.*s' (relu, topk, batchtopk, jumprelu, "
                                    "gated, matryoshka, transcoder, skip_transcoder, target_topk)",
                           (int)len, p);
        /* the other lists' rules: no trailing comma ("topk," ran topk), nothing twice */
        if (e && !e[1]) return err_set(ERR_ARG, "--families '%s': a trailing comma", o->families);
        for (const char *q = o->families; q < p; q += strcspn(q, ",") + 1)
            if (strcspn(q, ",") == len && !strncmp(q, p, len))
                return err_set(ERR_ARG, "--families: %.*s is given twice", (int)len, p);
        p += len + (e ? 1 : 0);
    }
    return OK;
}

static const double *values_of(const sweep_opts *o, const sweep_family *f, int *n,
                               double *kbuf)
{
    if (f->param_k) {
        for (int i = 0; i < o->n_ks; i++) kbuf[i] = o->ks[i];
        *n = o->n_ks;
        return kbuf;
    }
    if (f->arch == SAE_RELU) return *n = o->n_relu_l1, o->relu_l1;
    if (f->arch == SAE_GATED) return *n = o->n_gated_l1, o->gated_l1;
    return *n = o->n_jumprelu_l1, o->jumprelu_l1;
}

/* The --eval suites in one spelling ("all" and any order name the same runs; "none" when
 * empty), so that only a change of suites refuses a continued sweep. */
static void suites_canonical(const sweep_opts *o, char *s, size_t n)
{
    int bits = 0, all;
    if (o->eval_suites && *o->eval_suites && eval_parse_suites(o->eval_suites, &bits, &all))
        bits = 0; /* check_store refused it already */
    snprintf(s, n, "%s", bits ? "" : "none");
    for (int i = 0; i < EVAL_NSUITES; i++)
        if (bits & (1 << i))
            snprintf(s + strlen(s), n - strlen(s), "%s%s", s[0] ? "," : "", eval_suite_names[i]);
}

/* The run's settings as JSON: what a resumed sweep must match, so every setting that changes a
 * run's numbers is here (a continued sweep with another --eval-seqs-per-genre scored half the
 * grid on 30 sequences and half on 450, exit 0: an audit). The eval suites' settings only for
 * the runs that run them (not the transcoders). */
static int run_config(const sweep_opts *o, plan_run *p, const char *hook, const char *hook_out,
                      int64_t rows)
{
    buf b = {0};
    int rc = buf_printf(&b, "{\"family\": \"%s\", \"param\": \"%s\", \"value\": %.17g, \"hook\": ",
                        p->f->name, p->f->param_k ? "k" : "l1", p->value);
    if (!rc) rc = buf_json(&b, hook, strlen(hook), BUF_JSON_CTRL_U);
    if (!rc && hook_out) rc = buf_str(&b, ", \"hook_out\": ");
    if (!rc && hook_out) rc = buf_json(&b, hook_out, strlen(hook_out), BUF_JSON_CTRL_U);
    if (!rc)
        rc = buf_printf(&b, ", \"d_sae\": %d, \"expansion\": %.17g, \"tokens\": %lld, \"batch\": %d, "
                        "\"seed\": %llu, \"val_frac\": %.17g, \"eval_tokens\": %lld, \"ce_seqs\": %d, "
                        "\"max_seqs\": %d", o->d_sae, o->expansion, (long long)o->tokens, o->batch,
                        (unsigned long long)o->seed, o->val_frac, (long long)o->eval_tokens,
                        o->ce_seqs, o->max_seqs);
    /* the data: the hook's tokens in the training split (another extract into the database
       between a kill and the rerun mixed runs of two datasets in one frontier, exit 0: an audit).
       A transcoder's pairs are its input hook's sequences (the target read for each), so the
       target hook's own count is not its data: rows of it for other sequences refused a
       transcoder whose pairs were the same (train_tokens_out, a review) */
    if (!rc) rc = buf_printf(&b, ", \"train_tokens\": %lld", (long long)rows);
    char suites[64];
    suites_canonical(o, suites, sizeof suites);
    if (!rc && !p->f->transcoder) rc = buf_printf(&b, ", \"eval\": \"%s\"", suites);
    if (!rc && !p->f->transcoder && strcmp(suites, "none"))
        rc = buf_printf(&b, ", \"eval_seqs_per_genre\": %d", o->eval_seqs_per_genre);
    if (!rc) rc = buf_str(&b, "}");
    if (!rc && b.n >= sizeof p->config) rc = err_set(ERR_ARG, "run settings too long");
    if (!rc) memcpy(p->config, b.p, b.n + 1);
    buf_free(&b);
    return rc;
}

static void fmt_value(char *s, size_t n, double v)
{
    snprintf(s, n, "%g", v);
    for (char *c = s; *c; c++)
        if (*c == '.') *c = 'p'; /* 2.5 -> 2p5: a directory name without dots */
}

/* rows: the training split's tokens of --hook, --tc-hook, --tc-hook-out (check_store) */
static int plan_grid(const sweep_opts *o, const int64_t rows[3], plan_run **out, int *n)
{
    *out = NULL;
    *n = 0;
    int cap = 0, rc = OK;
    for (int fi = 0; fi < NFAM && !rc; fi++) {
        const sweep_family *f = &families[fi];
        if (!wanted(o, f->name)) continue;
        if ((f->transcoder || f->target) && !(o->tc_hook && o->tc_hook_out)) {
            if (o->families) /* asked for by name */
                rc = err_set(ERR_ARG, "family %s needs the transcoder hooks (--tc-hook, "
                                      "--tc-hook-out)", f->name);
            continue;
        }
        double kbuf[SWEEP_MAX_SETTINGS];
        int nv;
        const double *v = values_of(o, f, &nv, kbuf);
        for (int i = 0; i < nv && !rc; i++) {
            if (*n == cap) {
                int nc = cap ? 2 * cap : 32;
                plan_run *g = mem_realloc(*out, (size_t)nc * sizeof *g);
                if (!g) {
                    rc = err_set(ERR_NOMEM, "out of memory for the grid");
                    break;
                }
                *out = g;
                cap = nc;
            }
            plan_run *p = &(*out)[(*n)++];
            memset(p, 0, sizeof *p);
            p->f = f;
            p->value = v[i];
            char vs[32];
            fmt_value(vs, sizeof vs, v[i]);
            snprintf(p->name, sizeof p->name, "%s_%s%s", f->name, f->param_k ? "k" : "l1", vs);
            if (f->target) snprintf(p->label, sizeof p->label, "topk@%s", o->tc_hook_out);
            else snprintf(p->label, sizeof p->label, "%s", f->name);
            rc = path_join(p->dir, sizeof p->dir, o->out, p->name);
            if (!rc)
                rc = run_config(o, p, run_hook(o, f), f->transcoder ? o->tc_hook_out : NULL,
                                rows[run_hook_index(f)]);
        }
    }
    if (!rc && *n == 0) rc = err_set(ERR_ARG, "the grid is empty");
    if (rc) {
        mem_free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

static int file_exists(const char *dir, const char *name)
{
    char p[700];
    struct stat sb;
    return path_join(p, sizeof p, dir, name) == OK && stat(p, &sb) == 0;
}

/* sae-train for one run: fresh, or continuing its checkpoint. */
static int train_run(const sweep_opts *o, const plan_run *p, int64_t max_steps, sae_run_result *tr)
{
    sae_run_opts so;
    sae_run_defaults(&so);
    const sweep_family *f = p->f;
    so.db = o->db;
    so.hook = run_hook(o, f);
    so.hook_out = f->transcoder ? o->tc_hook_out : NULL;
    so.val_frac = o->val_frac;
    so.eval_tokens = o->eval_tokens;
    so.out = p->dir;
    so.expansion = o->expansion;
    so.checkpoint_every = o->checkpoint_every;
    so.max_steps = max_steps;
    so.stop = o->stop;
    so.resume = file_exists(p->dir, "checkpoint.bin");
    so.force = !so.resume;
    /* a checkpoint of another run there (an sae-train by hand into the run's directory) was
       refused with "resume with the same flags", a sae-train's advice; and one this sweep left
       under other flags (--max-steps, then another --tokens) is not "another run's" (a review):
       the sweep's flags continue it, as for a run done before (and the database it started on,
       where the refusal is store_rows) */
    char advice[sizeof p->dir + 300];
    snprintf(advice, sizeof advice, "that run was started with other settings or data (this sweep "
             "with other flags or before the database changed, or a sae-train by hand): rerun as it "
             "was started to continue it, or remove %s/checkpoint.bin to train it from the start",
             p->dir);
    so.resume_advice = advice;
    sae_train_config *c = &so.train;
    c->arch = f->arch;
    c->transcoder = f->transcoder;
    c->d_sae = o->d_sae;
    c->batch = o->batch;
    c->total_tokens = o->tokens;
    c->seed = o->seed;
    if (f->param_k) c->k = (int)p->value;
    else c->l1 = p->value;
    return sae_train_run(&so, tr);
}

/* The evaluation of one trained run into its row: sae-train's held-out numbers and ana_run's
 * downstream pass (the SAE spliced in). More evaluation suites go here. */
/* The `saelite eval` suites on the run's SAE: their rows go to the eval tables under the run's
 * registry id, where sweep_draw finds them through eval_summary. A database with neither POS
 * tags nor two genres has nothing to probe: the suites are left out, not an error. The random-SAE
 * baseline is off (it doubles the encoding and does not depend on the run). */
static int eval_suites(const sweep_opts *o, const plan_run *p, eval_memo *memo,
                       store_sweep_row *row)
{
    if (!o->eval_suites || !*o->eval_suites || p->f->transcoder) return OK;
    eval_opts eo;
    eval_defaults(&eo);
    eo.db = o->db;
    eo.sae = p->dir;
    eo.suites = o->eval_suites;
    eo.seed = o->seed;
    eo.seqs_per_genre = o->eval_seqs_per_genre;
    eo.no_random = 1;
    eo.skip_missing = 1;
    eo.memo = memo; /* the probes on raw activations are the same for every run */
    eo.stop = o->stop;
    eo.notice = o->notice;
    eo.user = o->user;
    eval_result er;
    double t0 = now_seconds();
    int rc = eval_run(&eo, &er);
    row->eval_seconds += now_seconds() - t0;
    if (rc == ERR_NOTFOUND && !(o->stop && *o->stop)) {
        err_clear();
        return OK;
    }
    return rc ? err_wrap(rc, "eval suites of %s", p->dir) : OK;
}

/* The memos the runs of one sweep share: what does not depend on the SAE is computed once. */
typedef struct {
    eval_memo *probes;
    ana_memo *zero;
} sweep_memos;

static int sweep_eval_run(const sweep_opts *o, const plan_run *p, const sae_run_result *tr,
                          const sweep_memos *memo, store_sweep_row *row)
{
    row->sae_id = tr->sae_id;
    row->eval_tokens = tr->eval_tokens;
    row->ev = tr->eval_tokens > 0 ? tr->eval.ev : NAN;
    row->mse = tr->eval_tokens > 0 ? tr->eval.mse : NAN;
    row->l0 = tr->eval_tokens > 0 ? tr->eval.l0 : NAN;
    row->dead_frac = tr->eval_tokens > 0 ? tr->eval.dead_frac : NAN;
    ana_run_opts ao;
    ana_run_defaults(&ao);
    ao.db = o->db;
    ao.sae_dir = p->dir;
    ao.model_dir = o->model_dir;
    ao.tok_dir = o->tok_dir;
    ao.val_frac = o->val_frac;
    ao.ce_seqs = o->ce_seqs;
    ao.max_seqs = o->max_seqs;
    ao.stop = o->stop;
    ao.notice = o->notice;
    ao.user = o->user;
    ao.memo = memo->zero;
    ao.no_err_pass = 1; /* the check that splicing keeps the clean forward: not a frontier's */
    ana_run_result ar;
    double t0 = now_seconds();
    int rc = ana_run(&ao, &ar);
    row->eval_seconds = now_seconds() - t0;
    if (rc) return err_wrap(rc, "evaluating %s", p->dir);
    const ana_dict_result *d = &ar.dict[0];
    row->dict_id = d->dict_id;
    if (d->have_downstream) {
        row->ce_tokens = d->ds.n;
        row->ce_clean = d->ds.ce_clean;
        row->ce_sae = d->ds.ce_sae;
        row->ce_zero = d->ds.ce_zero;
        row->ce_score = d->ds.ce_score;
        row->kl_sae = d->ds.kl_sae;
        row->kl_score = d->ds.kl_score;
    }
    return eval_suites(o, p, memo->probes, row);
}

static void row_init(store_sweep_row *row, const sweep_opts *o, const plan_run *p,
                     const sae_run_result *tr)
{
    memset(row, 0, sizeof *row);
    snprintf(row->sweep, sizeof row->sweep, "%s", o->out);
    snprintf(row->name, sizeof row->name, "%s", p->name);
    snprintf(row->family, sizeof row->family, "%s", p->label);
    snprintf(row->architecture, sizeof row->architecture, "%s", sae_arch_name(p->f->arch));
    const sweep_family *f = p->f;
    snprintf(row->hook_name, sizeof row->hook_name, "%s", run_hook(o, f));
    if (f->transcoder) snprintf(row->hook_out, sizeof row->hook_out, "%s", o->tc_hook_out);
    snprintf(row->param, sizeof row->param, "%s", f->param_k ? "k" : "l1");
    row->value = p->value;
    row->d_in = tr->d_in;
    row->d_out = tr->d_out;
    row->d_sae = tr->d_sae;
    /* the tokens trained (whole batches; an audit found the row recording --tokens, which a
       partial last batch leaves untrained) */
    row->tokens = tr->total_steps * (int64_t)tr->batch;
    row->seed = (int64_t)o->seed;
    snprintf(row->config, sizeof row->config, "%s", p->config);
    snprintf(row->dir, sizeof row->dir, "%s", p->dir);
    row->sae_id = row->dict_id = row->ce_tokens = -1;
    row->ce_clean = row->ce_sae = row->ce_zero = row->ce_score = row->kl_sae = row->kl_score = NAN;
    row->train_seconds = tr->total_seconds;
}

static int open_rw(const sweep_opts *o, store **s)
{
    int rc = store_open(s, o->db, 0);
    if (!rc && (rc = store_sweep_init(*s))) {
        store_close(*s);
        *s = NULL;
    }
    return rc;
}

/* One "key": value of a run's config (run_config writes a flat object): spans of the text. */
typedef struct {
    const char *k, *v;
    int kn, vn;
} cfg_item;

/* A JSON string's length from its opening quote to its closing one, inclusive (0: unclosed). */
static int str_span(const char *s)
{
    int i = 1;
    while (s[i] && s[i] != '"') i += s[i] == '\\' && s[i + 1] ? 2 : 1;
    return s[i] ? i + 1 : 0;
}

/* The items of a flat config, values as written (compared as text: a seed above 2^53 would
 * compare equal to its neighbour as a double); -1 when it is not one. */
static int cfg_items(const char *s, cfg_item *it, int cap)
{
    int n = 0;
    s += strspn(s, " ");
    if (*s++ != '{') return -1;
    for (;;) {
        s += strspn(s, " ,");
        if (*s == '}') return n;
        int kn = *s == '"' ? str_span(s) : 0;
        if (!kn || n == cap) return -1;
        it[n].k = s + 1;
        it[n].kn = kn - 2;
        s += kn;
        s += strspn(s, " ");
        if (*s++ != ':') return -1;
        s += strspn(s, " ");
        int vn = *s == '"' ? str_span(s) : (int)strcspn(s, ",}");
        if (!vn) return -1;
        it[n].v = s;
        it[n++].vn = vn;
        s += vn;
    }
}

static const cfg_item *cfg_find(const cfg_item *it, int n, const cfg_item *key)
{
    for (int i = 0; i < n; i++)
        if (it[i].kn == key->kn && !memcmp(it[i].k, key->k, (size_t)key->kn)) return &it[i];
    return NULL;
}

/* The flag that sets a config key, for the refusal's message. */
static void cfg_flag(const plan_run *p, const cfg_item *c, char *f, size_t n)
{
    const sweep_family *fam = p->f;
    if (c->kn == 5 && !memcmp(c->k, "value", 5))
        snprintf(f, n, "%s", fam->param_k               ? "--ks"
                             : fam->arch == SAE_RELU    ? "--relu-l1"
                             : fam->arch == SAE_GATED   ? "--gated-l1"
                                                        : "--jumprelu-l0");
    else if (c->kn == 4 && !memcmp(c->k, "hook", 4))
        snprintf(f, n, "%s", fam->transcoder ? "--tc-hook" : fam->target ? "--tc-hook-out" : "--hook");
    else if (c->kn == 8 && !memcmp(c->k, "hook_out", 8)) snprintf(f, n, "--tc-hook-out");
    else {
        snprintf(f, n, "--%.*s", c->kn, c->k);
        for (char *q = f; *q; q++)
            if (*q == '_') *q = '-';
    }
}

/* A value as the user would type it: unquoted, numbers in their shortest spelling. */
static void cfg_value(const cfg_item *c, char *v, size_t n)
{
    if (c->v[0] == '"') {
        snprintf(v, n, "%.*s", c->vn - 2, c->v + 1);
        return;
    }
    snprintf(v, n, "%.*s", c->vn, c->v);
    if (strpbrk(v, ".eE")) buf_double(v, n, strtod(v, NULL));
}

/* Refuses a run done before with other settings, naming the first setting that differs, its
 * recorded and its new value. */
static int check_config(const sweep_opts *o, const plan_run *p, const char *recorded)
{
    if (!strcmp(recorded, p->config)) return OK;
    cfg_item a[32], b[32];
    int na = cfg_items(recorded, a, 32), nb = cfg_items(p->config, b, 32);
    if (na < 0 || nb < 0)
        return err_set(ERR_ARG, "%s: run %s was done with other settings (%s); give a new --out "
                       "for a new grid", o->out, p->name, recorded);
    /* --expansion sizes a run only with --d-sae 0: with one d_sae on both sides it changes
       nothing (an audit found it refused) */
    const cfg_item dk = {.k = "d_sae", .kn = 5}, ek = {.k = "expansion", .kn = 9};
    const cfg_item *da = cfg_find(a, na, &dk), *db = cfg_find(b, nb, &dk);
    int sized = da && db && da->vn == db->vn && !memcmp(da->v, db->v, (size_t)da->vn) &&
                !(db->vn == 1 && db->v[0] == '0');
    char flag[64], was[256], now[256];
    for (int i = 0; i < nb; i++) {
        if (sized && b[i].kn == ek.kn && !memcmp(b[i].k, ek.k, (size_t)ek.kn)) continue;
        const cfg_item *r = cfg_find(a, na, &b[i]);
        int data = b[i].kn == 12 && !memcmp(b[i].k, "train_tokens", 12);
        if (data && !r) continue; /* a row from before the record: unchecked, as before */
        if (data && !(r->vn == b[i].vn && !memcmp(r->v, b[i].v, (size_t)r->vn)))
            return err_set(ERR_ARG, "%s: run %s was trained on other data: hook %s had %.*s tokens "
                           "in its training split then, %.*s now in %s (another extract into it, or "
                           "another database); give a new --out for a new grid", o->out, p->name,
                           run_hook(o, p->f), r->vn, r->v, b[i].vn, b[i].v, o->db);
        cfg_flag(p, &b[i], flag, sizeof flag);
        if (!r)
            return err_set(ERR_ARG, "%s: run %s was done with other settings: it has no record of "
                           "%s (a sweep of an older saelite); give a new --out for a new grid",
                           o->out, p->name, flag);
        if (r->vn == b[i].vn && !memcmp(r->v, b[i].v, (size_t)r->vn)) continue;
        cfg_value(r, was, sizeof was);
        cfg_value(&b[i], now, sizeof now);
        return err_set(ERR_ARG, "%s: run %s was done with other settings: %s %s, not %s; rerun "
                       "with %s %s to continue, or give a new --out for a new grid", o->out,
                       p->name, flag, was, now, flag, was);
    }
    /* 0a8459d, on main, recorded a transcoder's train_tokens_out; 0fffd9c stopped checking it
       (the pairs are the input hook's sequences). Without this its runs were refused as "done
       with --train-tokens-out N", a flag there is not, and only a new grid went on (a review) */
    const cfg_item tk = {.k = "train_tokens_out", .kn = 16};
    for (int i = 0; i < na; i++)
        if (!(sized && a[i].kn == ek.kn && !memcmp(a[i].k, ek.k, (size_t)ek.kn)) &&
            !(a[i].kn == tk.kn && !memcmp(a[i].k, tk.k, (size_t)tk.kn)) && !cfg_find(b, nb, &a[i])) {
            cfg_flag(p, &a[i], flag, sizeof flag);
            cfg_value(&a[i], was, sizeof was);
            return err_set(ERR_ARG, "%s: run %s was done with other settings: %s %s, which this "
                           "call does not use; give a new --out for a new grid", o->out, p->name,
                           flag, was);
        }
    return OK;
}

/* The row of a run done before, if any; ERR_ARG when it was done with other settings. */
/* Whether a run's row still describes its directory: the weights there are the ones registered
 * (sae_registry.weights), or at least readable where the row has no registry id. A directory
 * removed or damaged after its run was recorded was skipped as "done before", and the frontiers
 * listed an SAE that no longer existed (an audit). */
static int run_dir_intact(store *s, const store_sweep_row *row, int *intact)
{
    char cs[17];
    *intact = sae_weights_checksum(row->dir, cs) == OK;
    err_clear();
    if (!*intact || row->sae_id < 0) return OK;
    store_sae_entry e;
    int rc = store_sae_get(s, row->sae_id, NULL, &e);
    if (rc == ERR_NOTFOUND) { /* its registry row went: the row's ids are stale */
        *intact = 0;
        err_clear();
        return OK;
    }
    if (!rc && e.weights[0] && strcmp(e.weights, cs)) *intact = 0;
    return rc;
}

/* *found: the run has a row (matching the grid's settings) whose directory is intact; *lost:
 * it has a row, but its directory no longer holds that SAE (trained again). */
static int find_done(const sweep_opts *o, const plan_run *p, store_sweep_row *row, int *found,
                     int *lost)
{
    store *s;
    *lost = 0;
    int rc = open_rw(o, &s), intact = 1;
    if (!rc) rc = store_sweep_get(s, o->out, p->name, row, found);
    if (!rc && *found) rc = check_config(o, p, row->config);
    if (!rc && *found) rc = run_dir_intact(s, row, &intact);
    store_close(s);
    if (!rc && *found && !intact) {
        *found = 0;
        *lost = 1;
    }
    return rc;
}

static int put_row(const sweep_opts *o, const store_sweep_row *row)
{
    store *s;
    int rc = open_rw(o, &s);
    if (!rc) rc = store_sweep_put(s, row);
    store_close(s);
    return rc;
}

static int read_rows(const sweep_opts *o, sweep_result *res)
{
    store *s;
    int rc = open_rw(o, &s);
    if (!rc) rc = store_sweep_list(s, o->out, &res->rows, &res->n_rows);
    if (!rc) rc = store_sweep_has_eval(s, &res->have_eval);
    store_close(s);
    return rc;
}

/* Two values of one list that name the same run (OUT/<family>_<param><value>): the second
 * trained again into the first's directory (--ks 8,8, --relu-l1 1,1.0: an audit), and values
 * equal to fmt_value's 6 digits would meet the first's row as "other settings". */
static int check_list(const char *flag, const double *v, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++) {
            char a[32], b[32];
            fmt_value(a, sizeof a, v[j]);
            fmt_value(b, sizeof b, v[i]);
            if (strcmp(a, b)) continue;
            buf_double(a, sizeof a, v[j]);
            buf_double(b, sizeof b, v[i]);
            if (v[i] == v[j]) return err_set(ERR_ARG, "%s: %s is given twice", flag, a);
            return err_set(ERR_ARG, "%s: %s and %s would be one run (run names keep 6 significant "
                           "digits)", flag, a, b);
        }
    return OK;
}

int sweep_check_opts(const sweep_opts *o)
{
    if (!o->db || !o->hook || !o->out) return err_set(ERR_ARG, "needs a database, a hook and an output directory");
    if (!!o->tc_hook != !!o->tc_hook_out) return err_set(ERR_ARG, "the transcoder hooks go together (input and target)");
    if (o->tokens < 1 || o->batch < 1 || o->ce_seqs < 1 || o->max_seqs < 0 || o->eval_tokens < 1)
        return err_set(ERR_ARG, "tokens, batch, ce_seqs and eval_tokens must be >= 1");
    if (!(o->val_frac > 0 && o->val_frac < 1)) return err_set(ERR_ARG, "val_frac must be in (0, 1)");
    if (o->d_sae < 0 || (o->d_sae == 0 && !(o->expansion > 0))) return err_set(ERR_ARG, "no dictionary size");
    for (int i = 0; i < o->n_ks; i++)
        if (o->ks[i] < 1) return err_set(ERR_ARG, "k values must be >= 1");
    double ks[SWEEP_MAX_SETTINGS];
    for (int i = 0; i < o->n_ks; i++) ks[i] = o->ks[i];
    int rc = check_list("--ks", ks, o->n_ks);
    if (!rc) rc = check_list("--relu-l1", o->relu_l1, o->n_relu_l1);
    if (!rc) rc = check_list("--gated-l1", o->gated_l1, o->n_gated_l1);
    if (!rc) rc = check_list("--jumprelu-l0", o->jumprelu_l1, o->n_jumprelu_l1);
    int bits, all; /* --eval foo: a usage error, as --families foo is (check_store checked it at run time) */
    if (!rc && o->eval_suites && *o->eval_suites && eval_parse_suites(o->eval_suites, &bits, &all))
        rc = err_wrap(ERR_ARG, "--eval");
    return rc ? rc : check_families(o);
}

/* What every run of the grid needs from the store, checked before anything is written (an
 * audit: a k above d_sae, an unknown hook, too few tokens or an unknown suite failed only when
 * their run came, after the output directory and the sweep tables were made, and --eval foo
 * after the first run was trained and analysed; a second audit: --model /nonexistent after the
 * first SAE was trained and registered): a store that opens, its hooks, the model and tokenizer
 * of the CE/KL pass (loaded once per model), and d_sae against k. */
static int check_store(const sweep_opts *o, int64_t rows[3])
{
    int bits, all;
    if (o->eval_suites && *o->eval_suites && eval_parse_suites(o->eval_suites, &bits, &all))
        return err_wrap(ERR_ARG, "--eval");
    if (o->tokens < o->batch)
        return err_set(ERR_ARG, "--tokens %lld is less than one batch (%d)",
                       (long long)o->tokens, o->batch);
    store *s;
    int rc = store_open(&s, o->db, STORE_READONLY);
    if (rc) return rc;
    const char *hooks[3];
    sweep_hooks(o, hooks);
    int64_t model_of[3] = {-1, -1, -1};
    int width[3] = {0, 0, 0};
    for (int i = 0; i < 3 && !rc; i++) {
        store_hook h;
        if (!hooks[i]) continue;
        if ((rc = store_hook_find(s, hooks[i], &h))) break;
        width[i] = h.width;
        model_of[i] = h.model_id;
        /* a hook without training rows failed only when its run started, after the directory,
           the table and every earlier family (an audit) */
        store_iter *it = NULL;
        rc = store_iter_open(&it, s, h.id, STORE_SPLIT_TRAIN, o->val_frac, o->seed);
        if (!rc) rows[i] = store_iter_tokens(it);
        if (!rc && rows[i] <= 0)
            rc = err_set(ERR_NOTFOUND, "%s: hook %s has no activations in the training split",
                         o->db, hooks[i]);
        store_iter_close(it);
    }
    store_close(s);
    ana_run_opts ao;
    ana_run_defaults(&ao);
    ao.db = o->db;
    ao.model_dir = o->model_dir;
    ao.tok_dir = o->tok_dir;
    for (int i = 0; i < 3 && !rc; i++) {
        int seen = !hooks[i];
        for (int j = 0; j < i && !seen; j++) seen = hooks[j] && model_of[j] == model_of[i];
        if (!seen) rc = ana_check_model(&ao, hooks[i]);
    }
    if (rc) return rc;
    /* k against each k-family's d_sae: with --d-sae 0 a transcoder's (or the target SAE's)
       comes from its own, narrower hook, and failed mid-sweep after the SAEs had trained (an
       audit) */
    for (int f = 0; f < NFAM; f++) {
        if (!families[f].param_k || !wanted(o, families[f].name)) continue;
        int hi = families[f].transcoder ? 1 : families[f].target ? 2 : 0;
        if (!hooks[hi]) continue;
        int d_sae = o->d_sae;
        if (d_sae <= 0 && (rc = sae_run_d_sae(o->expansion, width[hi], &d_sae))) return rc;
        for (int i = 0; i < o->n_ks; i++)
            if (o->ks[i] > d_sae)
                return err_set(ERR_ARG, "k %d is more than d_sae (%d) of %s on %s", o->ks[i], d_sae,
                               families[f].name, hooks[hi]);
    }
    if (o->d_sae <= 0) {
        int d_sae;
        if ((rc = sae_run_d_sae(o->expansion, width[0], &d_sae))) return rc;
    }
    return OK;
}

/* A stop the user asked for (SIGINT, SIGTERM): the runners' messages say how their own command
 * continues ("continue with --resume", a sae-train flag the sweep does not have), so the sweep
 * says how a sweep does: the same command again. */
static int stopped(const sweep_opts *o, int rc) { return rc == ERR_ABORTED && o->stop && *o->stop; }

/* The sweep's key in sweep_runs: the spelling its directory was first recorded under, so that
 * --out swv and --out ./swv continue one sweep (they were two, over the same folders). */
static int sweep_key(const sweep_opts *o, char *key, size_t cap)
{
    store *s;
    int rc = store_open(&s, o->db, STORE_READONLY); /* nothing made before the checks pass */
    if (!rc) rc = store_sweep_key(s, o->out, key, cap);
    store_close(s);
    return rc;
}

int sweep_run(const sweep_opts *o, sweep_result *res)
{
    memset(res, 0, sizeof *res);
    int rc = sweep_check_opts(o);
    int64_t rows[3] = {0, 0, 0};
    if (!rc) rc = check_store(o, rows);
    sweep_opts keyed;
    char key[4096];
    if (!rc && !(rc = sweep_key(o, key, sizeof key))) {
        keyed = *o;
        keyed.out = key;
        o = &keyed;
    }
    plan_run *plan = NULL;
    int np = 0;
    if (!rc) rc = plan_grid(o, rows, &plan, &np);
    if (!rc) rc = file_mkdir_p(o->out);
    /* two sweeps into one directory both trained every run, each over the other's files (an
       audit: nothing lost only because the runs are deterministic and written by rename) */
    int lock = -1;
    if (!rc) rc = file_dir_lock(o->out, ".sweep.lock", "sweep", &lock);
    res->unlocked = !rc && lock < 0;
    res->n_runs = np;
    double t0 = now_seconds();
    /* the runs already done first, so the progress line counts only what is left */
    unsigned char *done = np ? mem_calloc((size_t)np, 1) : NULL;
    if (!rc && np && !done) rc = err_set(ERR_NOMEM, "out of memory for the grid");
    sweep_memos memo = {0};
    if (!rc) rc = eval_memo_new(&memo.probes);
    if (!rc) rc = ana_memo_new(&memo.zero);
    store_sweep_row row;
    for (int i = 0; i < np && !rc; i++) {
        int found = 0, lost = 0;
        rc = find_done(o, &plan[i], &row, &found, &lost);
        res->lost += lost;
        if (rc || !found) continue;
        done[i] = 1;
        res->done_before++;
        /* an eval of this SAE by hand replaced the suites' rows (keyed by SAE and suite), and
           the frontiers would draw its numbers under this sweep's settings (an audit):
           evaluate it again on the sweep's sample */
        int64_t other = 0;
        if (o->eval_suites && *o->eval_suites && !plan[i].f->transcoder && row.sae_id >= 0) {
            store *s;
            rc = open_rw(o, &s);
            if (!rc) rc = store_eval_runs_other(s, row.sae_id, o->seed, o->eval_seqs_per_genre, 0, &other);
            store_close(s);
        }
        if (!rc && other > 0) {
            rc = eval_suites(o, &plan[i], memo.probes, &row);
            /* a stop here said "eval suites of DIR: interrupted" without how to go on, after
               the run's "(done before)" line (an audit) */
            if (rc && stopped(o, rc))
                err_set(rc, "interrupted while evaluating %s again (its suites' rows are another "
                        "sample's); rerun the same command to continue", plan[i].dir);
            if (!rc) res->reevaluated++;
        }
        if (!rc && o->on_run) o->on_run(&row, i, np, 1, o->user);
    }
    progress pr;
    /* in training tokens (every run has the same budget), so the rate reads in tok/s */
    int left = np - res->done_before;
    progress_begin(&pr, "sweep", (double)left * (double)o->tokens, "tok");
    for (int i = 0; i < np && !rc; i++) {
        if (done[i]) continue;
        if (o->max_runs > 0 && res->trained >= o->max_runs) break;
        sae_run_result tr;
        rc = train_run(o, &plan[i], res->trained == 0 ? o->max_steps : 0, &tr);
        if (!rc && !tr.finished) { /* max_steps: the checkpoint stays for the next call */
            snprintf(res->stopped_in, sizeof res->stopped_in, "%s", plan[i].name);
            res->stopped_step = tr.step;
            res->stopped_total = tr.total_steps;
            break;
        }
        if (rc) {
            if (stopped(o, rc))
                err_set(rc, "interrupted while training %s at step %lld of %lld%s; rerun the "
                        "same command to continue", plan[i].dir, (long long)tr.step,
                        (long long)tr.total_steps,
                        file_exists(plan[i].dir, "checkpoint.bin") ? " (checkpoint saved)" : "");
            else err_wrap(rc, "training %s", plan[i].dir);
            break;
        }
        row_init(&row, o, &plan[i], &tr);
        rc = sweep_eval_run(o, &plan[i], &tr, &memo, &row);
        if (rc && stopped(o, rc))
            err_set(rc, "interrupted while evaluating %s (trained; only its evaluation runs again, "
                    "from its own checkpoint where one was saved); "
                    "rerun the same command to continue", plan[i].dir);
        if (!rc) rc = put_row(o, &row);
        if (rc) break;
        res->trained++;
        progress_update(&pr, (double)res->trained * (double)o->tokens,
                        "%d/%d runs, last %s: L0 %.1f EV %.3f CE score %.3f", res->trained, left,
                        row.name, row.l0, row.ev, row.ce_score);
        if (o->on_run) o->on_run(&row, i, np, 0, o->user);
    }
    progress_end(&pr);
    eval_memo_free(memo.probes);
    ana_memo_free(memo.zero);
    mem_free(done);
    if (!rc) rc = read_rows(o, res);
    /* the rows of this grid only: a rerun with fewer values drew and summarised the earlier
       grid's runs too, as "5 runs" (an audit); those are counted in n_other */
    size_t kept = 0;
    for (size_t i = 0; !rc && i < res->n_rows; i++) {
        int in = 0;
        for (int j = 0; j < np && !in; j++) in = !strcmp(res->rows[i].name, plan[j].name);
        if (in) res->rows[kept++] = res->rows[i];
        else res->n_other++;
    }
    if (!rc) res->n_rows = kept;
    mem_free(plan);
    res->finished = !rc && res->done_before + res->trained == np;
    if (res->finished && !o->no_png) rc = sweep_draw(o, res);
    file_dir_unlock(lock);
    res->seconds = now_seconds() - t0;
    return rc;
}

void sweep_result_free(sweep_result *res)
{
    mem_free(res->rows);
    res->rows = NULL;
    res->n_rows = 0;
}

/* ---- frontier arithmetic ---------------------------------------------------------------- */
double sweep_row_metric(const store_sweep_row *r, const char *m)
{
    return !strcmp(m, "ev")          ? r->ev
           : !strcmp(m, "mse")       ? r->mse
           : !strcmp(m, "l0")        ? r->l0
           : !strcmp(m, "dead_frac") ? r->dead_frac
           : !strcmp(m, "ce_score")  ? r->ce_score
           : !strcmp(m, "kl_score")  ? r->kl_score
                                     : NAN;
}

int sweep_metric_lower_better(const char *m)
{
    return !strcmp(m, "mse") || !strcmp(m, "dead_frac") || !strcmp(m, "l0") ||
           !strncmp(m, "absorption_mean_frac", 20) || !strcmp(m, "absorption_full_rate");
}

int sweep_pareto(const double *l0, const double *y, int n, int lower_better, unsigned char *on)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        on[i] = l0[i] > 0 && isfinite(l0[i]) && isfinite(y[i]);
        for (int j = 0; on[i] && j < n; j++) {
            if (j == i || !(l0[j] > 0) || !isfinite(l0[j]) || !isfinite(y[j])) continue;
            double gi = lower_better ? -y[i] : y[i], gj = lower_better ? -y[j] : y[j];
            /* j at most as dense and at least as good, strictly one of them; of two equal
               points the first stays */
            if (l0[j] <= l0[i] && gj >= gi && (l0[j] < l0[i] || gj > gi || j < i)) on[i] = 0;
        }
        k += on[i];
    }
    return k;
}

/* The family's finite (L0, metric) points on its Pareto front, sorted by L0, into x (log L0)
 * and y; returns n. A dominated run (another of the family as sparse and better) is no point
 * of the frontier: interpolating through it drew and read a worse frontier (an audit). */
static int family_points(const store_sweep_row *rows, size_t n, const char *family,
                         const char *metric, double *x, double *y, int cap)
{
    double l0[64] = {0}, v[64] = {0};
    unsigned char on[64];
    int m = 0, k = 0;
    for (size_t i = 0; i < n && m < 64; i++) {
        if (strcmp(rows[i].family, family)) continue;
        l0[m] = rows[i].l0;
        v[m++] = sweep_row_metric(&rows[i], metric);
    }
    sweep_pareto(l0, v, m, sweep_metric_lower_better(metric), on);
    for (int i = 0; i < m && k < cap; i++) {
        if (!on[i]) continue;
        int j = k++;
        while (j > 0 && x[j - 1] > log(l0[i])) {
            x[j] = x[j - 1];
            y[j] = y[j - 1];
            j--;
        }
        x[j] = log(l0[i]);
        y[j] = v[i];
    }
    return k;
}

double sweep_metric_at_l0(const store_sweep_row *rows, size_t n, const char *family,
                          const char *metric, double l0)
{
    double x[64], y[64], t = log(l0);
    int k = family_points(rows, n, family, metric, x, y, 64);
    /* 0.5% of L0 past either end counts as the end: a k 64 run measures L0 63.90-63.9999 (the
       mean over tokens), and "L0 64: no family reaches it" hid the whole column */
    const double tol = 0.005;
    if (k == 0 || !(l0 > 0) || t < x[0] - tol || t > x[k - 1] + tol) return NAN;
    if (t < x[0]) t = x[0];
    if (t > x[k - 1]) t = x[k - 1];
    for (int i = 0; i + 1 < k; i++)
        if (t <= x[i + 1]) {
            double w = x[i + 1] > x[i] ? (t - x[i]) / (x[i + 1] - x[i]) : 0;
            return y[i] + w * (y[i + 1] - y[i]);
        }
    return y[k - 1];
}

double sweep_l0_at_metric(const store_sweep_row *rows, size_t n, const char *family,
                          const char *metric, double target, int *below)
{
    double x[64], y[64];
    int k = family_points(rows, n, family, metric, x, y, 64);
    int lower = sweep_metric_lower_better(metric);
    if (below) *below = k > 0 && (lower ? y[0] < target : y[0] > target);
    if (below && *below) return exp(x[0]);
    for (int i = 0; i < k; i++) {
        if (y[i] == target) return exp(x[i]);
        if (i + 1 < k && (y[i] - target) * (y[i + 1] - target) < 0)
            return exp(x[i] + (target - y[i]) / (y[i + 1] - y[i]) * (x[i + 1] - x[i]));
    }
    return NAN;
}
