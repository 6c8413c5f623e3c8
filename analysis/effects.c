/* effects.c - per-feature ablation effects, batched over positions (see effects.h). */
#include "analysis/effects.h"

#include "analysis/ana.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"
#include "common/progress.h"

typedef struct {
    int t, j;  /* position, feature */
    float a;   /* f_j at t in the clean pass */
} pair;

/* The hook of the clean pass (copy the rows out) and of the ablation passes (row b of the
 * batch gets the pairs rows[r0 + b]). */
typedef struct {
    const sae_model *s;
    int T, d, capture; /* d: the rows' width, the input hook's (capture) or the decoder's */
    float *x;              /* capture: [T,d] */
    const pair *pairs;     /* ablate: pairs of row r are pairs[start[r] .. start[r+1]) */
    const int *start;
    int r0, nb, rc;
} hook_ctx;

static int effects_hook(const tensor_view *tv, void *user)
{
    hook_ctx *h = user;
    int64_t want = (int64_t)(h->capture ? 1 : h->nb) * h->T * h->d;
    if (tensor_numel(tv) != want) {
        h->rc = err_set(ERR_SHAPE, "hook %s gives %lld values, not %lld", tv->name,
                        (long long)tensor_numel(tv), (long long)want);
        return 1;
    }
    if (h->capture) {
        memcpy(h->x, tv->data, (size_t)want * sizeof *h->x);
        return 0;
    }
    for (int b = 0; b < h->nb; b++)
        for (int p = h->start[h->r0 + b]; p < h->start[h->r0 + b + 1]; p++) {
            const pair *q = &h->pairs[p];
            float *x = tv->data + ((size_t)b * h->T + q->t) * h->d;
            const float *v = h->s->W_dec + (size_t)q->j * h->d;
            for (int i = 0; i < h->d; i++) x[i] -= q->a * v[i];
        }
    return 0;
}

/* log-softmax of l [V] into lp, and (p != NULL) the probabilities (ana_softmax) */
static void log_softmax(const float *l, int V, float *lp, float *p)
{
    double lse;
    if (p) ana_softmax(p, l, V, &lse);
    else lse = ana_logsumexp(l, V);
    for (int i = 0; i < V; i++) lp[i] = (float)((double)l[i] - lse);
}

int ana_effects_chunk(int V, int d_sae, size_t max_acc_bytes)
{
    size_t acc_bytes = max_acc_bytes ? max_acc_bytes : (size_t)512 << 20;
    size_t chunk = acc_bytes / ((size_t)V * sizeof(float));
    if (chunk < 1) chunk = 1;
    if (chunk > (size_t)d_sae) chunk = (size_t)d_sae;
    return (int)chunk;
}

/* The caller's save of st; 0 once it failed (no more offers). */
static int offer_state(const ana_effects_opts *o, const ana_effects_state *st, double *last_save)
{
    int ok = o->save(st, o->save_user) == OK;
    *last_save = now_seconds();
    return ok;
}

