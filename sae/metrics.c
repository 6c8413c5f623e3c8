/* metrics.c - see metrics.h. */
#include "sae/metrics.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"
#include "common/npy.h"

int sae_metrics_init(sae_metrics *m, int d_in, int d_sae)
{
    memset(m, 0, sizeof *m);
    m->d_in = d_in;
    m->d_sae = d_sae;
    m->sum_x = mem_calloc(d_in, sizeof(double));
    m->fires = mem_calloc(d_sae > 0 ? d_sae : 1, sizeof(int64_t));
    if (!m->sum_x || !m->fires) {
        sae_metrics_free(m);
        return err_set(ERR_NOMEM, "metrics: out of memory");
    }
    return OK;
}

void sae_metrics_free(sae_metrics *m)
{
    mem_free(m->sum_x);
    mem_free(m->fires);
    m->sum_x = NULL;
    m->fires = NULL;
}

/* center: each row's mean over d_in is taken from both x and xhat first - a centred SAE
   (cfg.center_input) is scored on C x against its own reconstruction, as SAELens scores it (x - xhat
   is unchanged; the variance and cosine are C x's, not x's, an audit) */
static void metrics_add(sae_metrics *m, const float *x, const float *xhat, const float *f, int N,
                        int center)
{
    int D = m->d_in, S = m->d_sae;
    for (int b = 0; b < N; b++) {
        const float *xr = x + (int64_t)b * D, *hr = xhat + (int64_t)b * D;
        double se = 0, xx = 0, hh = 0, xh = 0, mu = 0;
        if (center) {
            for (int i = 0; i < D; i++) mu += xr[i];
            mu /= D;
        }
        for (int i = 0; i < D; i++) {
            double xv = (double)xr[i] - mu, hv = (double)hr[i] - mu;
            double d = xv - hv;
            se += d * d;
            xx += xv * xv;
            hh += hv * hv;
            xh += xv * hv;
            m->sum_x[i] += xv;
        }
        m->sse += se;
        m->sum_sq += xx;
        if (xx > 0 && hh > 0) m->cos_sum += xh / sqrt(xx * hh);
        if (xx > 0) {
            m->l2r_sum += sqrt(hh / xx);
            m->n_nonzero++;
        }
        if (f) {
            const float *fr = f + (int64_t)b * S;
            int64_t l0 = 0;
            for (int j = 0; j < S; j++)
                if (fr[j] > 0) {
                    l0++;
                    m->fires[j]++;
                }
            m->l0_sum += (double)l0;
        }
    }
    m->n += N;
}

void sae_metrics_add(sae_metrics *m, const float *x, const float *xhat, const float *f, int N)
{
    metrics_add(m, x, xhat, f, N, 0);
}

void sae_metrics_prefixes(sae_metrics *m, const sae_config *c)
{
    m->n_prefix = 0;
    if (c->arch != SAE_MATRYOSHKA || c->transcoder) return;
    for (int g = 0; g < c->n_widths && g < SAE_MAX_WIDTHS; g++)
        if (c->widths[g] > (g ? c->widths[g - 1] : 0) && c->widths[g] < c->d_sae)
            m->prefix_end[m->n_prefix++] = c->widths[g];
    memset(m->prefix_sse, 0, sizeof m->prefix_sse);
}

/* Each inner prefix's squared error on N rows: the reconstruction is built level by level in
   double, b_dec (+ the row's mean for a centred SAE, which sae_forward adds) plus the rows of
   W_dec of the latents j < end that fire, and compared with x after each level. */
static int prefix_add(sae_metrics *acc, const sae_model *m, const float *x, const float *f, int N)
{
    const int D = m->cfg.d_in, S = m->cfg.d_sae;
    double *h = mem_alloc(sizeof(double) * (size_t)D);
    if (!h) return err_set(ERR_NOMEM, "metrics: out of memory for the Matryoshka prefixes");
    for (int b = 0; b < N; b++) {
        const float *xr = x + (int64_t)b * D, *fr = f + (int64_t)b * S;
        double mu = 0;
        if (m->cfg.center_input) {
            for (int i = 0; i < D; i++) mu += xr[i];
            mu = (float)(mu / D);
        }
        for (int i = 0; i < D; i++) h[i] = (double)m->b_dec[i] + mu;
        for (int g = 0, j = 0; g < acc->n_prefix; g++) {
            for (; j < acc->prefix_end[g]; j++)
                if (fr[j] != 0) {
                    const float *w = m->W_dec + (int64_t)j * D;
                    for (int i = 0; i < D; i++) h[i] += (double)fr[j] * w[i];
                }
            double se = 0;
            for (int i = 0; i < D; i++) se += ((double)xr[i] - h[i]) * ((double)xr[i] - h[i]);
            acc->prefix_sse[g] += se;
        }
    }
    mem_free(h);
    return OK;
}

