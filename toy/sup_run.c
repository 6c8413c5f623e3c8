/* sup_run.c - `saelite superpose` as a library call: one toy model per sparsity, their files and
 * pictures, and the checkpoint that lets a killed sweep continue with the models it finished. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/hash.h"
#include "common/mem.h"
#include "common/npy.h"
#include "common/progress.h"
#include "toy/toy.h"

void sup_run_defaults(sup_run_opts *o)
{
    memset(o, 0, sizeof *o);
    sup_config_default(&o->c, 20, 5);
    o->ckpt = 1;
}

/* ---- the checkpoint: the finished models beside the output directory ------------------------
 * OUT.superpose-ckpt (OUT without trailing slashes), rewritten atomically after each model. Layout,
 * host byte order: int64 {magic, key0, key1, models}, per model int64 {index into the sparsity
 * list}, double final_loss, float W[n*m], float b[n]; last the FNV-1a (file_sum). The key: every
 * setting that changes a model (n, m, steps, batch, lr, importance, instances, seed, the
 * sparsity list) and OpenBLAS's thread count (sgemm's bits depend on it). Another key, a bad
 * count or index, a value that is not finite or a failing checksum: a fresh start with a notice. */
#define SUP_CKPT_MAGIC INT64_C(0x3150434b50555353) /* "SSUPKCP1" */

typedef struct {
    char path[4200];
    uint64_t key[2];
} sup_ckpt;

static void ckpt_key(const sup_run_opts *o, uint64_t key[2])
{
    uint64_t h[2] = {0x7375706572706f73ull, HASH_FNV1A_INIT};
    const sup_config *c = &o->c;
    int64_t w[] = {c->n_features, c->n_hidden, c->steps, c->batch, c->instances, (int64_t)c->seed,
                   o->ns, openblas_get_num_threads()};
    for (size_t i = 0; i < sizeof w / sizeof *w; i++) hash_absorb128(h, (uint64_t)w[i]);
    double f[] = {c->lr, c->importance_decay};
    for (int i = 0; i < 2 + o->ns; i++) {
        uint64_t b;
        double v = i < 2 ? f[i] : o->sparsity[i - 2];
        memcpy(&b, &v, sizeof b);
        hash_absorb128(h, b);
    }
    key[0] = h[0];
    key[1] = h[1];
}

static size_t model_floats(const sup_run_opts *o) /* W's: n x m */
{
    return (size_t)o->c.n_features * o->c.n_hidden;
}

static int ckpt_save(const sup_ckpt *ck, const sup_run_opts *o, sup_model *const *models)
{
    file_atomic fa;
    int rc = file_atomic_open_plain(&fa, ck->path);
    if (rc) return rc;
    fa.sync = 1;
    int64_t count = 0;
    for (int k = 0; k < o->ns; k++) count += models[k] != NULL;
    file_sum io = file_sum_start(fa.f);
    int64_t hdr[4] = {SUP_CKPT_MAGIC, (int64_t)ck->key[0], (int64_t)ck->key[1], count};
    file_sum_put(&io, hdr, sizeof hdr);
    for (int k = 0; k < o->ns; k++) {
        if (!models[k]) continue;
        int64_t idx = k;
        file_sum_put(&io, &idx, sizeof idx);
        file_sum_put(&io, &models[k]->final_loss, sizeof models[k]->final_loss);
        file_sum_put(&io, models[k]->W, model_floats(o) * sizeof(float));
        file_sum_put(&io, models[k]->b, (size_t)o->c.n_features * sizeof(float));
    }
    file_sum_put_end(&io);
    if (io.bad) {
        file_atomic_abort(&fa);
        return err_set(ERR_IO, "%s: write failed", ck->path);
    }
    return file_atomic_commit(&fa);
}

static int finite_all(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return 0;
    return 1;
}

static sup_model *model_new(int n, int m)
{
    sup_model *s = mem_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->n = n;
    s->m = m;
    s->W = mem_alloc(sizeof(float) * (size_t)n * m);
    s->b = mem_alloc(sizeof(float) * (size_t)n);
    if (!s->W || !s->b) {
        sup_model_free(s);
        return NULL;
    }
    return s;
}

