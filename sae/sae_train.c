/* sae_train.c - the SAE trainer (see sae_train.h). */
#include "sae/sae_train.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dist.h"
#include "common/checked.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/hash.h"
#include "common/mem.h"
#include "common/npy.h"
#include "common/par.h"
#include "common/progress.h"
#include "sae/sae_kernels.h"

/* ---- config --------------------------------------------------------------------------- */
void sae_train_defaults(sae_train_config *c)
{
    memset(c, 0, sizeof *c);
    c->arch = SAE_TOPK;
    c->k = 32;
    c->aux_coef = 1.0 / 32;
    c->batch = 4096;
    c->total_tokens = 10000000;
    c->seed = 42;
    c->warmup_frac = 0.01;
    c->decay_frac = 0.2;
    c->l1_warmup_frac = 0.05;
    c->bdec_init = SAE_BDEC_DEFAULT;
    c->normalize = 1;
    /* in normalised units (mean input norm sqrt(d_in)); the papers' 0.001 moves the threshold
       too slowly for runs of a few thousand steps (measured on synthetic data, docs/sae.md) */
    c->jr_bandwidth = 0.5;
    c->jr_init_threshold = 0.5;
    /* Adam moves a log-threshold by at most ~lr per step: at 4e-4 and the 500-2500 steps of a
       run here, thresholds could not grow by more than a few tens of percent (docs/sae.md) */
    c->jr_lr_mult = 10;
    c->adam_b1 = -1; /* the architecture's (trainer_alloc) */
    c->adam_b2 = 0.999;
    c->adam_eps = 1e-8;
}

/* Compare field by field; name the first difference as the flag a user gives ("--k 32, this
   run 16"), so a refused resume says which flag to change back. */
int sae_train_config_diff(const sae_train_config *a, const sae_train_config *b, char *why, size_t n)
{
#define DIFF_I(f, flag) \
    if (a->f != b->f) return snprintf(why, n, flag " %lld (this run %lld)", (long long)a->f, (long long)b->f), 1
#define DIFF_D(f, flag) \
    if (a->f != b->f) return snprintf(why, n, flag " %.9g (this run %.9g)", (double)a->f, (double)b->f), 1
    if (a->arch != b->arch || a->transcoder != b->transcoder) {
        static const char *const tcn[] = {"", "transcoder", "skip_transcoder"};
        char wa[64], wb[64];
        const sae_train_config *c2[2] = {a, b};
        char *w2[2] = {wa, wb};
        for (int i = 0; i < 2; i++)
            if (c2[i]->transcoder > 0 && c2[i]->transcoder < 3)
                snprintf(w2[i], 64, "--arch %s --activation %s", tcn[c2[i]->transcoder],
                         sae_arch_name(c2[i]->arch));
            else snprintf(w2[i], 64, "--arch %s", sae_arch_name(c2[i]->arch));
        return snprintf(why, n, "%s (this run %s)", wa, wb), 1;
    }
    DIFF_I(d_in, "input width");
    DIFF_I(d_out, "output width");
    DIFF_I(d_sae, "--d-sae");
    DIFF_I(k, "--k");
    DIFF_I(k_aux, "--k-aux");
    DIFF_D(aux_coef, "--aux-coef");
    DIFF_D(l1, "--l1");
    DIFF_D(lr, "--lr");
    DIFF_I(batch, "--batch");
    DIFF_I(total_tokens, "--tokens");
    DIFF_I(seed, "--seed");
    DIFF_D(warmup_frac, "warm-up fraction");
    DIFF_D(decay_frac, "decay fraction");
    DIFF_D(l1_warmup_frac, "sparsity warm-up fraction");
    DIFF_I(dead_window, "--dead-window");
    if (a->bdec_init != b->bdec_init) {
        static const char *const bn[] = {"zero", "mean", "median", "the default"};
        int ia = a->bdec_init >= 0 && a->bdec_init < 4 ? a->bdec_init : 3;
        int ib = b->bdec_init >= 0 && b->bdec_init < 4 ? b->bdec_init : 3;
        return snprintf(why, n, "--bdec-init %s (this run %s)", bn[ia], bn[ib]), 1;
    }
    DIFF_I(normalize, "normalisation (--no-normalize)");
    DIFF_D(jr_bandwidth, "--jr-bandwidth");
    DIFF_D(jr_init_threshold, "--jr-threshold");
    DIFF_D(jr_lr_mult, "--jr-lr-mult");
    DIFF_D(adam_b1, "--adam-beta1");
    DIFF_D(adam_b2, "Adam beta2");
    DIFF_D(adam_eps, "Adam eps");
    if (a->mat_levels != b->mat_levels)
        return snprintf(why, n, "--levels %s (this run %s)", a->mat_levels == SAE_MAT_OWN ? "own" : "shared",
                        b->mat_levels == SAE_MAT_OWN ? "own" : "shared"), 1;
    if (fmax(a->grad_clip, 0) != fmax(b->grad_clip, 0))
        return snprintf(why, n, "--grad-clip %.9g (this run %.9g)", fmax(a->grad_clip, 0),
                        fmax(b->grad_clip, 0)), 1;
    if (a->n_widths != b->n_widths ||
        memcmp(a->widths, b->widths, sizeof(int) * (a->n_widths > 0 ? a->n_widths : 0))) {
        char wa[256], wb[256];
        size_t la = 0, lb = 0;
        wa[0] = wb[0] = 0;
        for (int i = 0; i < a->n_widths && la < sizeof wa - 16; i++)
            la += (size_t)snprintf(wa + la, sizeof wa - la, "%s%d", i ? "," : "", a->widths[i]);
        for (int i = 0; i < b->n_widths && lb < sizeof wb - 16; i++)
            lb += (size_t)snprintf(wb + lb, sizeof wb - lb, "%s%d", i ? "," : "", b->widths[i]);
        return snprintf(why, n, "--widths %s (this run %s)", wa, wb), 1;
    }
#undef DIFF_I
#undef DIFF_D
    if (n) why[0] = 0;
    return 0;
}

int sae_train_config_equal(const sae_train_config *a, const sae_train_config *b)
{
    char why[8];
    return !sae_train_config_diff(a, b, why, sizeof why);
}

/* ---- trainer -------------------------------------------------------------------------- */
typedef struct {
    float v; /* relu(pre-activation) */
    int j;   /* latent (global index); -1: padding */
} lcand;

struct sae_trainer {
    sae_train_config c;
    int D, S, B, kaux;
    int Do, tc;        /* output width (D for SAEs); transcoder kind (0 for SAEs) */
    int64_t total_steps, step, tokens, dead_window;
    double scale, scale_out; /* scale_out: transcoders' target scale (= scale for SAEs) */
    float *ys, *zero_in; /* targets [B,Do] (= xs for SAEs); transcoders: D zeros */
    float thr_run; /* BatchTopK: running mean (rate 0.1) of the batch threshold (normalised units) */
    float thr_batch; /* BatchTopK: the last forward's batch threshold (its k*B-th value) */
    float aux_norm; /* AuxK: 1 / (1 - EV) of the previous step's batch (0 before the first) */
    int64_t np;
    float *p, *g, *m, *v;
    sae_params P, G;
    int64_t *since;
    double *sq; /* grad_clip: per-latent squared gradient norms [S] */
    float gscale; /* grad_clip: this step's factor on the gradient, applied by Adam (1: none) */
    /* per-step buffers */
    int chunk, chunk16; /* TopK's row chunk in fp32 and in bf16 (chunk_rows); chunk16 >= chunk */
    float *xs, *xc, *xhat, *dxhat, *ehat, *pre, *fbuf, *scratch;
    float *bmax; /* TopK: the chunk's block maxima (sae_k_encode_bmax) */
    int64_t *ptr, *aptr, cap, acap;
    int *idx, *aidx, *dead, *ttok, *attok;
    int64_t *tptr, *tent, *atptr, *atent;
    float *val, *dval, *aval, *adval, *nrm;
    unsigned char *fired;
    /* matryoshka: one inner level's BatchTopK (prefix pre-activations, CSR, its reconstruction) */
    float *mpre, *lxhat, *lval, *ldval;
    int64_t *lptr, *ltptr, *ltent;
    int *lidx, *lttok;
    /* gated: relu(pi) and its gradient [B,S], the via-gate reconstruction [B,D] */
    float *gbuf, *xg, *gsum;
    int gated_unfrozen; /* gradient tests only: the auxiliary loss also trains the decoder */
    int reference_steps; /* tests only: ReLU, JumpReLU and gated steps stay dense, Matryoshka's
                            shared levels scatter one by one (the forms the fast ones match) */
    float *th;          /* JumpReLU: [S] exp(log_threshold), few_active_leaf's */
    int *wtok, *widx;   /* JumpReLU: [cap] the inactive entries in the threshold's window */
    float *gval, *gdval; /* gated: [cap] the open gates' values and their gradients */
    /* data parallelism: mb leaves (micro-batches) per step; a rank's leaf tree (forward_backward) */
    int mb, tree_depth;
    float *gpool[31];
    double *spool;
    /* latent blocks (TopK; latent_leaf): lb blocks of Sb latents, rank s of N owns the blocks
       [s lb/N, (s+1) lb/N); lb = 1: the path above. Buffers allocated at the first step. */
    int lb, Sb, ldepth;
    float *lpre, *lbmax;        /* one block's pre-activations of a row chunk [chunk, Sb], maxima */
    lcand *cand, *gcand;        /* this rank's candidates [B, w] and every rank's [N, B, w] */
    int64_t ccap;               /* entries cand can hold (B w grows with AuxK's candidates) */
    lcand *sel, *asel;          /* the global selections [B, k] and [B, k_aux], every rank alike */
    int *ldead;                 /* one block's dead latents, local indices [Sb] */
    float *xpool[31], *bpool[31]; /* the block trees: reconstructions [2 B Do], b_dec gradients */
    int64_t gathered; /* the step at which rank 0 last held every latent (gather, bcast); -1 */
    double *prof, prof_t; /* sae_trainer_profile: seconds per phase, time of the last mark */
    /* data parallel with every rank on one node (shm_attach): g is this rank's segment of a
       shared window and p one copy for the node, so the sum reads the other ranks' gradients
       in place and Adam's parts need no allgather */
    dist_shm *gshm, *pshm;
    int shm_tried;
};

/* Adds the time since the last mark to phase ph (profiling on). */
static void prof_mark(sae_trainer *t, int ph)
{
    if (!t->prof) return;
    double n = now_seconds();
    t->prof[ph] += n - t->prof_t;
    t->prof_t = n;
}

void sae_trainer_profile(sae_trainer *t, double *secs) { t->prof = secs; }

/* Rows of one encoder chunk for the precision in force (a function of batch, d_sae and the
 * precision: the fp32 bits depend on it, see sae_trainer_new). */
static int chunk_rows(const sae_trainer *t)
{
    return sae_k_precision() == SAE_PRECISION_BF16 ? t->chunk16 : t->chunk;
}

const char *sae_prof_name(int ph)
{
    static const char *const names[SAE_PROF_N] = {"input", "encode", "topk", "auxk select",
                                                  "decode+loss", "dec bwd", "enc bwd", "auxk",
                                                  "other", "adam", "dead"};
    return ph >= 0 && ph < SAE_PROF_N ? names[ph] : "?";
}

static int is_sparse(sae_arch a)
{
    return a == SAE_TOPK || a == SAE_BATCHTOPK || a == SAE_MATRYOSHKA;
}
static int is_batchtopk(sae_arch a) { return a == SAE_BATCHTOPK || a == SAE_MATRYOSHKA; }

const char *sae_train_flag_owners(sae_arch a, int transcoder, const char *flag)
{
    /* a transcoder's activations are relu, topk, batchtopk and jumprelu (no gated, matryoshka) */
    if (!strcmp(flag, "--k") || !strcmp(flag, "--k-aux") || !strcmp(flag, "--aux-coef"))
        return is_sparse(a) ? NULL
               : transcoder ? "the topk and batchtopk activations" : "topk, batchtopk and matryoshka";
    if (!strcmp(flag, "--l1"))
        return !is_sparse(a) ? NULL
               : transcoder ? "the relu and jumprelu activations" : "relu, gated and jumprelu";
    if (!strncmp(flag, "--jr-", 5))
        return a == SAE_JUMPRELU ? NULL : transcoder ? "the jumprelu activation" : "jumprelu";
    return NULL;
}
/* relu keeps the decoder unconstrained (norms in the penalty, folded at export); gated keeps
   unit rows like the sparse architectures (see gated_leaf) */
/* ReLU, JumpReLU and gated steps run sparse (few_active_leaf, gated_sparse_leaf) while they
 * need at most 1 / SPARSE_STEP_DIV of a leaf's pre-activations */
enum { SPARSE_STEP_DIV = 8 };

static int is_constrained(sae_arch a) { return a != SAE_RELU; }

/* The parameter vector as segments (set_views' layout): latent-indexed ones are d_sae units of
 * `unit` floats (W_encT and W_dec rows, b_enc, JumpReLU's thresholds, gated's r_mag and b_mag),
 * shared ones one unit (b_dec, a skip transcoder's W_skip). kind: the Adam each gets. */
enum { SEG_PLAIN, SEG_UNIT_ROWS, SEG_BENC, SEG_THRESH };
typedef struct {
    int64_t off, units, unit;
    int latent, kind;
} pseg;

static int param_segs(const sae_trainer *t, pseg *sg)
{
    int64_t S = t->S, D = t->D, Do = t->Do, o = 0;
    int n = 0;
#define SEG(U, L, LAT, K) (sg[n++] = (pseg){o, (U), (L), (LAT), (K)}, o += (int64_t)(U) * (L))
    SEG(S, D, 1, SEG_PLAIN);                                                   /* W_encT */
    SEG(S, Do, 1, is_constrained(t->c.arch) ? SEG_UNIT_ROWS : SEG_PLAIN);      /* W_dec */
    SEG(S, 1, 1, is_sparse(t->c.arch) ? SEG_BENC : SEG_PLAIN);                 /* b_enc */
    SEG(1, Do, 0, SEG_PLAIN);                                                  /* b_dec */
    if (t->c.arch == SAE_JUMPRELU) SEG(S, 1, 1, SEG_THRESH);                   /* log_threshold */
    if (t->c.arch == SAE_GATED) {
        SEG(S, 1, 1, SEG_PLAIN); /* r_mag */
        SEG(S, 1, 1, SEG_PLAIN); /* b_mag */
    }
    if (t->tc == SAE_SKIP_TRANSCODER) SEG(1, (int64_t)Do * D, 0, SEG_PLAIN);   /* W_skip */
#undef SEG
    return o == t->np ? n : -1;
}

void sae_trainer_free(sae_trainer *t)
{
    if (!t) return;
    if (t->pshm) dist_shm_release(t->pshm);
    else mem_free_aligned(t->p);
    if (t->gshm) dist_shm_release(t->gshm);
    else mem_free_aligned(t->g);
    mem_free_aligned(t->m);
    mem_free_aligned(t->v);
    mem_free(t->since);
    mem_free(t->sq);
    mem_free_aligned(t->xc);
    mem_free_aligned(t->xhat);
    mem_free_aligned(t->dxhat);
    mem_free_aligned(t->ehat);
    mem_free_aligned(t->pre);
    mem_free_aligned(t->bmax);
    mem_free_aligned(t->fbuf);
    mem_free_aligned(t->scratch);
    mem_free(t->ptr);
    mem_free(t->aptr);
    mem_free(t->idx);
    mem_free(t->aidx);
    mem_free(t->dead);
    mem_free(t->val);
    mem_free(t->dval);
    mem_free(t->aval);
    mem_free(t->adval);
    mem_free(t->fired);
    mem_free(t->nrm);
    mem_free(t->ttok);
    mem_free(t->th);
    mem_free(t->gval);
    mem_free(t->gdval);
    mem_free(t->wtok);
    mem_free(t->widx);
    mem_free(t->attok);
    mem_free(t->tptr);
    mem_free(t->tent);
    mem_free(t->atptr);
    mem_free(t->atent);
    mem_free_aligned(t->mpre);
    mem_free_aligned(t->lxhat);
    mem_free(t->lval);
    mem_free(t->ldval);
    mem_free(t->lptr);
    mem_free(t->ltptr);
    mem_free(t->ltent);
    mem_free(t->lidx);
    mem_free(t->lttok);
    mem_free_aligned(t->gbuf);
    mem_free_aligned(t->xg);
    mem_free(t->gsum);
    if (t->ys != t->xs) mem_free_aligned(t->ys);
    mem_free(t->zero_in);
    mem_free_aligned(t->xs);
    for (int d = 0; d < 31; d++) mem_free_aligned(t->gpool[d]);
    mem_free(t->spool);
    mem_free_aligned(t->lpre);
    mem_free_aligned(t->lbmax);
    mem_free(t->cand);
    mem_free(t->gcand);
    mem_free(t->sel);
    mem_free(t->asel);
    mem_free(t->ldead);
    for (int d = 0; d < 31; d++) {
        mem_free_aligned(t->xpool[d]);
        mem_free_aligned(t->bpool[d]);
    }
    mem_free(t);
}