void sae_metrics_merge(sae_metrics *into, const sae_metrics *from)
{
    into->n += from->n;
    into->n_nonzero += from->n_nonzero;
    into->sse += from->sse;
    into->sum_sq += from->sum_sq;
    into->cos_sum += from->cos_sum;
    into->l2r_sum += from->l2r_sum;
    into->l0_sum += from->l0_sum;
    for (int i = 0; i < into->d_in; i++) into->sum_x[i] += from->sum_x[i];
    for (int j = 0; j < into->d_sae; j++) into->fires[j] += from->fires[j];
    for (int g = 0; g < into->n_prefix; g++) into->prefix_sse[g] += from->prefix_sse[g];
}

void sae_metrics_summarize(const sae_metrics *m, sae_metrics_summary *o)
{
    memset(o, 0, sizeof *o);
    o->n = m->n;
    if (m->n == 0) return;
    double n = (double)m->n, msq = 0;
    for (int i = 0; i < m->d_in; i++) msq += (m->sum_x[i] / n) * (m->sum_x[i] / n);
    double var = m->sum_sq - n * msq;
    o->mse = m->sse / (n * m->d_in);
    o->ev = var > 0 ? 1.0 - m->sse / var : 0;
    o->ev_defined = var > 0;
    o->cos = m->cos_sum / n;
    o->l2_ratio = m->n_nonzero ? m->l2r_sum / (double)m->n_nonzero : 0;
    o->l0 = m->l0_sum / n;
    int64_t dead = 0, dense = 0;
    for (int j = 0; j < m->d_sae; j++) {
        double d = m->fires[j] / n;
        dead += m->fires[j] == 0;
        dense += d > 0.1;
    }
    o->dead_frac = m->d_sae ? (double)dead / m->d_sae : 0;
    o->dense_frac = m->d_sae ? (double)dense / m->d_sae : 0;
    o->n_prefix = m->n_prefix;
    double fires = 0; /* of the latents below each prefix's end */
    for (int g = 0, j = 0; g < m->n_prefix; g++) {
        for (; j < m->prefix_end[g]; j++) fires += (double)m->fires[j];
        o->prefix_end[g] = m->prefix_end[g];
        o->prefix_mse[g] = m->prefix_sse[g] / (n * m->d_in);
        o->prefix_ev[g] = var > 0 ? 1.0 - m->prefix_sse[g] / var : 0;
        o->prefix_l0[g] = fires / n;
    }
}

void sae_metrics_log10_density(const sae_metrics *m, float *out)
{
    double n = m->n > 0 ? (double)m->n : 1;
    for (int j = 0; j < m->d_sae; j++) out[j] = (float)log10(m->fires[j] / n + 1e-10);
}

static float *unit_rows(const float *W, int R, int d)
{
    float *o = mem_alloc(sizeof(float) * (size_t)R * d);
    if (!o) return NULL;
    for (int r = 0; r < R; r++) {
        double ss = 0;
        for (int i = 0; i < d; i++) ss += (double)W[(int64_t)r * d + i] * W[(int64_t)r * d + i];
        float inv = ss > 0 ? (float)(1 / sqrt(ss)) : 0;
        for (int i = 0; i < d; i++) o[(int64_t)r * d + i] = W[(int64_t)r * d + i] * inv;
    }
    return o;
}

int sae_cosines(const float *A, int na, const float *B, int nb, int d, float *C)
{
    if (na < 1 || nb < 1 || d < 1) return err_set(ERR_SHAPE, "cosines: empty matrix");
    float *U = unit_rows(A, na, d), *V = unit_rows(B, nb, d);
    if (!U || !V) {
        mem_free(U);
        mem_free(V);
        return err_set(ERR_NOMEM, "cosines: out of memory");
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, na, nb, d, 1.0f, U, d, V, d, 0.0f, C, nb);
    mem_free(U);
    mem_free(V);
    return OK;
}

int sae_mmcs_match(const float *truth, int F, const float *W, int S, int d, double thr,
                   double *mmcs, double *recovered, float *best, int *match)
{
    if (F < 1 || S < 1 || d < 1)
        return err_set(ERR_SHAPE, "mmcs: empty input (%d true directions, %d learned, width %d)", F,
                       S, d);
    float *T = unit_rows(truth, F, d), *L = unit_rows(W, S, d);
    enum { CH = 256 };
    float *cs = mem_alloc(sizeof(float) * (size_t)CH * S);
    if (!T || !L || !cs) {
        mem_free(T);
        mem_free(L);
        mem_free(cs);
        return err_set(ERR_NOMEM, "mmcs: out of memory");
    }
    double sum = 0;
    int64_t rec = 0;
    for (int r0 = 0; r0 < F; r0 += CH) {
        int n = F - r0 < CH ? F - r0 : CH;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, S, d, 1.0f, T + (int64_t)r0 * d,
                    d, L, d, 0.0f, cs, S);
        for (int r = 0; r < n; r++) {
            float mx = -2;
            int arg = 0;
            for (int j = 0; j < S; j++)
                if (cs[(int64_t)r * S + j] > mx) {
                    mx = cs[(int64_t)r * S + j];
                    arg = j;
                }
            sum += mx;
            rec += mx > thr;
            if (best) best[r0 + r] = mx;
            if (match) match[r0 + r] = arg;
        }
    }
    *mmcs = sum / F;
    *recovered = (double)rec / F;
    mem_free(T);
    mem_free(L);
    mem_free(cs);
    return OK;
}

