/* synth.c - see synth.h. */
#include "sae/synth.h"

#include <cblas.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/json.h"
#include "common/mem.h"
#include "sae/metrics.h"

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
    c->child_p = 0.4;
}

static int check_config(const synth_config *c);

/* ---- the generator's configuration as a file (sae_synth_spec_*) ---- */

int sae_synth_spec_save(const synth_config *c, const char *path)
{
    if (c->seed > SAE_SYNTH_SPEC_MAX_SEED)
        return err_set(ERR_ARG, "%s: seed %llu is above 2^53; a JSON number cannot keep it", path,
                       (unsigned long long)c->seed);
    /* numbers as raw text (buf_double, %llu): cJSON's own printing rounded seed
       9000000000000001 to 9e+15, another generator on rebuild */
    cJSON *o = cJSON_CreateObject();
    char num[10][40];
    snprintf(num[0], 40, "%d", c->d);
    snprintf(num[1], 40, "%d", c->n_features);
    buf_double(num[2], 40, c->active);
    buf_double(num[3], 40, c->decay);
    snprintf(num[4], 40, "%d", c->rank);
    buf_double(num[5], 40, c->corr);
    snprintf(num[6], 40, "%llu", (unsigned long long)c->seed);
    snprintf(num[7], 40, "%d", c->parents);
    snprintf(num[8], 40, "%d", c->children);
    buf_double(num[9], 40, c->child_p);
    static const char *const keys[10] = {"d", "features", "active", "decay", "rank", "corr", "seed",
                                         "parents", "children", "child_p"};
    int ok = o && cJSON_AddStringToObject(o, "generator", "saelite synth");
    for (int i = 0; ok && i < 10; i++) ok = cJSON_AddRawToObject(o, keys[i], num[i]) != NULL;
    char *txt = ok ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    if (!txt) return err_set(ERR_NOMEM, "%s: out of memory", path);
    size_t n = strlen(txt);
    char *line = mem_alloc(n + 2); /* a final newline, as text files end */
    int rc = line ? OK : err_set(ERR_NOMEM, "%s: out of memory", path);
    if (!rc) {
        memcpy(line, txt, n);
        line[n] = '\n';
        rc = file_write_atomic(path, line, n + 1);
    }
    mem_free(line);
    cJSON_free(txt);
    return rc;
}

/* The spec's numeric keys: where each goes in synth_config, and what it may hold. Whole numbers
 * ('i' int, 'u' uint64_t) must be in [lo, hi]; 'f' doubles are any number (check_config judges
 * them with the rest). */
typedef struct {
    const char *key;
    char type;
    size_t off;
    double lo, hi;
    const char *what;
} spec_field;

#define SPEC_INT(k, f, lo, what) {k, 'i', offsetof(synth_config, f), lo, INT32_MAX, what}
#define SPEC_DBL(k, f) {k, 'f', offsetof(synth_config, f), 0, 0, "a number"}
static const spec_field spec_fields[] = {
    SPEC_INT("d", d, 1, "a whole number >= 1"),
    SPEC_INT("features", n_features, 1, "a whole number >= 1"),
    SPEC_INT("rank", rank, 0, "a whole number >= 0"),
    SPEC_INT("parents", parents, 0, "a whole number >= 0"),
    SPEC_INT("children", children, 0, "a whole number >= 0"),
    {"seed", 'u', offsetof(synth_config, seed), 0, SAE_SYNTH_SPEC_MAX_SEED, "a whole number 0..2^53"},
    SPEC_DBL("active", active),
    SPEC_DBL("decay", decay),
    SPEC_DBL("corr", corr),
    SPEC_DBL("child_p", child_p),
};
#undef SPEC_INT
#undef SPEC_DBL

/* Stores v into c's field f; 0 when v is not what f may hold. */
static int spec_set(synth_config *c, const spec_field *f, const cJSON *v)
{
    if (!cJSON_IsNumber(v)) return 0;
    double x = v->valuedouble;
    char *dst = (char *)c + f->off;
    if (f->type == 'f') {
        *(double *)dst = x;
        return 1;
    }
    if (!isfinite(x) || x != floor(x) || x < f->lo || x > f->hi) return 0;
    if (f->type == 'u') *(uint64_t *)dst = (uint64_t)x;
    else *(int *)dst = (int)x;
    return 1;
}

