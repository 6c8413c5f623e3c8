/* superpose.c - toy models of superposition (see toy.h). */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"
#include "common/rng.h"
#include "toy/toy.h"

void sup_config_default(sup_config *c, int n, int m)
{
    memset(c, 0, sizeof *c);
    c->n_features = n;
    c->n_hidden = m;
    c->sparsity = 0;
    c->importance_decay = 0.7;
    c->steps = 10000;
    c->batch = 1024;
    c->lr = 1e-3;
    c->instances = 1;
    c->seed = 0;
}

static int check_config(const sup_config *c)
{
    if (c->n_features < 1 || c->n_hidden < 1 || c->n_features > 100000 || c->n_hidden > 100000)
        return err_set(ERR_ARG, "need 1 <= m, n <= 100000 (got n=%d, m=%d)",
                       c->n_features, c->n_hidden);
    if (!(c->sparsity >= 0 && c->sparsity < 1))
        return err_set(ERR_ARG, "sparsity must be in [0,1), got %g", c->sparsity);
    if (!(c->importance_decay > 0 && c->importance_decay <= 1))
        return err_set(ERR_ARG, "importance decay must be in (0,1], got %g",
                       c->importance_decay);
    if (c->steps < 0 || c->batch < 1 || !(c->lr > 0) || c->instances < 1)
        return err_set(ERR_ARG, "need steps >= 0, batch >= 1, lr > 0, instances >= 1");
    /* the progress counts steps x instances in an int (--instances 2147483647 overflowed it:
       UBSan, an audit) */
    if ((int64_t)c->steps * c->instances > INT32_MAX)
        return err_set(ERR_ARG, "steps x instances is %lld, above %d", (long long)c->steps * c->instances,
                       INT32_MAX);
    return OK;
}

/* x[B,n]: each feature 0 with probability S, else uniform in [0,1). One draw per entry:
 * u in [S,1) rescaled is uniform given that it is non-zero. */
static void sample_batch(rng_state *r, float *x, int B, int n, double S)
{
    for (long i = 0; i < (long)B * n; i++) {
        double u = rng_uniform(r);
        x[i] = u < S ? 0.0f : (float)((u - S) / (1.0 - S));
    }
}

/* Forward pass: h[B,m] = x W, z[B,n] = h W^T + b, out = ReLU(z) (stored in z).
 * Returns the importance-weighted loss summed over the batch. If dz != NULL it receives
 * d(loss/B)/dz. */
static double forward(const float *W, const float *b, const float *imp, const float *x, int B,
                      int n, int m, float *h, float *z, float *dz)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, m, n, 1.0f, x, n, W, m, 0.0f, h,
                m);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, n, m, 1.0f, h, m, W, m, 0.0f, z, n);
    double loss = 0;
    for (int r = 0; r < B; r++) {
        float *zr = z + (size_t)r * n;
        const float *xr = x + (size_t)r * n;
        for (int i = 0; i < n; i++) {
            float pre = zr[i] + b[i];
            float out = pre > 0 ? pre : 0;
            float d = out - xr[i];
            loss += (double)imp[i] * d * d;
            if (dz) dz[(size_t)r * n + i] = pre > 0 ? 2.0f * imp[i] * d / (float)B : 0.0f;
            zr[i] = out;
        }
    }
    return loss;
}

static void adam(float *p, const float *g, float *mo, float *v, long n, double lr, int t)
{
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    double c1 = 1 - pow(b1, t), c2 = 1 - pow(b2, t);
    for (long i = 0; i < n; i++) {
        mo[i] = (float)(b1 * mo[i] + (1 - b1) * g[i]);
        v[i] = (float)(b2 * v[i] + (1 - b2) * (double)g[i] * g[i]);
        p[i] -= (float)(lr * (mo[i] / c1) / (sqrt(v[i] / c2) + eps));
    }
}

static float *importances(int n, double r)
{
    float *imp = mem_alloc(sizeof(float) * n);
    if (imp)
        for (int i = 0; i < n; i++) imp[i] = (float)pow(r, i);
    return imp;
}

void sup_model_free(sup_model *s)
{
    if (!s) return;
    mem_free(s->W);
    mem_free(s->b);
    mem_free(s);
}