int ana_effects(gpt2_model *m, const sae_model *s, const char *hook, const int *tok,
                const int64_t *off, const unsigned char *bos, size_t nseq,
                const ana_effects_opts *o, ana_effects_out *out, ana_effects_fn cb, void *user)
{
    const gpt2_config *cfg = gpt2_cfg(m);
    const int V = cfg->vocab_size, D = s->cfg.d_sae, d = s->cfg.d_in;
    /* a transcoder's decoder writes its output hook: the ablation is there, in rows of d_out
       (it subtracted d_out-wide decoder rows from the input hook's rows, read at d_in's stride:
       out of bounds where d_out < d_in; an audit of analyze --effects on transcoders) */
    const int tc = s->cfg.transcoder != SAE_NOT_TRANSCODER;
    const char *ahook = tc ? s->cfg.hook_name_out : hook;
    const int dd = tc ? s->cfg.d_out : d;
    const int B = o->batch > 0 ? o->batch : 8;
    const int64_t max_ctx = o->max_ctx > 0 ? o->max_ctx : INT64_MAX;
    int layer, width;
    int rc = gpt2_hook_token_info(m, hook, &layer, &width);
    if (rc) return rc;
    if (width != d) return err_set(ERR_SHAPE, "effects: %s is %d wide but the SAE reads %d", hook, width, d);
    if (tc && (rc = gpt2_hook_token_info(m, ahook, &layer, &width)) != OK) return rc;
    if (tc && width != dd)
        return err_set(ERR_SHAPE, "effects: %s is %d wide but the transcoder writes %d", ahook, width, dd);
    const int local = gpt2_hook_position_local(m, ahook);
    int Tm = 0;
    for (size_t i = 0; i < nseq; i++)
        if (off[i + 1] - off[i] > Tm) Tm = (int)(off[i + 1] - off[i]);
    if (Tm > cfg->n_ctx) return err_set(ERR_SHAPE, "effects: a sequence of %d tokens is longer than the model's context %d", Tm, cfg->n_ctx);
    const int chunk = ana_effects_chunk(V, D, o->max_acc_bytes);

    const ana_effects_state *rs = o->resume;
    if (rs && (rs->chunk != chunk || rs->V != V || rs->d_sae != D || rs->j0 < 0 || rs->j0 >= D ||
               rs->j0 % chunk || rs->seqs_done < 0 || rs->seqs_done > (int64_t)nseq))
        return err_set(ERR_ARG, "effects: a saved state of %d features in chunks of %d (vocabulary "
                       "%d) does not fit this run's %d in chunks of %d (%d)", rs->d_sae, rs->chunk,
                       rs->V, D, chunk, V);
    memset(out->n, 0, (size_t)D * sizeof *out->n);
    out->forwards = out->rows = 0;
    double *sa = mem_calloc((size_t)D, sizeof *sa), *skl = mem_calloc((size_t)D, sizeof *skl);
    double *sdl = mem_calloc((size_t)D, sizeof *sdl);
    float *acc = mem_alloc((size_t)chunk * V * sizeof *acc);
    float *x = mem_alloc((size_t)(Tm > 0 ? Tm : 1) * d * sizeof *x);
    float *f = mem_alloc((size_t)(Tm > 0 ? Tm : 1) * D * sizeof *f);
    float *lpc = mem_alloc((size_t)(Tm > 0 ? Tm : 1) * V * sizeof *lpc);
    float *pc = mem_alloc((size_t)(Tm > 0 ? Tm : 1) * V * sizeof *pc);
    float *lpa = mem_alloc((size_t)V * sizeof *lpa);
    int *rep = mem_alloc((size_t)B * (Tm > 0 ? Tm : 1) * sizeof *rep);
    /* pending pairs of one sequence: at most one per (position, feature) */
    size_t pcap = (size_t)(Tm > 0 ? Tm : 1) * (D < 64 ? D : 64);
    pair *pairs = mem_alloc(pcap * sizeof *pairs), *byrow = mem_alloc(pcap * sizeof *byrow);
    int *pstart = mem_alloc(((size_t)Tm + 2) * sizeof *pstart); /* per position */
    int *rstart = mem_alloc((pcap + 2) * sizeof *rstart);       /* per row */
    if (!sa || !skl || !sdl || !acc || !x || !f || !lpc || !pc || !lpa || !rep || !pairs ||
        !byrow || !pstart || !rstart)
        rc = err_set(ERR_NOMEM, "effects: out of memory (%d features x %d tokens)", chunk, V);
    hook_ctx h = {.s = s, .d = d};
    progress pr;
    double total = (double)nseq * ((D + chunk - 1) / chunk), done = 0;
    int jstart = 0;
    size_t istart = 0;
    if (!rc && rs) { /* the saved sums and counts, then on from its sequence */
        jstart = rs->j0;
        istart = (size_t)rs->seqs_done;
        memcpy(out->n, rs->n, (size_t)D * sizeof *out->n);
        memcpy(sa, rs->sum_act, (size_t)D * sizeof *sa);
        memcpy(skl, rs->sum_kl, (size_t)D * sizeof *skl);
        memcpy(sdl, rs->sum_dloss, (size_t)D * sizeof *sdl);
        memcpy(acc, rs->acc, (size_t)((jstart + chunk < D ? jstart + chunk : D) - jstart) * V * sizeof *acc);
        out->forwards = rs->forwards;
        out->rows = rs->rows;
        done = (double)nseq * (jstart / chunk) + (double)istart;
    }
    progress_begin_at(&pr, "effects", total, "seq", done);
    double last_save = now_seconds();
    int saving = o->save && o->save_secs > 0;
    for (int j0 = jstart; j0 < D && !rc; j0 += chunk) {
        int j1 = j0 + chunk < D ? j0 + chunk : D;
        size_t i0 = j0 == jstart ? istart : 0;
        if (i0 == 0) memset(acc, 0, (size_t)(j1 - j0) * V * sizeof *acc);
        for (size_t i = i0; i < nseq && !rc; i++, done++) {
            /* the state after sequence i - 1 of this chunk (the callbacks of the chunks before ran) */
            if (saving && i > i0 && now_seconds() - last_save >= o->save_secs)
                saving = offer_state(o, &(ana_effects_state){j0, chunk, V, D, (int64_t)i, acc, out->n,
                                                             sa, skl, sdl, out->forwards, out->rows},
                                     &last_save);
            const int *ids = tok + off[i];
            const int T = (int)(off[i + 1] - off[i]);
            const int b0 = bos && bos[i] ? 1 : 0;
            if (o->stop && *o->stop) {
                rc = err_set(ERR_ABORTED, "interrupted");
                break;
            }
            progress_update(&pr, done, NULL);
            if (T < 2 || ids[0] < 0) continue;
            /* every feature of the chunk has its --effects-ctx contexts: the clean pass would find
               no pair (it ran for each sequence left, 89 passes for 64 ablations) */
            int open = max_ctx == INT64_MAX;
            for (int j = j0; j < j1 && !open; j++) open = out->n[j] < max_ctx;
            if (!open) continue;
            /* clean pass: hook rows, codes, next-token log-probabilities */
            gpt2_hook_clear(m);
            h.capture = 1;
            h.d = d;
            h.T = T;
            h.x = x;
            h.rc = OK;
            if ((rc = gpt2_hook_add(m, hook, effects_hook, &h))) break;
            rc = gpt2_forward(m, ids, 1, T, 1);
            if (!rc) rc = h.rc;
            if (!rc) rc = sae_encode(s, x, T, f);
            if (rc) break;
            out->forwards++;
            const float *lg = gpt2_logits(m);
            for (int t = b0; t + 1 < T; t++)
                log_softmax(lg + (size_t)t * V, V, lpc + (size_t)t * V, pc + (size_t)t * V);
            /* pending pairs, grouped by position */
            size_t np = 0;
            int maxper = 0;
            for (int t = 0; t <= T; t++) {
                pstart[t] = (int)np;
                if (t == T || t < b0 || t + 1 >= T) continue;
                for (int j = j0; j < j1; j++) {
                    float a = f[(size_t)t * D + j];
                    if (!(a > 0) || out->n[j] >= max_ctx) continue;
                    if (np == pcap) {
                        pcap *= 2;
                        pair *p2 = mem_realloc(pairs, pcap * sizeof *pairs);
                        pair *b2 = p2 ? mem_realloc(byrow, pcap * sizeof *byrow) : NULL;
                        int *r2 = b2 ? mem_realloc(rstart, (pcap + 2) * sizeof *rstart) : NULL;
                        if (p2) pairs = p2;
                        if (b2) byrow = b2;
                        if (r2) rstart = r2;
                        if (!r2) {
                            rc = err_set(ERR_NOMEM, "effects: out of memory");
                            break;
                        }
                    }
                    pairs[np++] = (pair){t, j, a};
                    out->n[j]++;
                }
                if (rc) break;
                if ((int)np - pstart[t] > maxper) maxper = (int)np - pstart[t];
            }
            if (rc) break;
            /* rows: position-local hooks take the r-th pair of every position; others one pair */
            int nrows = 0;
            size_t w = 0;
            if (local) {
                for (int r = 0; r < maxper; r++) {
                    rstart[nrows++] = (int)w;
                    for (int t = b0; t + 1 < T; t++)
                        if (pstart[t] + r < pstart[t + 1]) byrow[w++] = pairs[pstart[t] + r];
                }
            } else {
                for (size_t p = 0; p < np; p++) {
                    rstart[nrows++] = (int)w;
                    byrow[w++] = pairs[p];
                }
            }
            rstart[nrows] = (int)w;
            h.capture = 0;
            h.d = dd;
            h.pairs = byrow;
            h.start = rstart;
            if (tc) {
                gpt2_hook_clear(m);
                if ((rc = gpt2_hook_add(m, ahook, effects_hook, &h))) break;
            }
            for (int b = 0; b < B; b++) memcpy(rep + (size_t)b * T, ids, (size_t)T * sizeof *rep);
            for (int r0 = 0; r0 < nrows && !rc; r0 += B) {
                h.r0 = r0;
                h.nb = nrows - r0 < B ? nrows - r0 : B;
                h.rc = OK;
                rc = gpt2_forward(m, rep, h.nb, T, 1);
                if (!rc) rc = h.rc;
                if (rc) break;
                out->forwards++;
                out->rows += h.nb;
                const float *la = gpt2_logits(m);
                for (int b = 0; b < h.nb; b++)
                    for (int p = rstart[r0 + b]; p < rstart[r0 + b + 1]; p++) {
                        const pair *q = &byrow[p];
                        const size_t at = (size_t)q->t * V;
                        log_softmax(la + ((size_t)b * T + q->t) * V, V, lpa, NULL);
                        double kl = 0;
                        float *ac = acc + (size_t)(q->j - j0) * V;
                        for (int v = 0; v < V; v++) {
                            float dv = lpc[at + v] - lpa[v];
                            kl += (double)pc[at + v] * dv;
                            ac[v] += dv;
                        }
                        int y = ids[q->t + 1];
                        sa[q->j] += q->a;
                        skl[q->j] += kl;
                        sdl[q->j] += (double)lpc[at + y] - lpa[y];
                    }
            }
        }
        gpt2_hook_clear(m);
        if (!rc && saving && now_seconds() - last_save >= o->save_secs) /* the chunk whole */
            saving = offer_state(o, &(ana_effects_state){j0, chunk, V, D, (int64_t)nseq, acc, out->n, sa,
                                                         skl, sdl, out->forwards, out->rows},
                                 &last_save);
        for (int j = j0; j < j1 && !rc; j++) {
            int64_t n = out->n[j];
            if (!n) continue;
            float *ac = acc + (size_t)(j - j0) * V;
            for (int v = 0; v < V; v++) ac[v] = (float)(ac[v] / (double)n);
            if (cb) rc = cb(j, n, ac, V, user);
        }
    }
    progress_end(&pr);
    gpt2_hook_clear(m);
    for (int j = 0; j < D; j++) {
        double n = (double)out->n[j];
        out->mean_act[j] = n ? sa[j] / n : NAN;
        out->kl[j] = n ? skl[j] / n : NAN;
        out->dloss[j] = n ? sdl[j] / n : NAN;
    }
    mem_free(sa);
    mem_free(skl);
    mem_free(sdl);
    mem_free(acc);
    mem_free(x);
    mem_free(f);
    mem_free(lpc);
    mem_free(pc);
    mem_free(lpa);
    mem_free(rep);
    mem_free(pairs);
    mem_free(byrow);
    mem_free(pstart);
    mem_free(rstart);
    return rc;
}