static float *zalloc(int64_t n)
{
    float *p = mem_alloc_aligned(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (p) memset(p, 0, sizeof(float) * (size_t)(n > 0 ? n : 1));
    return p;
}

static void set_views(sae_trainer *t, float *base, sae_params *v)
{
    int64_t S = t->S;
    v->W_encT = base;
    v->W_dec = base + S * t->D;
    v->b_enc = v->W_dec + S * t->Do;
    v->b_dec = v->b_enc + t->S;
    v->log_threshold = t->c.arch == SAE_JUMPRELU ? v->b_dec + t->Do : NULL;
    v->r_mag = t->c.arch == SAE_GATED ? v->b_dec + t->Do : NULL;
    v->W_skip = t->tc == SAE_SKIP_TRANSCODER ? base + t->np - (int64_t)t->Do * t->D : NULL;
    v->b_mag = t->c.arch == SAE_GATED ? v->r_mag + t->S : NULL;
}

/* Matryoshka widths: strictly increasing, the first >= k, d_sae appended when missing. */
static int check_widths(sae_train_config *c)
{
    if (c->arch != SAE_MATRYOSHKA) {
        c->n_widths = 0;
        memset(c->widths, 0, sizeof c->widths);
        return OK;
    }
    if (c->n_widths == 0) /* default: d_sae/8, d_sae/4, d_sae/2 (those >= k) */
        for (int div = 8; div >= 2; div /= 2)
            if (c->d_sae / div >= c->k && c->d_sae / div >= 1 &&
                (!c->n_widths || c->d_sae / div > c->widths[c->n_widths - 1]))
                c->widths[c->n_widths++] = c->d_sae / div;
    if (c->n_widths < 0 || c->n_widths > SAE_MAX_WIDTHS)
        return err_set(ERR_ARG, "matryoshka: %d widths (at most %d)", c->n_widths, SAE_MAX_WIDTHS);
    for (int i = 0; i < c->n_widths; i++) {
        if (c->widths[i] < 1 || c->widths[i] > c->d_sae)
            return err_set(ERR_ARG, "matryoshka width %d is not in 1..d_sae (%d)", c->widths[i],
                           c->d_sae);
        if (i && c->widths[i] <= c->widths[i - 1])
            return err_set(ERR_ARG, "matryoshka widths must be strictly increasing (%d after %d)",
                           c->widths[i], c->widths[i - 1]);
    }
    if (!c->n_widths || c->widths[c->n_widths - 1] != c->d_sae) {
        if (c->n_widths == SAE_MAX_WIDTHS)
            return err_set(ERR_ARG, "matryoshka: at most %d widths with d_sae", SAE_MAX_WIDTHS);
        c->widths[c->n_widths++] = c->d_sae;
    }
    if (c->widths[0] < c->k)
        return err_set(ERR_ARG, "matryoshka: the smallest width %d is below k %d", c->widths[0],
                       c->k);
    return OK;
}

/* Checks a configuration and fills in the defaults it leaves to the trainer (c: a copy of cin,
   which tells an lr the user gave from one set here). */
static int trainer_config(sae_train_config *c, const sae_train_config *cin)
{
    if (c->d_in <= 0 || c->d_sae <= 0 || c->batch <= 0)
        return err_set(ERR_ARG, "d_in %d, d_sae %d and batch %d must be positive",
                       c->d_in, c->d_sae, c->batch);
    if (is_sparse(c->arch) && (c->k <= 0 || c->k > c->d_sae))
        return err_set(ERR_ARG, "k %d must be in 1..d_sae (%d)", c->k, c->d_sae);
    if (c->total_tokens < c->batch)
        return err_set(ERR_ARG, "--tokens %lld is less than one batch (%d)",
                       (long long)c->total_tokens, c->batch);
    int rcw = check_widths(c);
    if (rcw) return rcw;
    if (!c->transcoder) c->d_out = 0;
    if (c->transcoder && (c->d_out <= 0 || c->arch == SAE_GATED || c->arch == SAE_MATRYOSHKA))
        return err_set(ERR_ARG, "a transcoder needs d_out > 0 (%d) and the relu, topk, batchtopk or "
                       "jumprelu activation", c->d_out);
    if ((c->arch == SAE_RELU || c->arch == SAE_JUMPRELU || c->arch == SAE_GATED) &&
        (int64_t)c->batch * c->d_sae > (1LL << 31))
        return err_set(ERR_ARG, "batch x d_sae too large for the dense %s path",
                       sae_arch_name(c->arch));
    /* OpenAI's 2e-4 at 16384 latents scaled by 1/sqrt(d_sae), raised to 3.75e-4 (1.5e-3 at
       1024 latents: on tools/ref/gt_gen.py's family 1e-3 still left TopK below the PyTorch
       recipe on --rho 0.9, --active 10 and --decay 0.98, 1.5e-3 passed it on all; BatchTopK at
       8e-4 missed its recipe by 0.02-0.05 MMCS, at 1.5e-3 it meets it; relu, clipped, 0.614
       MMCS at 1e-3 and 0.641 at 1.5e-3 against its recipe's 0.607 at 1.5M tokens; gated,
       clipped, 0.767 at 8e-4 and 0.899 at 1.5e-3; issue 22, docs/sae.md) */
    if (c->lr <= 0) c->lr = 3.75e-4 / sqrt(c->d_sae / 16384.0);
    /* relu: the rule's value at 1024 latents is also its floor. Past 1024 the 1/sqrt(d_sae) cut
       (fitted by OpenAI for TopK) made relu tie its recipe on gt_gen's ratio4 (d_sae 2048: 0.571
       at 1.06e-3, 0.596 and 0.602 over two seeds at 1.5e-3, recipe 0.573); on the demo's
       activations at 4096 latents 1.5e-3 gives L0 26 / EV 0.931 / CE score 0.918 where 7.5e-4
       gives 37 / 0.925 / 0.906 (issue 22, docs/sae.md) */
    if (cin->lr <= 0 && c->arch == SAE_RELU && c->lr < 1.5e-3) c->lr = 1.5e-3;
    /* jumprelu: its paper's beta1 0 (+0.02 MMCS with clipping at 1.5M tokens on
       tools/ref/gt_gen.py's base set); relu and jumprelu: a zero b_dec, as their recipes (there,
       clipped: relu +0.014 MMCS over the median at lr 1e-3, jumprelu +0.024; docs/sae.md) */
    /* gated: the same three as jumprelu, its recipe's Adam (ConstrainedAdam's beta1 0) and b_dec;
       with clipping and the lr above, +0.16 MMCS over clipping alone at 1.5M tokens (docs/sae.md,
       "Gated against its recipe") */
    if (c->adam_b1 < 0) c->adam_b1 = c->arch == SAE_JUMPRELU || c->arch == SAE_GATED ? 0.0 : 0.9;
    if (c->bdec_init == SAE_BDEC_DEFAULT)
        c->bdec_init = c->arch == SAE_RELU || c->arch == SAE_JUMPRELU || c->arch == SAE_GATED
                          ? SAE_BDEC_ZERO : SAE_BDEC_MEDIAN;
    if (c->k_aux <= 0) c->k_aux = c->d_in / 2 > 0 ? c->d_in / 2 : 1;
    if (c->k_aux > c->d_sae) c->k_aux = c->d_sae;
    if (c->l1 <= 0 && c->arch == SAE_RELU) c->l1 = 5.0;
    if (c->l1 <= 0 && c->arch == SAE_JUMPRELU) c->l1 = 1.0;
    if (c->l1 <= 0 && c->arch == SAE_GATED) c->l1 = 5.0;
    /* clip to 1, as the relu and jumprelu recipes do: on tools/ref/gt_gen.py's sets it also
       lifts TopK (+0.04-0.06 MMCS on the hard ones, past its recipe on ratio4), BatchTopK
       (+0.01-0.07 on all four), gated (0.32 -> 0.77 at 1.5M tokens, though its recipe does not
       clip) and the demo's SAE (EV +0.005, CE loss score +0.005; issue 22, docs/sae.md) */
    if (c->grad_clip == 0) c->grad_clip = 1.0;
    if (c->arch != SAE_MATRYOSHKA) c->mat_levels = 0;
    else if (c->mat_levels == 0) c->mat_levels = SAE_MAT_SHARED;
    else if (c->mat_levels != SAE_MAT_SHARED && c->mat_levels != SAE_MAT_OWN)
        return err_set(ERR_ARG, "matryoshka: unknown level mode %d", c->mat_levels);
    return OK;
}

/* The architecture's own buffers (and the sparse forms'), sized from t->c, t->B, t->S, t->D,
   t->Do and t->kaux; 1 when every allocation succeeded (sae_trainer_free frees any). */
static int trainer_alloc_arch(sae_trainer *t)
{
    const sae_train_config c = t->c;
    int64_t D = t->D, S = t->S, B = t->B, Do = t->Do;
    int ok = 1;
    if (c.arch == SAE_TOPK) {
        /* pre-activations in row chunks of at most 16M floats, of equal size: every chunk's
           GEMM packs all of W_enc again, so a short last chunk (4 rows at d_sae 24576) cost a
           whole packing for nothing. The chunk is a function of batch and d_sae only: OpenBLAS's
           result for a row can depend on how many rows its call holds (at 1024 rows against
           2048, about 2% of the entries differ in the last bit), so that is what keeps the bits
           independent of everything else */
        int64_t ch = ((int64_t)1 << 24) / S;
        ch = ch >= B ? B : ch < 64 ? 64 : ch;
        int64_t nch = (B + ch - 1) / ch;
        t->chunk = (int)((B + nch - 1) / nch);
        if (t->chunk > B) t->chunk = B;
        /* in bf16 a multiple of 64 rows: oneDNN's calls go in 64-row multiples, then pieces of
           at most 32 (model/ops_bf16.c), each streaming all of the bf16 W_enc; 682-row chunks at
           d_sae 24576 made 18 calls a step, 10 rows the smallest (the encoder 209 ms against
           its GEMM's 127). And larger: up to 64M floats, equal chunks again. In 704-row chunks
           the encoder at d_sae 24576 took 122-162 ms a step (median 157 of three runs),
           against 107-146 (median 120 of six) in 2048-row ones, its GEMM alone 105-118
           (bench_sae, Xeon model 207 with AMX, 2026-12-06). No bits depend on it in fp32. */
        int64_t c16 = ((int64_t)1 << 26) / S;
        c16 = c16 >= B ? B : c16 < 64 ? 64 : c16;
        int64_t n16 = (B + c16 - 1) / c16;
        c16 = (B + n16 - 1) / n16;
        t->chunk16 = (int)((c16 + 63) / 64 * 64);
        if (t->chunk16 > B) t->chunk16 = (int)B;
        if (t->chunk16 < t->chunk) t->chunk16 = t->chunk;
        /* the larger of the two, not zeroed: the encoder writes every entry it reads back, and
           pages fp32 never touches cost it no memory */
        t->pre = mem_alloc_aligned(sizeof(float) * (size_t)t->chunk16 * S);
        t->bmax = zalloc((int64_t)t->chunk16 * (S / SAE_K_TOPK_BLOCK));
        t->cap = B * (int64_t)c.k;
        ok = ok && t->bmax;
    } else {
        t->chunk = t->chunk16 = (int)B;
        t->pre = zalloc(B * S);
        if (is_batchtopk(c.arch)) {
            t->scratch = zalloc(B * S);
            t->cap = B * (int64_t)c.k + B; /* a little room for ties */
            ok = ok && t->scratch;
        } else {
            t->fbuf = zalloc(B * S);
            ok = ok && t->fbuf;
        }
        if (c.arch == SAE_MATRYOSHKA && c.n_widths > 1) {
            t->mpre = c.mat_levels == SAE_MAT_OWN ? zalloc(B * (int64_t)c.widths[c.n_widths - 2])
                                                  : zalloc(1); /* freed as aligned */
            /* the shared code keeps every inner level's reconstruction (matryoshka_decode) */
            t->lxhat = zalloc(B * D * (c.mat_levels == SAE_MAT_SHARED ? c.n_widths - 1 : 1));
            t->lval = mem_alloc(sizeof(float) * t->cap);
            t->ldval = mem_alloc(sizeof(float) * t->cap);
            t->lidx = mem_alloc(sizeof(int) * t->cap);
            t->lttok = mem_alloc(sizeof(int) * t->cap);
            t->ltent = mem_alloc(sizeof(int64_t) * t->cap);
            t->lptr = mem_alloc(sizeof(int64_t) * (B + 1) * c.n_widths); /* a CSR per group */
            t->ltptr = mem_alloc(sizeof(int64_t) * (S + 1));
            ok = ok && t->mpre && t->lxhat && t->lval && t->ldval && t->lidx && t->lttok &&
                 t->ltent && t->lptr && t->ltptr;
        }
        if (c.arch == SAE_GATED) {
            t->gbuf = zalloc(B * S);
            t->xg = zalloc(B * D);
            t->gsum = mem_alloc(sizeof(float) * S);
            ok = ok && t->gbuf && t->xg && t->gsum;
        }
    }
    ok = ok && t->pre;
    if (is_sparse(c.arch)) {
        t->acap = B * (int64_t)t->kaux;
        t->idx = mem_alloc(sizeof(int) * t->cap);
        t->val = mem_alloc(sizeof(float) * t->cap);
        t->dval = mem_alloc(sizeof(float) * t->cap);
        t->aptr = mem_alloc(sizeof(int64_t) * (B + 1));
        t->aidx = mem_alloc(sizeof(int) * t->acap);
        t->aval = mem_alloc(sizeof(float) * t->acap);
        t->adval = mem_alloc(sizeof(float) * t->acap);
        t->ehat = zalloc(B * Do);
        t->tptr = mem_alloc(sizeof(int64_t) * (S + 1));
        t->atptr = mem_alloc(sizeof(int64_t) * (S + 1));
        t->tent = mem_alloc(sizeof(int64_t) * t->cap);
        t->atent = mem_alloc(sizeof(int64_t) * t->acap);
        t->ttok = mem_alloc(sizeof(int) * t->cap);
        t->attok = mem_alloc(sizeof(int) * t->acap);
        ok = ok && t->tptr && t->atptr && t->tent && t->atent && t->ttok && t->attok && t->idx && t->val && t->dval && t->aptr && t->aidx && t->aval && t->adval &&
             t->ehat;
    }
    if (c.arch == SAE_RELU || c.arch == SAE_JUMPRELU || c.arch == SAE_GATED) {
        /* the sparse forms (few_active_leaf, gated_sparse_leaf) */
        t->cap = B * (int64_t)S / SPARSE_STEP_DIV;
        t->idx = mem_alloc(sizeof(int) * (t->cap + 1));
        t->val = mem_alloc(sizeof(float) * (t->cap + 1));
        t->dval = mem_alloc(sizeof(float) * (t->cap + 1));
        t->tptr = mem_alloc(sizeof(int64_t) * (S + 1));
        t->tent = mem_alloc(sizeof(int64_t) * (t->cap + 1));
        t->ttok = mem_alloc(sizeof(int) * (t->cap + 1));
        ok = ok && t->idx && t->val && t->dval && t->tptr && t->tent && t->ttok;
        if (c.arch == SAE_GATED) {
            t->gval = mem_alloc(sizeof(float) * (t->cap + 1));
            t->gdval = mem_alloc(sizeof(float) * (t->cap + 1));
            ok = ok && t->gval && t->gdval;
        }
        if (c.arch == SAE_JUMPRELU) {
            t->th = mem_alloc(sizeof(float) * S);
            t->wtok = mem_alloc(sizeof(int) * (t->cap + 1));
            t->widx = mem_alloc(sizeof(int) * (t->cap + 1));
            ok = ok && t->th && t->wtok && t->widx;
        }
    }
    return ok;
}

/* Allocate a trainer for config c with zero parameters (no init). */
static int trainer_alloc(sae_trainer **out, const sae_train_config *cin)
{
    *out = NULL;
    sae_train_config c = *cin;
    int rcc = trainer_config(&c, cin);
    if (rcc) return rcc;
    sae_trainer *t = mem_calloc(1, sizeof *t);
    if (!t) return err_set(ERR_NOMEM, "SAE trainer: out of memory");
    t->c = c;
    t->D = c.d_in;
    t->S = c.d_sae;
    t->B = c.batch;
    t->kaux = c.k_aux;
    t->total_steps = c.total_tokens / c.batch;
    t->dead_window = c.dead_window;
    if (t->dead_window <= 0) {
        /* k-sparse total/30: 200k at 6M tokens, where 600k (total/10) left MMCS 0.96 instead of
           0.99 on tools/ref/gt_gen.py's base set (issue 22, docs/sae.md): latents must be
           declared dead early enough for AuxK to move them onto the features still missing */
        int64_t w = c.total_tokens / (is_sparse(c.arch) ? 30 : 10);
        t->dead_window = w < 100000 ? 100000 : w > 10000000 ? 10000000 : w;
    }
    t->scale = t->scale_out = 1;
    t->mb = 1;
    t->lb = 1;
    t->gathered = -1;
    t->tc = c.transcoder;
    t->Do = c.transcoder ? c.d_out : c.d_in;
    int64_t D = t->D, S = t->S, B = t->B, Do = t->Do;
    t->np = S * D + S * Do + S + Do + (c.arch == SAE_JUMPRELU ? S : c.arch == SAE_GATED ? 2 * S : 0) +
            (c.transcoder == SAE_SKIP_TRANSCODER ? Do * D : 0);
    pseg sg[8];
    if (param_segs(t, sg) < 0) { /* set_views and param_segs must agree on the layout */
        mem_free(t);
        return err_set(ERR_SHAPE, "SAE trainer: parameter segments do not add up to %lld",
                       (long long)t->np);
    }
    /* what the allocations below add up to at least: weights, gradient and Adam's two moments,
       and the dense architectures' [batch, d_sae] pre-activations. Past the machine's memory the
       lazy allocations would succeed and the kernel kill the job while they are zeroed
       (--d-sae 100000000 on 16 inputs was), so say it now. Per process: ranks on one node, and
       --resume's second trainer for the flag check, are not added up. */
    /* dense architectures: the batch's pre-activations and activations (8 bytes per entry) and
       the sparse form's arrays, sized for 1/8 of the entries (~4 bytes per entry) */
    double need = 16.0 * (double)t->np + (is_sparse(c.arch) ? 0 : 12.0 * (double)B * S);
    /* and what grows with the batch alone: its rows (input, centred input, reconstruction and
       its gradient; the AuxK residual and the targets where there are any) and the sparse
       entries' five arrays (--batch 1e8 on 16 inputs passed without this and kept allocating) */
    need += 4.0 * (double)B * (2 * D + (is_sparse(c.arch) ? 3 : 2) * Do) +
            (is_sparse(c.arch) ? 24.0 * (double)B * (c.k + t->kaux) : 0) +
            (c.arch == SAE_TOPK ? 4.0 * fmin((double)B * S, (double)(1 << 24)) : 0);
    long long phys = mem_physical_bytes();
    if (phys > 0 && need > (double)phys) {
        mem_free(t);
        return err_set(ERR_ARG, "d_sae %lld x d_in %lld: the weights, gradients and Adam state%s "
                       "need %.1f GB, more than this machine's %.1f GB of memory (a smaller "
                       "--d-sae or --expansion, or --batch?)", (long long)S, (long long)D,
                       is_sparse(c.arch) ? " with a batch's rows" : " with a batch's pre-activations",
                       need / 1e9, (double)phys / 1e9);
    }
    t->p = zalloc(t->np);
    t->g = zalloc(t->np);
    t->m = zalloc(t->np);
    t->v = zalloc(t->np);
    t->since = mem_calloc(S, sizeof(int64_t));
    t->sq = c.grad_clip > 0 ? mem_alloc(sizeof(double) * S) : NULL;
    t->fired = mem_calloc(S, 1);
    t->dead = mem_alloc(sizeof(int) * S);
    t->nrm = mem_alloc(sizeof(float) * S);
    t->xs = zalloc(B * D);
    t->xc = zalloc(B * D);
    t->xhat = zalloc(B * Do);
    t->dxhat = zalloc(B * Do);
    t->ys = t->tc ? zalloc(B * Do) : t->xs;
    if (t->tc) t->zero_in = mem_calloc(D, sizeof(float));
    t->ptr = mem_alloc(sizeof(int64_t) * (B + 1));
    int ok = t->p && t->g && t->m && t->v && t->since && (c.grad_clip <= 0 || t->sq) && t->fired && t->dead && t->nrm && t->xs && t->xc &&
             t->xhat && t->dxhat && t->ptr && t->ys && (!t->tc || t->zero_in);
    ok = ok && trainer_alloc_arch(t);
    if (!ok) {
        sae_trainer_free(t);
        return err_set(ERR_NOMEM, "SAE trainer: out of memory for d_in %d, d_sae %d, batch %d",
                       c.d_in, c.d_sae, c.batch);
    }
    set_views(t, t->p, &t->P);
    set_views(t, t->g, &t->G);
    *out = t;
    return OK;
}

int sae_geometric_median(float *out, const float *x, int64_t n, int d, int iters)
{
    double *y = mem_calloc(d, sizeof(double)), *acc = mem_calloc(d, sizeof(double));
    if (!y || !acc) {
        mem_free(y);
        mem_free(acc);
        return err_set(ERR_NOMEM, "geometric median: out of memory");
    }
    for (int64_t r = 0; r < n; r++)
        for (int i = 0; i < d; i++) y[i] += x[r * d + i];
    for (int i = 0; i < d; i++) y[i] /= (double)n;
    for (int it = 0; it < iters; it++) {
        double wsum = 0;
        memset(acc, 0, sizeof(double) * d);
        for (int64_t r = 0; r < n; r++) {
            const float *xr = x + r * d;
            double dist = 0;
            for (int i = 0; i < d; i++) dist += (xr[i] - y[i]) * (xr[i] - y[i]);
            double w = 1.0 / fmax(sqrt(dist), 1e-8);
            wsum += w;
            for (int i = 0; i < d; i++) acc[i] += w * xr[i];
        }
        double move = 0;
        for (int i = 0; i < d; i++) {
            double ny = acc[i] / wsum;
            move += (ny - y[i]) * (ny - y[i]);
            y[i] = ny;
        }
        if (move < 1e-12) break;
    }
    for (int i = 0; i < d; i++) out[i] = (float)y[i];
    mem_free(y);
    mem_free(acc);
    return OK;
}

int sae_trainer_new(sae_trainer **out, const sae_train_config *c, const float *sample, int64_t n)
{
    *out = NULL;
    if (n < 1) return err_set(ERR_ARG, "empty initialisation sample");
    sae_trainer *t;
    int rc = trainer_alloc(&t, c);
    if (rc) return rc;
    int D = t->D, S = t->S, Do = t->Do;
    double normsum = 0, normsum_out = 0;
    int64_t W = t->tc ? D + Do : D; /* a transcoder's sample rows are (input, target) pairs */
    for (int64_t r = 0; r < n; r++) {
        double ss = 0, so = 0;
        for (int i = 0; i < D; i++) ss += (double)sample[r * W + i] * sample[r * W + i];
        for (int i = D; t->tc && i < W; i++) so += (double)sample[r * W + i] * sample[r * W + i];
        normsum += sqrt(ss);
        normsum_out += sqrt(so);
    }
    if (t->c.normalize) {
        if (!(normsum > 0) || !isfinite(normsum) || (t->tc && !(normsum_out > 0 && isfinite(normsum_out)))) {
            sae_trainer_free(t);
            return err_set(ERR_FORMAT, "the %lld rows sampled to set the input scale have zero (or "
                           "non-finite) norm: all-zero activations? (--no-normalize trains "
                           "unscaled)", (long long)n);
        }
        t->scale = sqrt((double)D) / (normsum / (double)n);
        t->scale_out = t->tc ? sqrt((double)Do) / (normsum_out / (double)n) : t->scale;
    }
    rng_state rng;
    rng_seed(&rng, t->c.seed);
    /* Anthropic's ReLU recipe: 0.1 (SAELens' decoder_init_norm); gated's rows are unit norm */
    float rownorm = t->c.arch == SAE_RELU ? 0.1f : 1.0f;
    for (int64_t e = 0; e < (int64_t)S * Do; e++) t->P.W_dec[e] = (float)rng_normal_alt(&rng);
    sae_k_normalize_rows(t->P.W_dec, S, Do);
    for (int64_t e = 0; e < (int64_t)S * Do; e++) t->P.W_dec[e] *= rownorm;
    if (t->tc) { /* input and output spaces differ: the encoder draws its own unit rows */
        for (int64_t e = 0; e < (int64_t)S * D; e++) t->P.W_encT[e] = (float)rng_normal_alt(&rng);
        sae_k_normalize_rows(t->P.W_encT, S, D);
        for (int64_t e = 0; e < (int64_t)S * D; e++) t->P.W_encT[e] *= rownorm;
    } else
        memcpy(t->P.W_encT, t->P.W_dec, sizeof(float) * (size_t)S * D);
    if (t->P.log_threshold)
        for (int j = 0; j < S; j++) t->P.log_threshold[j] = (float)log(t->c.jr_init_threshold);
    if (t->c.bdec_init != SAE_BDEC_ZERO) {
        int64_t m = n < 16384 ? n : 16384;
        float *xs = mem_alloc(sizeof(float) * (size_t)m * Do);
        if (!xs) {
            sae_trainer_free(t);
            return err_set(ERR_NOMEM, "SAE trainer: out of memory");
        }
        if (t->tc) /* b_dec is on the output side: the targets' median */
            for (int64_t r = 0; r < m; r++)
                for (int i = 0; i < Do; i++)
                    xs[r * Do + i] = (float)(sample[r * W + D + i] * t->scale_out);
        else
            for (int64_t e = 0; e < m * D; e++) xs[e] = (float)(sample[e] * t->scale);
        if (t->c.bdec_init == SAE_BDEC_MEDIAN) rc = sae_geometric_median(t->P.b_dec, xs, m, Do, 100);
        else rc = sae_geometric_median(t->P.b_dec, xs, m, Do, 0);
        mem_free(xs);
        if (rc) {
            sae_trainer_free(t);
            return rc;
        }
    }
    *out = t;
    return OK;
}

const sae_train_config *sae_trainer_cfg(const sae_trainer *t) { return &t->c; }
int64_t sae_trainer_total_steps(const sae_trainer *t) { return t->total_steps; }
int64_t sae_trainer_step_index(const sae_trainer *t) { return t->step; }
double sae_trainer_scale(const sae_trainer *t) { return t->scale; }
const int64_t *sae_trainer_since_fired(const sae_trainer *t) { return t->since; }

void sae_trainer_params(sae_trainer *t, sae_params *p, sae_params *grad)
{
    if (p) *p = t->P;
    if (grad) *grad = t->G;
}

int64_t sae_trainer_dead_window(const sae_trainer *t) { return t->dead_window; }

static double sparsity_coef(const sae_trainer *t)
{
    double w = t->c.l1_warmup_frac * t->total_steps;
    double f = w >= 1 ? fmin(1.0, (t->step + 1) / w) : 1.0;
    return t->c.l1 * f;
}

/* k-sparse (topk, batchtopk, matryoshka): b_enc's learning rate, lr times the mean input norm
   of the training space (sqrt(d_in) when normalised), so it moves as fast against the
   pre-activations as at mean norm 1. At lr alone it moved 16x slower on tools/ref/gt_gen.py's
   base set (d_in 256): no latent died, AuxK never started and MMCS stalled at 0.88 (issue 22,
   docs/sae.md). b_dec keeps lr: at x16 it only added noise to its median init (worse EV in
   short runs). The others: lr. */
static float benc_lr(const sae_trainer *t, double lr)
{
    int scaled = is_sparse(t->c.arch) && t->c.normalize;
    return (float)(lr * (scaled ? sqrt((double)t->D) : 1.0));
}

static double lr_at(const sae_trainer *t)
{
    double T = (double)t->total_steps, s = (double)t->step;
    double warm = fmin(1000.0, t->c.warmup_frac * T);
    double lr = t->c.lr;
    if (warm >= 1 && s < warm) lr *= (s + 1) / warm;
    double dstart = T - t->c.decay_frac * T;
    if (t->c.decay_frac > 0 && s >= dstart) lr *= (T - s) / (T - dstart);
    return lr;
}

/* ---- one step: leaves, their tree, the reduction across ranks -----------------------------
 * A step's batch is cut into t->mb leaves (micro-batches) of B / mb consecutive rows; rank r of
 * N computes leaves [r mb/N, (r+1) mb/N). Each leaf's gradient starts from zero and is computed
 * by the same calls on any rank (the same rows, the same shapes); the leaves are summed in one
 * fixed binary tree: each rank's consecutive leaves locally, then the top levels across ranks
 * (dist_sum_f32). Normalisations use the global B, the batch-global selections (BatchTopK,
 * Matryoshka levels) a global threshold, the step's scalars (sums over tokens) ride in the same
 * tree, and the fired flags, kept minimum and counts are exact reductions. With mb = 1 and one
 * rank this is today's single-pass step, call for call. */
enum { SC_SSE, SC_SS, SC_SPARSE, SC_AUX, SC_ACTIVE, SC_LVL, SC_COL = SC_LVL + SAE_MAX_WIDTHS };

typedef struct {
    double coef;
    int nd, ka;
    float ca;
    int global;                  /* batchtopk thresholds given (mb > 1 or several ranks) */
    float thr;                   /* the global BatchTopK threshold */
    float lthr[SAE_MAX_WIDTHS];  /* the Matryoshka levels' thresholds */
    float kept_min;              /* smallest value BatchTopK kept in this rank's leaves */
    int lw, lkac;                /* latent blocks: candidates per row, AuxK's per block */
} step_ctx;

/* Skip transcoders: yhat += xs W_skip^T; dW_skip += dxhat^T xs (dxhat from recon_error). */
static void skip_forward(sae_trainer *t, int64_t r0, int n)
{
    if (!t->P.W_skip) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, t->Do, t->D, 1.0f, t->xs + r0 * t->D,
                t->D, t->P.W_skip, t->D, 1.0f, t->xhat + r0 * t->Do, t->Do);
}

