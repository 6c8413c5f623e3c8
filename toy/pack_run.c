/* pack_run.c - `saelite pack` as a library call: a random set and an optimised set of unit
 * vectors, their pair statistics, and with an output directory their files. */
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "common/npy.h"
#include "common/progress.h"
#include "toy/toy.h"

typedef struct {
    progress p;
    volatile int *stop;
} pack_prog;

static int on_step(int step, int total, double best, void *user)
{
    pack_prog *pp = user;
    progress_update(&pp->p, step, "max |cos| %.4f", best);
    return pp->stop && *pp->stop;
}

/* The measuring passes over every pair: progress in rows and a stop (they ran minutes silent
   and deaf to SIGTERM, an audit). */
static int on_rows(int rows, int total, double mx, void *user)
{
    pack_prog *pp = user;
    progress_update(&pp->p, rows, "max |cos| so far %.4f", mx);
    return pp->stop && *pp->stop;
}

static int measure(const pack_run_opts *o, const char *what, const float *V, pack_stats *st,
                   int64_t *hist)
{
    pack_prog pp = {.stop = o->stop};
    progress_begin(&pp.p, what, o->c.count, "row");
    int rc = pack_measure_cb(V, o->c.count, o->c.dim, st, hist, PACK_NBINS, on_rows, &pp);
    progress_end(&pp.p);
    return rc;
}

static int write_outputs(const pack_run_opts *o, const pack_run_result *r)
{
    const char *out = o->out_dir;
    char path[4096];
    int64_t sh[2] = {o->c.count, o->c.dim};
    int rc = file_mkdir_p(out); /* after the work: an interrupted run leaves none */
    if (!rc) rc = path_join(path, sizeof path, out, "vectors.npy");
    if (!rc) rc = npy_write(path, r->V, 2, sh);
    if (rc) return rc;
    file_atomic a;
    if ((rc = path_join(path, sizeof path, out, "angles.csv")) || (rc = file_atomic_open(&a, path)))
        return rc;
    fprintf(a.f, "angle_lo_deg,angle_hi_deg,random_pairs,optimized_pairs\n");
    for (int b = 0; b < PACK_NBINS; b++)
        if (r->hist_random[b] || r->hist_opt[b])
            fprintf(a.f, "%.1f,%.1f,%lld,%lld\n", b * 0.1, (b + 1) * 0.1, (long long)r->hist_random[b],
                    (long long)r->hist_opt[b]);
    if ((rc = file_atomic_commit(&a))) return rc;
    if ((rc = path_join(path, sizeof path, out, "angles.png"))) return rc;
    return pack_render(path, o->c.count, o->c.dim, r->hist_random, r->hist_opt, PACK_NBINS,
                       o->range_lo, o->range_hi);
}

void pack_run_result_free(pack_run_result *r)
{
    mem_free(r->V);
    mem_free(r->hist_random);
    mem_free(r->hist_opt);
    memset(r, 0, sizeof *r);
}

int pack_run(const pack_run_opts *o, pack_run_result *r)
{
    memset(r, 0, sizeof *r);
    const pack_config *c = &o->c;
    if (c->dim < 1 || c->count < 2 || (int64_t)c->dim * c->count > (1L << 30))
        return err_set(ERR_ARG, "pack: %d vectors in %d dimensions: want count >= 2, dim >= 1, "
                       "count x dim <= 2^30", c->count, c->dim);
    size_t nv = (size_t)c->dim * c->count;
    float *R = mem_alloc(sizeof(float) * nv);
    r->V = mem_alloc(sizeof(float) * nv);
    r->hist_random = mem_alloc(sizeof(int64_t) * PACK_NBINS);
    r->hist_opt = mem_alloc(sizeof(int64_t) * PACK_NBINS);
    int rc = R && r->V && r->hist_random && r->hist_opt
                 ? OK : err_set(ERR_NOMEM, "out of memory for %d x %d vectors", c->count, c->dim);
    if (!rc) {
        pack_random(R, c->count, c->dim, c->seed);
        rc = measure(o, "pack: random set", R, &r->random, r->hist_random);
    }
    if (!rc) {
        memcpy(r->V, R, sizeof(float) * nv);
        pack_prog pp = {.stop = o->stop};
        progress_begin(&pp.p, "pack", c->steps, "step");
        double t0 = now_seconds();
        rc = pack_optimize(c, r->V, 1, on_step, &pp);
        progress_end(&pp.p);
        r->seconds = now_seconds() - t0;
    }
    if (!rc) rc = measure(o, "pack: optimised set", r->V, &r->opt, r->hist_opt);
    if (!rc && o->out_dir) rc = write_outputs(o, r);
    mem_free(R);
    if (rc) pack_run_result_free(r);
    return rc;
}
