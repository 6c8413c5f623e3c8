/* graph.c - attribution graphs: the frozen replacement model, one linear backward per target,
 * circuit-tracer's influence pruning (see graph.h). */
#include "analysis/graph.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"
#include "common/par.h"
#include "common/progress.h"

void ana_graph_free(ana_graph *g)
{
    if (!g) return;
    mem_free(g->nodes);
    mem_free(g->adj);
    mem_free(g->edge_kept);
    memset(g, 0, sizeof *g);
}

/* ---- what one forward captures -------------------------------------------------------------- */
typedef struct {
    int L, T, C, H;
    float *x0;   /* [T,C] hook_embed: the token embeddings (the embedding nodes) */
    float *wpe;  /* [T,C] hook_pos_embed: the positional embeddings (a constant: bias) */
    float *pre;  /* [L,T,C] resid_pre per block */
    float *mid;  /* [L,T,C] resid_mid */
    float *ln2;  /* [L,T,C] ln2.hook_normalized (the transcoder input) */
    float *mlp;  /* [L,T,C] hook_mlp_out */
    float *pat;  /* [L,H,T,T] attn.hook_pattern */
    float *fin;  /* [T,C] last block's resid_post (ln_f's input) */
} capture;

typedef struct { float *dst; size_t n; } grab;
static int grab_fn(const tensor_view *tv, void *user)
{
    grab *g = user;
    if ((size_t)tensor_numel(tv) != g->n) return 1;
    memcpy(g->dst, tv->data, g->n * sizeof *g->dst);
    return 0;
}

/* 1/sqrt(var + eps) of each row, as the LayerNorm forward computes it (biased variance). */
static void ln_scales(double *r, const float *x, int T, int C, float eps)
{
    for (int t = 0; t < T; t++) {
        const float *v = x + (size_t)t * C;
        double mean = 0, var = 0;
        for (int k = 0; k < C; k++) mean += v[k];
        mean /= C;
        for (int k = 0; k < C; k++) var += (v[k] - mean) * (v[k] - mean);
        var /= C;
        r[t] = 1.0 / sqrt(var + (double)eps);
    }
}

/* out[C] += r * (g*w - mean(g*w)): the frozen LayerNorm's transpose applied to g */
static void ln_back(double *out, const double *g, const double *w, double r, int C)
{
    double mean = 0;
    for (int k = 0; k < C; k++) mean += g[k] * w[k];
    mean /= C;
    for (int k = 0; k < C; k++) out[k] += r * (g[k] * w[k] - mean);
}

static double *dup_d(const float *p, size_t n)
{
    double *d = mem_alloc(n * sizeof *d);
    if (d)
        for (size_t i = 0; i < n; i++) d[i] = p[i];
    return d;
}

typedef struct {
    double *w1, *b1, *w2, *b2;    /* [C] */
    double *Wv, *bv, *Wo, *bo;    /* Wv [C,C] (c_attn's value columns), bv [C], Wo [C,C], bo [C] */
    double *r1, *r2;              /* [T] frozen scales */
} frozen_layer;

/* ---- pruning -------------------------------------------------------------------------------- */
static double *normalized_abs(const double *A, int n)
{
    double *N = mem_alloc((size_t)n * n * sizeof *N);
    if (!N) return NULL;
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < n; j++) s += fabs(A[(size_t)i * n + j]);
        if (s < 1e-10) s = 1e-10;
        for (int j = 0; j < n; j++) N[(size_t)i * n + j] = fabs(A[(size_t)i * n + j]) / s;
    }
    return N;
}

/* out = w An + w An^2 + ... (An already normalised) */
static int influence_of(const double *An, int n, const double *w, double *out)
{
    double *cur = mem_alloc((size_t)n * sizeof *cur), *nxt = mem_alloc((size_t)n * sizeof *nxt);
    if (!cur || !nxt) {
        mem_free(cur);
        mem_free(nxt);
        return err_set(ERR_NOMEM, "graph pruning: out of memory");
    }
    memcpy(cur, w, (size_t)n * sizeof *cur);
    memset(out, 0, (size_t)n * sizeof *out);
    int rc = OK;
    for (int it = 0;; it++) {
        memset(nxt, 0, (size_t)n * sizeof *nxt);
        int any = 0;
        for (int i = 0; i < n; i++) {
            if (cur[i] == 0) continue;
            const double *row = An + (size_t)i * n;
            for (int j = 0; j < n; j++) nxt[j] += cur[i] * row[j];
        }
        for (int j = 0; j < n; j++) {
            out[j] += nxt[j];
            any |= nxt[j] != 0;
        }
        if (!any) break;
        if (it > n) {
            rc = err_set(ERR_ARG, "graph influence does not converge (the adjacency has a cycle)");
            break;
        }
        double *t = cur;
        cur = nxt;
        nxt = t;
    }
    mem_free(cur);
    mem_free(nxt);
    return rc;
}