int sae_truth_check(const char *path, const float *truth, int64_t F, int d)
{
    int rc = npy_check_finite(path, truth, F, d);
    for (int64_t r = 0; !rc && r < F; r++) {
        int i = 0;
        while (i < d && truth[r * d + i] == 0) i++;
        if (i == d)
            rc = err_set(ERR_ARG, "%s: row %lld (a true direction) is all zeros", path, (long long)r);
    }
    return rc;
}

int sae_mmcs(const float *truth, int F, const float *W, int S, int d, double thr, double *mmcs,
             double *recovered, float *best)
{
    return sae_mmcs_match(truth, F, W, S, d, thr, mmcs, recovered, best, NULL);
}

/* Finite inputs and weights can still overflow float32 in the encoder or decoder (an entry near
 * 3e38): the metrics would be inf or NaN ("mse -nan", an L0 counted from NaN codes). Refused. */
static int check_out(const float *f, int64_t nf, const float *out, int64_t no)
{
    for (int64_t i = 0; i < nf; i++)
        if (!isfinite(f[i]))
            return err_set(ERR_ARG, "the SAE's latent activations are not finite (%g): its weights "
                           "or the inputs are too large for float32", (double)f[i]);
    for (int64_t i = 0; i < no; i++)
        if (!isfinite(out[i]))
            return err_set(ERR_ARG, "the SAE's reconstruction is not finite (%g): its weights or "
                           "the inputs are too large for float32", (double)out[i]);
    return OK;
}

int sae_metrics_eval_rows(sae_metrics *acc, const sae_model *m, const float *x, int n, float *f,
                          float *xhat)
{
    int rc = sae_forward(m, x, n, f, xhat);
    if (!rc) rc = check_out(f, (int64_t)n * m->cfg.d_sae, xhat, (int64_t)n * m->cfg.d_in);
    if (!rc && acc->n_prefix) rc = prefix_add(acc, m, x, f, n);
    if (!rc) metrics_add(acc, x, xhat, f, n, m->cfg.center_input);
    return rc;
}

int sae_metrics_eval_pairs(sae_metrics *acc, const sae_model *m, const float *xy, int n, float *f,
                           float *x, float *y, float *yhat)
{
    int Di = m->cfg.d_in, Do = sae_out_dim(&m->cfg);
    for (int b = 0; b < n; b++) {
        memcpy(x + (int64_t)b * Di, xy + (int64_t)b * (Di + Do), sizeof(float) * Di);
        memcpy(y + (int64_t)b * Do, xy + (int64_t)b * (Di + Do) + Di, sizeof(float) * Do);
    }
    int rc = sae_forward(m, x, n, f, yhat);
    if (!rc) rc = check_out(f, (int64_t)n * m->cfg.d_sae, yhat, (int64_t)n * Do);
    if (!rc) sae_metrics_add(acc, y, yhat, f, n);
    return rc;
}

int sae_metrics_eval(sae_metrics *acc, const sae_model *m, const float *x, int64_t n,
                     int (*next)(void *user, float *buf, int rows), void *user)
{
    const int tc = m->cfg.transcoder != 0, Do = sae_out_dim(&m->cfg);
    const int D = m->cfg.d_in + (tc ? Do : 0), S = m->cfg.d_sae, CH = SAE_EVAL_CHUNK;
    float *buf = x ? NULL : mem_alloc(sizeof(float) * (size_t)CH * D);
    float *xh = mem_alloc(sizeof(float) * (size_t)CH * D);
    float *f = mem_alloc(sizeof(float) * (size_t)CH * S);
    float *xi = tc ? mem_alloc(sizeof(float) * (size_t)CH * D) : NULL, *yo = xi ? xi + (size_t)CH * m->cfg.d_in : NULL;
    int rc = (!x && !buf) || !xh || !f || (tc && !xi) ? err_set(ERR_NOMEM, "evaluation: out of memory") : OK;
    for (int64_t r0 = 0; !rc && r0 < n; r0 += CH) {
        int nb = n - r0 < CH ? (int)(n - r0) : CH;
        const float *xc = x ? x + r0 * D : buf;
        if (!x) rc = next(user, buf, nb);
        if (!rc && tc) rc = sae_metrics_eval_pairs(acc, m, xc, nb, f, xi, yo, xh);
        else if (!rc) rc = sae_metrics_eval_rows(acc, m, xc, nb, f, xh);
    }
    mem_free(buf);
    mem_free(xh);
    mem_free(f);
    mem_free(xi);
    return rc;
}