static void skip_backward(sae_trainer *t, int64_t r0, int n)
{
    if (!t->P.W_skip) return;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t->Do, t->D, n, 1.0f,
                t->dxhat + r0 * t->Do, t->Do, t->xs + r0 * t->D, t->D, 1.0f, t->G.W_skip, t->D);
}

/* Reconstruction error of rows [r0, r0+n): fills dxhat = 2/B (xhat - ys); sc gets the sums
 * (squared error, squared target, the targets' column sums for the explained variance). */
static void recon_error(sae_trainer *t, int64_t r0, int n, double *sc)
{
    int D = t->Do;
    sae_k_recon_error(t->dxhat + r0 * D, &sc[SC_SSE], &sc[SC_SS], sc + SC_COL, t->xhat + r0 * D,
                      t->ys + r0 * D, 2.0f / t->B, n, D);
}

/* explained variance from the (reduced) sums: sum ||y - mean||^2 = sum ||y||^2 - B ||mean||^2 */
static double explained_variance(const sae_trainer *t, const double *sc)
{
    int B = t->B;
    double msq = 0;
    for (int i = 0; i < t->Do; i++) msq += (sc[SC_COL + i] / B) * (sc[SC_COL + i] / B);
    double var = sc[SC_SS] - B * msq;
    return var > 0 ? 1.0 - sc[SC_SSE] / var : 0;
}

/* The kB-th largest positive value of pre[r, :m] over rows [r0, r0+n) of every rank (row stride
 * S), as sae_k_batchtopk's threshold: INFINITY when no value is positive, 0 when at most kB are.
 * Exact and split-independent: a radix selection on the float bit patterns (positive floats
 * order as their bits), 4 rounds of 256 integer counts summed over ranks. buf: n*m floats. */
static int global_kth(float *thr, const float *pre, int64_t r0, int64_t n, int S, int m,
                      int64_t kB, float *buf)
{
    int64_t np = 0;
    for (int64_t r = r0; r < r0 + n; r++) {
        const float *p = pre + r * S;
        for (int j = 0; j < m; j++)
            if (p[j] > 0) buf[np++] = p[j];
    }
    int64_t tot = np;
    int rc = dist_sum_i64(&tot, 1);
    if (rc) return rc;
    if (tot == 0) {
        *thr = INFINITY;
        return OK;
    }
    if (tot <= kB) {
        *thr = 0;
        return OK;
    }
    uint32_t prefix = 0;
    int64_t want = kB; /* rank from the top among the candidates left */
    for (int shift = 24; shift >= 0; shift -= 8) {
        int64_t h[256];
        memset(h, 0, sizeof h);
        for (int64_t i = 0; i < np; i++) {
            uint32_t u;
            memcpy(&u, &buf[i], 4);
            h[(u >> shift) & 255]++;
        }
        if ((rc = dist_sum_i64(h, 256))) return rc;
        int bin = 255;
        while (bin > 0 && want > h[bin]) want -= h[bin--];
        prefix |= (uint32_t)bin << shift;
        int64_t w = 0;
        for (int64_t i = 0; i < np; i++) {
            uint32_t u;
            memcpy(&u, &buf[i], 4);
            if (((u >> shift) & 255) == (uint32_t)bin) buf[w++] = buf[i];
        }
        np = w;
    }
    memcpy(thr, &prefix, 4);
    return OK;
}

/* The shared code truncated to its first m latents (the paper's f[:, :m]): the leaf's CSR (ptr,
 * idx, val) without the entries of latents >= m, into (lptr, lidx, lval). */
static void matryoshka_prefix(sae_trainer *t, int n, int m)
{
    int64_t q = 0;
    t->lptr[0] = 0;
    for (int b = 0; b < n; b++) {
        for (int64_t e = t->ptr[b]; e < t->ptr[b + 1]; e++)
            if (t->idx[e] < m) {
                t->lidx[q] = t->idx[e];
                t->lval[q++] = t->val[e];
            }
        t->lptr[b + 1] = q;
    }
}

/* Matryoshka's inner levels on rows [r0, r0+n), each scattered on its own: for each width m but
 * the last, a code over the first m latents, decoded by W_dec[:m] + b_dec; adds the gradient of
 * sum_m ||x - xhat_m||^2 / B into G and each level's squared error into sc. The code
 * (mat_levels): SAE_MAT_SHARED, the full-width selection truncated (matryoshka_prefix; the
 * steps use matryoshka_shared_backward for it, this form is the tests' reference);
 * SAE_MAT_OWN, the prefix pre[:, :m]'s own BatchTopK (k B entries over the global batch).
 * Sparse throughout: the kernels of the full-width path on the prefix. */
static void matryoshka_levels(sae_trainer *t, const step_ctx *cx, int64_t r0, int n, double *sc)
{
    int B = t->B, D = t->D, S = t->S;
    const sae_params *P = &t->P, *G = &t->G;
    const float *pre = t->pre + r0 * S, *xs = t->xs + r0 * D, *xc = t->xc + r0 * D;
    float thr, gs = 2.0f / B;
    for (int l = 0; l + 1 < t->c.n_widths; l++) {
        int m = t->c.widths[l];
        if (t->c.mat_levels == SAE_MAT_SHARED) {
            matryoshka_prefix(t, n, m);
        } else {
            for (int b = 0; b < n; b++)
                memcpy(t->mpre + (int64_t)b * m, pre + (int64_t)b * S, sizeof(float) * m);
            if (cx->global)
                sae_k_batchtopk_select(t->lptr, t->lidx, t->lval, t->cap, &thr, t->mpre, n, m,
                                       cx->lthr[l]);
            else
                sae_k_batchtopk(t->lptr, t->lidx, t->lval, t->cap, &thr, t->mpre, n, m,
                                (int64_t)t->c.k * B, t->scratch);
        }
        sae_k_decode_sparse(t->lxhat, t->lptr, t->lidx, t->lval, P->W_dec, P->b_dec, n, D);
        double sse = 0;
        for (int64_t e = 0; e < (int64_t)n * D; e++) {
            float d = t->lxhat[e] - xs[e];
            sse += (double)d * d;
            t->lxhat[e] = gs * d;
        }
        sc[SC_LVL + l] = sse;
        sae_k_colsum_add(G->b_dec, t->lxhat, n, D);
        sae_k_csr_transpose(t->ltptr, t->ltent, t->lttok, t->lptr, t->lidx, n, m);
        sae_k_decode_sparse_backward(G->W_dec, t->ldval, t->lxhat, t->ltptr, t->ltent, t->lttok,
                                     t->lval, P->W_dec, m, D);
        int64_t nnz = t->lptr[n];
        for (int64_t e = 0; e < nnz; e++)
            if (!(t->lval[e] > 0)) t->ldval[e] = 0;
        sae_k_encode_sparse_backward(G->W_encT, G->b_enc, t->ldval, t->ltptr, t->ltent, t->lttok,
                                     xc, m, D);
    }
}

/* Matryoshka with the shared code, rows [r0, r0+n): every level's reconstruction in one decode.
 * Latent group g holds widths[g-1] <= j < widths[g]; level g decodes groups 0..g, so level g is
 * level g-1 plus group g's entries. The leaf's CSR (latents ascending in each row, as the
 * selection writes them) is split into one CSR per group, and each level continues the one
 * below: the same adds in the same order as decoding each level's prefix on its own, so the
 * same bits, for a single pass over the entries. Inner levels go to t->lxhat (one [B,D] slice
 * each), the full width to xhat. */
static void matryoshka_decode(sae_trainer *t, int n, float *xhat)
{
    int B = t->B, D = t->D, L = t->c.n_widths;
    const sae_params *P = &t->P;
    int64_t cnt[SAE_MAX_WIDTHS + 1] = {0}, at[SAE_MAX_WIDTHS + 1];
    for (int64_t e = 0; e < t->ptr[n]; e++) {
        int g = 0;
        while (t->idx[e] >= t->c.widths[g]) g++;
        cnt[g]++;
    }
    at[0] = 0;
    for (int g = 1; g < L; g++) at[g] = at[g - 1] + cnt[g - 1];
    for (int g = 0; g < L; g++) t->lptr[(int64_t)g * (B + 1)] = at[g];
    for (int b = 0; b < n; b++) {
        for (int64_t e = t->ptr[b]; e < t->ptr[b + 1]; e++) {
            int g = 0;
            while (t->idx[e] >= t->c.widths[g]) g++;
            t->lidx[at[g]] = t->idx[e];
            t->lval[at[g]++] = t->val[e];
        }
        for (int g = 0; g < L; g++) t->lptr[(int64_t)g * (B + 1) + b + 1] = at[g];
    }
    for (int g = 0; g < L; g++) {
        float *out = g < L - 1 ? t->lxhat + (int64_t)g * B * D : xhat;
        const int64_t *gptr = t->lptr + (int64_t)g * (B + 1);
        if (g == 0)
            sae_k_decode_sparse(out, gptr, t->lidx, t->lval, P->W_dec, P->b_dec, n, D);
        else
            sae_k_decode_sparse_from(out, gptr, t->lidx, t->lval, P->W_dec,
                                     t->lxhat + (int64_t)(g - 1) * B * D, n, D);
    }
}