int ana_graph_influence(const double *A, int n, const double *w, double *out)
{
    double *An = normalized_abs(A, n);
    if (!An) return err_set(ERR_NOMEM, "graph pruning: out of memory");
    int rc = influence_of(An, n, w, out);
    mem_free(An);
    return rc;
}

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x > y ? -1 : x < y;
}

double ana_graph_threshold(const double *scores, size_t n, double threshold)
{
    if (n == 0) return 0;
    double *s = mem_alloc(n * sizeof *s);
    if (!s) return 0; /* keep everything rather than fail */
    memcpy(s, scores, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_desc);
    double total = 0;
    for (size_t i = 0; i < n; i++) total += s[i];
    double thr = 0, cum = 0;
    if (total > 0) {
        size_t idx = n - 1; /* the first rank whose cumulative fraction reaches threshold */
        for (size_t i = 0; i < n; i++) {
            cum += s[i];
            if (cum / total >= threshold) {
                idx = i;
                break;
            }
        }
        thr = s[idx];
    }
    mem_free(s);
    return thr;
}

int ana_graph_prune(ana_graph *g, double node_threshold, double edge_threshold)
{
    if (!(node_threshold >= 0 && node_threshold <= 1) || !(edge_threshold >= 0 && edge_threshold <= 1))
        return err_set(ERR_ARG, "graph thresholds %g, %g (each in [0, 1])", node_threshold, edge_threshold);
    const int n = g->n, nF = g->n_features, nFE = nF + g->n_layers * g->n_pos;
    const size_t nn = (size_t)n * n;
    double *w = mem_calloc((size_t)n, sizeof *w), *infl = mem_alloc((size_t)n * sizeof *infl);
    double *pinf = mem_alloc((size_t)n * sizeof *pinf), *P = mem_alloc(nn * sizeof *P);
    unsigned char *nm = mem_alloc((size_t)n), *old = mem_alloc((size_t)n);
    int *rank = mem_alloc((size_t)n * sizeof *rank);
    mem_free(g->edge_kept);
    g->edge_kept = mem_calloc(nn, 1);
    double *Pn = NULL;
    int rc = OK;
    if (!w || !infl || !pinf || !P || !nm || !old || !rank || !g->edge_kept) {
        rc = err_set(ERR_NOMEM, "graph pruning: out of memory");
        goto out;
    }
    for (int i = n - g->n_logits; i < n; i++) w[i] = g->nodes[i].activation;
    if ((rc = ana_graph_influence(g->adj, n, w, infl))) goto out;
    double thr = ana_graph_threshold(infl, (size_t)n, node_threshold);
    for (int i = 0; i < n; i++) nm[i] = infl[i] >= thr || i >= nFE;
    for (size_t k = 0; k < nn; k++) {
        int t = (int)(k / n), s = (int)(k % n);
        P[k] = nm[t] && nm[s] ? g->adj[k] : 0;
    }
    if (!(Pn = normalized_abs(P, n))) {
        rc = err_set(ERR_NOMEM, "graph pruning: out of memory");
        goto out;
    }
    if ((rc = influence_of(Pn, n, w, pinf))) goto out;
    for (int i = 0; i < n; i++) pinf[i] += w[i];
    for (size_t k = 0; k < nn; k++) P[k] = Pn[k] * pinf[k / n]; /* edge scores */
    double ethr = ana_graph_threshold(P, nn, edge_threshold);
    /* an entry of weight zero is no edge, whatever the threshold */
    for (size_t k = 0; k < nn; k++) g->edge_kept[k] = P[k] >= ethr && g->adj[k] != 0;
    for (;;) {
        memcpy(old, nm, (size_t)n);
        for (size_t k = 0; k < nn; k++)
            if (!nm[k / n] || !nm[k % n]) g->edge_kept[k] = 0;
        for (int s = 0; s < nFE; s++) { /* features and errors need a kept outgoing edge */
            int any = 0;
            for (int t = 0; t < n && !any; t++) any = g->edge_kept[(size_t)t * n + s];
            nm[s] &= any;
        }
        for (int t = 0; t < nF; t++) { /* features need a kept incoming edge */
            int any = 0;
            for (int s = 0; s < n && !any; s++) any = g->edge_kept[(size_t)t * n + s];
            nm[t] &= any;
        }
        if (!memcmp(old, nm, (size_t)n)) break;
    }
    /* cumulative influence fraction by rank (circuit-tracer's node "influence" field) */
    double total = 0;
    for (int i = 0; i < n; i++) {
        rank[i] = i;
        total += infl[i];
    }
    for (int i = 1; i < n; i++) { /* insertion sort by influence, descending (n is small) */
        int r = rank[i], j = i - 1;
        while (j >= 0 && infl[rank[j]] < infl[r]) {
            rank[j + 1] = rank[j];
            j--;
        }
        rank[j + 1] = r;
    }
    double cum = 0;
    for (int k = 0; k < n; k++) {
        cum += infl[rank[k]];
        g->nodes[rank[k]].cum = total > 0 ? cum / total : 0;
    }
    g->n_kept = 0;
    g->n_edges_kept = 0;
    for (int i = 0; i < n; i++) {
        g->nodes[i].influence = infl[i];
        g->nodes[i].kept = nm[i];
        g->n_kept += nm[i];
    }
    for (size_t k = 0; k < nn; k++) g->n_edges_kept += g->edge_kept[k];
out:
    mem_free(w);
    mem_free(infl);
    mem_free(pinf);
    mem_free(P);
    mem_free(Pn);
    mem_free(nm);
    mem_free(old);
    mem_free(rank);
    return rc;
}