/* ---- Spearman ------------------------------------------------------------------------------ */
typedef struct { float v; int i; } keyed;
static int cmp_keyed(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? -1 : 1;
    return x->i - y->i;
}

/* average ranks (1-based) of x [n] into r */
static void ranks(const float *x, int n, keyed *k, double *r)
{
    for (int i = 0; i < n; i++) k[i] = (keyed){x[i], i};
    qsort(k, (size_t)n, sizeof *k, cmp_keyed);
    for (int a = 0; a < n;) {
        int b = a;
        while (b + 1 < n && k[b + 1].v == k[a].v) b++;
        double avg = (a + b) / 2.0 + 1;
        for (int c = a; c <= b; c++) r[k[c].i] = avg;
        a = b + 1;
    }
}

double ana_spearman(const float *a, const float *b, int n)
{
    if (n < 2) return NAN;
    keyed *k = mem_alloc((size_t)n * sizeof *k);
    double *ra = mem_alloc((size_t)n * sizeof *ra), *rb = mem_alloc((size_t)n * sizeof *rb);
    double res = NAN;
    if (k && ra && rb) {
        ranks(a, n, k, ra);
        ranks(b, n, k, rb);
        double m = (n + 1) / 2.0, sab = 0, saa = 0, sbb = 0;
        for (int i = 0; i < n; i++) {
            sab += (ra[i] - m) * (rb[i] - m);
            saa += (ra[i] - m) * (ra[i] - m);
            sbb += (rb[i] - m) * (rb[i] - m);
        }
        if (saa > 0 && sbb > 0) res = sab / sqrt(saa * sbb);
    }
    mem_free(k);
    mem_free(ra);
    mem_free(rb);
    return res;
}
