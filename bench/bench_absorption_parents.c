/* bench_absorption_parents.c - why SAEBench's absorption metric and the exact one disagree on a
 * trained SAE: per parent of the hierarchical generator, the latent sae_absorption takes (the
 * decoder closest to the parent's direction) beside the latent SAEBench's k-sparse probe takes
 * (the first split feature), with their decoder cosines to the parent and to each child, how often
 * each fires (parent + child, parent alone, parent absent), and the ground-truth probe's
 * direction u (cosines to the parent and the children) with the mean raw projection P = x.u on
 * the parent + child samples, the parent's own share of it and the probe latent's projection;
 * the exact partial absorption (sae_absorption_rows) beside SAEBench's absorption fraction, with
 * and without its 40% gate, per parent and per counted sample (binned by the exact value).
 *
 * Usage: bench_absorption_parents [ARCH [SEED [CHILD_P [d F PARENTS CHILDREN D_SAE K TOKENS ACTIVE [NORMALIZE]]]]]
 * Defaults: bench_absorption's run batchtopk, seed 0, child_p 0.7 (d 64, 128 features, 8 parents
 * with 4 children, d_sae 128, k 5, 600k tokens, 5 active, sae-train's input normalisation).
 * tests/test_eval.c's trained case (raw inputs): `topk 0 0.05 256 96 3 16 96 3 300000 3 0`. A
 * few seconds each.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/eval.h"
#include "common/err.h"
#include "common/mem.h"
#include "sae/metrics.h"
#include "sae/sae_train.h"
#include "sae/synth.h"

enum { N = 16384, MAXP = 32, MAXC = 32 };

static double cosf_rows(const float *a, const float *b, int d)
{
    double s = 0, na = 0, nb = 0;
    for (int i = 0; i < d; i++) s += (double)a[i] * b[i], na += (double)a[i] * a[i], nb += (double)b[i] * b[i];
    return na > 0 && nb > 0 ? s / sqrt(na * nb) : 0;
}

/* the latent's cosines and firing rates for parent p */
static void latent_row(const char *who, int L, int p, const sae_model *m, const synth_config *sc,
                       const float *dirs, const float *codes, const float *f)
{
    int d = sc->d, F = sc->n_features, G = 1 + sc->children, S = m->cfg.d_sae;
    const float *row = m->W_dec + (size_t)L * d;
    printf("  %s latent %4d: cos parent %5.2f, children", who, L, cosf_rows(row, dirs + (size_t)p * G * d, d));
    for (int k = 1; k < G; k++) printf(" %5.2f", cosf_rows(row, dirs + (size_t)(p * G + k) * d, d));
    long with = 0, wf = 0, alone = 0, af = 0, absent = 0, abf = 0;
    for (int i = 0; i < N; i++) {
        const float *cr = codes + (size_t)i * F;
        int fires = f[(size_t)i * S + L] > 0, kids = 0;
        for (int k = 1; k < G; k++) kids += cr[p * G + k] > 0;
        if (!(cr[p * G] > 0)) absent++, abf += fires;
        else if (kids) with++, wf += fires;
        else alone++, af += fires;
    }
    printf(" | fires: parent + child %.3f, parent alone %.3f, parent absent %.4f\n",
           with ? (double)wf / with : 0, alone ? (double)af / alone : 0, absent ? (double)abf / absent : 0);
}

