/* textmodel.c - "test your text" (the model with the SAE at its hook on one posted text), the live
 * activations of a stored sequence, and steering (analysis/steer.h) for the browser
 * (serve_internal.h). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "analysis/steer.h"
#include "common/err.h"
#include "common/mem.h"
#include "common/progress.h"
#include "model/gpt2.h"
#include "model/tokenizer.h"
#include "sae/sae.h"
#include "serve/serve_internal.h"

struct srv_model {
    gpt2_model *gpt;
    tok_tokenizer *tok;
    sae_model *sae;
    char sae_dir[4096]; /* as srv_result.test_sae */
    pthread_mutex_t mu;
    float *x; /* [n_ctx, d_in] hook activations of the last pass */
    float *f; /* [n_ctx, d_sae] their codes */
    int T;    /* rows in x of the last pass */
};

static int capture(const tensor_view *t, void *user)
{
    srv_model *m = user;
    /* [B=1, T, d_in] contiguous, or [B=1, T, H, d_head] (attn.hook_z, hook_q/k/v: extract
       stores their H * d_head values per token; a check on the last dim alone answered 500
       "unexpected shape" to every test of an SAE trained on hook_z) */
    int64_t T = t->ndim >= 3 ? t->shape[1] : 0, C = 1;
    for (int i = 2; i < t->ndim; i++) C *= t->shape[i];
    if (t->ndim < 3 || t->shape[0] != 1 || C != m->sae->cfg.d_in || T > gpt2_cfg(m->gpt)->n_ctx)
        return err_set(ERR_SHAPE, "hook %s: unexpected shape", m->sae->cfg.hook_name);
    memcpy(m->x, t->data, (size_t)(T * C) * sizeof *m->x);
    m->T = (int)T;
    return 0;
}

int srv_model_open(srv_model **out, const char *model_dir, const char *sae_dir)
{
    *out = NULL;
    srv_model *m = mem_calloc(1, sizeof *m);
    if (!m) return err_set(ERR_NOMEM, "out of memory");
    pthread_mutex_init(&m->mu, NULL);
    snprintf(m->sae_dir, sizeof m->sae_dir, "%s", sae_dir);
    int rc = gpt2_load(&m->gpt, model_dir);
    if (!rc) rc = tok_load(&m->tok, model_dir);
    if (!rc) rc = tok_check_model(m->tok, model_dir, gpt2_cfg(m->gpt)->vocab_size, model_dir);
    if (rc) err_wrap(rc, "--model %s (serve reads the tokenizer files next to the model)", model_dir);
    if (!rc) rc = sae_load(&m->sae, sae_dir);
    if (!rc) rc = ana_check_sae_model(m->sae, sae_dir, model_dir);
    int layer, width;
    if (!rc && !m->sae->cfg.hook_name[0])
        rc = err_set(ERR_ARG, "%s: the SAE's cfg.json names no hook_name", sae_dir);
    if (!rc && (rc = gpt2_hook_token_info(m->gpt, m->sae->cfg.hook_name, &layer, &width)) == OK &&
        width != m->sae->cfg.d_in)
        rc = err_set(ERR_SHAPE, "%s: hook %s is %d wide in the model, the SAE reads %d", sae_dir,
                     m->sae->cfg.hook_name, width, m->sae->cfg.d_in);
    if (!rc) {
        int n = gpt2_cfg(m->gpt)->n_ctx;
        m->x = mem_alloc((size_t)n * m->sae->cfg.d_in * sizeof *m->x);
        m->f = mem_alloc((size_t)n * m->sae->cfg.d_sae * sizeof *m->f);
        if (!m->x || !m->f) rc = err_set(ERR_NOMEM, "out of memory for the test-your-text buffers");
    }
    if (rc) {
        srv_model_close(m);
        return rc;
    }
    *out = m;
    return OK;
}

void srv_model_close(srv_model *m)
{
    if (!m) return;
    gpt2_free(m->gpt);
    tok_free(m->tok);
    sae_free(m->sae);
    mem_free(m->x);
    mem_free(m->f);
    pthread_mutex_destroy(&m->mu);
    mem_free(m);
}

const char *srv_model_sae(const srv_model *m) { return m->sae_dir; }
const sae_model *srv_model_sae_weights(const srv_model *m) { return m->sae; }
int srv_model_ctx(const srv_model *m) { return gpt2_cfg(m->gpt)->n_ctx - (tok_eot(m->tok) >= 0); }

/* The capture hook, attached for one pass (steering clears the model's hooks). Under m->mu. */
static int capture_on(srv_model *m)
{
    gpt2_hook_clear(m->gpt);
    m->T = 0;
    return gpt2_hook_add(m->gpt, m->sae->cfg.hook_name, capture, m);
}

