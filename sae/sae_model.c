/* sae_model.c - sae_model allocation and inference (see sae.h). */
#include "sae/sae.h"

#include <cblas.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"
#include "sae/sae_kernels.h"

static const char *arch_names[SAE_NARCH] = {"relu",     "topk",  "batchtopk",
                                             "jumprelu", "gated", "matryoshka"};

const char *sae_arch_name(sae_arch a)
{
    return (unsigned)a < SAE_NARCH ? arch_names[a] : "?";
}

int sae_arch_parse(const char *s, sae_arch *out)
{
    if (!strcmp(s, "matryoshka_batchtopk")) {
        *out = SAE_MATRYOSHKA;
        return OK;
    }
    for (int i = 0; i < SAE_NARCH; i++)
        if (!strcmp(s, arch_names[i])) {
            *out = (sae_arch)i;
            return OK;
        }
    if (!strcmp(s, "standard")) {
        *out = SAE_RELU;
        return OK;
    }
    return err_set(ERR_ARG, "unknown SAE architecture '%s' (relu, topk, batchtopk, jumprelu, gated, "
                                "matryoshka)", s);
}

int sae_widths_parse(const char *s, int *widths, int *n)
{
    const char *p = s;
    while (*p) {
        char *end;
        long w = strtol(p, &end, 10);
        if (end == p || w < 1 || w > 1 << 30 || (*end && *end != ',') || *n == SAE_MAX_WIDTHS)
            return err_set(ERR_ARG, "expected up to %d positive integers W1,W2,...", SAE_MAX_WIDTHS);
        widths[(*n)++] = (int)w;
        p = *end ? end + 1 : end;
    }
    return OK;
}

void sae_free(sae_model *s)
{
    if (!s) return;
    mem_free(s->W_enc);
    mem_free(s->b_enc);
    mem_free(s->W_dec);
    mem_free(s->b_dec);
    mem_free(s->threshold);
    mem_free(s->b_mag);
    mem_free(s->r_mag);
    mem_free(s->W_skip);
    mem_free(s);
}

int sae_model_new(sae_model **out, const sae_config *cfg)
{
    *out = NULL;
    if (cfg->d_in <= 0 || cfg->d_sae <= 0)
        return err_set(ERR_ARG, "SAE shape d_in %d d_sae %d must be positive", cfg->d_in,
                       cfg->d_sae);
    if ((cfg->arch == SAE_TOPK || cfg->arch == SAE_BATCHTOPK) &&
        (cfg->k <= 0 || cfg->k > cfg->d_sae))
        return err_set(ERR_ARG, "SAE k %d must be in 1..d_sae (%d)", cfg->k, cfg->d_sae);
    if (cfg->transcoder && (cfg->d_out <= 0 || cfg->arch == SAE_GATED || cfg->arch == SAE_MATRYOSHKA))
        return err_set(ERR_ARG, "transcoder: d_out %d must be positive, activation relu, topk, "
                       "batchtopk or jumprelu", cfg->d_out);
    sae_model *s = mem_calloc(1, sizeof *s);
    if (!s) return err_set(ERR_NOMEM, "SAE model: out of memory");
    s->cfg = *cfg;
    if (!cfg->transcoder) s->cfg.d_out = 0;
    size_t D = cfg->d_in, S = cfg->d_sae, Do = sae_out_dim(cfg);
    s->W_enc = mem_calloc(D * S, sizeof(float));
    s->W_dec = mem_calloc(Do * S, sizeof(float));
    s->b_enc = mem_calloc(S, sizeof(float));
    s->b_dec = mem_calloc(Do, sizeof(float));
    int skip = cfg->transcoder == SAE_SKIP_TRANSCODER;
    if (skip) s->W_skip = mem_calloc(Do * D, sizeof(float));
    int thr = cfg->arch == SAE_JUMPRELU || cfg->arch == SAE_BATCHTOPK ||
              cfg->arch == SAE_MATRYOSHKA;
    int gated = cfg->arch == SAE_GATED;
    if (thr) s->threshold = mem_calloc(S, sizeof(float));
    if (gated) {
        s->b_mag = mem_calloc(S, sizeof(float));
        s->r_mag = mem_calloc(S, sizeof(float));
    }
    if (!s->W_enc || !s->W_dec || !s->b_enc || !s->b_dec || (thr && !s->threshold) ||
        (gated && (!s->b_mag || !s->r_mag)) || (skip && !s->W_skip)) {
        sae_free(s);
        return err_set(ERR_NOMEM, "SAE model %dx%d: out of memory", cfg->d_in, cfg->d_sae);
    }
    *out = s;
    return OK;
}

