/* pack.c - packing nearly orthogonal unit vectors (see toy.h).
 *
 * Objective: the smoothed maximum (1/beta) log sum_{i != j} exp(beta |cos_ij|) with
 * beta = sharpness / s, s the largest |cos| of the current iterate, so the pairs within a few
 * percent of the maximum carry the gradient. Each step computes cos for one row block at a time
 * with sgemm, turns it into weights, accumulates the gradient (dense sgemm when many weights
 * are non-zero, a sparse loop otherwise), projects it onto the tangent space of the sphere and
 * moves every vector by at most `lr` radians (the most pushed one moves exactly lr).
 */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"
#include "common/rng.h"
#include "toy/toy.h"

void pack_config_default(pack_config *c, int dim, int count)
{
    memset(c, 0, sizeof *c);
    c->dim = dim;
    c->count = count;
    c->steps = 300;
    c->lr = 0.2;
    c->sharpness = 20;
    c->seed = 0;
}

static void normalize_rows(float *V, int count, int dim)
{
    for (int i = 0; i < count; i++) {
        float *v = V + (size_t)i * dim;
        double s = 0;
        for (int k = 0; k < dim; k++) s += (double)v[k] * v[k];
        if (s <= 0) { /* a zero vector has no direction: use a coordinate axis */
            v[i % dim] = 1;
            continue;
        }
        float inv = (float)(1.0 / sqrt(s));
        for (int k = 0; k < dim; k++) v[k] *= inv;
    }
}

void pack_random(float *V, int count, int dim, uint64_t seed)
{
    rng_state r;
    rng_seed(&r, seed);
    for (size_t i = 0; i < (size_t)count * dim; i++) V[i] = (float)rng_normal(&r);
    normalize_rows(V, count, dim);
}

/* Rows per block so that a block of cosines stays near 32 MB. */
static int block_rows(int count)
{
    long b = (8L << 20) / count;
    if (b < 1) b = 1;
    if (b > count) b = count;
    return (int)b;
}

double pack_welch_bound(int count, int dim)
{
    if (count <= dim || count < 2) return 0;
    return sqrt((double)(count - dim) / ((double)dim * (count - 1)));
}

double pack_jl_eps(int count, int dim) { return sqrt(4.0 * log((double)count) / dim); }

double pack_jl_dim(int count, double eps) { return 4.0 * log((double)count) / (eps * eps); }

static int check(int count, int dim)
{
    if (dim < 1 || count < 2 || (int64_t)count * dim > (1L << 30))
        return err_set(ERR_ARG, "need dim >= 1 and count >= 2 and count * dim <= 2^30 (got dim=%d, count=%d)",
                       dim, count);
    /* every pass (a measure, an optimiser step) multiplies all pairs: count^2 dim / 2
       multiply-adds. 1e6 x 10 passed the size check and ran for days, silent (an audit). */
    if ((double)count * count * dim > PACK_MAX_WORK)
        return err_set(ERR_ARG, "count^2 x dim = %.3g is more than %.3g (each pass multiplies every "
                       "pair: count %d, dim %d would take hours a pass)", (double)count * count * dim,
                       PACK_MAX_WORK, count, dim);
    return OK;
}

int pack_measure(const float *V, int count, int dim, pack_stats *st, int64_t *hist, int nbins)
{
    return pack_measure_cb(V, count, dim, st, hist, nbins, NULL, NULL);
}

int pack_measure_cb(const float *V, int count, int dim, pack_stats *st, int64_t *hist, int nbins,
                    toy_progress_fn cb, void *user)
{
    int rc = check(count, dim);
    if (rc) return rc;
    int nonfinite = 0;
    int bs = block_rows(count);
    float *C = mem_alloc(sizeof(float) * (size_t)bs * count);
    if (!C) return err_set(ERR_NOMEM, "out of memory for %d x %d cosines", bs, count);
    if (hist) memset(hist, 0, sizeof(int64_t) * nbins);
    double mx = 0, sum = 0, sum2 = 0, cmin = 1, cmax = -1;
    for (int r0 = 0; r0 < count; r0 += bs) {
        int nr = count - r0 < bs ? count - r0 : bs;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, count, dim, 1.0f,
                    V + (size_t)r0 * dim, dim, V, dim, 0.0f, C, count);
        for (int i = 0; i < nr; i++) {
            const float *ci = C + (size_t)i * count;
            for (int j = r0 + i + 1; j < count; j++) {
                double c = ci[j];
                if (c != c) { /* a NaN skipped measured NaN vectors as max |cos| 0 (an audit) */
                    nonfinite = 1;
                    continue;
                }
                if (c > 1) c = 1;
                if (c < -1) c = -1;
                double a = fabs(c);
                if (a > mx) mx = a;
                sum += a;
                sum2 += c * c;
                if (c < cmin) cmin = c;
                if (c > cmax) cmax = c;
                if (hist && c == c) { /* a NaN cosine has no bin (and (int)NaN is UB) */
                    int b = (int)(acos(c) * (180.0 / M_PI) / 180.0 * nbins);
                    hist[b < 0 ? 0 : b >= nbins ? nbins - 1 : b]++;
                }
            }
        }
        if (cb && cb(r0 + nr, count, mx, user)) {
            mem_free(C);
            return err_set(ERR_ABORTED, "interrupted while measuring (row %d of %d)", r0 + nr, count);
        }
    }
    mem_free(C);
    if (nonfinite) return err_set(ERR_ARG, "the vectors are not finite (a NaN cosine)");
    int64_t pairs = (int64_t)count * (count - 1) / 2;
    st->pairs = pairs;
    st->max_abs_cos = mx;
    st->mean_abs_cos = sum / pairs;
    st->rms_cos = sqrt(sum2 / pairs);
    st->min_angle_deg = acos(cmax) * 180.0 / M_PI;
    st->max_angle_deg = acos(cmin) * 180.0 / M_PI;
    return OK;
}