int sup_eval(const sup_model *s, const sup_config *c, int samples, uint64_t seed, double *loss)
{
    int n = s->n, m = s->m, B = 1024;
    float *imp = importances(n, c->importance_decay);
    float *x = mem_alloc(sizeof(float) * B * n), *h = mem_alloc(sizeof(float) * B * m),
          *z = mem_alloc(sizeof(float) * B * n);
    int rc = OK;
    if (!imp || !x || !h || !z) rc = err_set(ERR_NOMEM, "out of memory");
    rng_state r;
    rng_seed(&r, seed);
    double total = 0;
    for (int done = 0; rc == OK && done < samples; done += B) {
        int nb = samples - done < B ? samples - done : B;
        sample_batch(&r, x, nb, n, c->sparsity);
        total += forward(s->W, s->b, imp, x, nb, n, m, h, z, NULL);
    }
    if (rc == OK) *loss = samples > 0 ? total / samples : 0;
    mem_free(imp);
    mem_free(x);
    mem_free(h);
    mem_free(z);
    return rc;
}

/* Evaluation samples: `want`, fewer for wide models so an evaluation costs at most ~2e11 flops
 * (about 4 n m a sample; --n 10000 --m 10000 spent over 10 minutes in 2^18 samples, silent and
 * deaf to SIGTERM), never fewer than 1024. */
static int eval_samples(const sup_config *c, int want)
{
    double cap = 2e11 / (4.0 * c->n_features * c->n_hidden);
    return cap >= want ? want : cap > 1024 ? (int)cap : 1024;
}

/* One instance from `seed`; progress steps are offset by `base` of `total`. */
static int train_one(const sup_config *c, uint64_t seed, sup_model **out, toy_progress_fn cb,
                     void *user, int base, int total)
{
    int rc = OK;
    int n = c->n_features, m = c->n_hidden, B = c->batch;
    sup_model *s = mem_calloc(1, sizeof *s);
    float *imp = importances(n, c->importance_decay);
    size_t nw = (size_t)n * m;
    /* one block: grads and Adam moments for W then b */
    float *gw = mem_calloc(3 * (nw + n), sizeof(float));
    float *x = mem_alloc(sizeof(float) * B * n), *h = mem_alloc(sizeof(float) * B * m),
          *z = mem_alloc(sizeof(float) * B * n), *dz = mem_alloc(sizeof(float) * B * n),
          *dh = mem_alloc(sizeof(float) * B * m);
    if (s) {
        s->n = n;
        s->m = m;
        s->W = mem_alloc(sizeof(float) * nw);
        s->b = mem_calloc(n, sizeof(float));
    }
    if (!s || !imp || !gw || !x || !h || !z || !dz || !dh || !s->W || !s->b) {
        rc = err_set(ERR_NOMEM, "out of memory (n=%d, m=%d, batch=%d)", n, m, B);
        goto done;
    }
    float *gb = gw + nw, *mw = gb + n, *mb = mw + nw, *vw = mb + n, *vb = vw + nw;
    rng_state r;
    rng_seed(&r, seed);
    /* Xavier normal, as torch.nn.init.xavier_normal_ on the paper's [m,n] W */
    double sd = sqrt(2.0 / (n + m));
    for (size_t i = 0; i < nw; i++) s->W[i] = (float)(sd * rng_normal(&r));
    for (int t = 1; t <= c->steps; t++) {
        sample_batch(&r, x, B, n, c->sparsity);
        double loss = forward(s->W, s->b, imp, x, B, n, m, h, z, dz) / B;
        memset(gb, 0, sizeof(float) * n);
        for (int rr = 0; rr < B; rr++)
            for (int i = 0; i < n; i++) gb[i] += dz[(size_t)rr * n + i];
        /* dW = dz^T h (decoder side) + x^T (dz W) (encoder side) */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, m, B, 1.0f, dz, n, h, m, 0.0f, gw,
                    m);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, m, n, 1.0f, dz, n, s->W, m, 0.0f,
                    dh, m);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, m, B, 1.0f, x, n, dh, m, 1.0f, gw,
                    m);
        adam(s->W, gw, mw, vw, (long)nw, c->lr, t);
        adam(s->b, gb, mb, vb, n, c->lr, t);
        /* the ReLU maps a NaN pre-activation to 0, so NaN weights kept the loss finite (that of
           an all-zero output) and a diverged model was written, exit 0 (an audit) */
        int finite = isfinite(loss);
        /* targets lie in [0, 1], so a loss past 1e6 x the importances' sum means outputs ~1000
           off: --lr 1e9 ran to 3e39 with finite floats and was printed as a result (an audit) */
        double isum = 0;
        for (int i = 0; i < n; i++) isum += imp[i];
        if (finite && loss > 1e6 * isum) finite = 0;
        for (size_t i = 0; finite && i < nw; i++) finite = isfinite(s->W[i]);
        for (int i = 0; finite && i < n; i++) finite = isfinite(s->b[i]);
        if (!finite) {
            rc = err_set(ERR_ARG, "loss diverged at step %d (lower --lr)", t);
            goto done;
        }
        if (cb && cb(base + t, total, loss, user)) {
            rc = err_set(ERR_ABORTED, "interrupted at step %d", t);
            goto done;
        }
    }
    rc = sup_eval(s, c, eval_samples(c, 8192), c->seed ^ 0x5eed5eedULL, &s->final_loss);