/* Rows per chunk so that the scratch stays small whatever N is. */
#define ENC_CHUNK 256

int sae_encode(const sae_model *s, const float *x, int N, float *f)
{
    int D = s->cfg.d_in, S = s->cfg.d_sae, k = s->cfg.k;
    float *xc = mem_alloc(sizeof(float) * (size_t)ENC_CHUNK * D);
    int *idx = NULL;
    float *val = NULL;
    int topk = s->cfg.arch == SAE_TOPK || (s->cfg.arch == SAE_BATCHTOPK && !s->threshold);
    int gated = s->cfg.arch == SAE_GATED;
    if (topk) {
        idx = mem_alloc(sizeof(int) * (size_t)ENC_CHUNK * k);
        val = mem_alloc(sizeof(float) * (size_t)ENC_CHUNK * k);
    }
    if (!xc || (topk && (!idx || !val))) {
        mem_free(xc);
        mem_free(idx);
        mem_free(val);
        return err_set(ERR_NOMEM, "sae_encode: out of memory");
    }
    for (int r0 = 0; r0 < N; r0 += ENC_CHUNK) {
        int n = N - r0 < ENC_CHUNK ? N - r0 : ENC_CHUNK;
        float *fr = f + (int64_t)r0 * S;
        for (int b = 0; b < n; b++) {
            const float *xr = x + (int64_t)(r0 + b) * D;
            if (s->cfg.transcoder) memcpy(xc + (int64_t)b * D, xr, sizeof(float) * D);
            else
                for (int i = 0; i < D; i++) xc[(int64_t)b * D + i] = xr[i] - s->b_dec[i];
            if (gated) memset(fr + (int64_t)b * S, 0, sizeof(float) * S);
            else memcpy(fr + (int64_t)b * S, s->b_enc, sizeof(float) * S);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, S, D, 1.0f, xc, D, s->W_enc, S,
                    1.0f, fr, S);
        if (gated) {
            /* u = xc W_enc: gate u + b_gate > 0, magnitude relu(exp(r_mag) u + b_mag) */
            for (int64_t e = 0; e < (int64_t)n * S; e++) {
                int j = (int)(e % S);
                float u = fr[e], mag = expf(s->r_mag[j]) * u + s->b_mag[j];
                fr[e] = (u + s->b_enc[j] > 0 && mag > 0) ? mag : 0;
            }
        } else if (topk) {
            sae_k_topk(idx, val, fr, n, S, k, NULL, 0);
            for (int b = 0; b < n; b++) {
                float *row = fr + (int64_t)b * S;
                memset(row, 0, sizeof(float) * S);
                for (int e = 0; e < k; e++) row[idx[b * k + e]] = val[b * k + e];
            }
        } else if (s->threshold) {
            for (int64_t e = 0; e < (int64_t)n * S; e++) {
                float t = s->threshold[e % S];
                if (!(fr[e] > t && fr[e] > 0)) fr[e] = 0;
            }
        } else {
            for (int64_t e = 0; e < (int64_t)n * S; e++)
                if (!(fr[e] > 0)) fr[e] = 0;
        }
    }
    mem_free(xc);
    mem_free(idx);
    mem_free(val);
    return OK;
}

int sae_out_dim(const sae_config *c) { return c->transcoder ? c->d_out : c->d_in; }

