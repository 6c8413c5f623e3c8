/* bench_absorption.c - feature absorption of BatchTopK against Matryoshka BatchTopK on a
 * hierarchical synthetic ground truth (sae/synth.h: parents with children that fire only with
 * them; sae_absorption: how often a parent's latent is silent when the parent fires together with
 * a child).
 *
 * Setup: d 64, 128 features (8 parents with 4 children each, the 40 most frequent features),
 * 5 active, no copula correlation; d_sae 128, k 5, batch 1024, 600k tokens, lr 0.002; matryoshka
 * with the default widths 16, 32, 64, 128. Held-out: 16384 fresh samples. child_p 0.4 and 0.7,
 * seeds 0..3 (data and init). Prints one row per run and the means; about a minute on 2 cores.
 * Beside the exact absorption (binary, and partial: the share of the parent its latent does not
 * carry; with the share that latent carries where the parent fires alone), SAEBench's metric as
 * `saelite eval` computes it (eval_absorption_synth, analysis/eval.h: full-absorption rate and
 * mean absorption fraction, and the fraction without its 40% gate, on 16384 train and 16384 test
 * samples of the same generator) and its split-feature count; per parent and per sample, why
 * they differ: bench_absorption_parents.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common/err.h"
#include "analysis/eval.h"
#include "common/mem.h"
#include "sae/sae_train.h"
#include "sae/synth.h"

static int run(sae_arch arch, int seed, double child_p, sae_absorption_result *r, double *ev,
               eval_abs_class *sb, eval_abs_class *sb0)
{
    synth_config sc;
    synth_defaults(&sc);
    sc.d = 64;
    sc.n_features = 128;
    sc.active = 5;
    sc.rank = 0;
    sc.seed = 11 + (uint64_t)seed;
    sc.parents = 8;
    sc.children = 4;
    sc.child_p = child_p;
    sae_train_config c;
    sae_train_defaults(&c);
    c.arch = arch;
    c.d_in = 64;
    c.d_sae = 128;
    c.k = 5;
    c.batch = 1024;
    c.total_tokens = 600000;
    c.lr = 0.002;
    c.seed = 42 + (uint64_t)seed;
    enum { N = 16384 };
    sae_source *src = NULL;
    sae_synth *g = NULL;
    sae_model *m = NULL;
    float *x = mem_alloc(sizeof(float) * N * 64), *codes = mem_alloc(sizeof(float) * N * 128);
    int rc = x && codes ? sae_source_synth(&src, &sc) : err_set(ERR_NOMEM, "out of memory");
    sae_step_stats st = {0};
    if (!rc) rc = sae_train_source(&c, src, N, &m, &st);
    sc.sample_seed = 777; /* held-out samples of the same features */
    if (!rc) rc = sae_synth_new(&g, &sc);
    if (!rc) rc = sae_synth_sample_codes(g, x, N, codes);
    if (!rc) rc = sae_absorption(m, &sc, sae_synth_directions(g), x, codes, N, r);
    eval_abs_params ap;
    eval_abs_defaults(&ap);
    if (!rc) rc = eval_absorption_synth(m, &sc, N, N, &ap, sb, NULL, NULL, NULL);
    ap.prop = 0; /* the fraction without SAEBench's 40% gate */
    if (!rc) rc = eval_absorption_synth(m, &sc, N, N, &ap, sb0, NULL, NULL, NULL);
    *ev = st.ev;
    sae_free(m);
    sae_synth_free(g);
    sae_source_close(src);
    mem_free(x);
    mem_free(codes);
    return rc;
}

int main(void)
{
    const double cps[2] = {0.4, 0.7};
    const sae_arch archs[2] = {SAE_BATCHTOPK, SAE_MATRYOSHKA};
    printf("child_p  arch        seed  absorption  partial  parent_alone  alone_carried  parent_cos  train_ev  "
           "saebench_full  saebench_frac  frac_no_gate  split\n");
    for (int q = 0; q < 2; q++) {
        double mean[2] = {0, 0}, part[2] = {0, 0}, full[2] = {0, 0}, frac[2] = {0, 0};
        for (int seed = 0; seed < 4; seed++)
            for (int a = 0; a < 2; a++) {
                sae_absorption_result r;
                double ev;
                eval_abs_class sb, sb0;
                if (run(archs[a], seed, cps[q], &r, &ev, &sb, &sb0)) {
                    fprintf(stderr, "bench_absorption: %s\n", err_msg());
                    return 1;
                }
                mean[a] += r.absorption / 4;
                part[a] += r.partial / 4;
                full[a] += sb.full_rate / 4;
                frac[a] += sb.mean_frac / 4;
                printf("%.1f      %-10s  %d     %.3f       %.3f    %.3f         %.3f          %.3f       %.3f     %.3f"
                       "          %.3f          %.3f         %d\n", cps[q], sae_arch_name(archs[a]), seed,
                       r.absorption, r.partial, r.parent_alone, r.alone_carried, r.parent_cos, ev, sb.full_rate,
                       sb.mean_frac, sb0.mean_frac, sb.n_split);
            }
        printf("child_p %.1f: mean absorption batchtopk %.3f, matryoshka %.3f; partial batchtopk %.3f, matryoshka "
               "%.3f; SAEBench full-absorption rate batchtopk %.3f, matryoshka %.3f; fraction batchtopk %.3f, "
               "matryoshka %.3f\n", cps[q], mean[0], mean[1], part[0], part[1], full[0], full[1], frac[0], frac[1]);
    }
    return 0;
}
