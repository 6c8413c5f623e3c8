/* sample.c - temperature / top-k sampling (see sample.h; the RNG is common/rng.h). */
#include "model/sample.h"

#include <math.h>
#include <stddef.h>

#include "common/err.h"
#include "common/mem.h"
#include "common/select.h"
#include "model/gpt2.h"

int smp_pick(const float *logits, int V, double temperature, int top_k, rng_state *rng,
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
        thr = sel_kth_smallest(work, V, V - top_k); /* the top_k-th largest */
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
    double u = rng_uniform(rng) * sum, acc = 0;
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
                 int top_k, int vocab_limit, int stop_id, rng_state *rng, smp_token_fn on_token,
                 void *user)
{
    const gpt2_config *cfg = gpt2_cfg(m);
    int V = cfg->vocab_size, Vs = vocab_limit > 0 && vocab_limit < V ? vocab_limit : V;
    if (*len == 0) return err_set(ERR_ARG, "empty context (give at least one token)");
    for (size_t i = 0; i < *len; i++)
        if (seq[i] < 0 || seq[i] >= V)
            return err_set(ERR_ARG, "token %d is outside the vocabulary (%d)", seq[i], V);
    float *work = mem_alloc(sizeof(float) * (size_t)V);
    if (!work) return err_set(ERR_NOMEM, "out of memory");
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