/* One pass: cosines of V, the largest |cos| (returned in *mx), and the (unnormalised)
 * gradient G of sum exp(beta (|cos| - s)) over pairs i != j (rows of G are not yet projected). */
static void grad_pass(const float *V, int count, int dim, int bs, float *C, float *G, double s,
                      double beta, double *mx)
{
    double m = 0;
    memset(G, 0, sizeof(float) * (size_t)count * dim);
    for (int r0 = 0; r0 < count; r0 += bs) {
        int nr = count - r0 < bs ? count - r0 : bs;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, count, dim, 1.0f,
                    V + (size_t)r0 * dim, dim, V, dim, 0.0f, C, count);
        long nnz = 0;
        const float fb = (float)beta, fs = (float)s;
        for (int i = 0; i < nr; i++) {
            float *ci = C + (size_t)i * count;
            ci[r0 + i] = 0; /* no self pair */
            float rm = 0;
            for (int j = 0; j < count; j++) {
                float a = fabsf(ci[j]);
                rm = a > rm ? a : rm;
                float e = fb * (a - fs);
                if (e < -25.0f) { /* weight below 1.4e-11 of the maximum's: nothing */
                    ci[j] = 0;
                    continue;
                }
                float w = expf(e < 60.0f ? e : 60.0f);
                ci[j] = ci[j] > 0 ? w : -w;
                nnz++;
            }
            ci[r0 + i] = 0;
            if (rm > m) m = rm;
        }
        float *Gb = G + (size_t)r0 * dim;
        if (nnz > (long)nr * count / 16) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, dim, count, 1.0f, C, count,
                        V, dim, 0.0f, Gb, dim);
        } else {
            for (int i = 0; i < nr; i++) {
                const float *ci = C + (size_t)i * count;
                float *g = Gb + (size_t)i * dim;
                for (int j = 0; j < count; j++)
                    if (ci[j] != 0) cblas_saxpy(dim, ci[j], V + (size_t)j * dim, 1, g, 1);
            }
        }
    }
    *mx = m;
}

int pack_optimize(const pack_config *c, float *V, int init, toy_progress_fn cb, void *user)
{
    int count = c->count, dim = c->dim;
    int rc = check(count, dim);
    if (rc) return rc;
    if (c->steps < 0 || !(c->lr > 0) || !(c->sharpness > 0))
        return err_set(ERR_ARG, "need steps >= 0, lr > 0, sharpness > 0");
    if (init) normalize_rows(V, count, dim);
    else pack_random(V, count, dim, c->seed);
    int bs = block_rows(count);
    size_t nv = (size_t)count * dim;
    float *C = mem_alloc(sizeof(float) * (size_t)bs * count);
    float *G = mem_alloc(sizeof(float) * nv), *best = mem_alloc(sizeof(float) * nv);
    if (!C || !G || !best) {
        rc = err_set(ERR_NOMEM, "out of memory (count=%d, dim=%d)", count, dim);
        goto done;
    }
    memcpy(best, V, sizeof(float) * nv);
    pack_stats st;
    if ((rc = pack_measure(V, count, dim, &st, NULL, 0))) goto done;
    double s = st.max_abs_cos, best_max = s;
    for (int t = 0; t < c->steps; t++) {
        double cur;
        grad_pass(V, count, dim, bs, C, G, s, c->sharpness / (s > 1e-6 ? s : 1e-6), &cur);
        if (cur < best_max) { /* cur belongs to V before this step's update */
            best_max = cur;
            memcpy(best, V, sizeof(float) * nv);
        }
        s = cur;
        double gmax = 0;
        for (int i = 0; i < count; i++) {
            float *g = G + (size_t)i * dim, *v = V + (size_t)i * dim;
            float radial = cblas_sdot(dim, g, 1, v, 1);
            cblas_saxpy(dim, -radial, v, 1, g, 1);
            double n2 = cblas_sdot(dim, g, 1, g, 1);
            if (n2 > gmax) gmax = n2;
        }
        if (gmax <= 0) break; /* nothing to push (e.g. count <= dim and orthogonal) */
        double lr = c->lr * pow(1e-3, t / (double)(c->steps > 1 ? c->steps - 1 : 1));
        /* G holds d/dV of sum exp(...): move against it, scaled so the largest step is lr */
        cblas_saxpy((int)nv, (float)(-lr / sqrt(gmax)), G, 1, V, 1);
        normalize_rows(V, count, dim);
        for (size_t i = 0; i < nv; i++)
            if (!isfinite(V[i])) {
                rc = err_set(ERR_ARG, "the vectors diverged at step %d (lower --lr)", t + 1);
                goto done;
            }
        if (cb && cb(t + 1, c->steps, best_max, user)) {
            rc = err_set(ERR_ABORTED, "interrupted at step %d", t + 1);
            goto done;
        }
    }
    if ((rc = pack_measure(V, count, dim, &st, NULL, 0))) goto done;
    if (st.max_abs_cos > best_max) memcpy(V, best, sizeof(float) * nv);
done:
    mem_free(C);
    mem_free(G);
    mem_free(best);
    return rc;
}
