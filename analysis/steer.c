/* steer.c - steering, delta clamping and steered generation at an SAE's hook (see steer.h). */
#include "analysis/steer.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/err.h"
#include "common/mem.h"
#include "common/rng.h"

static const char *const NAMES[] = {"add", "clamp", "ortho", "cap"};

const char *ana_steer_method_name(ana_steer_method m)
{
    return (unsigned)m < 4 ? NAMES[m] : "?";
}

int ana_steer_method_parse(const char *s, ana_steer_method *out)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, NAMES[i])) {
            *out = (ana_steer_method)i;
            return OK;
        }
    return err_set(ERR_ARG, "unknown steering method '%s' (add, clamp, ortho, cap)", s);
}

int ana_steer_parse(const char *spec, int d_sae, ana_steer_term **out, int *n)
{
    *out = NULL;
    *n = 0;
    int cap = 1;
    for (const char *p = spec; *p; p++) cap += *p == ',';
    ana_steer_term *t = mem_alloc((size_t)cap * sizeof *t);
    if (!t) return err_set(ERR_NOMEM, "out of memory");
    const char *p = spec;
    int k = 0;
    while (1) {
        char *end;
        errno = 0;
        /* strtol and strtod skip leading blanks; the end takes none either */
        if (!isdigit((unsigned char)*p)) goto bad;
        long f = strtol(p, &end, 10);
        if (end == p || *end != ':' || errno || f < 0 || f > INT32_MAX) goto bad;
        p = end + 1;
        double v = 0;
        /* 1e309 reads as an infinity: the range check below names it, not the syntax */
        size_t len = buf_read_double(p, BUF_DECIMAL_OVERFLOW, &v);
        end = (char *)p + len;
        if (!len || (*end && *end != ',')) goto bad;
        /* 3e38 fits a float but the residual overflowed downstream and the text failed mid-way
           on a NaN logit (an audit): strengths far beyond any activation are refused */
        if (!(fabs(v) <= ANA_STEER_MAX)) {
            mem_free(t);
            return err_set(ERR_ARG, "steering: strength %.*s is outside -%g..%g (beyond that the "
                           "model's float arithmetic overflows)", (int)(end - p), p,
                           ANA_STEER_MAX, ANA_STEER_MAX);
        }
        if (d_sae > 0 && f >= d_sae) {
            mem_free(t);
            return err_set(ERR_ARG, "steering: feature %ld is out of range (the SAE has %d)", f, d_sae);
        }
        t[k].feature = (int)f;
        t[k].value = (float)v;
        k++;
        if (!*end) break;
        p = end + 1;
    }
    *out = t;
    *n = k;
    return OK;
bad:
    mem_free(t);
    return err_set(ERR_ARG, "steering: '%s' is not FEATURE:STRENGTH[,FEATURE:STRENGTH...]", spec);
}