int sae_synth_spec_load(synth_config *c, const char *path)
{
    synth_defaults(c);
    cJSON *root;
    int rc = json_read_object_file(path, "a generator spec from `saelite synth --spec`", 64 << 10, &root);
    if (rc) return rc;
    enum { NF = sizeof spec_fields / sizeof spec_fields[0] };
    for (const cJSON *v = root->child; v && !rc; v = v->next) {
        const char *k = v->string ? v->string : "";
        if (!strcmp(k, "generator")) {
            if (!cJSON_IsString(v) || strcmp(v->valuestring, "saelite synth"))
                rc = err_set(ERR_FORMAT, "%s: \"generator\" must be \"saelite synth\"", path);
            continue;
        }
        int i = 0;
        while (i < NF && strcmp(k, spec_fields[i].key)) i++;
        if (i == NF)
            rc = err_set(ERR_FORMAT, "%s: unknown key \"%.40s\" (a generator spec has d, features, active, "
                         "decay, rank, corr, seed, parents, children, child_p)", path, k);
        else if (!spec_set(c, &spec_fields[i], v))
            rc = err_set(ERR_FORMAT, "%s: \"%s\" must be %s", path, k, spec_fields[i].what);
    }
    cJSON_Delete(root);
    if (rc) return rc;
    if (check_config(c)) {
        char why[256];
        snprintf(why, sizeof why, "%s", err_msg());
        return err_set(ERR_FORMAT, "%s: %s", path, why);
    }
    return OK;
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

/* What sae_synth_new accepts (ERR_ARG with the rule otherwise). */
static int check_config(const synth_config *c)
{
    int F = c->n_features, d = c->d, r = c->rank;
    /* the rule that failed, with its values: the default active 5 over --features 3 gave only
       the list of every rule (a review) */
    if (d < 1 || F < 1) return err_set(ERR_ARG, "synthetic data: d %d and features %d must be >= 1", d, F);
    if (!(c->active > 0) || c->active > F)
        return err_set(ERR_ARG, "synthetic data: active %g must be above 0 and at most the %d features "
                       "(active is 5 unless given)", c->active, F);
    if (r < 0 || !(c->decay > 0) || c->decay > 1 || c->corr < 0 || c->corr >= 1)
        return err_set(ERR_ARG, "synthetic data: need rank >= 0, 0 < decay <= 1, 0 <= corr < 1 (got %d, "
                       "%g, %g)", r, c->decay, c->corr);
    if (c->parents < 0 || c->children < 0 ||
        (int64_t)c->parents * (1 + (int64_t)c->children) > F || !(c->child_p >= 0 && c->child_p <= 1))
        return err_set(ERR_ARG, "synthetic data: %d parents with %d children each need %lld of the "
                       "%d features, child_p in [0, 1]", c->parents, c->children,
                       (long long)c->parents * (1 + (long long)c->children), F); /* no int overflow (an audit) */
    if (r > F)
        return err_set(ERR_ARG, "synthetic data: rank %d above the %d features (a factor of at most "
                       "their number)", r, F);
    /* the generator's arrays, whatever the samples asked for: directions [F,d], loadings [F,r],
       a chunk's factors [1024,r] and copula draws [1024,F], per-feature doubles; the command
       line had no bound (--features 200000 --d 1 took 800 MB for a 4 KB output, an audit) and
       the spec file's missed the chunk's factors */
    double rr = r ? r : 1;
    double bytes = 4.0 * ((double)F * d + (double)F * rr + CHUNK * rr + (double)CHUNK * F) + 20.0 * F;
    double cap = 4.0 * (1 << 30);
    long long phys = mem_physical_bytes();
    if (phys > 0 && (double)phys / 2 < cap) cap = (double)phys / 2;
    if (bytes > cap)
        return err_set(ERR_ARG, "synthetic data: %d features of d %d (rank %d) need %.2f GiB for the "
                       "generator, over the %.2f GiB allowed (4 GiB or half this machine's memory)",
                       F, d, r, bytes / (1 << 30), cap / (1 << 30));
    return OK;
}

int sae_synth_new(sae_synth **out, const synth_config *c)
{
    *out = NULL;
    int F = c->n_features, d = c->d, r = c->rank;
    int rc = check_config(c);
    if (rc) return rc;
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
    if (isfinite(hi) && hi < 0x1p150) {
        for (int it = 0; it < 200; it++) {
            double a = 0.5 * (lo + hi), sum = 0;
            for (int i = 0; i < F; i++) sum += fmin(1.0, a * pow(c->decay, i));
            if (sum < c->active) lo = a;
            else hi = a;
        }
        for (int i = 0; i < F; i++) s->p[i] = fmin(1.0, 0.5 * (lo + hi) * pow(c->decay, i));
    } else {
        /* a steep decay: 200 halvings of that bracket do not reach a (decay 1e-5 on 32
           features gave 21 active instead of 5, and once pow underflowed every feature fired),
           so bisect log a between active / F (sum <= a F) and the a that makes the first
           ceil(active) probabilities 1 */
        double ld = log(c->decay);
        lo = log(c->active / F);
        hi = -(ceil(c->active) - 1) * ld;
        for (int it = 0; it < 200; it++) {
            double t = 0.5 * (lo + hi), sum = 0;
            for (int i = 0; i < F; i++) sum += fmin(1.0, exp(t + i * ld));
            if (sum < c->active) lo = t;
            else hi = t;
        }
        for (int i = 0; i < F; i++) s->p[i] = fmin(1.0, exp(0.5 * (lo + hi) + i * ld));
    }
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

static int synth_sample(sae_synth *s, float *x, int N, int *active, float *codes);

int sae_synth_sample(sae_synth *s, float *x, int N, int *active)
{
    return synth_sample(s, x, N, active, NULL);
}

int sae_synth_sample_codes(sae_synth *s, float *x, int N, float *codes)
{
    return synth_sample(s, x, N, NULL, codes);
}

static int synth_sample(sae_synth *s, float *x, int N, int *active, float *codes)
{
    int F = s->c.n_features, d = s->c.d, r = s->c.rank;
    int G = s->c.parents > 0 ? 1 + s->c.children : 0, HF = s->c.parents * G;
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
            float *cr = codes ? codes + (int64_t)(r0 + b) * F : NULL;
            if (cr) memset(cr, 0, sizeof(float) * F);
            int cnt = 0, parent_on = 0;
            for (int i = 0; i < F; i++) {
                /* given the shared part, feature i fires with probability
                   Phi((thr_i - a_i.g) / sqrt(1 - |a_i|^2)) */
                float q = s->thr[i] == INFINITY ? 1.0f
                                                : phi_lookup(s->phi, (s->thr[i] - zr[i]) * s->isd[i]);
                int child = i < HF && i % G != 0;
                if (child) q = parent_on ? (float)s->c.child_p : 0.0f; /* only with its parent */
                int on = (float)rng_uniform(&s->rng) < q;
                if (i < HF && i % G == 0) parent_on = on;
                if (!on) continue;
                float mag = (float)(rng_uniform(&s->rng) * rng_uniform(&s->rng));
                /* hierarchy: clearly present when on, U(0.5, 1), so a latent that misses a
                   firing parent has absorbed it rather than thresholded a tiny magnitude */
                if (i < HF) mag = 0.5f + 0.5f * sqrtf(mag);
                const float *v = s->dirs + (int64_t)i * d;
                for (int j = 0; j < d; j++) xr[j] += mag * v[j];
                if (cr) cr[i] = mag;
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

int sae_absorption(const sae_model *m, const synth_config *c, const float *dirs, const float *x,
                   const float *codes, int N, sae_absorption_result *out)
{
    return sae_absorption_rows(m, c, dirs, x, codes, N, out, NULL);
}

int sae_absorption_rows(const sae_model *m, const synth_config *c, const float *dirs, const float *x,
                        const float *codes, int N, sae_absorption_result *out, float *rows)
{
    memset(out, 0, sizeof *out);
    int F = c->n_features, G = 1 + c->children, P = c->parents, S = m->cfg.d_sae, d = c->d;
    if (P < 1 || sae_out_dim(&m->cfg) != d)
        return err_set(ERR_ARG, "absorption: needs a hierarchical ground truth of width %d", d);
    float *pdir = mem_alloc(sizeof(float) * (size_t)P * d), *best = mem_alloc(sizeof(float) * P);
    int *match = mem_alloc(sizeof(int) * P);
    float *f = mem_alloc(sizeof(float) * (size_t)CHUNK * S);
    int rc = pdir && best && match && f ? OK : err_set(ERR_NOMEM, "absorption: out of memory");
    for (int p = 0; !rc && p < P; p++)
        memcpy(pdir + (size_t)p * d, dirs + (size_t)p * G * d, sizeof(float) * d);
    double mm, rec;
    if (!rc) rc = sae_mmcs_match(pdir, P, m->W_dec, S, d, 0.9, &mm, &rec, best, match);
    int64_t *with = mem_calloc((size_t)P * 4, sizeof(int64_t)); /* with, absorbed, alone, seen */
    double *along = mem_alloc(sizeof(double) * P), *part = mem_calloc((size_t)P, sizeof(double));
    double *alone = mem_calloc((size_t)P, sizeof(double));
    if (!rc && !(with && along && part && alone)) rc = err_set(ERR_NOMEM, "absorption: out of memory");
    for (int p = 0; !rc && p < P; p++) { /* the parent's latent's decoder along the parent */
        const float *wd = m->W_dec + (size_t)match[p] * d, *dp = pdir + (size_t)p * d;
        double s = 0;
        for (int j = 0; j < d; j++) s += (double)wd[j] * dp[j];
        along[p] = s;
    }
    for (int r0 = 0; !rc && r0 < N; r0 += CHUNK) {
        int n = N - r0 < CHUNK ? N - r0 : CHUNK;
        if ((rc = sae_encode(m, x + (int64_t)r0 * d, n, f))) break;
        for (int b = 0; b < n; b++) {
            const float *cr = codes + (int64_t)(r0 + b) * F;
            float *ro = rows ? rows + (int64_t)(r0 + b) * P : NULL;
            for (int p = 0; p < P; p++) {
                if (ro) ro[p] = -1;
                if (!(cr[p * G] > 0)) continue;
                int kids = 0;
                for (int k = 1; k < G; k++) kids += cr[p * G + k] > 0;
                float fp = f[(int64_t)b * S + match[p]];
                int fires = fp > 0;
                int64_t *w = with + (size_t)p * 4;
                if (kids) {
                    w[0]++;
                    w[1] += !fires;
                    /* the share of the parent's true part (magnitude m along d_p) that its latent
                       does not carry: 1 - f (W_dec[match] . d_p) / m, clipped to [0, 1] */
                    double carried = fires ? fp * along[p] / cr[p * G] : 0;
                    double un = carried >= 1 ? 0 : carried <= 0 ? 1 : 1 - carried;
                    part[p] += un;
                    if (ro) ro[p] = (float)un;
                } else {
                    w[2]++;
                    w[3] += fires;
                    double carried = fires ? fp * along[p] / cr[p * G] : 0;
                    alone[p] += carried >= 1 ? 1 : carried <= 0 ? 0 : carried;
                }
            }
        }
    }
    double ab = 0, al = 0, pc = 0, pa = 0, ac = 0;
    int na = 0, nl = 0;
    for (int p = 0; !rc && p < P; p++) {
        const int64_t *w = with + (size_t)p * 4;
        if (w[0]) ab += (double)w[1] / w[0], pa += part[p] / w[0], na++;
        if (w[2]) al += (double)w[3] / w[2], ac += alone[p] / w[2], nl++;
        pc += best[p];
    }
    if (!rc) {
        out->absorption = na ? ab / na : 0;
        out->partial = na ? pa / na : 0;
        out->parent_alone = nl ? al / nl : 0;
        out->alone_carried = nl ? ac / nl : 0;
        out->parent_cos = pc / P;
        out->n_parents = na;
    }
    mem_free(pdir);
    mem_free(best);
    mem_free(match);
    mem_free(f);
    mem_free(with);
    mem_free(along);
    mem_free(part);
    mem_free(alone);
    return rc;
}