int sae_pairs_join(float **x, int D, const float *y, int Do, int64_t n)
{
    size_t W = (size_t)D + (size_t)Do;
    float *xy = mem_realloc(*x, sizeof(float) * (size_t)(n > 0 ? n : 1) * W);
    if (!xy) return err_set(ERR_NOMEM, "out of memory joining %" PRId64 " rows of inputs and targets", n);
    /* last row first: row i's new place starts at or after the end of row i - 1's old one */
    for (int64_t i = n - 1; i >= 0; i--) {
        memmove(xy + (size_t)i * W, xy + (size_t)i * D, sizeof(float) * (size_t)D);
        memcpy(xy + (size_t)i * W + D, y + (size_t)i * Do, sizeof(float) * (size_t)Do);
    }
    *x = xy;
    return OK;
}

void sae_center_encoder(sae_model *s, int apply_b_dec)
{
    /* SAELens computes pre = (C x - a b_dec) W_enc + b_enc, a = apply_b_dec, C the centring
       along d_in (symmetric): = (x - a b_dec) (C W_enc) + b_enc - a mean(b_dec) colsum(W_enc).
       So each W_enc column loses its mean, and the biases take the rest (gated: the
       magnitude's too, scaled by exp(r_mag)). Idempotent: a centred column sums to 0. */
    int64_t D = s->cfg.d_in, S = s->cfg.d_sae;
    double mb = 0;
    if (apply_b_dec) {
        for (int64_t i = 0; i < D; i++) mb += s->b_dec[i];
        mb /= (double)D;
    }
    for (int64_t j = 0; j < S; j++) {
        double cs = 0;
        for (int64_t i = 0; i < D; i++) cs += s->W_enc[i * S + j];
        float mean = (float)(cs / (double)D);
        for (int64_t i = 0; i < D; i++) s->W_enc[i * S + j] -= mean;
        double delta = -mb * cs;
        s->b_enc[j] += (float)delta;
        if (s->b_mag && s->r_mag) s->b_mag[j] += (float)(exp((double)s->r_mag[j]) * delta);
    }
}

int sae_forward(const sae_model *s, const float *x, int N, float *f, float *out)
{
    int rc = sae_encode(s, x, N, f);
    if (rc) return rc;
    int Do = sae_out_dim(&s->cfg), S = s->cfg.d_sae;
    for (int b = 0; b < N; b++) memcpy(out + (int64_t)b * Do, s->b_dec, sizeof(float) * Do);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, Do, S, 1.0f, f, S, s->W_dec, Do,
                1.0f, out, Do);
    if (s->W_skip)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, Do, s->cfg.d_in, 1.0f, x,
                    s->cfg.d_in, s->W_skip, s->cfg.d_in, 1.0f, out, Do);
    if (s->cfg.center_input) /* the part of x the centred SAE never sees: its mean */
        for (int b = 0; b < N; b++) {
            const float *xr = x + (int64_t)b * s->cfg.d_in;
            double m = 0;
            for (int i = 0; i < s->cfg.d_in; i++) m += xr[i];
            float mf = (float)(m / s->cfg.d_in);
            for (int i = 0; i < Do; i++) out[(int64_t)b * Do + i] += mf;
        }
    return OK;
}

int sae_decode(const sae_model *s, const float *f, int N, float *xhat)
{
    if (s->W_skip)
        return err_set(ERR_ARG, "a skip transcoder's output needs its input (sae_forward)");
    if (s->cfg.center_input)
        return err_set(ERR_ARG, "a centred SAE's output needs its input's mean (sae_forward)");
    int D = sae_out_dim(&s->cfg), S = s->cfg.d_sae;
    for (int b = 0; b < N; b++) memcpy(xhat + (int64_t)b * D, s->b_dec, sizeof(float) * D);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, D, S, 1.0f, f, S, s->W_dec, D, 1.0f,
                xhat, D);
    return OK;
}