done:
    mem_free(imp);
    mem_free(gw);
    mem_free(x);
    mem_free(h);
    mem_free(z);
    mem_free(dz);
    mem_free(dh);
    if (rc) sup_model_free(s);
    else *out = s;
    return rc;
}

int sup_train(const sup_config *c, sup_model **out, toy_progress_fn cb, void *user)
{
    *out = NULL;
    int rc = check_config(c);
    if (rc) return rc;
    sup_model *best = NULL;
    int total = c->steps * c->instances;
    for (int k = 0; k < c->instances; k++) {
        sup_model *s;
        rc = train_one(c, c->seed + (uint64_t)k, &s, cb, user, k * c->steps, total);
        if (rc) break;
        if (!best || s->final_loss < best->final_loss) {
            sup_model_free(best);
            best = s;
        } else sup_model_free(s);
    }
    /* the loss that chose the best instance is biased low (the minimum of several estimates on
       one sample set): report it on a larger set of its own */
    if (!rc && best)
        rc = sup_eval(best, c, eval_samples(c, SUP_EVAL_SAMPLES), c->seed ^ 0x7e57e7a1ULL,
                      &best->final_loss);
    if (rc) sup_model_free(best);
    else *out = best;
    return rc;
}

void sup_gram(const sup_model *s, float *G)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->n, s->n, s->m, 1.0f, s->W, s->m, s->W,
                s->m, 0.0f, G, s->n);
}

/* The dot products W_i . W_j come from sgemm, 64 rows of W W^T at a time: n^2 m of them were
 * scalar loops, over 10 minutes at --n 10000 --m 10000 (audit). */
void sup_features(const sup_model *s, sup_feature *feat)
{
    enum { BLK = 64 };
    int n = s->n, m = s->m;
    float *G = mem_alloc(sizeof(float) * (size_t)BLK * n);
    for (int i0 = 0; i0 < n; i0 += BLK) {
        int nb = n - i0 < BLK ? n - i0 : BLK;
        if (G)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nb, n, m, 1.0f,
                        s->W + (size_t)i0 * m, m, s->W, m, 0.0f, G, n);
        for (int i = i0; i < i0 + nb; i++) {
            const float *wi = s->W + (size_t)i * m;
            double nn = 0;
            for (int k = 0; k < m; k++) nn += (double)wi[k] * wi[k];
            double norm = sqrt(nn), sup = 0;
            for (int j = 0; j < n && norm > 0; j++) {
                if (j == i) continue;
                double d;
                if (G) d = G[(size_t)(i - i0) * n + j];
                else { /* no scratch memory: the same sums one at a time */
                    const float *wj = s->W + (size_t)j * m;
                    d = 0;
                    for (int k = 0; k < m; k++) d += (double)wi[k] * wj[k];
                }
                d /= norm;
                sup += d * d;
            }
            feat[i].norm = (float)norm;
            feat[i].superposition = (float)sup;
            /* sum_j (W_i_hat . W_j)^2 includes j = i, which contributes ||W_i||^2. A feature
             * that is not represented (norm ~ 0) has no meaningful dimensionality: report 0. */
            feat[i].dimensionality = norm > 1e-3 ? (float)(nn / (nn + sup)) : 0.0f;
        }
    }
    mem_free(G);
}

double sup_dims_per_feature(const sup_model *s)
{
    double f = 0;
    for (size_t i = 0; i < (size_t)s->n * s->m; i++) f += (double)s->W[i] * s->W[i];
    return f > 0 ? s->m / f : INFINITY;
}

int sup_represented(const sup_model *s)
{
    int k = 0;
    for (int i = 0; i < s->n; i++) {
        double nn = 0;
        for (int j = 0; j < s->m; j++) nn += (double)s->W[(size_t)i * s->m + j] * s->W[(size_t)i * s->m + j];
        k += nn > 0.25; /* ||W_i|| > 0.5 */
    }
    return k;
}