/* ---- building ------------------------------------------------------------------------------- */
int ana_graph_check_transcoder(const gpt2_model *m, const sae_model *s, int l)
{
    const gpt2_config *c = gpt2_cfg(m);
    char in[64], outn[64];
    snprintf(in, sizeof in, "blocks.%d.ln2.hook_normalized", l);
    snprintf(outn, sizeof outn, "blocks.%d.hook_mlp_out", l);
    if (!s) return err_set(ERR_ARG, "no transcoder for block %d (one per block is needed)", l);
    if (!s->cfg.transcoder)
        return err_set(ERR_ARG, "block %d: an SAE, not a transcoder (sae-train --arch transcoder)", l);
    if (strcmp(s->cfg.hook_name, in) || strcmp(s->cfg.hook_name_out, outn))
        return err_set(ERR_ARG, "block %d: the transcoder maps %s -> %s; the graph needs %s -> %s", l,
                       s->cfg.hook_name[0] ? s->cfg.hook_name : "(no hook_name)",
                       s->cfg.hook_name_out[0] ? s->cfg.hook_name_out : "(no hook_name_out)", in, outn);
    if (s->cfg.d_in != c->n_embd || sae_out_dim(&s->cfg) != c->n_embd)
        return err_set(ERR_SHAPE, "block %d: the transcoder is %d -> %d wide, the model %d", l,
                       s->cfg.d_in, sae_out_dim(&s->cfg), c->n_embd);
    if (s->cfg.arch == SAE_GATED)
        return err_set(ERR_ARG, "block %d: gated transcoders are not supported", l);
    return OK;
}

static int check_transcoders(const gpt2_model *m, sae_model *const *tc)
{
    int rc = OK;
    for (int l = 0; l < gpt2_cfg(m)->n_layer && !rc; l++) rc = ana_graph_check_transcoder(m, tc[l], l);
    return rc;
}

static int capture_forward(gpt2_model *m, const int *tokens, int T, capture *cp)
{
    const gpt2_config *c = gpt2_cfg(m);
    const int L = c->n_layer, C = c->n_embd, H = c->n_head;
    size_t TC = (size_t)T * C;
    cp->L = L;
    cp->T = T;
    cp->C = C;
    cp->H = H;
    cp->x0 = mem_alloc(TC * sizeof(float));
    cp->wpe = mem_alloc(TC * sizeof(float));
    cp->pre = mem_alloc(L * TC * sizeof(float));
    cp->mid = mem_alloc(L * TC * sizeof(float));
    cp->ln2 = mem_alloc(L * TC * sizeof(float));
    cp->mlp = mem_alloc(L * TC * sizeof(float));
    cp->pat = mem_alloc((size_t)L * H * T * T * sizeof(float));
    cp->fin = mem_alloc(TC * sizeof(float));
    grab *gr = mem_alloc(((size_t)5 * L + 3) * sizeof *gr);
    if (!cp->x0 || !cp->wpe || !cp->pre || !cp->mid || !cp->ln2 || !cp->mlp || !cp->pat || !cp->fin || !gr) {
        mem_free(gr);
        return err_set(ERR_NOMEM, "out of memory for the graph");
    }
    gpt2_hook_clear(m);
    int rc = OK, k = 0;
    char nm[96];
#define GRAB(name, dst, count)                                                                 \
    do {                                                                                       \
        gr[k] = (grab){(dst), (count)};                                                        \
        if (!rc) rc = gpt2_hook_add(m, (name), grab_fn, &gr[k]);                               \
        k++;                                                                                   \
    } while (0)
    GRAB("hook_embed", cp->x0, TC);
    GRAB("hook_pos_embed", cp->wpe, TC);
    for (int l = 0; l < L; l++) {
        snprintf(nm, sizeof nm, "blocks.%d.hook_resid_pre", l);
        GRAB(nm, cp->pre + l * TC, TC);
        snprintf(nm, sizeof nm, "blocks.%d.attn.hook_pattern", l);
        GRAB(nm, cp->pat + (size_t)l * H * T * T, (size_t)H * T * T);
        snprintf(nm, sizeof nm, "blocks.%d.hook_resid_mid", l);
        GRAB(nm, cp->mid + l * TC, TC);
        snprintf(nm, sizeof nm, "blocks.%d.ln2.hook_normalized", l);
        GRAB(nm, cp->ln2 + l * TC, TC);
        snprintf(nm, sizeof nm, "blocks.%d.hook_mlp_out", l);
        GRAB(nm, cp->mlp + l * TC, TC);
    }
    snprintf(nm, sizeof nm, "blocks.%d.hook_resid_post", L - 1);
    GRAB(nm, cp->fin, TC);
#undef GRAB
    if (!rc) rc = gpt2_forward(m, tokens, 1, T, 1);
    gpt2_hook_clear(m);
    mem_free(gr);
    return rc;
}