/* The models a killed run finished into models[] (the others stay NULL); returns how many. */
static int ckpt_load(const sup_ckpt *ck, const sup_run_opts *o, sup_model **models)
{
    file_sum io;
    int64_t fsize = 0;
    const char *why = file_sum_open(ck->path, &io, &fsize);
    if (!why && !io.f) return 0;
    int64_t hdr[4] = {0};
    file_sum_get(&io, hdr, sizeof hdr);
    if (!why) {
        if (io.bad) why = "cannot be read";
        else if (hdr[0] != SUP_CKPT_MAGIC) why = "is not a superpose checkpoint of this build";
        else if ((uint64_t)hdr[1] != ck->key[0] || (uint64_t)hdr[2] != ck->key[1])
            why = "was made with other settings";
        else if (hdr[3] < 1 || hdr[3] > o->ns) why = "is damaged (its count)";
    }
    int got = 0;
    for (int64_t i = 0; !why && i < hdr[3]; i++) {
        int64_t k = -1;
        double loss = NAN;
        file_sum_get(&io, &k, sizeof k);
        file_sum_get(&io, &loss, sizeof loss);
        if (io.bad || k < 0 || k >= o->ns || models[k] || !(loss >= 0) || !isfinite(loss)) {
            why = "is damaged (a model's index or loss)";
            break;
        }
        sup_model *s = model_new(o->c.n_features, o->c.n_hidden);
        if (!s) {
            why = "needs more memory than there is";
            break;
        }
        models[k] = s;
        s->final_loss = loss;
        file_sum_get(&io, s->W, model_floats(o) * sizeof(float));
        file_sum_get(&io, s->b, (size_t)o->c.n_features * sizeof(float));
        if (io.bad) why = "is damaged (cut short)";
        else if (!finite_all(s->W, model_floats(o)) || !finite_all(s->b, (size_t)o->c.n_features))
            why = "is damaged (a weight that is not finite)";
        got++;
    }
    if (!why && !file_sum_get_end(&io)) why = "is damaged (its checksum fails)";
    if (io.f) fclose(io.f);
    if (!why) {
        progress_notice(o->notice, o->user, "continuing with the %d model%s finished before (%s)",
                        got, got == 1 ? "" : "s", ck->path);
        return got;
    }
    for (int k = 0; k < o->ns; k++) {
        sup_model_free(models[k]);
        models[k] = NULL;
    }
    progress_notice(o->notice, o->user, "%s %s: training every model", ck->path, why);
    return 0;
}

/* ---- progress -------------------------------------------------------------------------------- */
/* One progress line over every sparsity (a reporter per sparsity printed nothing when each model
   took less than the first line's delay: 7 models of 2.5 s, 17 s in silence) */
typedef struct {
    progress p;
    double S, base; /* steps of the sparsities before this one */
    volatile int *stop;
} prog_state;

static int on_step(int step, int total, double loss, void *user)
{
    prog_state *ps = user;
    /* every step (progress_update draws only every few seconds): every 50th step left a wide
       model silent for its first 17 minutes (an audit) */
    progress_update(&ps->p, ps->base + step, "S=%.4g loss %.5f", ps->S, loss);
    return ps->stop && *ps->stop;
}

/* ---- outputs ----------------------------------------------------------------------------------- */
static int write_outputs(const sup_run_opts *o, sup_model *const *models, const sup_feature *feat)
{
    const char *out = o->out_dir;
    int n = o->c.n_features, m = o->c.n_hidden, rc;
    char path[4096];
    float *G = mem_alloc(sizeof(float) * (size_t)n * n);
    if (!G) return err_set(ERR_NOMEM, "out of memory");
    if ((rc = file_mkdir_p(out))) goto done;
    for (int k = 0; k < o->ns; k++) {
        const sup_model *s = models[k];
        int64_t shw[2] = {n, m}, shb[1] = {n}, shg[2] = {n, n};
        sup_gram(s, G);
        if ((rc = path_fmt(path, sizeof path, "%s/W_S%s.npy", out, o->names[k])) ||
            (rc = npy_write(path, s->W, 2, shw)))
            goto done;
        if ((rc = path_fmt(path, sizeof path, "%s/b_S%s.npy", out, o->names[k])) ||
            (rc = npy_write(path, s->b, 1, shb)))
            goto done;
        if ((rc = path_fmt(path, sizeof path, "%s/gram_S%s.npy", out, o->names[k])) ||
            (rc = npy_write(path, G, 2, shg)))
            goto done;
    }
    file_atomic a;
    if ((rc = path_join(path, sizeof path, out, "features.csv")) || (rc = file_atomic_open(&a, path)))
        goto done;
    fprintf(a.f, "sparsity,feature,importance,norm,superposition,dimensionality,bias\n");
    for (int k = 0; k < o->ns; k++)
        for (int i = 0; i < n; i++) {
            const sup_feature *x = &feat[(size_t)k * n + i];
            fprintf(a.f, "%s,%d,%.6g,%.6f,%.6f,%.6f,%.6f\n", o->names[k], i, pow(o->c.importance_decay, i),
                    x->norm, x->superposition, x->dimensionality, models[k]->b[i]);
        }
    if ((rc = file_atomic_commit(&a))) goto done;
    if ((rc = path_join(path, sizeof path, out, "summary.csv")) || (rc = file_atomic_open(&a, path)))
        goto done;
    fprintf(a.f, "sparsity,loss,dims_per_feature,represented\n");
    for (int k = 0; k < o->ns; k++)
        fprintf(a.f, "%s,%.8f,%.6f,%d\n", o->names[k], models[k]->final_loss,
                sup_dims_per_feature(models[k]), sup_represented(models[k]));
    if ((rc = file_atomic_commit(&a))) goto done;
    if ((rc = path_join(path, sizeof path, out, "superpose.png")) ||
        (rc = sup_render(path, models, o->sparsity, o->ns, o->c.importance_decay)))
        goto done;
    if ((rc = path_join(path, sizeof path, out, "dimensionality.png")) ||
        (rc = sup_render_dimensionality(path, models, o->sparsity, o->ns)))
        goto done;
done:
    mem_free(G);
    return rc;
}