int srv_model_test(srv_model *m, const char *text, int k, cJSON *out)
{
    int *ids = NULL;
    size_t *offs = NULL, n = 0;
    /* the tokenizer is not thread-safe (its word cache, scratch and PCRE2 match data) and every
       connection's thread shares it: under m->mu like the model (an audit: four clients posting
       /api/test at once crashed the server within a second) */
    pthread_mutex_lock(&m->mu);
    int rc = tok_encode(m->tok, text, strlen(text), 0, &ids, &offs, &n);
    pthread_mutex_unlock(&m->mu);
    if (rc) return rc;
    const gpt2_config *cfg = gpt2_cfg(m->gpt);
    int bos = tok_eot(m->tok) >= 0;
    int T = (int)n + bos, truncated = 0;
    if (T > cfg->n_ctx) {
        T = cfg->n_ctx;
        truncated = 1;
    }
    int *seq = mem_alloc((size_t)(T > 0 ? T : 1) * sizeof *seq);
    if (!seq) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto done;
    }
    if (bos) seq[0] = tok_eot(m->tok);
    for (int i = bos; i < T; i++) seq[i] = ids[i - bos];
    if (T == bos) {
        rc = err_set(ERR_ARG, "the text has no tokens");
        goto done;
    }
    pthread_mutex_lock(&m->mu);
    rc = capture_on(m);
    if (!rc) rc = gpt2_forward(m->gpt, seq, 1, T, 0);
    if (!rc && m->T != T) rc = err_set(ERR_SHAPE, "the hook did not fire");
    if (!rc) rc = sae_encode(m->sae, m->x, T, m->f);
    cJSON *toks = rc ? NULL : cJSON_AddArrayToObject(out, "tokens");
    if (!rc && !toks) rc = err_set(ERR_NOMEM, "out of memory");
    int d = m->sae->cfg.d_sae;
    for (int t = bos; !rc && t < T; t++) {
        cJSON *o = cJSON_CreateObject();
        size_t len = 0;
        const char *b = tok_token_bytes(m->tok, seq[t], &len);
        cJSON *s = b ? srv_json_str(b, len) : cJSON_CreateString("");
        cJSON *fa = o && s ? cJSON_CreateArray() : NULL;
        if (!fa) {
            cJSON_Delete(o);
            cJSON_Delete(s);
            rc = err_set(ERR_NOMEM, "out of memory");
            break;
        }
        cJSON_AddItemToObject(o, "text", s);
        cJSON_AddNumberToObject(o, "id", seq[t]);
        cJSON_AddNumberToObject(o, "offset", (double)offs[t - bos]);
        /* top k active features by activation (k is small: repeated selection) */
        const float *row = m->f + (size_t)t * d;
        int picked[32];
        int np = 0;
        for (int r = 0; r < k && r < 32; r++) {
            int best = -1;
            for (int j = 0; j < d; j++) {
                if (!(row[j] > 0)) continue;
                int used = 0;
                for (int q = 0; q < np; q++) used |= picked[q] == j;
                if (!used && (best < 0 || row[j] > row[best])) best = j;
            }
            if (best < 0) break;
            picked[np++] = best;
            cJSON *pair = cJSON_CreateArray();
            cJSON_AddItemToArray(pair, cJSON_CreateNumber(best));
            cJSON_AddItemToArray(pair, srv_json_num(row[best]));
            cJSON_AddItemToArray(fa, pair);
        }
        cJSON_AddItemToObject(o, "features", fa);
        cJSON_AddItemToArray(toks, o);
    }
    pthread_mutex_unlock(&m->mu);
    if (!rc) {
        cJSON_AddBoolToObject(out, "truncated", truncated);
        cJSON_AddStringToObject(out, "hook", m->sae->cfg.hook_name);
    }
done:
    mem_free(seq);
    mem_free(ids);
    mem_free(offs);
    return rc;
}

int srv_model_feature(srv_model *m, const int *ids, int T, int feature, float *out)
{
    const gpt2_config *cfg = gpt2_cfg(m->gpt);
    if (T < 1 || T > cfg->n_ctx)
        return err_set(ERR_ARG, "a sequence of %d tokens does not fit the model's context (%d)", T,
                       cfg->n_ctx);
    if (feature < 0 || feature >= m->sae->cfg.d_sae)
        return err_set(ERR_ARG, "feature %d is outside the SAE (%d)", feature, m->sae->cfg.d_sae);
    int rc = gpt2_check_ids(cfg, ids, (size_t)T);
    if (rc) return rc;
    pthread_mutex_lock(&m->mu);
    rc = capture_on(m);
    if (!rc) rc = gpt2_forward(m->gpt, ids, 1, T, 0);
    if (!rc && m->T != T) rc = err_set(ERR_SHAPE, "the hook did not fire");
    if (!rc) rc = sae_encode(m->sae, m->x, T, m->f);
    for (int t = 0; !rc && t < T; t++) out[t] = m->f[(size_t)t * m->sae->cfg.d_sae + feature];
    pthread_mutex_unlock(&m->mu);
    return rc;
}

int srv_model_dsae(const srv_model *m) { return m->sae->cfg.d_sae; }

/* ---- steering ------------------------------------------------------------------------------- */
typedef struct {
    double deadline; /* now_seconds() */
    int timed_out;
} gen_guard;