int main(int argc, char **argv)
{
    sae_arch arch = SAE_BATCHTOPK;
    if (argc > 1) {
        arch = SAE_NARCH;
        for (int a = 0; a < SAE_NARCH; a++)
            if (!strcmp(argv[1], sae_arch_name((sae_arch)a))) arch = (sae_arch)a;
        if (arch == SAE_NARCH) return fprintf(stderr, "bench_absorption_parents: unknown arch %s\n", argv[1]), 2;
    }
    int seed = argc > 2 ? atoi(argv[2]) : 0;
    double cp = argc > 3 ? atof(argv[3]) : 0.7;
    int d = argc > 4 ? atoi(argv[4]) : 64, F = argc > 5 ? atoi(argv[5]) : 128;
    int P = argc > 6 ? atoi(argv[6]) : 8, C = argc > 7 ? atoi(argv[7]) : 4;
    int S = argc > 8 ? atoi(argv[8]) : 128, K = argc > 9 ? atoi(argv[9]) : 5;
    long tokens = argc > 10 ? atol(argv[10]) : 600000;
    int active = argc > 11 ? atoi(argv[11]) : 5;
    int normalize = argc > 12 ? atoi(argv[12]) : 1;
    if (P < 1 || P > MAXP || C < 1 || C > MAXC) return fprintf(stderr, "bench_absorption_parents: parents 1..%d, children 1..%d\n", MAXP, MAXC), 2;
    synth_config sc;
    synth_defaults(&sc);
    sc.d = d;
    sc.n_features = F;
    sc.active = active;
    sc.rank = 0;
    sc.seed = 11 + (uint64_t)seed;
    sc.parents = P;
    sc.children = C;
    sc.child_p = cp;
    sae_train_config c;
    sae_train_defaults(&c);
    c.arch = arch;
    c.d_in = d;
    c.d_sae = S;
    c.k = K;
    c.batch = 1024;
    c.total_tokens = tokens;
    c.lr = 0.002;
    c.seed = 42 + (uint64_t)seed;
    c.normalize = normalize;
    sae_source *src = NULL;
    sae_synth *g = NULL;
    sae_model *m = NULL;
    float *x = mem_alloc(sizeof(float) * (size_t)N * d), *codes = mem_alloc(sizeof(float) * (size_t)N * F);
    float *f = mem_alloc(sizeof(float) * (size_t)N * S), *pdir = mem_alloc(sizeof(float) * (size_t)P * d);
    int *rows = mem_alloc(sizeof(int) * N);
    unsigned char *y = mem_alloc(N);
    int rc = x && codes && f && pdir && rows && y ? sae_source_synth(&src, &sc) : err_set(ERR_NOMEM, "out of memory");
    sae_step_stats st = {0};
    if (!rc) rc = sae_train_source(&c, src, N, &m, &st);
    eval_abs_params ap;
    eval_abs_defaults(&ap);
    eval_abs_class mean, per[MAXP];
    sae_absorption_result ex;
    eval_abs_params ap0 = ap;
    ap0.prop = 0; /* SAEBench's fraction without its 40% gate: what the gate leaves out */
    eval_abs_class mean0, per0[MAXP];
    float *sf = mem_alloc(sizeof(float) * (size_t)N * P), *sf0 = mem_alloc(sizeof(float) * (size_t)N * P);
    float *part = mem_alloc(sizeof(float) * (size_t)N * P);
    if (!rc && !(sf && sf0 && part)) rc = err_set(ERR_NOMEM, "out of memory");
    if (!rc) rc = eval_absorption_synth(m, &sc, N, N, &ap, &mean, per, &ex, sf);
    if (!rc) rc = eval_absorption_synth(m, &sc, N, N, &ap0, &mean0, per0, NULL, sf0);
    if (rc) return fprintf(stderr, "bench_absorption_parents: %s\n", err_msg()), 1;
    printf("%s seed %d child_p %.2f (train ev %.3f): exact absorption %.4f, partial %.4f (parent alone: fires "
           "%.3f, carries %.3f; parent cosine %.3f); SAEBench full-absorption rate %.4f, mean fraction %.4f "
           "(without the 40%% gate %.4f)\n", sae_arch_name(arch), seed, cp, st.ev, ex.absorption, ex.partial,
           ex.parent_alone, ex.alone_carried, ex.parent_cos, mean.full_rate, mean.mean_frac, mean0.mean_frac);
    /* the test samples eval_absorption_synth and sae_absorption used */
    sc.sample_seed = sc.seed ^ 0x7e57ull;
    const int G = 1 + C;
    rc = sae_synth_new(&g, &sc);
    const float *dirs = rc ? NULL : sae_synth_directions(g);
    if (!rc) rc = sae_synth_sample_codes(g, x, N, codes);
    if (!rc) rc = sae_encode(m, x, N, f);
    sae_absorption_result ex2;
    if (!rc) rc = sae_absorption_rows(m, &sc, dirs, x, codes, N, &ex2, part);
    if (!rc && ex2.partial != ex.partial) rc = err_set(ERR_ARG, "not the metric's test samples");
    for (int p = 0; !rc && p < P; p++) memcpy(pdir + (size_t)p * d, dirs + (size_t)p * G * d, sizeof(float) * d);
    double mm, rec;
    float best[MAXP];
    int match[MAXP];
    if (!rc) rc = sae_mmcs_match(pdir, P, m->W_dec, S, d, 0.9, &mm, &rec, best, match);
    for (int p = 0; !rc && p < P; p++) {
        double sp = 0;
        long np = 0;
        for (int i = 0; i < N; i++)
            if (part[(size_t)i * P + p] >= 0) sp += part[(size_t)i * P + p], np++;
        printf("parent %d: split features %d, GT F1 %.3f, full rate %.3f, mean fraction %.3f (without the "
               "gate %.3f); exact partial %.3f\n", p, per[p].n_split, per[p].gt_f1, per[p].full_rate,
               per[p].mean_frac, per0[p].mean_frac, np ? sp / np : 0);
        latent_row("exact", match[p], p, m, &sc, dirs, codes, f);
        latent_row("probe", per[p].split[0], p, m, &sc, dirs, codes, f);
        /* the ground-truth probe's direction (on all of these samples, label = the parent fires) */
        for (int i = 0; i < N; i++) rows[i] = i, y[i] = codes[(size_t)i * F + p * G] > 0;
        eval_feats ef = {.dense = x, .d = d};
        eval_probe pr;
        if ((rc = eval_logreg(&ef, rows, y, N, NULL, 0, ap.C, 0, &pr))) break;
        float *u = pdir; /* the parents' directions are no longer needed: scratch for u */
        double nn = 0;
        for (int j = 0; j < d; j++) nn += pr.w[j] * pr.w[j];
        for (int j = 0; j < d; j++) u[j] = (float)(pr.w[j] / sqrt(nn));
        eval_probe_free(&pr);
        printf("  GT probe u: cos parent %5.2f, children", cosf_rows(u, dirs + (size_t)p * G * d, d));
        for (int k = 1; k < G; k++) printf(" %5.2f", cosf_rows(u, dirs + (size_t)(p * G + k) * d, d));
        int L = per[p].split[0];
        double cl = cosf_rows(u, m->W_dec + (size_t)L * d, d), sP = 0, sOwn = 0, sL = 0;
        long n = 0;
        for (int i = 0; i < N; i++) {
            const float *cr = codes + (size_t)i * F;
            int kids = 0;
            for (int k = 1; k < G; k++) kids += cr[p * G + k] > 0;
            if (!(cr[p * G] > 0) || !kids) continue;
            double P0 = 0, own = 0;
            for (int j = 0; j < d; j++) {
                P0 += (double)x[(size_t)i * d + j] * u[j];
                own += (double)cr[p * G] * dirs[(size_t)p * G * d + j] * u[j];
            }
            sP += P0, sOwn += own, sL += f[(size_t)i * S + L] * cl, n++;
        }
        if (n) printf(" | parent + child samples: mean P %.3f, the parent's own part %.3f, the probe latent's projection %.3f\n",
                      sP / n, sOwn / n, sL / n);
        else printf("\n");
    }
    /* per sample, over the parents: the metric's counted samples binned by their exact partial */
    enum { NB = 6 };
    double bn[NB] = {0}, bx[NB] = {0}, bf[NB] = {0}, bf0[NB] = {0}, mae = 0, mae0 = 0, nall = 0;
    for (size_t e = 0; !rc && e < (size_t)N * P; e++) {
        if (!(part[e] >= 0) || isnan(sf[e])) continue;
        int b = part[e] >= 1 ? NB - 1 : (int)(part[e] * (NB - 1));
        bn[b]++, bx[b] += part[e], bf[b] += sf[e], bf0[b] += sf0[e];
        mae += fabs(sf[e] - part[e]), mae0 += fabs(sf0[e] - part[e]), nall++;
    }
    if (!rc && nall) {
        printf("per counted sample (%.0f), by the exact partial absorption: mean exact / SAEBench fraction / "
               "without the gate\n", nall);
        for (int b = 0; b < NB; b++) {
            if (b < NB - 1) printf("  [%.1f, %.1f)", (double)b / (NB - 1), (double)(b + 1) / (NB - 1));
            else printf("  1 (silent)");
            if (bn[b]) printf(" %5.0f samples: %.3f / %.3f / %.3f\n", bn[b], bx[b] / bn[b], bf[b] / bn[b], bf0[b] / bn[b]);
            else printf("     0 samples\n");
        }
        printf("  mean |fraction - exact partial| per sample: %.3f (without the gate %.3f)\n", mae / nall, mae0 / nall);
    }
    if (rc) fprintf(stderr, "bench_absorption_parents: %s\n", err_msg());
    mem_free(sf);
    mem_free(sf0);
    mem_free(part);
    sae_free(m);
    sae_synth_free(g);
    sae_source_close(src);
    mem_free(x);
    mem_free(codes);
    mem_free(f);
    mem_free(pdir);
    mem_free(rows);
    mem_free(y);
    return rc ? 1 : 0;
}
