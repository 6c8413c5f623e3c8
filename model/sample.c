/* sample.c - xoshiro256** RNG and temperature / top-k sampling (see sample.h). */
#include "model/sample.h"

#include <math.h>
#include <stddef.h>

#include "common/err.h"
#include "common/mem.h"
#include "model/gpt2.h"

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void smp_seed(smp_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t smp_next(smp_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double smp_uniform(smp_rng *r) { return (double)(smp_next(r) >> 11) * 0x1.0p-53; }

double smp_normal(smp_rng *r)
{
    double u1 = smp_uniform(r), u2 = smp_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300; /* log(0) guard; probability 2^-53 */
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

uint64_t smp_below(smp_rng *r, uint64_t n)
{
    /* Rejection sampling: values in the incomplete top bucket are redrawn. */
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = smp_next(r);
    while (x >= lim);
    return x % n;
}

/* k-th largest value (1-based k) of a[0..n) by quickselect; a is reordered. */
static float kth_largest(float *a, int n, int k)
{
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        float p = a[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (a[i] > p) i++;
            while (a[j] < p) j--;
            if (i <= j) {
                float t = a[i];
                a[i] = a[j];
                a[j] = t;
                i++;
                j--;
            }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else return a[want];
    }
    return a[want];
}

int smp_pick(const float *logits, int V, double temperature, int top_k, smp_rng *rng,
             float *work, int *token)
{
    if (V < 1) return err_set(ERR_ARG, "sampling: vocabulary size %d", V);
    int best = 0;
    for (int i = 0; i < V; i++) {
        if (isnan(logits[i])) return err_set(ERR_ARG, "sampling: logit of token %d is NaN", i);
        if (logits[i] > logits[best]) best = i;
    }
    if (temperature <= 0 || top_k == 1 || isinf(logits[best])) {
        *token = best;
        return OK;
    }
    /* Allowed set: logits > thr, plus the first `extra` tokens equal to thr (index order). */
    float thr = -INFINITY;
    int extra = V;
    if (top_k > 0 && top_k < V) {
        for (int i = 0; i < V; i++) work[i] = logits[i];
        thr = kth_largest(work, V, top_k);
        int greater = 0;
        for (int i = 0; i < V; i++) greater += logits[i] > thr;
        extra = top_k - greater;
    }
    double mx = logits[best], sum = 0;
    int eq = 0;
    for (int i = 0; i < V; i++) {
        float l = logits[i];
        double p = 0;
        if (l > thr || (l == thr && eq++ < extra)) p = exp(((double)l - mx) / temperature);
        work[i] = (float)p;
        sum += work[i]; /* the float value, so the scan below sees the same total */
    }
    double u = smp_uniform(rng) * sum, acc = 0;
    int last = best;
    for (int i = 0; i < V; i++) {
        if (work[i] <= 0) continue;
        acc += work[i];
        last = i;
        if (u < acc) {
            *token = i;
            return OK;
        }
    }
    *token = last; /* rounding left u just above the running sum */
    return OK;
}

int smp_generate(gpt2_model *m, int *seq, size_t *len, int max_new, double temperature,
                 int top_k, int vocab_limit, int stop_id, smp_rng *rng, smp_token_fn on_token,
                 void *user)
{
    const gpt2_config *cfg = gpt2_cfg(m);
    int V = cfg->vocab_size, Vs = vocab_limit > 0 && vocab_limit < V ? vocab_limit : V;
    if (*len == 0) return err_set(ERR_ARG, "generate: empty context (give at least one token)");
    for (size_t i = 0; i < *len; i++)
        if (seq[i] < 0 || seq[i] >= V)
            return err_set(ERR_ARG, "generate: token %d is outside the vocabulary (%d)", seq[i], V);
    float *work = mem_alloc(sizeof(float) * (size_t)V);
    if (!work) return err_set(ERR_NOMEM, "generate: out of memory");
    int rc = OK;
    for (int k = 0; k < max_new; k++) {
        size_t T = *len < (size_t)cfg->n_ctx ? *len : (size_t)cfg->n_ctx;
        if ((rc = gpt2_forward(m, seq + *len - T, 1, (int)T, 1))) break;
        const float *logits = gpt2_logits(m) + (T - 1) * (size_t)V;
        int next;
        if ((rc = smp_pick(logits, Vs, temperature, top_k, rng, work, &next))) break;
        seq[(*len)++] = next;
        if (on_token && on_token(next, user)) break;
        if (next == stop_id) break;
    }
    mem_free(work);
    return rc;
}