static int gen_token(int id, void *user)
{
    (void)id;
    gen_guard *g = user;
    if (now_seconds() > g->deadline) g->timed_out = 1;
    return g->timed_out;
}

/* One continuation seq[len0..len) as {"text", "tokens": [text...], "ids": [...], "stop"}. */
static cJSON *continuation(srv_model *m, const int *seq, size_t len0, size_t len, int timed_out,
                           int max_new)
{
    cJSON *o = cJSON_CreateObject(), *toks = cJSON_CreateArray(), *ids = cJSON_CreateArray();
    char *all = mem_alloc(1);
    size_t n = 0;
    int ok = o && toks && ids && all;
    int eot = tok_eot(m->tok);
    for (size_t i = len0; ok && i < len; i++) {
        size_t bl = 0;
        const char *b = seq[i] == eot ? "" : tok_token_bytes(m->tok, seq[i], &bl);
        if (!b) {
            b = "";
            bl = 0;
        }
        cJSON *t = srv_json_str(b, bl);
        char *na = mem_realloc(all, n + bl + 1);
        if (!t || !na) {
            cJSON_Delete(t);
            ok = 0;
            break;
        }
        all = na;
        memcpy(all + n, b, bl);
        n += bl;
        cJSON_AddItemToArray(toks, t);
        cJSON_AddItemToArray(ids, cJSON_CreateNumber(seq[i]));
    }
    cJSON *text = ok ? srv_json_str(all, n) : NULL;
    mem_free(all);
    if (!text) {
        cJSON_Delete(o);
        cJSON_Delete(toks);
        cJSON_Delete(ids);
        return NULL;
    }
    cJSON_AddItemToObject(o, "text", text);
    cJSON_AddItemToObject(o, "tokens", toks);
    cJSON_AddItemToObject(o, "ids", ids);
    const char *stop = timed_out ? "time limit"
                     : len > len0 && seq[len - 1] == eot ? "endoftext"
                     : (int)(len - len0) >= max_new ? "max_tokens" : "?";
    cJSON_AddStringToObject(o, "stop", stop);
    return o;
}

int srv_model_steer(srv_model *m, const srv_steer_req *r, cJSON *out)
{
    ana_steer *st = NULL;
    int *seq = NULL;
    size_t len0 = 0;
    const gpt2_config *cfg = gpt2_cfg(m->gpt);
    int Vt = tok_vocab_size(m->tok), eot = tok_eot(m->tok);
    int rc = ana_steer_new(&st, m->sae, r->method, r->terms, r->nterms);
    if (!rc) {
        pthread_mutex_lock(&m->mu); /* ana_gen_context tokenizes: see srv_model_test */
        rc = ana_gen_context(m->tok, cfg->vocab_size, r->prompt, strlen(r->prompt), r->max_new,
                             &seq, &len0);
        pthread_mutex_unlock(&m->mu);
    }
    int *seq2 = rc ? NULL : mem_alloc(sizeof(int) * (len0 + (size_t)r->max_new + 1));
    if (!rc && !seq2) rc = err_set(ERR_NOMEM, "out of memory");
    if (rc) goto done;
    memcpy(seq2, seq, len0 * sizeof *seq);
    /* what `generate --compare` runs: the steered and the unsteered continuation, same seed */
    ana_gen_opts go = {.max_new = r->max_new, .top_k = r->top_k, .vocab_limit = Vt,
                       .stop_id = eot, .temperature = r->temperature, .seed = r->seed};
    gen_guard g = {now_seconds() + r->timeout_ms / 1000.0, 0}, g2;
    size_t len = len0, len2 = len0;
    double t0 = now_seconds();
    pthread_mutex_lock(&m->mu);
    go.on_token = gen_token;
    go.user = &g;
    rc = ana_steer_generate(m->gpt, st, 1, &go, seq, &len);
    g2 = (gen_guard){g.deadline, 0};
    go.user = &g2;
    if (!rc) rc = ana_steer_generate(m->gpt, st, 0, &go, seq2, &len2);
    pthread_mutex_unlock(&m->mu);
    double secs = now_seconds() - t0;
    if (rc) goto done;
    cJSON *a = continuation(m, seq, len0, len, g.timed_out, r->max_new);
    cJSON *b = continuation(m, seq2, len0, len2, g2.timed_out, r->max_new);
    if (!a || !b) {
        cJSON_Delete(a);
        cJSON_Delete(b);
        rc = err_set(ERR_NOMEM, "out of memory");
        goto done;
    }
    cJSON_AddItemToObject(out, "steered", a);
    cJSON_AddItemToObject(out, "unsteered", b);
    cJSON_AddNumberToObject(out, "prompt_tokens", (double)len0);
    cJSON_AddStringToObject(out, "hook", m->sae->cfg.hook_name);
    cJSON_AddNumberToObject(out, "ms", secs * 1e3);
done:
    ana_steer_free(st);
    mem_free(seq);
    mem_free(seq2);
    return rc;
}