/* Matryoshka with the shared code on rows [r0, r0+n): the decoder's backward for every level
 * at once, given the full width's reconstruction gradient in dxhat, the inner levels'
 * reconstructions from matryoshka_decode and the transposed pattern (tptr, tent, ttok). A
 * latent of group g is in the levels g .. L-1, so its decoder row and its dval see R_g = the sum
 * of those levels' gradients 2/B (xhat_l - x). Going from the widest group down, each inner
 * level's gradient is added into dxhat (which this consumes) and each group's latents scatter
 * once against it: one pass over the pattern instead of one per level (each level repeated its
 * prefix's scatters), and then one encoder scatter on the summed dval. The same gradients as
 * matryoshka_levels up to the order of float sums (tests/test_sae.c); b_dec gets each level's
 * column sums, the levels' squared errors go into sc. */
static void matryoshka_shared_backward(sae_trainer *t, int64_t r0, int n, double *sc)
{
    int B = t->B, D = t->D, L = t->c.n_widths;
    const sae_params *P = &t->P, *G = &t->G;
    const float *xs = t->xs + r0 * D;
    float *dx = t->dxhat + r0 * D, gs = 2.0f / B;
    for (int g = L - 1; g >= 0; g--) {
        int j0 = g ? t->c.widths[g - 1] : 0, j1 = t->c.widths[g];
        if (g < L - 1) { /* level g's reconstruction -> its gradient, added into dxhat */
            float *lx = t->lxhat + (int64_t)g * B * D;
            double sse = 0;
            for (int64_t e = 0; e < (int64_t)n * D; e++) {
                float d = lx[e] - xs[e], gd = gs * d;
                sse += (double)d * d;
                lx[e] = gd;
                dx[e] += gd;
            }
            sc[SC_LVL + g] = sse;
            sae_k_colsum_add(G->b_dec, lx, n, D);
        }
        sae_k_decode_sparse_backward(G->W_dec + (int64_t)j0 * D, t->dval, dx, t->tptr + j0,
                                     t->tent, t->ttok, t->val, P->W_dec + (int64_t)j0 * D,
                                     j1 - j0, D);
    }
}

/* The L1 penalty's decoder-norm term over latents j (ReLU's f, gated's gate a): coef/B * fsum_j
 * ||W_dec,j|| into the loss, its gradient into G->W_dec[j], the norm into t->nrm[j]. fsum(j)
 * sums latent j's activations over the leaf's tokens in token order, from the dense rows f
 * [n,S] or from the transposed CSR's values vals (zeros add nothing: the same double). */
static double l1_norm_term(sae_trainer *t, double coef, const float *f, int n,
                           const int64_t *tptr, const int64_t *tent, const float *vals)
{
    int B = t->B, Do = t->Do, S = t->S;
    const sae_params *P = &t->P, *G = &t->G;
    double loss = 0;
    for (int j = 0; j < S; j++) {
        const float *w = P->W_dec + (int64_t)j * Do;
        double nn = 0, fsum = 0;
        for (int i = 0; i < Do; i++) nn += (double)w[i] * w[i];
        nn = sqrt(nn);
        if (tptr)
            for (int64_t q = tptr[j]; q < tptr[j + 1]; q++) fsum += vals[tent[q]];
        else
            for (int b = 0; b < n; b++) fsum += f[(int64_t)b * S + j];
        loss += coef / B * fsum * nn;
        if (nn > 0) {
            float gsc = (float)(coef / B * fsum / nn);
            float *gw = G->W_dec + (int64_t)j * Do;
            for (int i = 0; i < Do; i++) gw[i] += gsc * w[i];
        }
        t->nrm[j] = (float)nn;
    }
    return loss;
}

/* dxhat[b] . W_dec[j] in 8 lanes (so the loop vectorises without reassociating a sum) */
static float dot_lanes(const float *a, const float *w, int n)
{
    float l[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int q = 0; q < 8; q++) l[q] += a[i + q] * w[i + q];
    float s = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
    for (; i < n; i++) s += a[i] * w[i];
    return s;
}

/* Gated's auxiliary reconstruction error: returns sum (xg - x)^2 and leaves its gradient
 * gs (xg - x) in xg. */
static double gated_aux_error(float *xg, const float *xs, int64_t n, float gs)
{
    double asse = 0;
    for (int64_t e = 0; e < n; e++) {
        float d = xg[e] - xs[e];
        asse += (double)d * d;
        xg[e] = gs * d;
    }
    return asse;
}

/* Gated with few open gates: the step on the entries whose gate is open (pi > 0) only, as
 * few_active_leaf does for ReLU: both reconstructions (the magnitudes' and the auxiliary one
 * of the gates) through the CSR decode, the decoder's gradients through the transposed
 * scatters (the frozen auxiliary decoder's dots one by one), the encoder's gradient and the
 * gates' sum for b_dec from one scatter. The same gradient as gated_leaf up to the order of
 * float sums. Returns 0 (nothing done) when more than n S / SPARSE_STEP_DIV gates are open. */
static int gated_sparse_leaf(sae_trainer *t, const step_ctx *cx, int64_t r0, int n, double *sc)
{
    int B = t->B, D = t->D, S = t->S;
    const sae_params *P = &t->P, *G = &t->G;
    const float *pre = t->pre + r0 * S;
    float *xs = t->xs + r0 * D, *xc = t->xc + r0 * D, *xhat = t->xhat + r0 * D;
    float *xg = t->xg + r0 * D, *dxhat = t->dxhat + r0 * D;
    float *fv = t->val, *av = t->gval, *df = t->dval, *da = t->gdval;
    int64_t cap = (int64_t)n * S / SPARSE_STEP_DIV, nnz = 0, active = 0;
    int64_t *ptr = t->ptr;
    ptr[0] = 0;
    for (int b = 0; b < n; b++) {
        const float *pr = pre + (int64_t)b * S;
        for (int j = 0; j < S; j++) {
            float pi = pr[j];
            if (!(pi > 0)) continue;
            if (nnz == cap) return 0;
            float mag = expf(P->r_mag[j]) * (pi - P->b_enc[j]) + P->b_mag[j];
            t->idx[nnz] = j;
            av[nnz] = pi;
            fv[nnz++] = mag > 0 ? mag : 0;
        }
        ptr[b + 1] = nnz;
    }
    for (int64_t e = 0; e < nnz; e++)
        if (fv[e] > 0) {
            active++;
            t->fired[t->idx[e]] = 1;
        }
    sae_k_decode_sparse(xhat, ptr, t->idx, fv, P->W_dec, P->b_dec, n, D);
    sae_k_decode_sparse(xg, ptr, t->idx, av, P->W_dec, P->b_dec, n, D);
    recon_error(t, r0, n, sc);
    double asse = gated_aux_error(xg, xs, (int64_t)n * D, 2.0f / B);
    sae_k_colsum_add(G->b_dec, dxhat, n, D);
    sae_k_csr_transpose(t->tptr, t->tent, t->ttok, ptr, t->idx, n, S);
    /* df = dxhat . W_dec[j] where the magnitude is positive (0 elsewhere: no gradient there) */
    sae_k_decode_sparse_backward(G->W_dec, df, dxhat, t->tptr, t->tent, t->ttok, fv, P->W_dec, S, D);
    if (t->gated_unfrozen) {
        sae_k_colsum_add(G->b_dec, xg, n, D);
        sae_k_decode_sparse_backward(G->W_dec, da, xg, t->tptr, t->tent, t->ttok, av, P->W_dec, S, D);
    } else
        for (int b = 0; b < n; b++)
            for (int64_t e = ptr[b]; e < ptr[b + 1]; e++)
                da[e] = dot_lanes(xg + (int64_t)b * D, P->W_dec + (int64_t)t->idx[e] * D, D);
    double sparsity_loss = l1_norm_term(t, cx->coef, NULL, n, t->tptr, t->tent, av);
    float cB = (float)(cx->coef / B);
    for (int64_t e = 0; e < nnz; e++) {
        int j = t->idx[e];
        float er = expf(P->r_mag[j]), u = av[e] - P->b_enc[j];
        float dmag = df[e]; /* 0 where the magnitude is not positive (fv 0) */
        float dpi = da[e] + cB * t->nrm[j];
        G->r_mag[j] += dmag * er * u;
        G->b_mag[j] += dmag;
        G->b_enc[j] += dpi;
        df[e] = dmag * er + dpi; /* d loss / d (xc . w_j) */
    }
    /* W_encT's gradient, and in gsum each latent's sum of it (the b_dec gradient through xc) */
    memset(t->gsum, 0, sizeof(float) * S);
    sae_k_encode_sparse_backward(G->W_encT, t->gsum, df, t->tptr, t->tent, t->ttok, xc, S, D);
    sae_k_bdec_from_enc(G->b_dec, t->gsum, P->W_encT, D, S);
    sc[SC_AUX] = asse;
    sc[SC_SPARSE] = sparsity_loss;
    sc[SC_ACTIVE] = (double)active;
    return 1;
}

/* Gated (Rajamanoharan et al. 2024, SAELens' losses) on rows [r0, r0+n): pi = xc W_enc + b_gate,
 * u = pi - b_gate, mag = exp(r_mag) u + b_mag, f = 1[pi > 0] relu(mag). Loss = ||x - xhat||^2 / B
 * + coef / B sum relu(pi)_j ||W_dec,j|| + ||x - (relu(pi) W_dec + b_dec)||^2 / B, the last with
 * the decoder frozen (the paper's x_frozen: W_dec and b_dec get no gradient from it). The gate
 * is a step function: f passes gradient only through the magnitude path, pi only through the
 * penalty and the auxiliary loss. The decoder rows are kept at unit norm (constrained Adam, as
 * the paper and dictionary_learning's gated trainer): unconstrained, nothing but the penalty
 * acts on their norms once the auxiliary decoder is frozen (the MSE is indifferent, r_mag
 * rescales f), so they shrank and the gate's penalty coef ||W_dec,j|| with them. With unit rows
 * the norm factor is 1 and its gradient, parallel to the row, is projected out. Dense like relu
 * (cblas_sgemm) while many gates are open, then sparse (gated_sparse_leaf). */
static void gated_leaf(sae_trainer *t, const step_ctx *cx, int64_t r0, int n, double *sc)
{
    int B = t->B, D = t->D, S = t->S;
    const sae_params *P = &t->P, *G = &t->G;
    double coef = cx->coef;
    int64_t BS = (int64_t)n * S, active = 0;
    float *pre = t->pre + r0 * S, *f = t->fbuf + r0 * S, *a = t->gbuf + r0 * S;
    float *xs = t->xs + r0 * D, *xc = t->xc + r0 * D, *xhat = t->xhat + r0 * D;
    float *xg = t->xg + r0 * D, *dxhat = t->dxhat + r0 * D;
    sae_k_encode(pre, xc, xs, P->W_encT, P->b_enc, P->b_dec, n, D, S);
    if (!t->reference_steps && gated_sparse_leaf(t, cx, r0, n, sc)) return;
    for (int64_t e = 0; e < BS; e++) {
        int j = (int)(e % S);
        float pi = pre[e], mag = expf(P->r_mag[j]) * (pi - P->b_enc[j]) + P->b_mag[j];
        f[e] = (pi > 0 && mag > 0) ? mag : 0;
        a[e] = pi > 0 ? pi : 0;
        if (f[e] > 0) {
            active++;
            t->fired[j] = 1;
        }
    }
    for (int b = 0; b < n; b++) {
        memcpy(xhat + (int64_t)b * D, P->b_dec, sizeof(float) * D);
        memcpy(xg + (int64_t)b * D, P->b_dec, sizeof(float) * D);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, D, S, 1.0f, f, S, P->W_dec, D, 1.0f,
                xhat, D);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, D, S, 1.0f, a, S, P->W_dec, D, 1.0f,
                xg, D);
    recon_error(t, r0, n, sc);
    double asse = gated_aux_error(xg, xs, (int64_t)n * D, 2.0f / B), sparsity_loss = 0;
    sae_k_colsum_add(G->b_dec, dxhat, n, D);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, S, D, n, 1.0f, f, S, dxhat, D, 1.0f,
                G->W_dec, D);
    if (t->gated_unfrozen) {
        sae_k_colsum_add(G->b_dec, xg, n, D);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, S, D, n, 1.0f, a, S, xg, D, 1.0f,
                    G->W_dec, D);
    }
    /* the penalty's decoder norms do get their gradient (as in SAELens) */
    sparsity_loss = l1_norm_term(t, coef, a, n, NULL, NULL, NULL);
    /* df = dxhat W_dec^T (over f), da = dxg W_dec^T (over a) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, S, D, 1.0f, dxhat, D, P->W_dec, D,
                0.0f, f, S);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, S, D, 1.0f, xg, D, P->W_dec, D,
                0.0f, a, S);
    float cB = (float)(coef / B);
    memset(t->gsum, 0, sizeof(float) * S);
    for (int64_t e = 0; e < BS; e++) {
        int j = (int)(e % S);
        float pi = pre[e], er = expf(P->r_mag[j]), u = pi - P->b_enc[j];
        float mag = er * u + P->b_mag[j];
        float dmag = (pi > 0 && mag > 0) ? f[e] : 0;
        float dpi = pi > 0 ? a[e] + cB * t->nrm[j] : 0;
        G->r_mag[j] += dmag * er * u;
        G->b_mag[j] += dmag;
        G->b_enc[j] += dpi;
        f[e] = dmag * er + dpi; /* d loss / d (xc . w_j) */
        t->gsum[j] += f[e];
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, S, D, n, 1.0f, f, S, xc, D, 1.0f,
                G->W_encT, D);
    sae_k_bdec_from_enc(G->b_dec, t->gsum, P->W_encT, D, S);
    sc[SC_AUX] = asse;
    sc[SC_SPARSE] = sparsity_loss;
    sc[SC_ACTIVE] = (double)active;
}

/* TopK, BatchTopK, Matryoshka on rows [r0, r0+n) (+ AuxK). */
static void sparse_leaf(sae_trainer *t, step_ctx *cx, int64_t r0, int n, double *sc)
{
    int B = t->B, D = t->D, Do = t->Do, S = t->S, k = t->c.k, ka = cx->ka, nd = cx->nd;
    const sae_params *P = &t->P, *G = &t->G;
    const float *bsub = t->tc ? t->zero_in : P->b_dec;
    float *xs = t->xs + r0 * D, *xc = t->xc + r0 * D, *xhat = t->xhat + r0 * Do;
    float *dxhat = t->dxhat + r0 * Do, *ys = t->ys + r0 * Do, *ehat = t->ehat + r0 * Do;
    int64_t active = 0;
    if (t->c.arch == SAE_TOPK) {
        for (int rr = 0, ch = chunk_rows(t); rr < n; rr += ch) {
            int m = n - rr < ch ? n - rr : ch;
            /* the top-k's first pass runs inside the GEMM's blocks (fp32) */
            int fused = sae_k_encode_bmax(t->pre, t->bmax, xc + (int64_t)rr * D,
                                          xs + (int64_t)rr * D, P->W_encT, P->b_enc, bsub, m, D, S);
            prof_mark(t, SAE_PROF_ENCODE);
            /* AuxK's selection in the same pass (its phase is counted in the top-k's) */
            sae_k_topk_bmax_aux(t->idx + (int64_t)rr * k, t->val + (int64_t)rr * k,
                                t->aidx + (int64_t)rr * ka, t->aval + (int64_t)rr * ka, t->pre,
                                fused ? t->bmax : NULL, m, S, k, ka, t->dead, nd);
            prof_mark(t, SAE_PROF_TOPK);
        }
        for (int b = 0; b <= n; b++) t->ptr[b] = (int64_t)b * k;
    } else {
        float *pre = t->pre + r0 * S, thr;
        int64_t nk;
        if (cx->global) {
            nk = sae_k_batchtopk_select(t->ptr, t->idx, t->val, t->cap, &thr, pre, n, S, cx->thr);
        } else {
            sae_k_encode(pre, xc, xs, P->W_encT, P->b_enc, bsub, n, D, S);
            nk = sae_k_batchtopk(t->ptr, t->idx, t->val, t->cap, &thr, pre, n, S, (int64_t)k * B,
                                 t->scratch);
        }
        if (nk && thr < cx->kept_min) cx->kept_min = thr;
        if (ka) sae_k_topk(t->aidx, t->aval, pre, n, S, ka, t->dead, nd);
    }
    for (int b = 0; b <= n; b++) t->aptr[b] = (int64_t)b * ka;
    int64_t nnz = t->ptr[n];
    for (int64_t e = 0; e < nnz; e++)
        if (t->val[e] > 0) {
            t->fired[t->idx[e]] = 1;
            active++;
        }
    /* Matryoshka's shared code: every level decoded and scattered back in one pass (the tests'
       switch keeps the per-level form, their reference) */
    int mat_once = t->c.arch == SAE_MATRYOSHKA && t->c.mat_levels == SAE_MAT_SHARED &&
                   t->c.n_widths > 1 && !t->reference_steps;
    if (mat_once)
        matryoshka_decode(t, n, xhat);
    else
        sae_k_decode_sparse(xhat, t->ptr, t->idx, t->val, P->W_dec, P->b_dec, n, Do);
    skip_forward(t, r0, n);
    recon_error(t, r0, n, sc);
    sae_k_colsum_add(G->b_dec, dxhat, n, Do);
    skip_backward(t, r0, n);
    prof_mark(t, SAE_PROF_DECODE);
    sae_k_csr_transpose(t->tptr, t->tent, t->ttok, t->ptr, t->idx, n, S);
    if (mat_once)
        matryoshka_shared_backward(t, r0, n, sc);
    else
        sae_k_decode_sparse_backward(G->W_dec, t->dval, dxhat, t->tptr, t->tent, t->ttok, t->val,
                                     P->W_dec, S, Do);
    prof_mark(t, SAE_PROF_DEC_BWD);
    sae_k_encode_sparse_backward(G->W_encT, G->b_enc, t->dval, t->tptr, t->tent, t->ttok, xc, S, D);
    prof_mark(t, SAE_PROF_ENC_BWD);
    if (t->c.arch == SAE_MATRYOSHKA && !mat_once) matryoshka_levels(t, cx, r0, n, sc);
    prof_mark(t, SAE_PROF_OTHER);
    if (ka) {
        /* AuxK: the dead latents' top-ka reconstruct the (detached) residual e = x - xhat */
        float ca = cx->ca;
        sae_k_decode_sparse(ehat, t->aptr, t->aidx, t->aval, P->W_dec, NULL, n, Do);
        double asse = 0;
        for (int64_t e = 0; e < (int64_t)n * Do; e++) {
            float d = ehat[e] - (ys[e] - xhat[e]);
            asse += (double)d * d;
            ehat[e] = 2.0f * ca / B * d;
        }
        sc[SC_AUX] = asse;
        sae_k_csr_transpose(t->atptr, t->atent, t->attok, t->aptr, t->aidx, n, S);
        sae_k_decode_sparse_backward(G->W_dec, t->adval, ehat, t->atptr, t->atent, t->attok,
                                     t->aval, P->W_dec, S, Do);
        int64_t an = t->aptr[n];
        for (int64_t e = 0; e < an; e++)
            if (!(t->aval[e] > 0)) t->adval[e] = 0;
        sae_k_encode_sparse_backward(G->W_encT, G->b_enc, t->adval, t->atptr, t->atent, t->attok,
                                     xc, S, D);
        prof_mark(t, SAE_PROF_AUX);
    }
    sc[SC_ACTIVE] = (double)active;
}