static void capture_free(capture *cp)
{
    mem_free(cp->x0);
    mem_free(cp->wpe);
    mem_free(cp->pre);
    mem_free(cp->mid);
    mem_free(cp->ln2);
    mem_free(cp->mlp);
    mem_free(cp->pat);
    mem_free(cp->fin);
}

static void frozen_free(frozen_layer *fl, int L)
{
    for (int l = 0; fl && l < L; l++) {
        frozen_layer *f = &fl[l];
        mem_free(f->w1), mem_free(f->b1), mem_free(f->w2), mem_free(f->b2);
        mem_free(f->Wv), mem_free(f->bv), mem_free(f->Wo), mem_free(f->bo);
        mem_free(f->r1), mem_free(f->r2);
    }
    mem_free(fl);
}

static const float *param(const gpt2_model *m, const char *fmt, int l)
{
    char nm[64];
    snprintf(nm, sizeof nm, fmt, l);
    int nd;
    int64_t sh[2];
    return gpt2_param(m, nm, &nd, sh);
}

static int frozen_make(const gpt2_model *m, const capture *cp, frozen_layer **out)
{
    const int L = cp->L, C = cp->C, T = cp->T;
    const float eps = gpt2_cfg(m)->ln_eps;
    frozen_layer *fl = mem_calloc((size_t)L, sizeof *fl);
    if (!fl) return err_set(ERR_NOMEM, "out of memory for the graph");
    for (int l = 0; l < L; l++) {
        frozen_layer *f = &fl[l];
        const float *qkv = param(m, "h.%d.attn.c_attn.weight", l);
        const float *qkvb = param(m, "h.%d.attn.c_attn.bias", l);
        f->w1 = dup_d(param(m, "h.%d.ln_1.weight", l), C);
        f->b1 = dup_d(param(m, "h.%d.ln_1.bias", l), C);
        f->w2 = dup_d(param(m, "h.%d.ln_2.weight", l), C);
        f->b2 = dup_d(param(m, "h.%d.ln_2.bias", l), C);
        f->Wo = dup_d(param(m, "h.%d.attn.c_proj.weight", l), (size_t)C * C);
        f->bo = dup_d(param(m, "h.%d.attn.c_proj.bias", l), C);
        f->bv = dup_d(qkvb + 2 * C, C);
        f->Wv = mem_alloc((size_t)C * C * sizeof *f->Wv);
        f->r1 = mem_alloc((size_t)T * sizeof *f->r1);
        f->r2 = mem_alloc((size_t)T * sizeof *f->r2);
        if (!f->w1 || !f->b1 || !f->w2 || !f->b2 || !f->Wo || !f->bo || !f->bv || !f->Wv || !f->r1 ||
            !f->r2) {
            frozen_free(fl, L);
            return err_set(ERR_NOMEM, "out of memory for the graph");
        }
        for (int i = 0; i < C; i++)
            for (int j = 0; j < C; j++) f->Wv[(size_t)i * C + j] = qkv[(size_t)i * 3 * C + 2 * C + j];
        ln_scales(f->r1, cp->pre + (size_t)l * T * C, T, C, eps);
        ln_scales(f->r2, cp->mid + (size_t)l * T * C, T, C, eps);
    }
    *out = fl;
    return OK;
}

/* ---- the targets' linear backwards ----------------------------------------------------------- */
enum { NB = 64 }; /* targets per batch: the backward's dgemms run on [NB T, C] rows */