static double dot(const float *a, const float *b, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

int ana_steer_rows(const sae_model *s, ana_steer_method m, const ana_steer_term *t, int n,
                   float *x, int N, float *f)
{
    const int d = s->cfg.d_in, D = s->cfg.d_sae;
    if (s->cfg.transcoder) /* its W_dec rows live at another hook (d_out wide) */
        return err_set(ERR_ARG, "steering: the SAE is a transcoder (it writes %s, not %s); steer "
                       "with an SAE of one hook", s->cfg.hook_name_out, s->cfg.hook_name);
    for (int k = 0; k < n; k++)
        if (t[k].feature < 0 || t[k].feature >= D)
            return err_set(ERR_ARG, "steering: feature %d is out of range (the SAE has %d)",
                           t[k].feature, D);
    if (n == 0 || N == 0) return OK;
    if (m == ANA_STEER_CLAMP) {
        if (!f) return err_set(ERR_ARG, "steering: clamping needs code scratch");
        int rc = sae_encode(s, x, N, f); /* codes of the unmodified rows, read by every term */
        if (rc) return rc;
        for (int r = 0; r < N; r++) {
            float *xr = x + (size_t)r * d;
            const float *fr = f + (size_t)r * D;
            for (int k = 0; k < n; k++) {
                float delta = t[k].value - fr[t[k].feature];
                if (delta == 0) continue;
                const float *v = s->W_dec + (size_t)t[k].feature * d;
                for (int i = 0; i < d; i++) xr[i] += delta * v[i];
            }
        }
        return OK;
    }
    for (int k = 0; k < n; k++) {
        const float *v = s->W_dec + (size_t)t[k].feature * d;
        const double S = t[k].value, vv = dot(v, v, d);
        if (m != ANA_STEER_ADD && !(vv > 0)) continue; /* a zero direction has no projection */
        for (int r = 0; r < N; r++) {
            float *xr = x + (size_t)r * d;
            double c; /* coefficient of v in the change */
            if (m == ANA_STEER_ADD) c = S;
            else {
                double p = dot(xr, v, d) / vv; /* x = p v + (orthogonal part) */
                if (m == ANA_STEER_ORTHO) c = (S - 1) * p;
                else { /* cap: the projection on u is p |v|; keep it at most S */
                    double norm = sqrt(vv), over = p * norm - S;
                    c = over > 0 ? -over / norm : 0;
                }
            }
            if (c == 0) continue;
            float cf = (float)c;
            for (int i = 0; i < d; i++) xr[i] += cf * v[i];
        }
    }
    return OK;
}

struct ana_steer {
    const sae_model *sae;
    ana_steer_method method;
    ana_steer_term *terms;
    int n, rc;
    float *f; /* [cap_rows, d_sae] clamp scratch */
    int cap_rows;
};

int ana_steer_new(ana_steer **out, const sae_model *s, ana_steer_method m,
                  const ana_steer_term *t, int n)
{
    *out = NULL;
    /* a transcoder's decoder writes another hook: its rows added at its input hook are noise
       (and read past W_dec's [d_sae, d_out] when d_out < d_in: a crash in an audit) */
    if (s->cfg.transcoder)
        return err_set(ERR_ARG, "steering: the SAE is a transcoder (it writes %s, not %s); steer "
                       "with an SAE of one hook", s->cfg.hook_name_out, s->cfg.hook_name);
    for (int k = 0; k < n; k++) {
        if (t[k].feature < 0 || t[k].feature >= s->cfg.d_sae)
            return err_set(ERR_ARG, "steering: feature %d is out of range (the SAE has %d)",
                           t[k].feature, s->cfg.d_sae);
        if (!(fabsf(t[k].value) <= ANA_STEER_MAX))
            return err_set(ERR_ARG, "steering: strength %g is outside -%g..%g", t[k].value,
                           ANA_STEER_MAX, ANA_STEER_MAX);
        /* clamping sets a feature once: a second term added S - f again (2S - f, an audit) */
        for (int j = 0; m == ANA_STEER_CLAMP && j < k; j++)
            if (t[j].feature == t[k].feature)
                return err_set(ERR_ARG, "steering: feature %d is clamped twice (give it once)",
                               t[k].feature);
    }
    ana_steer *st = mem_calloc(1, sizeof *st);
    if (!st) return err_set(ERR_NOMEM, "out of memory");
    st->terms = mem_alloc((size_t)(n > 0 ? n : 1) * sizeof *st->terms);
    if (!st->terms) {
        mem_free(st);
        return err_set(ERR_NOMEM, "out of memory");
    }
    if (n) memcpy(st->terms, t, (size_t)n * sizeof *t);
    st->sae = s;
    st->method = m;
    st->n = n;
    *out = st;
    return OK;
}

void ana_steer_free(ana_steer *st)
{
    if (!st) return;
    mem_free(st->terms);
    mem_free(st->f);
    mem_free(st);
}

static int steer_hook(const tensor_view *tv, void *user)
{
    ana_steer *st = user;
    const int d = st->sae->cfg.d_in;
    int64_t numel = tensor_numel(tv);
    if (numel % d) {
        st->rc = err_set(ERR_SHAPE, "hook %s gives %lld values, not rows of the SAE's %d", tv->name,
                         (long long)numel, d);
        return 1;
    }
    int rows = (int)(numel / d);
    if (st->method == ANA_STEER_CLAMP && rows > st->cap_rows) {
        float *f = mem_realloc(st->f, (size_t)rows * st->sae->cfg.d_sae * sizeof *f);
        if (!f) {
            st->rc = err_set(ERR_NOMEM, "out of memory for the codes of %d rows", rows);
            return 1;
        }
        st->f = f;
        st->cap_rows = rows;
    }
    int rc = ana_steer_rows(st->sae, st->method, st->terms, st->n, tv->data, rows, st->f);
    if (rc) {
        st->rc = rc;
        return 1;
    }
    return 0;
}

int ana_steer_attach(ana_steer *st, gpt2_model *m, const char *hook)
{
    const char *h = hook ? hook : st->sae->cfg.hook_name;
    if (!h[0]) return err_set(ERR_ARG, "steering: the SAE names no hook (cfg.json hook_name); give --hook NAME");
    /* add, ortho and cap only move decoder directions, which another hook of the same width can
     * take (an experiment); clamp encodes the hook's rows, and codes of rows the SAE never saw
     * mean nothing (analyze and attribute refuse such a hook) */
    if (st->method == ANA_STEER_CLAMP && st->sae->cfg.hook_name[0] &&
        strcmp(h, st->sae->cfg.hook_name))
        return err_set(ERR_ARG, "steering: clamp sets the SAE's own codes, and it was trained on "
                       "%s, not %s (add, ortho and cap move its decoder directions to another "
                       "hook)", st->sae->cfg.hook_name, h);
    int layer, width;
    int rc = gpt2_hook_token_info(m, h, &layer, &width);
    if (rc) return rc;
    if (width != st->sae->cfg.d_in)
        return err_set(ERR_SHAPE, "steering: %s is %d wide but the SAE reads %d", h, width,
                       st->sae->cfg.d_in);
    st->rc = OK;
    return gpt2_hook_add(m, h, steer_hook, st);
}

int ana_steer_error(const ana_steer *st) { return st->rc; }

int ana_steer_generate(gpt2_model *m, ana_steer *st, int steered, const ana_gen_opts *o,
                       int *seq, size_t *len)
{
    gpt2_hook_clear(m);
    int rc = steered ? ana_steer_attach(st, m, o->hook) : OK;
    rng_state rng;
    rng_seed(&rng, o->seed);
    if (!rc)
        rc = smp_generate(m, seq, len, o->max_new, o->temperature, o->top_k, o->vocab_limit,
                          o->stop_id, &rng, o->on_token, o->user);
    if (steered && st->rc) rc = st->rc;
    gpt2_hook_clear(m);
    return rc;
}

int ana_gen_context(tok_tokenizer *tok, int vocab, const char *prompt, size_t n, int max_new,
                    int **seq, size_t *len)
{
    *seq = NULL;
    *len = 0;
    int eot = tok_eot(tok);
    int rc = tok_check_model(tok, NULL, vocab, NULL);
    if (rc) return rc;
    if (max_new < 0) return err_set(ERR_ARG, "max_new must be >= 0, got %d", max_new);
    int *ids = NULL;
    size_t ni = 0;
    if ((rc = tok_encode(tok, prompt, n, 1, &ids, NULL, &ni))) return rc;
    /* the running sequence: prompt (or <|endoftext|>) then the generated tokens */
    int *ctx = mem_alloc(sizeof(int) * (ni + (size_t)max_new + 1));
    size_t k = 0;
    if (!ctx) rc = err_set(ERR_NOMEM, "out of memory");
    else if (ni == 0 && eot < 0)
        rc = err_set(ERR_ARG, "empty prompt and the tokenizer has no <|endoftext|> to start from");
    else if (ni == 0) ctx[k++] = eot;
    if (!rc && ni) memcpy(ctx + k, ids, ni * sizeof *ids), k += ni;
    mem_free(ids);
    if (rc) {
        mem_free(ctx);
        return rc;
    }
    *seq = ctx;
    *len = k;
    return OK;
}

int ana_check_sae_model(const sae_model *s, const char *sae_dir, const char *model_dir)
{
    if (!s->cfg.model_checksum[0]) return OK;
    char cs[17];
    int rc = gpt2_dir_checksum(model_dir, cs);
    if (rc) return rc;
    if (strcmp(cs, s->cfg.model_checksum))
        return err_set(ERR_ARG, "%s: the SAE was trained on activations of a model with checksum %s, "
                       "but --model %s has checksum %s: another model", sae_dir,
                       s->cfg.model_checksum, model_dir, cs);
    return OK;
}