/* ---- TopK over latent blocks (--latent-blocks L, sharded with --latent-shards) -------------
 * The latents are cut into lb blocks of Sb = S / lb consecutive latents; rank s of N owns the
 * blocks [s lb/N, (s+1) lb/N): their W_encT and W_dec rows, b_enc entries and Adam moments
 * (the other ranges are allocated on every rank but neither read nor updated there). Every rank
 * sees the whole batch. Per step:
 * 1. each owned block's pre-activations (the encoder GEMM on the block's rows of W_encT, row
 *    chunk by row chunk) and its per-row top min(k, Sb) (and, for AuxK, its top among the
 *    block's dead latents), selected on the raw values, then ReLU applied: the candidates;
 * 2. the candidates of every rank (dist_allgather: exact), and on every rank the same global
 *    top-k per row, ordered by the ReLU'd value and then by the lower latent: a total order, so
 *    the selection does not depend on who found which candidate. Among positive values that is
 *    the single pass's selection and tie-break; where a row has fewer than k positive values
 *    the zero entries may name other latents than the single pass's (the largest raw values
 *    there, the lowest latents here), which changes nothing: a zero entry adds nothing to the
 *    reconstruction, gets no gradient and is never counted as fired or active;
 * 3. each block's reconstruction from its selected latents (and AuxK's), summed over blocks in
 *    one fixed binary tree: the owned blocks' levels locally, the top levels across ranks
 *    (dist_sum_f32); the error is then the same bits on every rank;
 * 4. each block's backward (its latents' rows only: the transposed CSR walks tokens in order,
 *    whoever owns the block) and its part of the b_dec gradient through xc = x - b_dec, summed
 *    in the same tree; b_dec, the fired flags and the dead counters are replicated.
 * So for a given lb the bits do not depend on N (any power of two dividing lb), and one process
 * runs the same calls over all lb blocks. lb = 1 is sparse_leaf (the single pass). */

/* a before b in the selection order: larger value, then lower latent */
static int lcand_before(lcand a, lcand b) { return a.v > b.v || (a.v == b.v && a.j < b.j); }

/* Offers c to the best-first list out [*n <= k]. */
static void lcand_offer(lcand *out, int *n, int k, lcand c)
{
    if (c.j < 0 || (*n == k && !lcand_before(c, out[k - 1]))) return;
    int i = *n < k ? (*n)++ : k - 1;
    while (i > 0 && lcand_before(c, out[i - 1])) {
        out[i] = out[i - 1];
        i--;
    }
    out[i] = c;
}

/* The entries of block [j0, j0+Sb) in a selection sel [B, kk] as CSR with block-local latents. */
static void block_csr(int64_t *ptr, int *idx, float *val, const lcand *sel, int B, int kk, int j0,
                      int Sb)
{
    int64_t n = 0;
    ptr[0] = 0;
    for (int b = 0; b < B; b++) {
        const lcand *r = sel + (int64_t)b * kk;
        for (int e = 0; e < kk; e++)
            if (r[e].j >= j0 && r[e].j < j0 + Sb) {
                idx[n] = r[e].j - j0;
                val[n++] = r[e].v;
            }
        ptr[b + 1] = n;
    }
}

/* A rank's block tree, a binary counter over its consecutive blocks (as forward_backward's over
 * leaves): leaf() is the next block's buffer, add() sums equal levels; pool[0] holds the sum. */
typedef struct {
    float **pool;
    int64_t n;
    int top, lv[32];
} ltree;

static float *ltree_leaf(ltree *tr) { return tr->pool[tr->top]; }

static void ltree_add(ltree *tr)
{
    tr->lv[tr->top++] = 0;
    while (tr->top >= 2 && tr->lv[tr->top - 1] == tr->lv[tr->top - 2]) {
        float *a = tr->pool[tr->top - 2], *b = tr->pool[tr->top - 1];
        for (int64_t i = 0; i < tr->n; i++) a[i] = a[i] + b[i];
        tr->lv[tr->top - 2]++;
        tr->top--;
    }
}

/* Frees the latent blocks' buffers (NULL after, so a later latent_alloc starts clean). */
static void latent_free(sae_trainer *t)
{
    mem_free_aligned(t->lpre);
    mem_free_aligned(t->lbmax);
    mem_free(t->sel);
    mem_free(t->asel);
    mem_free(t->ldead);
    t->lpre = t->lbmax = NULL;
    t->sel = t->asel = NULL;
    t->ldead = NULL;
    for (int d = 0; d < 31; d++) {
        mem_free_aligned(t->xpool[d]);
        mem_free_aligned(t->bpool[d]);
        t->xpool[d] = t->bpool[d] = NULL;
    }
}

static int latent_alloc(sae_trainer *t)
{
    int N = dist_size(), nbl = t->lb / N, B = t->B, D = t->D;
    if (t->lpre) return OK;
    t->Sb = t->S / t->lb;
    t->ldepth = 1;
    while ((1 << (t->ldepth - 1)) < nbl) t->ldepth++;
    t->lpre = zalloc((int64_t)t->chunk16 * t->Sb);
    t->lbmax = zalloc((int64_t)t->chunk16 * (t->Sb / SAE_K_TOPK_BLOCK + 1));
    t->sel = mem_alloc(sizeof(lcand) * (size_t)B * t->c.k);
    t->asel = mem_alloc(sizeof(lcand) * (size_t)B * t->kaux);
    t->ldead = mem_alloc(sizeof(int) * (size_t)t->Sb);
    int ok = t->lpre && t->lbmax && t->sel && t->asel && t->ldead;
    for (int d = 0; ok && d < t->ldepth; d++)
        ok = (t->xpool[d] = zalloc(2 * (int64_t)B * D)) && (t->bpool[d] = zalloc(D));
    if (ok) return OK;
    latent_free(t); /* the next step tries again */
    return err_set(ERR_NOMEM, "SAE trainer: out of memory for the latent blocks");
}

/* Before the step's first collective, everything of latent_leaf that can fail on one rank: its
 * buffers, and room in t->cand for this step's candidates, w = nbl (kc + kac) per row (kac:
 * AuxK's per block, as many as the block with the most dead latents offers; the dead list is
 * every rank's, so w is too). */
static int latent_prepare(sae_trainer *t, step_ctx *cx)
{
    int rc = latent_alloc(t);
    if (rc) return rc;
    int B = t->B, Sb = t->Sb, N = dist_size(), nbl = t->lb / N, k = t->c.k;
    int kc = k < Sb ? k : Sb, kac = 0;
    for (int q = 0, e = 0; cx->ka && q < t->lb; q++) {
        int n = 0;
        while (e < cx->nd && t->dead[e] < (q + 1) * Sb) e++, n++;
        if (n > kac) kac = n;
    }
    if (kac > cx->ka) kac = cx->ka;
    cx->lw = nbl * (kc + kac);
    cx->lkac = kac;
    if ((int64_t)B * cx->lw > t->ccap) {
        mem_free(t->cand);
        mem_free(t->gcand);
        t->ccap = (int64_t)B * cx->lw;
        t->cand = mem_alloc(sizeof(lcand) * (size_t)t->ccap);
        t->gcand = N > 1 ? mem_alloc(sizeof(lcand) * (size_t)t->ccap * N) : NULL;
        if (!t->cand || (N > 1 && !t->gcand)) {
            mem_free(t->cand);
            mem_free(t->gcand);
            t->cand = t->gcand = NULL;
            t->ccap = 0;
            return err_set(ERR_NOMEM, "SAE trainer: out of memory for the top-k candidates");
        }
    }
    return OK;
}

/* Step 1: the owned blocks' candidates into t->cand [B, w] (room made by latent_prepare),
 * w = nbl (kc + kac): per row and block its top kc (relu'd), then AuxK's top min(kac, the
 * block's dead) padded to kac. Nothing here can fail. */
static void latent_candidates(sae_trainer *t, const step_ctx *cx, int kc)
{
    int B = t->B, D = t->D, Sb = t->Sb, N = dist_size(), nbl = t->lb / N, q0 = dist_rank() * nbl;
    int w = cx->lw, kac = cx->lkac;
    const sae_params *P = &t->P;
    for (int rr = 0, ch = chunk_rows(t); rr < B; rr += ch) {
        int m = B - rr < ch ? B - rr : ch;
        for (int qi = 0, de = 0; qi < nbl; qi++) {
            int j0 = (q0 + qi) * Sb;
            int fused = sae_k_encode_bmax(t->lpre, t->lbmax, t->xc + (int64_t)rr * D,
                                          t->xs + (int64_t)rr * D, P->W_encT + (int64_t)j0 * D,
                                          P->b_enc + j0, P->b_dec, m, D, Sb);
            prof_mark(t, SAE_PROF_ENCODE);
            sae_k_topk_bmax(t->idx, t->val, t->lpre, fused ? t->lbmax : NULL, m, Sb, kc);
            for (int b = 0; b < m; b++) {
                lcand *c = t->cand + (int64_t)(rr + b) * w + qi * kc;
                for (int e = 0; e < kc; e++)
                    c[e] = (lcand){t->val[(int64_t)b * kc + e], j0 + t->idx[(int64_t)b * kc + e]};
            }
            prof_mark(t, SAE_PROF_TOPK);
            if (!kac) continue;
            int nq = 0;
            while (de < cx->nd && t->dead[de] < j0) de++;
            for (int e = de; e < cx->nd && t->dead[e] < j0 + Sb; e++) t->ldead[nq++] = t->dead[e] - j0;
            int kq = nq < kac ? nq : kac;
            if (kq) sae_k_topk(t->aidx, t->aval, t->lpre, m, Sb, kq, t->ldead, nq);
            for (int b = 0; b < m; b++) {
                lcand *c = t->cand + (int64_t)(rr + b) * w + nbl * kc + qi * kac;
                for (int e = 0; e < kac; e++)
                    c[e] = e < kq ? (lcand){t->aval[(int64_t)b * kq + e],
                                            j0 + t->aidx[(int64_t)b * kq + e]}
                                  : (lcand){0, -1};
            }
            prof_mark(t, SAE_PROF_AUXSEL);
        }
    }
}

/* Step 2: every rank's candidates (allgather), the global top-k into t->sel and AuxK's top-ka
 * into t->asel, the fired flags (all latents) and the count of active entries. */
static int latent_select(sae_trainer *t, int ka, int kc, int w, int64_t *active)
{
    int B = t->B, k = t->c.k, N = dist_size(), nm = t->lb / N * kc, rc;
    const lcand *all = t->cand;
    if (N > 1) {
        if ((rc = dist_allgather(t->cand, t->gcand, sizeof(lcand) * (size_t)B * w))) return rc;
        all = t->gcand;
    }
    *active = 0;
    for (int b = 0; b < B; b++) {
        lcand *s = t->sel + (int64_t)b * k, *as = t->asel + (int64_t)b * ka;
        int n = 0, an = 0;
        for (int r = 0; r < N; r++) {
            const lcand *c = all + ((int64_t)r * B + b) * w;
            for (int e = 0; e < nm; e++) lcand_offer(s, &n, k, c[e]);
            for (int e = nm; e < w; e++) lcand_offer(as, &an, ka, c[e]);
        }
        for (int e = 0; e < k; e++)
            if (s[e].v > 0) {
                t->fired[s[e].j] = 1;
                (*active)++;
            }
    }
    prof_mark(t, SAE_PROF_TOPK);
    return OK;
}

/* TopK (+ AuxK) over latent blocks on the whole batch (rows 0..B), see above; latent_prepare
 * has run (and been agreed). */
static int latent_leaf(sae_trainer *t, const step_ctx *cx, double *sc)
{
    int B = t->B, D = t->D, k = t->c.k, ka = cx->ka, N = dist_size(), rc;
    int Sb = t->Sb, nbl = t->lb / N, q0 = dist_rank() * nbl, kc = k < Sb ? k : Sb;
    const sae_params *P = &t->P, *G = &t->G;
    int64_t BD = (int64_t)B * D, active;
    latent_candidates(t, cx, kc);
    if ((rc = latent_select(t, ka, kc, cx->lw, &active))) return rc;
    /* 3. the blocks' reconstructions [xhat part | AuxK's ehat] in the tree */
    ltree tr = {t->xpool, ka ? 2 * BD : BD, 0, {0}};
    for (int qi = 0; qi < nbl; qi++) {
        int j0 = (q0 + qi) * Sb;
        float *part = ltree_leaf(&tr);
        block_csr(t->ptr, t->idx, t->val, t->sel, B, k, j0, Sb);
        sae_k_decode_sparse(part, t->ptr, t->idx, t->val, P->W_dec + (int64_t)j0 * D, NULL, B, D);
        if (ka) {
            block_csr(t->aptr, t->aidx, t->aval, t->asel, B, ka, j0, Sb);
            sae_k_decode_sparse(part + BD, t->aptr, t->aidx, t->aval, P->W_dec + (int64_t)j0 * D,
                                NULL, B, D);
        }
        ltree_add(&tr);
    }
    float *sum = t->xpool[0];
    if (N > 1 && (rc = dist_sum_f32(sum, tr.n))) return rc;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < D; i++) t->xhat[(int64_t)b * D + i] = sum[(int64_t)b * D + i] + P->b_dec[i];
    recon_error(t, 0, B, sc);
    sae_k_colsum_add(G->b_dec, t->dxhat, B, D);
    if (ka) { /* AuxK: the dead latents' top-ka reconstruct the (detached) residual */
        const float *eh = sum + BD;
        float gs = 2.0f * cx->ca / B;
        double asse = 0;
        for (int64_t e = 0; e < BD; e++) {
            float d = eh[e] - (t->ys[e] - t->xhat[e]);
            asse += (double)d * d;
            t->ehat[e] = gs * d;
        }
        sc[SC_AUX] = asse;
    }
    prof_mark(t, SAE_PROF_DECODE);
    /* 4. the blocks' backward; their b_dec gradient through xc in the same tree */
    ltree bt = {t->bpool, D, 0, {0}};
    for (int qi = 0; qi < nbl; qi++) {
        int j0 = (q0 + qi) * Sb;
        float *gWd = G->W_dec + (int64_t)j0 * D, *gWe = G->W_encT + (int64_t)j0 * D;
        const float *Wd = P->W_dec + (int64_t)j0 * D, *We = P->W_encT + (int64_t)j0 * D;
        block_csr(t->ptr, t->idx, t->val, t->sel, B, k, j0, Sb);
        sae_k_csr_transpose(t->tptr, t->tent, t->ttok, t->ptr, t->idx, B, Sb);
        sae_k_decode_sparse_backward(gWd, t->dval, t->dxhat, t->tptr, t->tent, t->ttok, t->val, Wd,
                                     Sb, D);
        sae_k_encode_sparse_backward(gWe, G->b_enc + j0, t->dval, t->tptr, t->tent, t->ttok, t->xc,
                                     Sb, D);
        if (ka) {
            block_csr(t->aptr, t->aidx, t->aval, t->asel, B, ka, j0, Sb);
            sae_k_csr_transpose(t->atptr, t->atent, t->attok, t->aptr, t->aidx, B, Sb);
            sae_k_decode_sparse_backward(gWd, t->adval, t->ehat, t->atptr, t->atent, t->attok,
                                         t->aval, Wd, Sb, D);
            for (int64_t e = 0; e < t->aptr[B]; e++)
                if (!(t->aval[e] > 0)) t->adval[e] = 0;
            sae_k_encode_sparse_backward(gWe, G->b_enc + j0, t->adval, t->atptr, t->atent,
                                         t->attok, t->xc, Sb, D);
        }
        float *bd = ltree_leaf(&bt);
        memset(bd, 0, sizeof(float) * (size_t)D);
        sae_k_bdec_from_enc(bd, G->b_enc + j0, We, D, Sb);
        ltree_add(&bt);
    }
    prof_mark(t, SAE_PROF_ENC_BWD);
    if (N > 1 && (rc = dist_sum_f32(t->bpool[0], D))) return rc;
    for (int i = 0; i < D; i++) G->b_dec[i] = G->b_dec[i] + t->bpool[0][i];
    sc[SC_ACTIVE] = (double)active;
    return OK;
}

/* Adam on latents [lo, hi) of every latent-indexed segment and (shared) on all of the shared ones:
 * constrained decoders keep unit rows (their parallel gradient removed first), TopK's b_enc at
 * benc_lr, JumpReLU's thresholds at lr x jr_lr_mult. Elementwise and row-wise, so any split of
 * the latents gives the bits of one call over everything. */