/* ---- the run ---------------------------------------------------------------------------------- */
void sup_run_result_free(sup_run_result *r)
{
    for (int k = 0; r->models && k < r->ns; k++) sup_model_free(r->models[k]);
    mem_free(r->models);
    mem_free(r->feat);
    memset(r, 0, sizeof *r);
}

int sup_run(const sup_run_opts *o, sup_run_result *res)
{
    memset(res, 0, sizeof *res);
    if (o->ns < 1 || !o->sparsity || !o->names) return err_set(ERR_ARG, "superpose: no sparsity given");
    double t0 = now_seconds();
    res->ns = o->ns;
    res->models = mem_calloc((size_t)o->ns, sizeof *res->models);
    res->feat = mem_alloc(sizeof *res->feat * (size_t)o->c.n_features * o->ns);
    if (!res->models || !res->feat) return err_set(ERR_NOMEM, "out of memory");
    sup_ckpt ck = {{0}};
    if (o->out_dir) { /* the name also without checkpoints: a finished run removes a killed run's */
        size_t l = strlen(o->out_dir);
        while (l > 1 && o->out_dir[l - 1] == '/') l--;
        if (path_fmt(ck.path, sizeof ck.path, "%.*s.superpose-ckpt", (int)l, o->out_dir)) {
            ck.path[0] = 0;
            err_clear();
        } else file_remove_dead_temps_plain(ck.path, 0);
    }
    int save = ck.path[0] && o->ckpt;
    if (save) {
        /* the checkpoint sits beside -o, whose missing parents were made only at the end: with
           -o new/dir no checkpoint could be written and a kill started over (an audit) */
        char parent[sizeof ck.path];
        snprintf(parent, sizeof parent, "%s", ck.path);
        char *sl = strrchr(parent, '/');
        if (sl && sl != parent) {
            *sl = 0;
            if (file_mkdir_p(parent)) err_clear(); /* the first save then says why, as before */
        }
        ckpt_key(o, ck.key);
        res->resumed = ckpt_load(&ck, o, res->models);
    }
    prog_state ps = {.stop = o->stop};
    progress_begin(&ps.p, "superpose", (double)o->c.steps * o->c.instances * o->ns, "step");
    int rc = OK;
    for (int k = 0; k < o->ns && !rc; k++) {
        sup_config c = o->c;
        c.sparsity = o->sparsity[k];
        ps.S = o->sparsity[k];
        ps.base = (double)k * c.steps * c.instances;
        int fresh = !res->models[k];
        if (fresh) rc = sup_train(&c, &res->models[k], on_step, &ps);
        progress_end(&ps.p); /* clears a terminal's line for the row below; the count goes on */
        if (rc) break;
        sup_feature *feat = res->feat + (size_t)k * o->c.n_features;
        sup_features(res->models[k], feat);
        if (o->row) o->row(o->user, k, res->models[k], feat, !fresh);
        if (fresh && save && ckpt_save(&ck, o, res->models)) { /* only a cache: the run goes on */
            progress_notice(o->notice, o->user, "no more checkpoints: %s", err_msg());
            err_clear();
            save = 0;
        }
    }
    if (!rc && o->out_dir) rc = write_outputs(o, res->models, res->feat);
    if (!rc && ck.path[0]) unlink(ck.path); /* written: nothing left to continue */
    res->seconds = now_seconds() - t0;
    if (rc) sup_run_result_free(res);
    return rc;
}
