/* synth.c - see synth.h. */
#include "sae/synth.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"

#define PHI_N 8192
#define PHI_LO (-8.0)
#define PHI_HI 8.0
#define CHUNK 1024

struct sae_synth {
    synth_config c;
    float *dirs;  /* [F,d] */
    double *p;    /* [F] */
    float *A;     /* [F,r] correlation factor */
    float *thr;   /* [F] Phi^-1(p_i) */
    float *isd;   /* [F] 1/sqrt(1 - |a_i|^2) */
    float *g, *z; /* [CHUNK,r], [CHUNK,F] */
    float phi[PHI_N + 1];
    rng_state rng;
};

void synth_defaults(synth_config *c)
{
    memset(c, 0, sizeof *c);
    c->d = 256;
    c->n_features = 512;
    c->active = 5;
    c->decay = 0.99;
    c->rank = 8;
    c->corr = 0.5;
    c->seed = 1;
}

static double Phi(double u) { return 0.5 * erfc(-u / sqrt(2.0)); }

static double Phi_inv(double p)
{
    double lo = -40, hi = 40;
    for (int i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        if (Phi(mid) < p) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

void sae_synth_free(sae_synth *s)
{
    if (!s) return;
    mem_free(s->dirs);
    mem_free(s->p);
    mem_free(s->A);
    mem_free(s->thr);
    mem_free(s->isd);
    mem_free(s->g);
    mem_free(s->z);
    mem_free(s);
}

int sae_synth_new(sae_synth **out, const synth_config *c)
{
    *out = NULL;
    int F = c->n_features, d = c->d, r = c->rank;
    if (d < 1 || F < 1 || r < 0 || !(c->active > 0) || c->active > F || !(c->decay > 0) ||
        c->decay > 1 || c->corr < 0 || c->corr >= 1)
        return err_set(ERR_ARG,
                       "synthetic data: need d >= 1, features >= 1, 0 < active <= features, 0 < decay <= "
                       "1, 0 <= corr < 1");
    sae_synth *s = mem_calloc(1, sizeof *s);
    if (!s) return err_set(ERR_NOMEM, "synthetic data: out of memory");
    s->c = *c;
    s->dirs = mem_alloc(sizeof(float) * (size_t)F * d);
    s->p = mem_alloc(sizeof(double) * F);
    s->A = mem_calloc((size_t)F * (r ? r : 1), sizeof(float));
    s->thr = mem_alloc(sizeof(float) * F);
    s->isd = mem_alloc(sizeof(float) * F);
    s->g = mem_calloc((size_t)CHUNK * (r ? r : 1), sizeof(float));
    s->z = mem_alloc(sizeof(float) * (size_t)CHUNK * F);
    if (!s->dirs || !s->p || !s->A || !s->thr || !s->isd || !s->g || !s->z) {
        sae_synth_free(s);
        return err_set(ERR_NOMEM, "synthetic data: out of memory for %d features", F);
    }
    rng_seed(&s->rng, c->seed);
    for (int i = 0; i < F; i++) {
        float *v = s->dirs + (int64_t)i * d;
        double ss = 0;
        for (int j = 0; j < d; j++) {
            v[j] = (float)rng_normal_alt(&s->rng);
            ss += (double)v[j] * v[j];
        }
        float inv = (float)(1 / sqrt(ss));
        for (int j = 0; j < d; j++) v[j] *= inv;
    }
    /* p_i = min(1, a decay^i) with a such that sum p_i = active (bisection; clamping at 1 makes
       the sum non-linear in a) */
    double lo = 0, hi = (double)F / pow(c->decay, F);
    for (int it = 0; it < 200; it++) {
        double a = 0.5 * (lo + hi), sum = 0;
        for (int i = 0; i < F; i++) sum += fmin(1.0, a * pow(c->decay, i));
        if (sum < c->active) lo = a;
        else hi = a;
    }
    for (int i = 0; i < F; i++) s->p[i] = fmin(1.0, 0.5 * (lo + hi) * pow(c->decay, i));
    for (int i = 0; i < F; i++) {
        double a2 = r ? rng_uniform(&s->rng) * c->corr : 0, nn = 0;
        float *a = s->A + (int64_t)i * r;
        for (int q = 0; q < r; q++) {
            a[q] = (float)rng_normal_alt(&s->rng);
            nn += (double)a[q] * a[q];
        }
        for (int q = 0; q < r; q++) a[q] = (float)(a[q] * sqrt(a2 / nn));
        s->isd[i] = (float)(1 / sqrt(1 - a2));
        s->thr[i] = s->p[i] >= 1 ? INFINITY : (float)Phi_inv(s->p[i]);
    }
    if (c->sample_seed) rng_seed(&s->rng, c->sample_seed);
    for (int e = 0; e <= PHI_N; e++) s->phi[e] = (float)Phi(PHI_LO + (PHI_HI - PHI_LO) * e / PHI_N);
    *out = s;
    return OK;
}

const float *sae_synth_directions(const sae_synth *s) { return s->dirs; }
const double *sae_synth_probs(const sae_synth *s) { return s->p; }

static inline float phi_lookup(const float *tab, float u)
{
    float t = (u - (float)PHI_LO) * (float)(PHI_N / (PHI_HI - PHI_LO));
    if (t <= 0) return 0;
    if (t >= PHI_N) return 1;
    int i = (int)t;
    float fr = t - i;
    return tab[i] + fr * (tab[i + 1] - tab[i]);
}

int sae_synth_sample(sae_synth *s, float *x, int N, int *active)
{
    int F = s->c.n_features, d = s->c.d, r = s->c.rank;
    for (int r0 = 0; r0 < N; r0 += CHUNK) {
        int n = N - r0 < CHUNK ? N - r0 : CHUNK;
        /* z = g A^T: the shared part of the copula variables */
        if (r) {
            for (int64_t e = 0; e < (int64_t)n * r; e++) s->g[e] = (float)rng_normal_alt(&s->rng);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, F, r, 1.0f, s->g, r, s->A, r,
                        0.0f, s->z, F);
        } else memset(s->z, 0, sizeof(float) * (size_t)n * F);
        for (int b = 0; b < n; b++) {
            float *xr = x + (int64_t)(r0 + b) * d;
            const float *zr = s->z + (int64_t)b * F;
            memset(xr, 0, sizeof(float) * d);
            int cnt = 0;
            for (int i = 0; i < F; i++) {
                /* given the shared part, feature i fires with probability
                   Phi((thr_i - a_i.g) / sqrt(1 - |a_i|^2)) */
                float q = s->thr[i] == INFINITY ? 1.0f
                                                : phi_lookup(s->phi, (s->thr[i] - zr[i]) * s->isd[i]);
                if ((float)rng_uniform(&s->rng) >= q) continue;
                float mag = (float)(rng_uniform(&s->rng) * rng_uniform(&s->rng));
                const float *v = s->dirs + (int64_t)i * d;
                for (int j = 0; j < d; j++) xr[j] += mag * v[j];
                cnt++;
            }
            if (active) active[r0 + b] = cnt;
        }
    }
    return OK;
}

static int synth_next(sae_source *src, float *x, int B)
{
    return sae_synth_sample(src->impl, x, B, NULL);
}

static void synth_close(sae_source *src)
{
    sae_synth_free(src->impl);
    mem_free(src);
}

int sae_source_synth(sae_source **out, const synth_config *c)
{
    *out = NULL;
    sae_synth *g;
    int rc = sae_synth_new(&g, c);
    if (rc) return rc;
    sae_source *s = mem_calloc(1, sizeof *s);
    if (!s) {
        sae_synth_free(g);
        return err_set(ERR_NOMEM, "synthetic data: out of memory");
    }
    s->d_in = c->d;
    s->n_rows = -1;
    s->next = synth_next;
    s->close = synth_close;
    s->impl = g;
    *out = s;
    return OK;
}

const float *sae_source_synth_directions(const sae_source *s)
{
    return s && s->next == synth_next ? sae_synth_directions(s->impl) : NULL;
}