static void adam_latents(sae_trainer *t, double lr, int64_t lo, int64_t hi, int shared)
{
    pseg sg[8];
    int ns = param_segs(t, sg);
    float b1 = (float)t->c.adam_b1, b2 = (float)t->c.adam_b2, ep = (float)t->c.adam_eps;
    int64_t st = t->step + 1;
    for (int i = 0; i < ns; i++) {
        if (!sg[i].latent && !shared) continue; /* one p for the node: rank 0 updates these */
        int64_t a = sg[i].latent ? lo : 0, b = sg[i].latent ? hi : sg[i].units;
        int64_t o = sg[i].off + a * sg[i].unit, n = (b - a) * sg[i].unit;
        if (n <= 0) continue;
        float *p = t->p + o, *g = t->g + o, *m = t->m + o, *v = t->v + o;
        float l = sg[i].kind == SEG_BENC     ? benc_lr(t, lr)
                  : sg[i].kind == SEG_THRESH ? (float)(lr * t->c.jr_lr_mult)
                                             : (float)lr;
        if (sg[i].kind == SEG_UNIT_ROWS)
            sae_k_adam_unit_rows(p, g, m, v, n, 0, (int)(b - a), (int)sg[i].unit, l, b1, b2, ep, st,
                                 t->gscale);
        else
            sae_k_adam(p, g, m, v, n, l, b1, b2, ep, st, t->gscale);
    }
}

/* Gradient-norm clipping (grad_clip > 0), torch.nn.utils.clip_grad_norm_'s rule: g scaled by
 * clip / (norm + 1e-6) where that is below 1. The norm covers every parameter as Adam will see
 * it (unit-norm decoder rows without their parallel part, which Adam removes). Called with the
 * latent gradients of [lo, hi) and the shared ones complete on this rank, the state before
 * adam_latents. The squares are summed per latent in double (sae_k_row_sums), the parts summed across ranks
 * (zeros elsewhere: exact) and added up in latent order, so any split gives the same scale.
 * The factor goes to Adam (t->gscale), which scales each gradient as it reads it: the bits of a
 * scaling pass of its own, without that read and write of the whole gradient (17 MB at the
 * small bench shape; too little to measure in its 5-step runs). */
typedef struct {
    sae_trainer *t;
    const pseg *sg;
    int ns;
    int64_t lo, hi;
} clip_args;

/* Per-latent squared norms of [lo, hi), latents split over threads (each latent's sums in one
 * thread, in sae_k_row_sums' fixed order: the bits do not depend on the thread count). */
static void clip_sq(void *arg, int tid, int64_t r0, int64_t r1)
{
    const clip_args *a = arg;
    int64_t j0 = a->lo + r0, j1 = a->lo + r1;
    const sae_trainer *t = a->t;
    for (int i = 0; i < a->ns; i++) {
        const pseg *sg = &a->sg[i];
        if (!sg->latent) continue;
        int64_t u = sg->unit;
        const float *g = t->g + sg->off, *w = t->p + sg->off;
        int unit = sg->kind == SEG_UNIT_ROWS;
        for (int64_t j = j0; j < j1; j++) {
            double gg, gw, ww;
            sae_k_row_sums(&gg, unit ? &gw : NULL, &ww, g + j * u, w + j * u, u);
            if (unit && ww > 0) gg = fmax(gg - gw * gw / ww, 0);
            t->sq[j] += gg;
        }
    }
}

static int clip_grad(sae_trainer *t, int64_t lo, int64_t hi, sae_step_stats *st)
{
    pseg sg[8];
    int ns = param_segs(t, sg), rc = OK;
    int64_t S = t->S;
    memset(t->sq, 0, sizeof(double) * (size_t)S);
    double shared = 0;
    for (int i = 0; i < ns; i++)
        if (!sg[i].latent)
            for (int64_t e = 0; e < sg[i].units * sg[i].unit; e++)
                shared += (double)t->g[sg[i].off + e] * t->g[sg[i].off + e];
    /* one thread below ~1M elements of gradient (thread start-up would dominate) */
    int nt = (hi - lo) * (t->D + t->Do) < (1 << 20) ? 1 : par_threads();
    clip_args a = {.t = t, .sg = sg, .ns = ns, .lo = lo, .hi = hi};
    par_for(clip_sq, &a, hi - lo, 64, nt); /* 64 latents a range, handed out dynamically */
    if (dist_size() > 1 && (rc = dist_sum_f64(t->sq, S))) return rc;
    double tot = shared;
    for (int64_t j = 0; j < S; j++) tot += t->sq[j];
    double norm = sqrt(tot), cf = t->c.grad_clip / (norm + 1e-6);
    st->grad_norm = norm;
    if (!(cf < 1)) return OK;
    st->clipped = 1;
    t->gscale = (float)cf;
    return OK;
}

/* Data parallel, more than one rank: the latent segments' gradients summed into this rank's
 * part only (dist_sum_part_f32, the same tree as dist_sum_f32), the shared ones everywhere. */
static int zero_sum(sae_trainer *t)
{
    pseg sg[8];
    int ns = param_segs(t, sg), rc = OK;
    /* node-shared g: every rank's gradient complete here; sae_trainer_step sums each part in
       chunks just before their Adam (shm_sum_adam), while they are in cache */
    if (t->gshm) dist_shm_sync(t->gshm, NULL);
    for (int i = 0; i < ns && !rc; i++)
        if (!sg[i].latent) rc = dist_sum_f32(t->g + sg[i].off, sg[i].units * sg[i].unit);
        else if (!t->gshm) rc = dist_sum_part_f32(t->g + sg[i].off, sg[i].units, sg[i].unit);
    return rc;
}

/* Node-shared g and p: this rank's part [lo, hi) of the latents summed from every rank's
 * gradient (dist_shm_sum_part, the tree of dist_sum_f32) and (adam) updated by Adam, SHM_CHUNK
 * latents at a time so that Adam reads the sums from cache; then the shared segments on rank 0.
 * adam = 0 (gradient clipping, which needs the whole norm first): the sums only. */
enum { SHM_CHUNK = 64 };
static void shm_sum_adam(sae_trainer *t, double lr, int64_t lo, int64_t hi, int adam)
{
    pseg sg[8];
    int ns = param_segs(t, sg);
    for (int64_t c0 = lo; c0 < hi; c0 += SHM_CHUNK) {
        int64_t c1 = hi - c0 < SHM_CHUNK ? hi : c0 + SHM_CHUNK;
        for (int i = 0; i < ns; i++)
            if (sg[i].latent)
                dist_shm_sum_part(t->gshm, sg[i].off + c0 * sg[i].unit, sg[i].off + c1 * sg[i].unit);
        if (adam) adam_latents(t, lr, c0, c1, 0);
    }
    if (adam) adam_latents(t, lr, 0, 0, dist_is_root());
}

/* sae_trainer_bcast, data parallel: g and p move into node-shared windows when every rank is on
 * one node (dist_shm_new; otherwise nothing changes and the message path runs). Collective. */
enum { SHM_KEY_G = 0x5347, SHM_KEY_P = 0x5350 };
static int shm_attach(sae_trainer *t)
{
    t->shm_tried = 1;
    size_t bytes = sizeof(float) * (size_t)t->np;
    int rc = dist_shm_new(&t->gshm, bytes, SHM_KEY_G);
    if (!rc && t->gshm) rc = dist_shm_new(&t->pshm, dist_is_root() ? bytes : 0, SHM_KEY_P);
    if (rc || !t->pshm) {
        dist_shm_release(t->gshm);
        t->gshm = NULL;
        return rc;
    }
    float *g = dist_shm_seg(t->gshm, dist_rank()), *p = dist_shm_seg(t->pshm, 0);
    memcpy(g, t->g, bytes);
    if (dist_is_root()) memcpy(p, t->p, bytes); /* every rank holds the same p: rank 0's */
    dist_shm_sync(t->pshm, t->gshm);
    mem_free_aligned(t->g);
    mem_free_aligned(t->p);
    t->g = g;
    t->p = p;
    set_views(t, t->p, &t->P);
    set_views(t, t->g, &t->G);
    return OK;
}

/* After adam_latents on this rank's part [lo, hi): every rank's part of the parameters to every
 * rank, and the rest of g (partial sums Adam did not clear) back to zero for the next step. */
static int zero_gather(sae_trainer *t, int64_t lo, int64_t hi)
{
    pseg sg[8];
    int ns = param_segs(t, sg), rc = OK;
    if (t->pshm) {
        /* one p for the node, written in disjoint parts; the other ranks zeroed this rank's g
           outside its part in the sum; the shared segments' gradient only rank 0 used */
        for (int i = 0; i < ns && !dist_is_root(); i++)
            if (!sg[i].latent) memset(t->g + sg[i].off, 0, sizeof(float) * (size_t)(sg[i].units * sg[i].unit));
        dist_shm_sync(t->pshm, t->gshm);
        return OK;
    }
    for (int i = 0; i < ns && !rc; i++) {
        if (!sg[i].latent) continue;
        float *g = t->g + sg[i].off;
        int64_t u = sg[i].unit;
        memset(g, 0, sizeof(float) * (size_t)(lo * u));
        memset(g + hi * u, 0, sizeof(float) * (size_t)((sg[i].units - hi) * u));
        rc = dist_gather_part_f32(t->p + sg[i].off, sg[i].units, u);
    }
    return rc;
}

/* ReLU and JumpReLU with few active latents: after the encoder GEMM, the step runs on the active
 * entries only, as TopK's does (CSR decode, transposed scatters for both gradients), instead of
 * three more dense GEMMs over mostly zeros. JumpReLU's threshold gradient also reads the
 * inactive entries within the kernel's window: their dxhat . W_dec[j] is taken one by one. The
 * same gradient as dense_leaf up to the order of float sums. Returns 0 (nothing done) when the
 * entries it needs pass n S / SPARSE_STEP_DIV. */
static int few_active_leaf(sae_trainer *t, const step_ctx *cx, int64_t r0, int n, double *sc)
{
    int B = t->B, D = t->D, Do = t->Do, S = t->S, jr = t->c.arch == SAE_JUMPRELU;
    const sae_params *P = &t->P, *G = &t->G;
    float *xc = t->xc + r0 * D, *xhat = t->xhat + r0 * Do, *dxhat = t->dxhat + r0 * Do;
    const float *pre = t->pre + r0 * S;
    const float eps = (float)t->c.jr_bandwidth;
    float *th = t->th;
    if (jr)
        for (int j = 0; j < S; j++) th[j] = expf(P->log_threshold[j]);
    int64_t cap = (int64_t)n * S / SPARSE_STEP_DIV, nnz = 0, nw = 0;
    int64_t *ptr = t->ptr;
    ptr[0] = 0;
    for (int b = 0; b < n; b++) {
        const float *pr = pre + (int64_t)b * S;
        if (!jr) {
            for (int j = 0; j < S; j++)
                if (pr[j] > 0) {
                    if (nnz == cap) return 0;
                    t->idx[nnz] = j;
                    t->val[nnz++] = pr[j];
                }
        } else
            for (int j = 0; j < S; j++) {
                float v = pr[j];
                if (v > th[j] && v > 0) {
                    if (nnz + nw == cap) return 0;
                    t->idx[nnz] = j;
                    t->val[nnz++] = v;
                } else if (fabsf((v - th[j]) / eps) < 0.5f) {
                    if (nnz + nw == cap) return 0;
                    t->wtok[nw] = b;
                    t->widx[nw++] = j;
                }
            }
        ptr[b + 1] = nnz;
    }
    for (int64_t e = 0; e < nnz; e++) t->fired[t->idx[e]] = 1;
    sae_k_decode_sparse(xhat, ptr, t->idx, t->val, P->W_dec, P->b_dec, n, Do);
    skip_forward(t, r0, n);
    recon_error(t, r0, n, sc);
    sae_k_colsum_add(G->b_dec, dxhat, n, Do);
    skip_backward(t, r0, n);
    sae_k_csr_transpose(t->tptr, t->tent, t->ttok, ptr, t->idx, n, S);
    /* dval = dxhat . W_dec[j] at the active entries, before the L1 term moves G->W_dec */
    sae_k_decode_sparse_backward(G->W_dec, t->dval, dxhat, t->tptr, t->tent, t->ttok, t->val,
                                 P->W_dec, S, Do);
    float cB = (float)(cx->coef / B);
    if (!jr) {
        sc[SC_SPARSE] = l1_norm_term(t, cx->coef, NULL, n, t->tptr, t->tent, t->val);
        for (int64_t e = 0; e < nnz; e++) t->dval[e] += cB * t->nrm[t->idx[e]];
    } else {
        /* the straight-through estimators of dense_leaf, at the active entries in the window
           and at the inactive ones gathered above */
        float *gl = G->log_threshold;
        for (int64_t e = 0; e < nnz; e++) { /* row by row, as dense_leaf */
            int j = t->idx[e];
            if (fabsf((t->val[e] - th[j]) / eps) < 0.5f)
                gl[j] += th[j] * (t->dval[e] * (-th[j] / eps) + cB * (-1.0f / eps));
        }
        for (int64_t q = 0; q < nw; q++) {
            int j = t->widx[q];
            float df = dot_lanes(dxhat + (int64_t)t->wtok[q] * Do, P->W_dec + (int64_t)j * Do, Do);
            gl[j] += th[j] * (df * (-th[j] / eps) + cB * (-1.0f / eps));
        }
        sc[SC_SPARSE] = cx->coef / B * (double)nnz;
    }
    sae_k_encode_sparse_backward(G->W_encT, G->b_enc, t->dval, t->tptr, t->tent, t->ttok, xc, S, D);
    sc[SC_ACTIVE] = (double)nnz;
    return 1;
}

/* ReLU + L1 and JumpReLU on rows [r0, r0+n): dense decoder and gradients (cblas_sgemm), or
 * few_active_leaf's sparse form once few latents are active. */
static void dense_leaf(sae_trainer *t, const step_ctx *cx, int64_t r0, int n, double *sc)
{
    int B = t->B, D = t->D, Do = t->Do, S = t->S;
    const sae_params *P = &t->P, *G = &t->G;
    const float *bsub = t->tc ? t->zero_in : P->b_dec;
    float *xs = t->xs + r0 * D, *xc = t->xc + r0 * D, *xhat = t->xhat + r0 * Do;
    float *dxhat = t->dxhat + r0 * Do;
    float *pre = t->pre + r0 * S, *f = t->fbuf + r0 * S;
    int64_t BS = (int64_t)n * S, active = 0;
    double coef = cx->coef, sparsity_loss = 0;
    sae_k_encode(pre, xc, xs, P->W_encT, P->b_enc, bsub, n, D, S);
    if (!t->reference_steps && few_active_leaf(t, cx, r0, n, sc)) return;
    const float *lt = P->log_threshold;
    for (int64_t e = 0; e < BS; e++) {
        float v = pre[e], th = lt ? expf(lt[e % S]) : 0;
        f[e] = (v > th && v > 0) ? v : 0;
        if (f[e] > 0) {
            active++;
            t->fired[e % S] = 1;
        }
    }
    for (int b = 0; b < n; b++) memcpy(xhat + (int64_t)b * Do, P->b_dec, sizeof(float) * Do);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, Do, S, 1.0f, f, S, P->W_dec, Do,
                1.0f, xhat, Do);
    skip_forward(t, r0, n);
    recon_error(t, r0, n, sc);
    sae_k_colsum_add(G->b_dec, dxhat, n, Do);
    skip_backward(t, r0, n);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, S, Do, n, 1.0f, f, S, dxhat, Do,
                1.0f, G->W_dec, Do);
    float cB = (float)(coef / B);
    /* L1 weighted by decoder norms: coef/B * sum_b sum_j f_bj ||W_dec,j|| */
    if (t->c.arch == SAE_RELU) sparsity_loss = l1_norm_term(t, coef, f, n, NULL, NULL, NULL);
    /* df = dxhat @ W_dec^T, overwriting f */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, S, Do, 1.0f, dxhat, Do, P->W_dec,
                Do, 0.0f, f, S);
    if (t->c.arch == SAE_RELU) {
        for (int64_t e = 0; e < BS; e++) {
            f[e] = pre[e] > 0 ? f[e] + cB * t->nrm[e % S] : 0;
        }
    } else {
        /* JumpReLU straight-through estimators (rectangle kernel of width eps):
           d f / d theta := -(theta/eps) K, d H / d theta := -(1/eps) K; log-parametrised. */
        float eps = (float)t->c.jr_bandwidth;
        for (int64_t e = 0; e < BS; e++) {
            int j = (int)(e % S);
            float th = expf(lt[j]), v = pre[e];
            if (v > th) sparsity_loss += coef / B;
            if (fabsf((v - th) / eps) < 0.5f)
                G->log_threshold[j] += th * (f[e] * (-th / eps) + cB * (-1.0f / eps));
            f[e] = v > th ? f[e] : 0;
        }
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, S, D, n, 1.0f, f, S, xc, D, 1.0f,
                G->W_encT, D);
    sae_k_colsum_add(G->b_enc, f, n, S);
    sc[SC_SPARSE] = sparsity_loss;
    sc[SC_ACTIVE] = (double)active;
}

static int nscal(const sae_trainer *t) { return SC_COL + t->Do; }

/* Buffers for a rank's leaf tree: log2(leaves per rank) gradients besides t->g, and one scalar
 * row per tree depth. */
static int tree_alloc(sae_trainer *t, int depth)
{
    if (t->tree_depth >= depth) return OK;
    for (int d = 0; d < depth - 1; d++)
        if (!t->gpool[d] && !(t->gpool[d] = zalloc(t->np)))
            return err_set(ERR_NOMEM, "SAE trainer: out of memory for the micro-batch gradients");
    double *s = mem_realloc(t->spool, sizeof(double) * (size_t)depth * nscal(t));
    if (!s) return err_set(ERR_NOMEM, "SAE trainer: out of memory");
    t->spool = s;
    t->tree_depth = depth;
    return OK;
}

static int zero_sum(sae_trainer *t);

/* Forward + backward into t->g (which must be zero). Fills t->fired and stats. part (data
 * parallel, more than one rank): the latent gradients are summed only into this rank's part
 * (zero_sum), for sae_trainer_step's sharded Adam; otherwise every rank gets all of g. */