/* What every batch of targets reads, and each thread's scratch. */
typedef struct {
    ana_graph *g; /* writes: only its targets' adjacency rows and node biases */
    sae_model *const *tc;
    const frozen_layer *fl;
    const capture *cp;
    float *const *err;
    const float *WU;
    const double *wf, *bfin, *rf;
    int L, T, C, H, n, nF, nL, nT;
    volatile int *stop;
    double *scratch[PAR_MAX]; /* per thread: G, Gz, Gv, Gl [NB, T, C], bias [NB], vec [C] */
    progress *pr;             /* drawn by thread 0 (progress is one reporter per thread) */
    int done, stopped;        /* targets finished, a stop seen (atomics) */
} batch_ctx;

/* Targets b0 .. b0 + NB - 1 (features then logits): d target / d every earlier node, by a linear
 * backward through the frozen model, into their adjacency rows, and each target's bias. */
static void target_batch(const batch_ctx *x, int b0, double *G, double *Gz, double *Gv, double *Gl,
                         double *bias, double *vec)
{
    ana_graph *g = x->g;
    sae_model *const *tc = x->tc;
    const frozen_layer *fl = x->fl;
    const capture *cp = x->cp;
    float *const *err = x->err;
    const float *WU = x->WU;
    const double *wf = x->wf, *bfin = x->bfin, *rf = x->rf;
    const int L = x->L, T = x->T, C = x->C, H = x->H, dh = C / H, n = x->n, nF = x->nF, nL = x->nL,
              nT = x->nT, nE = L * T;
    const size_t TC = (size_t)T * C;
    const int nb = nT - b0 < NB ? nT - b0 : NB;
    int node_of[NB];
    memset(G, 0, (size_t)nb * TC * sizeof *G);
    for (int b = 0; b < nb; b++) {
        int idx = b0 + b < nF ? b0 + b : n - nL + (b0 + b - nF);
        node_of[b] = idx;
        bias[b] = 0;
        const ana_graph_node *nd = &g->nodes[idx];
        if (nd->kind == ANA_NODE_LOGIT) { /* d logit / d resid_post at T-1 through frozen ln_f */
            for (int q = 0; q < C; q++) {
                vec[q] = WU[(size_t)nd->id * C + q];
                bias[b] += bfin[q] * vec[q];
            }
            ln_back(G + (size_t)b * TC + (size_t)(T - 1) * C, vec, wf, rf[T - 1], C);
        }
    }
    for (int l = L - 1; l >= 0; l--) {
        const sae_model *s = tc[l];
        const int D = s->cfg.d_sae;
        const frozen_layer *fz = &fl[l];
        /* G is d/d resid_post of block l: edges from this block's features and errors */
        for (int b = 0; b < nb; b++) {
            double *gb = G + (size_t)b * TC, *arow = g->adj + (size_t)node_of[b] * n;
            for (int t = 0; t < T; t++)
                for (int q = 0; q < C; q++) bias[b] += s->b_dec[q] * gb[(size_t)t * C + q];
            for (int j = 0; j < nF; j++) {
                const ana_graph_node *src = &g->nodes[j];
                if (src->layer != l) continue;
                const double *gt = gb + (size_t)src->pos * C;
                const float *wd = s->W_dec + (size_t)src->id * C;
                double d = 0;
                for (int q = 0; q < C; q++) d += wd[q] * gt[q];
                arow[j] = src->activation * d;
            }
            for (int t = 0; t < T; t++) {
                const double *gt = gb + (size_t)t * C;
                const float *e = err[l] + (size_t)t * C;
                double d = 0;
                for (int q = 0; q < C; q++) d += e[q] * gt[q];
                arow[nF + l * T + t] = d;
            }
        }
        /* resid_mid: the residual passes; a skip transcoder's W_skip passes through ln_2 */
        if (s->W_skip) {
            for (int b = 0; b < nb; b++)
                for (int t = 0; t < T; t++) {
                    double *gt = G + (size_t)b * TC + (size_t)t * C, *gn = vec;
                    memset(gn, 0, (size_t)C * sizeof *gn);
                    for (int o = 0; o < C; o++) /* W_skip [d_out, d_in]: dx = g W_skip */
                        for (int q = 0; q < C; q++) gn[q] += gt[o] * s->W_skip[(size_t)o * C + q];
                    for (int q = 0; q < C; q++) bias[b] += fz->b2[q] * gn[q];
                    ln_back(gt, gn, fz->w2, fz->r2[t], C);
                }
        }
        /* this block's feature targets start here: d pre / d resid_mid through frozen ln_2 */
        for (int b = 0; b < nb; b++) {
            const ana_graph_node *nd = &g->nodes[node_of[b]];
            if (nd->kind != ANA_NODE_FEATURE || nd->layer != l) continue;
            double *we = vec;
            bias[b] += s->b_enc[nd->id];
            for (int q = 0; q < C; q++) {
                we[q] = s->W_enc[(size_t)q * D + nd->id];
                bias[b] += fz->b2[q] * we[q];
            }
            ln_back(G + (size_t)b * TC + (size_t)nd->pos * C, we, fz->w2, fz->r2[nd->pos], C);
        }
        /* attention with the pattern frozen: attn_out = (P (ln1 Wv + bv)) Wo + bo */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nb * T, C, C, 1.0, G, C, fz->Wo, C,
                    0.0, Gz, C);
        memset(Gv, 0, (size_t)nb * TC * sizeof *Gv);
        const float *P = cp->pat + (size_t)l * H * T * T;
        for (int b = 0; b < nb; b++) {
            const double *gb = G + (size_t)b * TC, *zb = Gz + (size_t)b * TC;
            double *vb = Gv + (size_t)b * TC;
            for (int t = 0; t < T; t++)
                for (int q = 0; q < C; q++) bias[b] += fz->bo[q] * gb[(size_t)t * C + q];
            for (int h = 0; h < H; h++)
                for (int t = 0; t < T; t++)
                    for (int s2 = 0; s2 <= t; s2++) {
                        double a = P[((size_t)h * T + t) * T + s2];
                        if (a == 0) continue;
                        const double *zt = zb + (size_t)t * C + h * dh;
                        double *vs = vb + (size_t)s2 * C + h * dh;
                        for (int q = 0; q < dh; q++) vs[q] += a * zt[q];
                    }
            for (int t = 0; t < T; t++)
                for (int q = 0; q < C; q++) bias[b] += fz->bv[q] * vb[(size_t)t * C + q];
        }
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nb * T, C, C, 1.0, Gv, C, fz->Wv, C,
                    0.0, Gl, C);
        for (int b = 0; b < nb; b++)
            for (int t = 0; t < T; t++) {
                const double *gl = Gl + (size_t)b * TC + (size_t)t * C;
                for (int q = 0; q < C; q++) bias[b] += fz->b1[q] * gl[q];
                ln_back(G + (size_t)b * TC + (size_t)t * C, gl, fz->w1, fz->r1[t], C);
            }
        /* G is now d/d resid_pre of block l = d/d resid_post of block l-1 */
    }
    for (int b = 0; b < nb; b++) { /* token embeddings; the positional ones are bias */
        double *arow = g->adj + (size_t)node_of[b] * n;
        for (int t = 0; t < T; t++) {
            const double *gt = G + (size_t)b * TC + (size_t)t * C;
            const float *x = cp->x0 + (size_t)t * C, *pe = cp->wpe + (size_t)t * C;
            double d = 0;
            for (int q = 0; q < C; q++) {
                d += x[q] * gt[q];
                bias[b] += pe[q] * gt[q];
            }
            arow[nF + nE + t] = d;
        }
        g->nodes[node_of[b]].bias = bias[b];
    }
}