static int forward_backward(sae_trainer *t, const float *x, sae_step_stats *st, int part)
{
    int B = t->B, D = t->D, Do = t->Do, S = t->S, N = dist_size();
    /* latent blocks: every rank takes the whole batch (one leaf) and its blocks of latents */
    int shard = t->lb > 1, NR = shard ? 1 : N; /* NR: the ranks that split the rows */
    if (shard && t->lb % N)
        return err_set(ERR_ARG, "world size %d does not divide the %d latent blocks", N, t->lb);
    if (t->mb % NR)
        return err_set(ERR_ARG, "world size %d does not divide the %d micro-batches", N, t->mb);
    int L = t->mb / NR, nb = B / t->mb, depth = 1, rc;
    while ((1 << (depth - 1)) < L) depth++;
    rc = tree_alloc(t, depth); /* agreed below, before the first collective */
    int64_t R0 = shard ? 0 : (int64_t)dist_rank() * L * nb, RN = (int64_t)L * nb;
    float sc = (float)t->scale;
    if (t->prof) t->prof_t = now_seconds();
    if (t->tc) { /* paired rows [x | y]: the input and the target, each with its own scale */
        float so = (float)t->scale_out;
        for (int64_t b = R0; b < R0 + RN; b++) {
            const float *r = x + b * (D + Do);
            for (int i = 0; i < D; i++) t->xs[b * D + i] = r[i] * sc;
            for (int i = 0; i < Do; i++) t->ys[b * Do + i] = r[D + i] * so;
        }
    } else
        sae_k_scale(t->xs + R0 * D, x + R0 * D, sc, RN * D);
    memset(t->fired, 0, S);
    prof_mark(t, SAE_PROF_INPUT);
    step_ctx cx;
    memset(&cx, 0, sizeof cx);
    cx.coef = sparsity_coef(t);
    cx.kept_min = INFINITY;
    cx.global = t->mb > 1 || N > 1;
    if (is_sparse(t->c.arch)) {
        if (t->c.aux_coef > 0)
            for (int j = 0; j < S; j++)
                if (t->since[j] >= t->dead_window) t->dead[cx.nd++] = j;
        cx.ka = cx.nd < t->kaux ? cx.nd : t->kaux;
        /* OpenAI's normalised AuxK (topk, batchtopk, matryoshka), aux_coef * ||e - ehat||^2 /
           ||e||^2 against the normalised MSE ||e||^2 / var(x); relative to this trainer's plain MSE that is
           aux_coef / (1 - EV) * ||e - ehat||^2, with the EV of the previous step (known before
           the leaves run, so the same for any split into micro-batches and ranks). SAELens'
           aux_coef * min(1, n_dead / k_aux) * ||e - ehat||^2 is ~30x weaker at EV 0.97 and left
           the latents AuxK revives off the missing features (issue 22, docs/sae.md). */
        cx.ca = (float)(t->c.aux_coef * t->aux_norm);
    }
    if (!rc && shard) rc = latent_prepare(t, &cx);
    /* What can fail on one rank alone (the allocations above) is agreed before the step's first
       collective, so every rank returns the same code (the failing rank's message, "rank R: ")
       instead of the others waiting in a collective the failed rank never enters. Past this
       point a step fails on every rank alike (the collectives agree on their own allocations;
       the loss is the same bits everywhere). One 4-byte all-reduce; nothing with one rank. */
    if ((rc = dist_check(rc))) return rc;
    if (is_batchtopk(t->c.arch) && cx.global) {
        /* the batch-global selections need every leaf's pre-activations first */
        const float *bsub = t->tc ? t->zero_in : t->P.b_dec;
        for (int l = 0; l < L; l++) {
            int64_t r = R0 + (int64_t)l * nb;
            sae_k_encode(t->pre + r * S, t->xc + r * D, t->xs + r * D, t->P.W_encT, t->P.b_enc,
                         bsub, nb, D, S);
        }
        int64_t kB = (int64_t)t->c.k * B;
        rc = global_kth(&cx.thr, t->pre, R0, RN, S, S, kB, t->scratch);
        for (int l = 0; !rc && t->c.mat_levels == SAE_MAT_OWN && l + 1 < t->c.n_widths; l++)
            rc = global_kth(&cx.lthr[l], t->pre, R0, RN, S, t->c.widths[l], kB, t->scratch);
        if (rc) return rc;
    }
    /* the leaves, summed as a binary counter: slot d holds a partial sum of 2^lv[d] leaves */
    int ns = nscal(t), top = 0, lv[32];
    for (int l = 0; l < L; l++) {
        float *gb = top == 0 ? t->g : t->gpool[top - 1];
        double *sb = t->spool + (int64_t)top * ns;
        if (top) memset(gb, 0, sizeof(float) * (size_t)t->np);
        memset(sb, 0, sizeof(double) * (size_t)ns);
        set_views(t, gb, &t->G);
        int64_t r0 = R0 + (int64_t)l * nb;
        if (shard) {
            if ((rc = latent_leaf(t, &cx, sb))) return rc;
        } else if (t->c.arch == SAE_GATED) gated_leaf(t, &cx, r0, nb, sb);
        else if (is_sparse(t->c.arch)) sparse_leaf(t, &cx, r0, nb, sb);
        else dense_leaf(t, &cx, r0, nb, sb);
        /* gradient through xc = x - b_dec: db_dec -= (sum_b dpre_b) @ W_encT (the leaf's g
           started at zero, so G->b_enc holds exactly its sum; gated and latent_leaf did their
           own) */
        if (!t->tc && t->c.arch != SAE_GATED && !shard)
            sae_k_bdec_from_enc(t->G.b_dec, t->G.b_enc, t->P.W_encT, D, S);
        lv[top++] = 0;
        while (top >= 2 && lv[top - 1] == lv[top - 2]) {
            float *a = top == 2 ? t->g : t->gpool[top - 3], *b = t->gpool[top - 2];
            for (int64_t i = 0; i < t->np; i++) a[i] = a[i] + b[i];
            double *sa = t->spool + (int64_t)(top - 2) * ns, *sbb = sa + ns;
            for (int i = 0; i < ns; i++) sa[i] = sa[i] + sbb[i];
            lv[top - 2]++;
            top--;
        }
    }
    set_views(t, t->g, &t->G);
    prof_mark(t, SAE_PROF_OTHER);
    double *s = t->spool;
    if (N > 1 && !shard) { /* latent_leaf's sums and selections are already every rank's */
        rc = part ? zero_sum(t) : dist_sum_f32(t->g, t->np);
        if (!rc) rc = dist_sum_f64(s, ns);
        if (!rc) rc = dist_max_u8(t->fired, S);
        if (!rc && is_batchtopk(t->c.arch)) rc = dist_min_f32(&cx.kept_min, 1);
        if (rc) return rc;
    }
    /* the running threshold moves in sae_trainer_step only: sae_trainer_loss_grad before a
       step counted its batch twice (audit) */
    if (is_batchtopk(t->c.arch)) t->thr_batch = isinf(cx.kept_min) ? 0 : cx.kept_min;
    double sse = s[SC_SSE], recon_loss = sse / B, aux_loss = 0;
    st->mse = sse / ((double)B * Do);
    st->ev = explained_variance(t, s);
    st->l0 = s[SC_ACTIVE] / B;
    st->sparsity_coef = cx.coef;
    if (t->c.arch == SAE_GATED) {
        st->aux_loss = s[SC_AUX] / B;
        st->loss = sse / B + s[SC_SPARSE] + s[SC_AUX] / B;
        return OK;
    }
    if (t->c.arch == SAE_MATRYOSHKA) {
        double lsum = 0;
        for (int l = 0; l + 1 < t->c.n_widths; l++) lsum += s[SC_LVL + l] / B;
        recon_loss += lsum;
    }
    if (cx.ka) aux_loss = cx.ca * s[SC_AUX] / B;
    st->aux_loss = aux_loss;
    st->loss = recon_loss + s[SC_SPARSE] + aux_loss;
    return OK;
}

void sae_trainer_test_unfreeze(sae_trainer *t, int on) { t->gated_unfrozen = on; }
void sae_trainer_test_reference_steps(sae_trainer *t, int on) { t->reference_steps = on; }

int sae_trainer_loss_grad(sae_trainer *t, const float *x, sae_step_stats *st)
{
    memset(st, 0, sizeof *st);
    return forward_backward(t, x, st, 0);
}

int sae_trainer_step(sae_trainer *t, const float *x, sae_step_stats *stp)
{
    sae_step_stats st;
    memset(&st, 0, sizeof st);
    /* data parallel over ranks: each rank runs Adam on its part of the latents only, then the
       parts are copied to every rank (ZeRO-1: the same bytes sent as one all-reduce, half the
       Adam work per rank at -np 2; elementwise and row-wise, so the same bits as one process) */
    int part = dist_size() > 1 && t->lb <= 1; /* shared memory: attached by sae_trainer_bcast */
    int rc = forward_backward(t, x, &st, part);
    if (rc) return rc;
    if (is_batchtopk(t->c.arch))
        /* rate 0.1, not SAELens' 0.01: the batch threshold keeps falling all through a run
           of 10^3 steps, and a 100-step average lagged enough to give L0 26 instead of k 32
           at inference (docs/sae.md); one batch's k*B-th value is already a tight estimate */
        t->thr_run = t->step == 0 ? t->thr_batch : 0.9f * t->thr_run + 0.1f * t->thr_batch;
    if (!isfinite(st.loss))
        return err_set(ERR_ARG, "loss became %g at step %lld (lower --lr?)", st.loss,
                       (long long)t->step);
    if (is_sparse(t->c.arch)) t->aux_norm = (float)(1.0 / fmax(1.0 - st.ev, 1e-6));
    prof_mark(t, SAE_PROF_OTHER);
    double lr = lr_at(t);
    int64_t lo = 0, hi = t->S;
    t->gscale = 1.0f;
    if (t->lb > 1) { /* latent shards: this rank's blocks */
        lo = (int64_t)dist_rank() * (t->S / dist_size());
        hi = lo + t->S / dist_size();
    } else if (part)
        dist_tree_part(t->S, dist_rank(), &lo, &hi);
    if (t->c.grad_clip > 0) {
        if (t->gshm) shm_sum_adam(t, lr, lo, hi, 0);
        if ((rc = clip_grad(t, lo, hi, &st))) return rc;
        adam_latents(t, lr, lo, hi, !t->gshm);
        if (t->gshm) adam_latents(t, lr, 0, 0, dist_is_root());
    } else if (t->gshm) shm_sum_adam(t, lr, lo, hi, 1);
    else adam_latents(t, lr, lo, hi, 1);
    if (part && (rc = zero_gather(t, lo, hi))) return rc;
    prof_mark(t, SAE_PROF_ADAM);
    int64_t ndead = 0;
    for (int j = 0; j < t->S; j++) {
        t->since[j] = t->fired[j] ? 0 : t->since[j] + t->B;
        if (t->since[j] >= t->dead_window) ndead++;
    }
    /* a threshold past exp's float range fires nothing, so the loss stays finite: without this
       a diverged JumpReLU trained on and its checkpoint held it (an audit, --jr-lr-mult 1e30) */
    if (t->c.arch == SAE_JUMPRELU)
        for (int j = 0; j < t->S; j++)
            if (!(t->P.log_threshold[j] < 80.0f))
                return err_set(ERR_ARG, "training diverged: latent %d's threshold became exp(%g) at "
                               "step %lld (lower --lr or --jr-lr-mult?)", j, t->P.log_threshold[j],
                               (long long)t->step);
    prof_mark(t, SAE_PROF_DEAD);
    t->step++;
    t->tokens += t->B;
    st.step = t->step;
    st.tokens = t->tokens;
    st.lr = lr;
    st.dead_frac = (double)ndead / t->S;
    if (stp) *stp = st;
    return OK;
}

int sae_trainer_export(const sae_trainer *t, const sae_config *meta, sae_model **out)
{
    sae_config cfg;
    memset(&cfg, 0, sizeof cfg);
    if (meta) cfg = *meta;
    cfg.arch = t->c.arch;
    cfg.d_in = t->D;
    cfg.d_sae = t->S;
    cfg.k = is_sparse(t->c.arch) ? t->c.k : 0;
    cfg.n_widths = t->c.n_widths;
    memcpy(cfg.widths, t->c.widths, sizeof cfg.widths);
    cfg.transcoder = t->tc;
    cfg.d_out = t->tc ? t->Do : 0;
    sae_model *s;
    int rc = sae_model_new(&s, &cfg);
    if (rc) return rc;
    int D = t->D, S = t->S, Do = t->Do;
    /* raw units: x = xs / scale, y = ys / scale_out (= scale for SAEs); f_raw = f n / scale_out */
    float inv = (float)(1.0 / t->scale_out);
    float io = (float)(t->scale / t->scale_out); /* transcoders: the input side's extra factor */
    for (int j = 0; j < S; j++) {
        const float *wd = t->P.W_dec + (int64_t)j * Do, *we = t->P.W_encT + (int64_t)j * D;
        double nn = 0;
        for (int i = 0; i < Do; i++) nn += (double)wd[i] * wd[i];
        nn = sqrt(nn);
        float n = nn > 0 ? (float)nn : 1.0f;
        for (int i = 0; i < Do; i++) s->W_dec[(int64_t)j * Do + i] = wd[i] / n;
        for (int i = 0; i < D; i++) s->W_enc[(int64_t)i * S + j] = t->tc ? we[i] * (n * io) : we[i] * n;
        s->b_enc[j] = t->P.b_enc[j] * n * inv;
        if (t->c.arch == SAE_JUMPRELU) s->threshold[j] = expf(t->P.log_threshold[j]) * n * inv;
        if (is_batchtopk(t->c.arch)) s->threshold[j] = t->thr_run * n * inv;
        if (t->c.arch == SAE_GATED) { /* exp(r_mag) scales W_enc, so r_mag needs no fold */
            s->b_mag[j] = t->P.b_mag[j] * n * inv;
            s->r_mag[j] = t->P.r_mag[j];
        }
    }
    for (int i = 0; i < Do; i++) s->b_dec[i] = t->P.b_dec[i] * inv;
    if (s->W_skip)
        for (int64_t e = 0; e < (int64_t)Do * D; e++) s->W_skip[e] = t->P.W_skip[e] * io;
    /* the loss stays finite when a diverged JumpReLU's thresholds overflow (nothing fires), and
       its file held +inf thresholds with exit 0 (an audit): no such file is written */
    const struct { const char *name; const float *v; int64_t n; } arr[] = {
        {"W_enc", s->W_enc, (int64_t)D * S}, {"b_enc", s->b_enc, S}, {"W_dec", s->W_dec, (int64_t)S * Do},
        {"b_dec", s->b_dec, Do}, {"threshold", s->threshold, S}, {"b_mag", s->b_mag, S},
        {"r_mag", s->r_mag, S}, {"W_skip", s->W_skip, (int64_t)Do * D}};
    for (size_t a = 0; a < sizeof arr / sizeof *arr; a++) {
        int64_t e = arr[a].v ? ck_first_nonfinite(arr[a].v, arr[a].n) : -1;
        if (e >= 0) {
            rc = err_set(ERR_ARG, "training diverged: %s[%lld] is %g at step %lld (lower --lr%s?)",
                         arr[a].name, (long long)e, arr[a].v[e], (long long)t->step,
                         t->c.arch == SAE_JUMPRELU ? " or --jr-lr-mult" : "");
            sae_free(s);
            return rc;
        }
    }
    *out = s;
    return OK;
}

int sae_micro_batches_check(int batch, int m)
{
    int n = dist_size();
    if (m < 1 || !dist_pow2(m))
        return err_set(ERR_ARG, "--micro-batches %d must be a power of two", m);
    if (batch % m)
        return err_set(ERR_ARG, "--batch %d is not a multiple of --micro-batches %d", batch, m);
    if (!dist_pow2(n))
        return err_set(ERR_ARG, "world size %d (mpirun -np) is not a power of two (the fixed "
                                "summation tree needs 1, 2, 4, 8, ... ranks)", n);
    if (m % n)
        return err_set(ERR_ARG, "world size %d (mpirun -np) does not divide --micro-batches %d "
                                "(give --micro-batches %d or more: the weights depend on it, not "
                                "on the world size)", n, m, n);
    return OK;
}

int sae_trainer_set_micro_batches(sae_trainer *t, int m)
{
    int rc = sae_micro_batches_check(t->B, m);
    if (rc) return rc;
    /* latent blocks run one leaf over the whole batch: more leaves would add it mb times */
    if (m > 1 && t->lb > 1) return sae_latent_blocks_check(&t->c, m, t->lb, dist_size());
    t->mb = m;
    return OK;
}

int sae_trainer_micro_batches(const sae_trainer *t) { return t->mb; }

void sae_trainer_rows(const sae_trainer *t, int *r0, int *n)
{
    if (t->lb > 1) { /* every latent shard sees the whole batch */
        *r0 = 0;
        *n = t->B;
        return;
    }
    int N = dist_size(), L = t->mb % N ? t->mb : t->mb / N, nb = t->B / t->mb;
    *r0 = t->mb % N ? 0 : dist_rank() * L * nb;
    *n = L * nb;
}

int sae_latent_blocks_check(const sae_train_config *c, int mb, int lb, int shards)
{
    int n = dist_size();
    if (lb == 1 && shards == 1) return OK;
    if (c->arch != SAE_TOPK || c->transcoder)
        return err_set(ERR_ARG, "--latent-shards/--latent-blocks need --arch topk: its per-token "
                                "top-k splits exactly over blocks of latents (%s is not split)",
                       c->transcoder ? "a transcoder" : sae_arch_name(c->arch));
    if (mb > 1)
        return err_set(ERR_ARG, "--latent-shards/--latent-blocks with --micro-batches %d (replicas x "
                                "latent shards) is not implemented: use one or the other", mb);
    if (lb < 1 || !dist_pow2(lb))
        return err_set(ERR_ARG, "--latent-blocks %d must be a power of two", lb);
    if (shards < 1 || !dist_pow2(shards) || lb % shards)
        return err_set(ERR_ARG, "--latent-shards %d must be a power of two dividing --latent-blocks "
                                "%d", shards, lb);
    if (n != shards)
        return err_set(ERR_ARG, "--latent-shards %d needs mpirun -np %d (world size %d: give "
                                "--latent-shards %d)", shards, shards, n, n);
    return OK;
}

int sae_trainer_set_latent_blocks(sae_trainer *t, int lb)
{
    if (lb == t->lb) return OK;
    if (t->pshm) /* data-parallel steps moved p into one node-shared copy (shm_attach) */
        return err_set(ERR_ARG, "latent blocks must be set before the first data-parallel step");
    int rc = sae_latent_blocks_check(&t->c, t->mb, lb, dist_size());
    if (rc) return rc;
    if (lb > t->S || t->S % lb)
        return err_set(ERR_ARG, "d_sae %d is not a multiple of --latent-blocks %d", t->S, lb);
    /* the block buffers were sized for the old count at its first step: the next step
       allocates them anew for lb */
    latent_free(t);
    mem_free(t->cand);
    mem_free(t->gcand);
    t->cand = t->gcand = NULL;
    t->ccap = 0;
    t->lb = lb;
    return OK;
}

int sae_trainer_latent_blocks(const sae_trainer *t) { return t->lb; }

/* this rank's part [off, off+n) of p, m, v (`arrays` of them from `first`) to rank 0, or rank r's
   from it, in messages of at most 2^28 floats */
static int gather_range(sae_trainer *t, int first, int arrays, int r, int64_t off, int64_t n)
{
    float *arr[3] = {t->p, t->m, t->v};
    for (int a = first; a < first + arrays; a++)
        for (int64_t o = 0; o < n; o += 1 << 28) {
            int64_t c = n - o < (1 << 28) ? n - o : (1 << 28);
            float *b = arr[a] + off + o;
            int rc = dist_is_root() ? dist_recv(b, sizeof(float) * (size_t)c, r, 0x5a, NULL)
                                    : dist_send(b, sizeof(float) * (size_t)c, 0, 0x5a);
            if (rc) return rc;
        }
    return OK;
}

static int gather(sae_trainer *t, int arrays)
{
    int N = dist_size(), me = dist_rank(), rc = OK;
    if (N == 1 || t->gathered == t->step) return OK;
    if (t->lb <= 1) {
        /* data parallel: every rank holds all parameters after a step (zero_gather); the Adam
           moments of each latent only on the rank whose part it is */
        if (arrays == 1) return OK;
        pseg sg[8];
        int ns = param_segs(t, sg);
        for (int r = 1; r < N && !rc; r++) {
            if (me != 0 && me != r) continue;
            int64_t lo, hi;
            dist_tree_part(t->S, r, &lo, &hi);
            for (int i = 0; i < ns && !rc; i++)
                if (sg[i].latent)
                    rc = gather_range(t, 1, 2, r, sg[i].off + lo * sg[i].unit, (hi - lo) * sg[i].unit);
        }
        if (!rc) t->gathered = t->step;
        return rc;
    }
    int64_t S = t->S, D = t->D, Sl = S / N;
    for (int r = 1; r < N && !rc; r++) {
        if (me != 0 && me != r) continue;
        int64_t j0 = r * Sl;
        rc = gather_range(t, 0, arrays, r, j0 * D, Sl * D); /* W_encT rows */
        if (!rc) rc = gather_range(t, 0, arrays, r, S * D + j0 * D, Sl * D); /* W_dec rows */
        if (!rc) rc = gather_range(t, 0, arrays, r, 2 * S * D + j0, Sl);     /* b_enc */
    }
    if (!rc && arrays == 3) t->gathered = t->step;
    return rc;
}

int sae_trainer_gather(sae_trainer *t) { return gather(t, 3); }
int sae_trainer_gather_params(sae_trainer *t) { return gather(t, 1); }

int sae_trainer_bcast(sae_trainer *t)
{
    if (dist_size() == 1) return OK;
    struct {
        int64_t step, tokens;
        double scale, scale_out;
        float thr_run, aux_norm;
        int mb;
    } h = {t->step, t->tokens, t->scale, t->scale_out, t->thr_run, t->aux_norm, t->mb};
    int rc = dist_bcast(&h, sizeof h);
    /* data parallel on one node: p becomes one node-shared copy, rank 0's (shm_attach), here
       rather than in the first step so the timed steps do not pay its page faults */
    if (!rc && t->lb <= 1 && !t->shm_tried) rc = dist_check(shm_attach(t));
    if (!rc && !t->pshm) rc = dist_bcast(t->p, sizeof(float) * (size_t)t->np); /* shared: one copy */
    if (!rc) rc = dist_bcast(t->m, sizeof(float) * (size_t)t->np);
    if (!rc) rc = dist_bcast(t->v, sizeof(float) * (size_t)t->np);
    if (!rc) rc = dist_bcast(t->since, sizeof(int64_t) * (size_t)t->S);
    if (rc) return rc;
    t->step = h.step;
    t->tokens = h.tokens;
    t->scale = h.scale;
    t->scale_out = h.scale_out;
    t->thr_run = h.thr_run;
    t->aux_norm = h.aux_norm;
    t->mb = h.mb;
    t->gathered = t->step; /* every rank holds rank 0's state, every latent */
    return OK;
}

/* ---- checkpoints ---------------------------------------------------------------------- */
#define CKPT_MAGIC "SAECKPT1"

typedef struct {
    char magic[8];
    uint32_t cfg_size, pad;
    int64_t step, tokens, np, S;
    double scale;
    float thr_run;
    uint32_t lblocks; /* latent blocks (0: one, the bytes of old files) */
} ckpt_header;

int sae_trainer_checkpoint(const sae_trainer *t, const char *path)
{
    file_atomic out;
    int rc = file_atomic_open(&out, path);
    if (rc) return rc;
    FILE *fp = out.f;
    ckpt_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CKPT_MAGIC, 8);
    h.cfg_size = sizeof(sae_train_config);
    h.step = t->step;
    h.tokens = t->tokens;
    h.np = t->np;
    h.S = t->S;
    h.scale = t->scale;
    h.thr_run = t->thr_run;
    h.pad = t->mb > 1 ? (uint32_t)t->mb : 0; /* micro-batches (0: one, the bytes of old files) */
    h.lblocks = t->lb > 1 ? (uint32_t)t->lb : 0;
    /* a trailing FNV-1a of every byte before it: a damaged file resumed into another SAE, exit 0
       (8 bytes of W_enc overwritten, an audit); the in-range check below cannot see that */
    file_sum io = file_sum_start(fp);
    file_sum_put(&io, &h, sizeof h);
    file_sum_put(&io, &t->c, sizeof t->c);
    file_sum_put(&io, t->p, sizeof(float) * (size_t)t->np);
    file_sum_put(&io, t->m, sizeof(float) * (size_t)t->np);
    file_sum_put(&io, t->v, sizeof(float) * (size_t)t->np);
    file_sum_put(&io, t->since, sizeof(int64_t) * (size_t)t->S);
    if (t->tc) file_sum_put(&io, &t->scale_out, sizeof(double));
    file_sum_put(&io, &t->aux_norm, sizeof(float)); /* after everything: optional */
    file_sum_put_end(&io);
    int ok = !io.bad;
    if (!ok) {
        int e = errno;
        file_atomic_abort(&out);
        return err_set(ERR_IO, "%s: cannot write checkpoint: %s", path, strerror(e));
    }
    return file_atomic_commit(&out);
}

int sae_trainer_resume(sae_trainer **out, const char *path)
{
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return err_set(ERR_IO, "%s: cannot open checkpoint: %s", path, strerror(errno));
    ckpt_header h;
    sae_train_config c;
    /* checkpoints written before the matryoshka fields hold the config up to n_widths, those
       before gradient clipping up to grad_clip (they ran without it) */
    memset(&c, 0, sizeof c);
    if (fread(&h, sizeof h, 1, fp) != 1 || memcmp(h.magic, CKPT_MAGIC, 8) ||
        (h.cfg_size != sizeof c && h.cfg_size != offsetof(sae_train_config, n_widths) &&
         h.cfg_size != offsetof(sae_train_config, grad_clip) &&
         h.cfg_size != offsetof(sae_train_config, mat_levels)) ||
        fread(&c, h.cfg_size, 1, fp) != 1) {
        fclose(fp);
        return err_set(ERR_FORMAT, "%s: not a saelite checkpoint of this version", path);
    }
    if (h.cfg_size < offsetof(sae_train_config, mat_levels)) c.grad_clip = -1;
    if (h.cfg_size < sizeof c) c.mat_levels = SAE_MAT_OWN;
    sae_trainer *t;
    int rc = trainer_alloc(&t, &c);
    if (rc) {
        fclose(fp);
        return err_wrap(rc, "%s", path);
    }
    if (h.np != t->np || h.S != t->S || h.step < 0 || h.step > t->total_steps) {
        fclose(fp);
        sae_trainer_free(t);
        return err_set(ERR_FORMAT, "%s: checkpoint sizes do not match its config", path);
    }
    /* the file's layout by its size: TopK's AuxK normaliser (a float) and the checksum (8
       bytes) came later, and files from before them end without (AuxK is then off for one
       step; there is no sum to check) */
    struct stat sb;
    int64_t base = (int64_t)sizeof h + h.cfg_size + 3 * (int64_t)sizeof(float) * t->np +
                   (int64_t)sizeof(int64_t) * t->S + (t->tc ? (int64_t)sizeof(double) : 0);
    int64_t size = fstat(fileno(fp), &sb) == 0 ? (int64_t)sb.st_size : -1;
    int has_aux = size >= base + 4, has_sum = size == base + 4 + 8;
    if (size != base && size != base + 4 && !has_sum) {
        fclose(fp);
        sae_trainer_free(t);
        return err_set(ERR_FORMAT, "%s: checkpoint is %s (%lld bytes, want %lld)", path,
                       size < base + 12 ? "truncated" : "longer than its contents", (long long)size,
                       (long long)(base + 12));
    }
    file_sum io = file_sum_start(fp);
    io.h = hash_fnv1a(hash_fnv1a(io.h, &h, sizeof h), &c, h.cfg_size); /* read above */
    file_sum_get(&io, t->p, sizeof(float) * (size_t)t->np);
    file_sum_get(&io, t->m, sizeof(float) * (size_t)t->np);
    file_sum_get(&io, t->v, sizeof(float) * (size_t)t->np);
    file_sum_get(&io, t->since, sizeof(int64_t) * (size_t)t->S);
    if (t->tc) file_sum_get(&io, &t->scale_out, sizeof(double));
    t->aux_norm = 0;
    if (has_aux) file_sum_get(&io, &t->aux_norm, sizeof(float));
    int ok = !io.bad, sum_ok = !has_sum || file_sum_get_end(&io);
    fclose(fp);
    if (!ok || !sum_ok) {
        sae_trainer_free(t);
        return err_set(ERR_FORMAT, ok ? "%s: the checkpoint fails its checksum: the file is damaged "
                                        "(resume from an earlier copy, or train anew without --resume)"
                                      : "%s: checkpoint is truncated", path);
    }
    /* a damaged file, not a diverged run (a step with a non-finite loss writes no checkpoint):
       say so now rather than as "loss became nan" a hundred steps on */
    static const char *const part[3] = {"weights", "Adam's first moment", "Adam's second moment"};
    for (int a = 0; a < 3; a++) {
        const float *x = a == 0 ? t->p : a == 1 ? t->m : t->v;
        int64_t bad = ck_first_nonfinite(x, t->np);
        if (bad >= 0 || (a == 2 && (bad = ck_first_negative(x, t->np)) >= 0)) {
            double v = x[bad];
            sae_trainer_free(t);
            return err_set(ERR_FORMAT, "%s: %g at index %lld of the checkpoint's %s: the file is "
                           "damaged (resume from an earlier copy, or train anew without --resume)",
                           path, v, (long long)bad, part[a]);
        }
    }
    /* and its scalars: input and target scales, BatchTopK's running threshold, AuxK's scale */
    if (!(isfinite(h.scale) && h.scale > 0) || !(isfinite(t->scale_out) && t->scale_out > 0) ||
        !isfinite(h.thr_run) || !isfinite(t->aux_norm) || t->aux_norm < 0) {
        sae_trainer_free(t);
        return err_set(ERR_FORMAT, "%s: the checkpoint's scales or thresholds are not finite "
                       "(input scale %g, target scale %g, threshold %g, AuxK scale %g): the file is "
                       "damaged", path, h.scale, t->tc ? t->scale_out : h.scale, (double)h.thr_run,
                       (double)t->aux_norm);
    }
    t->step = h.step;
    t->tokens = h.tokens;
    t->scale = h.scale;
    if (!t->tc) t->scale_out = h.scale;
    t->thr_run = h.thr_run;
    t->mb = h.pad ? (int)h.pad : 1;
    t->lb = h.lblocks ? (int)h.lblocks : 1;
    if (t->lb > 1 && (t->lb > t->S || t->S % t->lb || !dist_pow2(t->lb) || t->mb > 1)) {
        sae_trainer_free(t);
        return err_set(ERR_FORMAT, "%s: checkpoint's latent-block count %u does not fit its d_sae",
                       path, h.lblocks);
    }
    if (t->mb < 1 || t->mb > t->B || t->B % t->mb) {
        sae_trainer_free(t);
        return err_set(ERR_FORMAT, "%s: checkpoint's micro-batch count %u does not fit its batch",
                       path, h.pad);
    }
    *out = t;
    return OK;
}

/* ---- sources -------------------------------------------------------------------------- */
typedef struct {
    const float *x;
    float *owned;
    int64_t n, pos, *perm;
    rng_state rng;
} mem_src;

static void shuffle(mem_src *m)
{
    for (int64_t i = m->n - 1; i > 0; i--) {
        int64_t j = (int64_t)(rng_next(&m->rng) % (uint64_t)(i + 1));
        int64_t tmp = m->perm[i];
        m->perm[i] = m->perm[j];
        m->perm[j] = tmp;
    }
    m->pos = 0;
}

static int mem_next(sae_source *s, float *x, int B)
{
    mem_src *m = s->impl;
    for (int b = 0; b < B; b++) {
        if (m->pos == m->n) shuffle(m);
        memcpy(x + (int64_t)b * s->d_in, m->x + m->perm[m->pos++] * s->d_in,
               sizeof(float) * s->d_in);
    }
    return OK;
}

static int mem_next_rows(sae_source *s, float *x, int B, int r0, int n)
{
    mem_src *m = s->impl;
    for (int b = 0; b < B; b++) {
        if (m->pos == m->n) shuffle(m);
        int64_t row = m->perm[m->pos++];
        if (b >= r0 && b < r0 + n)
            memcpy(x + (int64_t)b * s->d_in, m->x + row * s->d_in, sizeof(float) * s->d_in);
    }
    return OK;
}

int sae_source_next_rows(sae_source *s, float *x, int B, int r0, int n)
{
    if (s->next_rows && (r0 > 0 || n < B)) return s->next_rows(s, x, B, r0, n);
    return s->next(s, x, B);
}

static void mem_close(sae_source *s)
{
    mem_src *m = s->impl;
    mem_free(m->owned);
    mem_free(m->perm);
    mem_free(m);
    mem_free(s);
}

int sae_source_mem_rows(sae_source **out, const float *x, const int64_t *rows, int64_t n,
                        int d_in, uint64_t seed)
{
    *out = NULL;
    if (n < 1 || d_in < 1) return err_set(ERR_ARG, "activation source: no rows");
    sae_source *s = mem_calloc(1, sizeof *s);
    mem_src *m = mem_calloc(1, sizeof *m);
    int64_t *perm = mem_alloc(sizeof(int64_t) * n);
    if (!s || !m || !perm) {
        mem_free(s);
        mem_free(m);
        mem_free(perm);
        return err_set(ERR_NOMEM, "activation source: out of memory");
    }
    for (int64_t i = 0; i < n; i++) perm[i] = rows ? rows[i] : i;
    m->x = x;
    m->n = n;
    m->perm = perm;
    rng_seed(&m->rng, seed ^ 0x5eed5eedULL);
    shuffle(m);
    s->d_in = d_in;
    s->n_rows = n;
    s->next = mem_next;
    s->next_rows = mem_next_rows;
    s->close = mem_close;
    s->impl = m;
    *out = s;
    return OK;
}

int sae_source_mem(sae_source **out, const float *x, int64_t n, int d_in, uint64_t seed)
{
    return sae_source_mem_rows(out, x, NULL, n, d_in, seed);
}

void sae_source_adopt(sae_source *s, float *data)
{
    ((mem_src *)s->impl)->owned = data;
}

int sae_source_npy(sae_source **out, const char *path, uint64_t seed)
{
    float *data;
    int nd;
    int64_t shape[8];
    int rc = npy_read(path, &data, &nd, shape);
    if (rc) return rc;
    if (nd != 2 || shape[0] < 1 || shape[1] < 1) {
        mem_free(data);
        return err_set(ERR_SHAPE, "%s: expected a 2-D array [tokens, d_in], got %d dims", path,
                       nd);
    }
    if ((rc = npy_check_finite(path, data, shape[0], shape[1]))) {
        mem_free(data);
        return rc;
    }
    rc = sae_source_mem(out, data, shape[0], (int)shape[1], seed);
    if (rc) {
        mem_free(data);
        return rc;
    }
    sae_source_adopt(*out, data);
    return OK;
}

int sae_source_skip(sae_source *s, int64_t rows, int B)
{
    float *buf = mem_alloc(sizeof(float) * (size_t)B * s->d_in);
    if (!buf) return err_set(ERR_NOMEM, "activation source: out of memory");
    int rc = OK;
    /* a resume replays the stream to where it stopped: seconds per 100k tokens, and it was
       silent before the training's own progress began (an audit) */
    progress pr;
    int64_t total = rows;
    progress_begin(&pr, "resume: replaying the stream", (double)total, "tok");
    while (rows > 0 && !rc) {
        int n = rows < B ? (int)rows : B;
        rc = s->next(s, buf, n);
        rows -= n;
        progress_update(&pr, (double)(total - rows), NULL);
    }
    progress_end(&pr);
    mem_free(buf);
    return rc;
}

int sae_train_source(const sae_train_config *c, sae_source *src, int64_t n_init, sae_model **out,
                     sae_step_stats *last)
{
    *out = NULL;
    if (n_init < 1 || n_init > INT32_MAX || src->d_in != c->d_in)
        return err_set(ERR_ARG, "sae_train_source: %lld initial rows of width %d for d_in %d",
                       (long long)n_init, src->d_in, c->d_in);
    int64_t rows = n_init > c->batch ? n_init : c->batch;
    float *x = mem_alloc(sizeof(float) * (size_t)rows * c->d_in);
    sae_trainer *t = NULL;
    sae_step_stats st = {0};
    int rc = x ? src->next(src, x, (int)n_init) : err_set(ERR_NOMEM, "out of memory");
    if (!rc) rc = sae_trainer_new(&t, c, x, n_init);
    while (!rc && sae_trainer_step_index(t) < sae_trainer_total_steps(t)) {
        rc = src->next(src, x, c->batch);
        if (!rc) rc = sae_trainer_step(t, x, &st);
    }
    if (!rc) rc = sae_trainer_export(t, NULL, out);
    if (!rc && last) *last = st;
    sae_trainer_free(t);
    mem_free(x);
    return rc;
}

void sae_source_close(sae_source *s)
{
    if (s && s->close) s->close(s);
}