static void target_batches(void *arg, int tid, int64_t i0, int64_t i1)
{
    batch_ctx *x = arg;
    const size_t B = (size_t)NB * x->T * x->C;
    double *G = x->scratch[tid];
    for (int64_t i = i0; i < i1; i++) {
        if (__atomic_load_n(&x->stopped, __ATOMIC_RELAXED) || (x->stop && *x->stop)) {
            __atomic_store_n(&x->stopped, 1, __ATOMIC_RELAXED);
            return;
        }
        const int b0 = (int)i * NB, nb = x->nT - b0 < NB ? x->nT - b0 : NB;
        target_batch(x, b0, G, G + B, G + 2 * B, G + 3 * B, G + 4 * B, G + 4 * B + NB);
        int d = __atomic_add_fetch(&x->done, nb, __ATOMIC_RELAXED);
        if (tid == 0) progress_update(x->pr, (double)d, NULL);
    }
}

int ana_graph_build(gpt2_model *m, sae_model *const *tc, const int *tokens, int T,
                    const ana_graph_params *p, ana_graph *g)
{
    memset(g, 0, sizeof *g);
    const gpt2_config *c = gpt2_cfg(m);
    const int L = c->n_layer, C = c->n_embd, H = c->n_head, V = c->vocab_size;
    if (T < 1 || T > c->n_ctx) return err_set(ERR_ARG, "%d tokens (the model takes 1 to %d)", T, c->n_ctx);
    int rc = gpt2_check_ids(c, tokens, (size_t)T);
    if (rc) return rc;
    if (!(p->logit_prob > 0 && p->logit_prob <= 1) || p->max_logits < 1)
        return err_set(ERR_ARG, "logit probability %g (in (0, 1]) and at most %d logits (>= 1)",
                       p->logit_prob, p->max_logits);
    rc = check_transcoders(m, tc);
    if (rc) return rc;
    capture cp = {0};
    frozen_layer *fl = NULL;
    const size_t TC = (size_t)T * C;
    float **f = mem_calloc((size_t)L, sizeof *f), **err = mem_calloc((size_t)L, sizeof *err);
    float *out = mem_alloc(TC * sizeof *out);
    double *lg = mem_alloc((size_t)V * sizeof *lg);
    int *order = mem_alloc((size_t)V * sizeof *order);
    double *wf = NULL, *bfin = NULL, *rf = NULL;
    batch_ctx bx = {0};
    if (!f || !err || !out || !lg || !order) {
        rc = err_set(ERR_NOMEM, "out of memory for the graph");
        goto done;
    }
    if ((rc = capture_forward(m, tokens, T, &cp))) goto done;
    /* salient logits at the last position */
    const float *lrow = gpt2_logits(m) + (size_t)(T - 1) * V;
    double mx = -INFINITY, z = 0;
    for (int v = 0; v < V; v++) mx = lrow[v] > mx ? lrow[v] : mx;
    for (int v = 0; v < V; v++) z += exp(lrow[v] - mx);
    for (int v = 0; v < V; v++) {
        lg[v] = exp(lrow[v] - mx) / z;
        order[v] = v;
    }
    int nL = 0;
    double cum = 0;
    while (nL < p->max_logits && nL < V && cum < p->logit_prob) { /* partial selection sort */
        int best = nL;
        for (int v = nL + 1; v < V; v++)
            if (lg[order[v]] > lg[order[best]]) best = v;
        int t = order[nL];
        order[nL] = order[best];
        order[best] = t;
        cum += lg[order[nL]];
        nL++;
    }
    /* transcoder activations and error nodes */
    int nF = 0;
    for (int l = 0; l < L; l++) {
        f[l] = mem_alloc((size_t)T * tc[l]->cfg.d_sae * sizeof **f);
        err[l] = mem_alloc(TC * sizeof **err);
        if (!f[l] || !err[l]) {
            rc = err_set(ERR_NOMEM, "out of memory for the graph");
            goto done;
        }
        if ((rc = sae_forward(tc[l], cp.ln2 + l * TC, T, f[l], out))) goto done;
        for (size_t k = 0; k < TC; k++) err[l][k] = cp.mlp[l * TC + k] - out[k];
        for (size_t k = 0; k < (size_t)T * tc[l]->cfg.d_sae; k++) nF += f[l][k] != 0;
    }
    if (nF > p->max_feature_nodes) {
        rc = err_set(ERR_ARG, "%d active transcoder features, more than the %d feature nodes allowed "
                     "(a shorter prompt, or raise --max-feature-nodes)", nF, p->max_feature_nodes);
        goto done;
    }
    const int nE = L * T, n = nF + nE + T + nL;
    g->n = n;
    g->n_features = nF;
    g->n_layers = L;
    g->n_pos = T;
    g->n_logits = nL;
    g->nodes = mem_calloc((size_t)n, sizeof *g->nodes);
    g->adj = mem_calloc((size_t)n * n, sizeof *g->adj);
    if (!g->nodes || !g->adj) {
        rc = err_set(ERR_NOMEM, "the graph's %d nodes need %.0f MB", n, (double)n * n * 8 / 1e6);
        goto done;
    }
    int k = 0;
    for (int l = 0; l < L; l++) {
        const sae_model *s = tc[l];
        const int D = s->cfg.d_sae;
        for (int t = 0; t < T; t++)
            for (int i = 0; i < D; i++) {
                double a = f[l][(size_t)t * D + i];
                if (a == 0) continue;
                double pre = s->b_enc[i]; /* the real forward's pre-activation */
                for (int q = 0; q < C; q++)
                    pre += (double)cp.ln2[l * TC + (size_t)t * C + q] * s->W_enc[(size_t)q * D + i];
                g->nodes[k++] = (ana_graph_node){ANA_NODE_FEATURE, l, t, i, a, pre, 0, 0, 0, 0};
            }
    }
    for (int l = 0; l < L; l++)
        for (int t = 0; t < T; t++) g->nodes[k++] = (ana_graph_node){ANA_NODE_ERROR, l, t, -1, 0, NAN, 0, 0, 0, 0};
    for (int t = 0; t < T; t++) g->nodes[k++] = (ana_graph_node){ANA_NODE_EMBED, -1, t, tokens[t], 0, NAN, 0, 0, 0, 0};
    for (int j = 0; j < nL; j++)
        g->nodes[k++] = (ana_graph_node){ANA_NODE_LOGIT, L, T - 1, order[j], lg[order[j]], lrow[order[j]], 0, 0, 0, 0};
    /* the frozen model */
    if ((rc = frozen_make(m, &cp, &fl))) goto done;
    wf = dup_d(param(m, "ln_f.weight", 0), C);
    bfin = dup_d(param(m, "ln_f.bias", 0), C);
    rf = mem_alloc((size_t)T * sizeof *rf);
    const float *WU = param(m, "lm_head.weight", 0); /* [V,C] */
    if (!wf || !bfin || !rf) {
        rc = err_set(ERR_NOMEM, "out of memory for the graph");
        goto done;
    }
    ln_scales(rf, cp.fin, T, C, c->ln_eps);
    /* targets: features then logits (node indices: features 0..nF-1, logits n-nL..n-1) */
    const int nT = nF + nL;
    /* a linear backward per target, NB at a time, the batches split over the threads (each
       with its own scratch and one OpenBLAS thread: a target's numbers do not depend on the
       thread, so the graph is the same bits on any count; capture_forward's gpt2_forward
       before them uses OpenBLAS's pool, so OPENBLAS_NUM_THREADS still moves the last bits).
       GPT-2 small with 12 transcoders and a 9-token prompt (3456 features) took 17 s here in
       silence, one core idle outside dgemm. */
    bx = (batch_ctx){.g = g, .tc = tc, .fl = fl, .cp = &cp, .err = err, .WU = WU, .wf = wf,
                     .bfin = bfin, .rf = rf, .L = L, .T = T, .C = C, .H = H, .n = n, .nF = nF,
                     .nL = nL, .nT = nT, .stop = p->stop};
    const int nbatch = (nT + NB - 1) / NB;
    const size_t per = (4 * NB * TC + NB + (size_t)C) * sizeof(double);
    int nt = par_threads() < nbatch ? par_threads() : nbatch;
    while (nt > 1 && (size_t)nt * per > ((size_t)1 << 30)) nt--; /* scratch within 1 GB */
    for (int i = 0; i < nt; i++)
        if (!(bx.scratch[i] = mem_alloc(per))) {
            rc = err_set(ERR_NOMEM, "out of memory for the graph");
            goto done;
        }
    progress pr;
    progress_begin(&pr, "graph: backward passes", (double)nT, "target");
    bx.pr = &pr;
    int nb_blas = openblas_get_num_threads();
    if (nt > 1 && nb_blas > 1) openblas_set_num_threads(1);
    par_for(target_batches, &bx, nbatch, 1, nt);
    if (nt > 1 && nb_blas > 1) openblas_set_num_threads(nb_blas);
    progress_update(&pr, (double)bx.done, NULL);
    progress_end(&pr);
    if (bx.stopped) {
        rc = err_set(ERR_ABORTED, "stopped while building the graph");
        goto done;
    }
    /* completeness: edges + bias against the real forward's value, relative to the larger of
       the value and the terms' magnitudes (a ReLU feature just above 0 whose bias and edges
       cancel read 2e-3 against its value for an exact graph, an audit) */
    for (int i = 0; i < n; i++) {
        const ana_graph_node *nd = &g->nodes[i];
        for (int j = 0; j < n; j++) g->n_edges += g->adj[(size_t)i * n + j] != 0;
        if (nd->kind != ANA_NODE_FEATURE && nd->kind != ANA_NODE_LOGIT) continue;
        double s = nd->bias, scale = fabs(nd->bias);
        for (int j = 0; j < n; j++) {
            s += g->adj[(size_t)i * n + j];
            scale += fabs(g->adj[(size_t)i * n + j]);
        }
        double e = fabs(s - nd->value);
        if (fabs(nd->value) > scale) scale = fabs(nd->value);
        if (e > g->max_abs_err) g->max_abs_err = e;
        if (scale > 0 && e / scale > g->max_rel_err) g->max_rel_err = e / scale;
    }
done:
    for (int l = 0; l < L; l++) {
        if (f) mem_free(f[l]);
        if (err) mem_free(err[l]);
    }
    mem_free(f);
    mem_free(err);
    mem_free(out);
    mem_free(lg);
    mem_free(order);
    for (int i = 0; i < PAR_MAX; i++) mem_free(bx.scratch[i]);
    mem_free(wf);
    mem_free(bfin);
    mem_free(rf);
    frozen_free(fl, L);
    capture_free(&cp);
    if (rc) ana_graph_free(g);
    return rc;
}

void ana_graph_node_id(const ana_graph *g, int i, char *out, size_t cap)
{
    const ana_graph_node *nd = &g->nodes[i];
    switch (nd->kind) {
    case ANA_NODE_FEATURE: snprintf(out, cap, "%d_%d_%d", nd->layer, nd->id, nd->pos); break;
    case ANA_NODE_ERROR: snprintf(out, cap, "%d_-1_%d", nd->layer, nd->pos); break;
    case ANA_NODE_EMBED: snprintf(out, cap, "E_%d_%d", nd->id, nd->pos); break;
    default: snprintf(out, cap, "%d_%d_%d", g->n_layers + 1, nd->id, nd->pos); break;
    }
}
