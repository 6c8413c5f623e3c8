/* gpt2.c - GPT-2 loading, hooked forward, backward (see gpt2.h). */
#include "model/gpt2.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/checked.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/hash.h"
#include "common/json.h"
#include "common/mem.h"
#include "common/progress.h"
#include "model/ops.h"

/* per-block hook kinds, in firing order */
enum {
    HK_RESID_PRE, HK_LN1, HK_Q, HK_K, HK_V, HK_SCORES, HK_PATTERN, HK_Z, HK_ATTN_OUT, HK_RESID_MID,
    HK_LN2, HK_MLP_PRE, HK_MLP_POST, HK_MLP_OUT, HK_RESID_POST, HK_PER_BLOCK
};
static const char *const hk_suffix[HK_PER_BLOCK] = {
    "hook_resid_pre", "ln1.hook_normalized", "attn.hook_q", "attn.hook_k", "attn.hook_v",
    "attn.hook_attn_scores", "attn.hook_pattern", "attn.hook_z", "hook_attn_out",
    "hook_resid_mid", "ln2.hook_normalized", "mlp.hook_pre", "mlp.hook_post", "hook_mlp_out",
    "hook_resid_post"};
#define HP_EMBED 0
#define HP_POS 1
#define HP_BLOCK(l, k) (2 + (l) * HK_PER_BLOCK + (k))
#define HP_LNF(L) (2 + (L) * HK_PER_BLOCK)

typedef struct {
    gpt2_hook_fn fn;
    void *user;
} hook_cb;

typedef struct {
    char name[64];
    int layer, width;
    hook_cb *cbs;
    int ncb;
} hook_point;

/* per-layer parameter pointers */
typedef struct {
    float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw,
        *fcprojb;
} layer_params;

typedef struct {
    float *p;
    size_t cap;
} buf;

struct gpt2_model {
    gpt2_config cfg;
    int gelu;
    int tied;
    float *params, *grads;
    size_t nparams;
    gpt2_tensor *tab;
    int ntab;
    float *wte, *wpe, *lnfw, *lnfb, *lm_head;
    layer_params *lp;

    hook_point *hp;
    int nhp;
    int last_hook_layer; /* -2 none, -1 embeddings only, l, or n_layer for ln_final */

    int train;
    /* activations; in training mode the per-layer ones hold n_layer slices */
    buf embed, pos, resid, mid, ln1, ln1m, ln1r, q, k, v, att, z, attn_out, ln2, ln2m, ln2r, pre,
        post, mlp_out, lnf, lnfm, lnfr, logits;
    /* backward scratch */
    buf dres, dln, dq, dk, dv, datt, dz, dpre, dpost;
    int *targets_copy;
    size_t targets_cap;
    int logits_valid;
    int lastB, lastT;
    int layers_run; /* blocks computed by the last forward (tests check early stop) */
};


/* ---- buffers ---------------------------------------------------------------------------- */
static int buf_need(buf *b, size_t n)
{
    if (b->cap >= n) return OK;
    mem_free_aligned(b->p);
    b->p = mem_alloc_aligned(sizeof(float) * (n ? n : 1));
    if (!b->p) {
        b->cap = 0;
        return err_set(ERR_NOMEM, "out of memory for %zu activations", n);
    }
    b->cap = n;
    return OK;
}

static void free_bufs(gpt2_model *m)
{
    buf *all[] = {&m->embed, &m->pos, &m->resid, &m->mid, &m->ln1, &m->ln1m, &m->ln1r, &m->q,
                  &m->k, &m->v, &m->att, &m->z, &m->attn_out, &m->ln2, &m->ln2m, &m->ln2r,
                  &m->pre, &m->post, &m->mlp_out, &m->lnf, &m->lnfm, &m->lnfr, &m->logits,
                  &m->dres, &m->dln, &m->dq, &m->dk, &m->dv, &m->datt, &m->dz, &m->dpre,
                  &m->dpost};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        mem_free_aligned(all[i]->p);
        all[i]->p = NULL;
        all[i]->cap = 0;
    }
}

/* ---- parameter table -------------------------------------------------------------------- */
static void tab_add(gpt2_model *m, size_t *off, const char *name, int ndim, int64_t a, int64_t b)
{
    gpt2_tensor *t = &m->tab[m->ntab++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->shape[0] = a;
    t->shape[1] = ndim > 1 ? b : 1;
    t->numel = (size_t)a * (ndim > 1 ? (size_t)b : 1);
    t->offset = *off;
    t->decay = ndim == 2;
    *off += t->numel;
}

static float *tab_ptr(gpt2_model *m, int i) { return m->params + m->tab[i].offset; }

/* The first field out of range, named with its allowed range (config.json or init-model's
 * flags: the caller knows which). */
static int check_cfg(const gpt2_config *c, const char *where)
{
    const char *w = where ? where : "", *sep = where ? ": " : "";
    const struct { const char *name; int v, hi; } lim[] = {
        {"n_layer", c->n_layer, GPT2_MAX_LAYERS}, {"n_embd", c->n_embd, GPT2_MAX_EMBD},
        {"n_head", c->n_head, GPT2_MAX_HEADS},    {"n_positions", c->n_ctx, GPT2_MAX_CTX},
        {"vocab_size", c->vocab_size, GPT2_MAX_VOCAB}, {"n_inner", c->n_inner, GPT2_MAX_INNER},
    };
    for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++)
        if (lim[i].v < 1 || lim[i].v > lim[i].hi)
            return err_set(ERR_FORMAT, "%s%sinvalid model shape: %s %d is outside 1..%d", w, sep,
                           lim[i].name, lim[i].v, lim[i].hi);
    if (c->n_embd % c->n_head)
        return err_set(ERR_FORMAT, "%s%sinvalid model shape: n_embd %d is not a multiple of "
                       "n_head %d", w, sep, c->n_embd, c->n_head);
    if (!(c->ln_eps > 0 && c->ln_eps < 1)) /* NaN fails too */
        return err_set(ERR_FORMAT, "%s%sinvalid model shape: layer_norm_epsilon %g is outside "
                       "(0, 1)", w, sep, (double)c->ln_eps);
    return OK;
}

static int model_params(gpt2_model *m);

/* The parameter table and hook points of a model of this shape; the parameters themselves only
 * with with_params (gpt2_load checks the file against the table before it allocates them). */
static int model_alloc(gpt2_model **out, const gpt2_config *cfg, int tied, int gelu, int with_params)
{
    gpt2_model *m = mem_calloc(1, sizeof *m);
    if (!m) return err_set(ERR_NOMEM, "out of memory");
    m->cfg = *cfg;
    m->tied = tied;
    m->gelu = gelu;
    int L = cfg->n_layer, C = cfg->n_embd, F = cfg->n_inner, V = cfg->vocab_size, N = cfg->n_ctx;
    m->tab = mem_calloc((size_t)(L * 12 + 5), sizeof *m->tab);
    m->lp = mem_calloc((size_t)L, sizeof *m->lp);
    m->nhp = 2 + L * HK_PER_BLOCK + 1;
    m->hp = mem_calloc((size_t)m->nhp, sizeof *m->hp);
    if (!m->tab || !m->lp || !m->hp) goto nomem;
    size_t off = 0;
    char nm[64];
    tab_add(m, &off, "wte.weight", 2, V, C);
    tab_add(m, &off, "wpe.weight", 2, N, C);
    for (int l = 0; l < L; l++) {
#define ADD(suffix, nd, a, b)                                                                  \
    snprintf(nm, sizeof nm, "h.%d.%s", l, suffix);                                             \
    tab_add(m, &off, nm, nd, a, b)
        ADD("ln_1.weight", 1, C, 0);
        ADD("ln_1.bias", 1, C, 0);
        ADD("attn.c_attn.weight", 2, C, 3 * C);
        ADD("attn.c_attn.bias", 1, 3 * C, 0);
        ADD("attn.c_proj.weight", 2, C, C);
        ADD("attn.c_proj.bias", 1, C, 0);
        ADD("ln_2.weight", 1, C, 0);
        ADD("ln_2.bias", 1, C, 0);
        ADD("mlp.c_fc.weight", 2, C, F);
        ADD("mlp.c_fc.bias", 1, F, 0);
        ADD("mlp.c_proj.weight", 2, F, C);
        ADD("mlp.c_proj.bias", 1, C, 0);
#undef ADD
    }
    tab_add(m, &off, "ln_f.weight", 1, C, 0);
    tab_add(m, &off, "ln_f.bias", 1, C, 0);
    if (!tied) tab_add(m, &off, "lm_head.weight", 2, V, C);
    m->nparams = off;
    /* hook points */
    snprintf(m->hp[HP_EMBED].name, 64, "hook_embed");
    snprintf(m->hp[HP_POS].name, 64, "hook_pos_embed");
    m->hp[HP_EMBED].layer = m->hp[HP_POS].layer = -1;
    m->hp[HP_EMBED].width = m->hp[HP_POS].width = C;
    for (int l = 0; l < L; l++)
        for (int k = 0; k < HK_PER_BLOCK; k++) {
            hook_point *h = &m->hp[HP_BLOCK(l, k)];
            snprintf(h->name, sizeof h->name, "blocks.%d.%s", l, hk_suffix[k]);
            h->layer = l;
            h->width = (k == HK_MLP_PRE || k == HK_MLP_POST) ? F
                     : (k == HK_SCORES || k == HK_PATTERN) ? cfg->n_head : C;
        }
    snprintf(m->hp[HP_LNF(L)].name, 64, "ln_final.hook_normalized");
    m->hp[HP_LNF(L)].layer = -1;
    m->hp[HP_LNF(L)].width = C;
    m->last_hook_layer = -2;
    if (with_params && model_params(m)) {
        gpt2_free(m);
        return ERR_NOMEM; /* recorded by model_params */
    }
    *out = m;
    return OK;
nomem:
    gpt2_free(m);
    return err_set(ERR_NOMEM, "out of memory for a %d-layer model", L);
}

/* The parameters of the table and the per-layer views into them (ERR_NOMEM recorded). */
static int model_params(gpt2_model *m)
{
    int L = m->cfg.n_layer, tied = m->tied;
    m->params = mem_alloc_aligned(sizeof(float) * m->nparams);
    if (!m->params) return err_set(ERR_NOMEM, "out of memory for a %d-layer model", L);
    m->wte = tab_ptr(m, 0);
    m->wpe = tab_ptr(m, 1);
    for (int l = 0; l < L; l++) {
        layer_params *p = &m->lp[l];
        int b = 2 + 12 * l;
        p->ln1w = tab_ptr(m, b + 0);
        p->ln1b = tab_ptr(m, b + 1);
        p->qkvw = tab_ptr(m, b + 2);
        p->qkvb = tab_ptr(m, b + 3);
        p->attprojw = tab_ptr(m, b + 4);
        p->attprojb = tab_ptr(m, b + 5);
        p->ln2w = tab_ptr(m, b + 6);
        p->ln2b = tab_ptr(m, b + 7);
        p->fcw = tab_ptr(m, b + 8);
        p->fcb = tab_ptr(m, b + 9);
        p->fcprojw = tab_ptr(m, b + 10);
        p->fcprojb = tab_ptr(m, b + 11);
    }
    m->lnfw = tab_ptr(m, 2 + 12 * L);
    m->lnfb = tab_ptr(m, 3 + 12 * L);
    m->lm_head = tied ? m->wte : tab_ptr(m, 4 + 12 * L);
    return OK;
}

void gpt2_free(gpt2_model *m)
{
    if (!m) return;
    free_bufs(m);
    if (m->hp)
        for (int i = 0; i < m->nhp; i++) mem_free(m->hp[i].cbs);
    mem_free(m->hp);
    mem_free(m->tab);
    mem_free(m->lp);
    if (m->params) /* cached bf16 weights (none before gpt2_load's checks pass) */
        op_bf16_forget(m->params, sizeof(float) * (size_t)m->nparams);
    mem_free_aligned(m->params);
    mem_free_aligned(m->grads);
    mem_free(m->targets_copy);
    mem_free(m);
}

const gpt2_config *gpt2_cfg(const gpt2_model *m) { return &m->cfg; }
int gpt2_tied(const gpt2_model *m) { return m->tied; }
const gpt2_tensor *gpt2_param_table(const gpt2_model *m, int *n)
{
    *n = m->ntab;
    return m->tab;
}
float *gpt2_params(gpt2_model *m, size_t *n)
{
    if (n) *n = m->nparams;
    return m->params;
}
float *gpt2_grads(gpt2_model *m) { return m->grads; }

const float *gpt2_param(const gpt2_model *m, const char *name, int *ndim, int64_t shape[2])
{
    const char *nm = name;
    if (m->tied && !strcmp(name, "lm_head.weight")) nm = "wte.weight";
    for (int i = 0; i < m->ntab; i++)
        if (!strcmp(m->tab[i].name, nm)) {
            if (ndim) *ndim = m->tab[i].ndim;
            if (shape) {
                shape[0] = m->tab[i].shape[0];
                shape[1] = m->tab[i].shape[1];
            }
            return m->params + m->tab[i].offset;
        }
    return NULL;
}

/* ---- create / save ---------------------------------------------------------------------- */
int gpt2_create(gpt2_model **out, const gpt2_config *cfg, uint64_t seed)
{
    int rc = check_cfg(cfg, NULL); /* the caller knows where the shape came from */
    if (rc) return rc;
    gpt2_model *m;
    if ((rc = model_alloc(&m, cfg, 1, OP_GELU_TANH, 1))) return rc;
    rng_state r;
    rng_seed(&r, seed);
    double proj_std = 0.02 / sqrt(2.0 * cfg->n_layer);
    /* one stream, so one thread: about 45 M parameters a second here (GPT-2 XL, 1.5 B, would
       take half a minute in silence) */
    progress pr;
    progress_begin(&pr, "random weights", (double)m->nparams, "param");
    size_t done = 0;
    for (int i = 0; i < m->ntab; i++) {
        gpt2_tensor *t = &m->tab[i];
        float *p = m->params + t->offset;
        const char *n = t->name;
        if (t->ndim == 2) {
            double sd = strstr(n, "c_proj.weight") ? proj_std : 0.02;
            /* Box-Muller pairs: both outputs used (GPT-2-small has 124M parameters) */
            for (size_t j = 0; j < t->numel; j += 2) {
                if (!(j & ((1u << 20) - 1))) progress_update(&pr, (double)(done + j), NULL);
                double u1 = rng_uniform(&r), u2 = rng_uniform(&r);
                if (u1 < 1e-300) u1 = 1e-300;
                double rad = sd * sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
                p[j] = (float)(rad * cos(th));
                if (j + 1 < t->numel) p[j + 1] = (float)(rad * sin(th));
            }
        } else {
            float v = strstr(n, "ln_") && strstr(n, ".weight") ? 1.0f : 0.0f;
            for (size_t j = 0; j < t->numel; j++) p[j] = v;
        }
        done += t->numel;
    }
    progress_end(&pr);
    *out = m;
    return OK;
}

static const char *gelu_name(int g) { return g == OP_GELU_ERF ? "gelu" : "gelu_new"; }

int gpt2_save(const gpt2_model *m, const char *dir, st_dtype dtype, int prefix)
{
    return gpt2_save_stop(m, dir, dtype, prefix, NULL);
}

int gpt2_save_stop(const gpt2_model *m, const char *dir, st_dtype dtype, int prefix,
                   volatile int *stop)
{
    int made = mkdir(dir, 0777) == 0;
    if (!made && errno != EEXIST)
        return err_set(ERR_IO, "%s: cannot create directory: %s", dir, strerror(errno));
    const gpt2_config *c = &m->cfg;
    char json[2048];
    snprintf(json, sizeof json,
             "{\n  \"model_type\": \"gpt2\",\n  \"architectures\": [\"GPT2LMHeadModel\"],\n"
             "  \"n_layer\": %d,\n  \"n_head\": %d,\n  \"n_embd\": %d,\n  \"n_positions\": %d,\n"
             "  \"n_ctx\": %d,\n  \"vocab_size\": %d,\n  \"n_inner\": %d,\n"
             "  \"layer_norm_epsilon\": %.9g,\n  \"activation_function\": \"%s\",\n"
             "  \"tie_word_embeddings\": %s\n}\n",
             c->n_layer, c->n_head, c->n_embd, c->n_ctx, c->n_ctx, c->vocab_size, c->n_inner,
             (double)c->ln_eps, gelu_name(m->gelu), m->tied ? "true" : "false");
    /* the two files as one (file_group): config.json was written first, so a failed or killed
       write of the weights left a new config beside the old model.safetensors, which no longer
       loaded ("does not fit"), or beside none (an audit) */
    char cpath[4096], mpath[4096];
    int rc = path_join(cpath, sizeof cpath, dir, "config.json");
    if (!rc) rc = path_join(mpath, sizeof mpath, dir, "model.safetensors");
    if (rc) return rc;
    file_group g = {0};
    const char *cw = file_group_add(&g, cpath), *mw = file_group_add(&g, mpath);
    if ((rc = file_write_atomic(cw, json, strlen(json)))) {
        file_group_abort(&g);
        if (made) rmdir(dir);
        return rc;
    }
    st_out *outs = mem_calloc((size_t)m->ntab, sizeof *outs);
    char(*names)[80] = mem_calloc((size_t)m->ntab, sizeof *names);
    if (!outs || !names) {
        mem_free(outs);
        mem_free(names);
        file_group_abort(&g);
        if (made) rmdir(dir);
        return err_set(ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < m->ntab; i++) {
        const gpt2_tensor *t = &m->tab[i];
        int top = !strcmp(t->name, "lm_head.weight"); /* HF keeps lm_head outside transformer. */
        snprintf(names[i], sizeof names[i], "%s%s", prefix && !top ? "transformer." : "", t->name);
        outs[i].name = names[i];
        outs[i].dtype = dtype;
        outs[i].ndim = t->ndim;
        outs[i].shape[0] = t->shape[0];
        outs[i].shape[1] = t->shape[1];
        outs[i].data = m->params + t->offset;
    }
    const char *meta[] = {"format", "pt", NULL};
    rc = st_write(mw, outs, m->ntab, meta);
    mem_free(outs);
    mem_free(names);
    /* a stop in the write (seconds for a large model) wrote the model anyway, exit 0 */
    if (!rc && stop && *stop) rc = err_set(ERR_ABORTED, "interrupted; nothing written");
    if (!rc) rc = file_group_commit(&g);
    else {
        file_group_abort(&g);
        if (made) rmdir(dir);
    }
    return rc;
}

/* ---- load ------------------------------------------------------------------------------- */
static int json_int(const cJSON *root, const char *key, const char *alt, int *out, int dflt,
                    const char *path)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it && alt) it = cJSON_GetObjectItemCaseSensitive(root, alt);
    if (!it || cJSON_IsNull(it)) {
        if (dflt >= 0) {
            *out = dflt;
            return OK;
        }
        if (it) /* present as null: said "missing" (params said "must be ..."; an audit) */
            return err_set(ERR_FORMAT, "%s: \"%s\" must be a positive integer (got null)", path, key);
        return err_set(ERR_FORMAT, "%s: missing \"%s\"", path, key);
    }
    if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble))
        return err_set(ERR_FORMAT, "%s: \"%s\" must be an integer", path, key);
    if (fabs(it->valuedouble) > 2e9)
        return err_set(ERR_FORMAT, "%s: \"%s\" is %g, outside the int range", path, key,
                       it->valuedouble);
    *out = (int)it->valuedouble;
    return OK;
}

/* What a JSON value is, for messages ("got null"). */
static const char *json_kind(const cJSON *v)
{
    return cJSON_IsNull(v)     ? "null"
           : cJSON_IsNumber(v) ? "a number"
           : cJSON_IsString(v) ? "a string"
           : cJSON_IsBool(v)   ? "a boolean"
           : cJSON_IsArray(v)  ? "an array"
                               : "an object";
}

/* A Hugging Face boolean: absent is dflt; anything but true/false is refused. null in particular
 * is not the default: GPT2Config keeps None and `if config.flag:` reads it as false, so a null
 * scale_attn_weights turns the scaling off and a null tie_word_embeddings unties. */
static int json_bool(const cJSON *root, const char *key, int dflt, int *out, const char *path)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    *out = dflt;
    if (!v) return OK;
    if (!cJSON_IsBool(v))
        return err_set(ERR_FORMAT, "%s: \"%s\" must be true or false (got %s)", path, key,
                       json_kind(v));
    *out = cJSON_IsTrue(v);
    return OK;
}

/* A Hugging Face boolean that changes the maths when not at its default, which is all we
 * implement: refused rather than silently ignored (the logits would be wrong). */
static int unsupported_flag(const cJSON *root, const char *key, int dflt, const char *why,
                            const char *path)
{
    int v, rc = json_bool(root, key, dflt, &v, path);
    if (rc || v == dflt) return rc;
    return err_set(ERR_FORMAT, "%s: \"%s\": %s is not supported (attention %s)", path, key,
                   dflt ? "false" : "true", why);
}

static int load_config(const char *dir, gpt2_config *c, int *gelu, int *tie_flag)
{
    char path[4096];
    int rc = path_join(path, sizeof path, dir, "config.json");
    cJSON *root;
    if (!rc) rc = json_read_object_file(path, NULL, (size_t)1 << 24, &root);
    if (rc) return rc;
    memset(c, 0, sizeof *c);
    /* another architecture's config can carry GPT-2's keys (GPT-Neo's n_layer ... ) and would
       load as a GPT-2 with the wrong maths; absent is accepted (hand-written configs) */
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (mt && !(cJSON_IsString(mt) && !strcmp(mt->valuestring, "gpt2"))) {
        if (cJSON_IsString(mt))
            rc = err_set(ERR_FORMAT, "%s: model_type \"%.60s\" is not supported (only \"gpt2\")",
                         path, mt->valuestring);
        else
            rc = err_set(ERR_FORMAT, "%s: \"model_type\" must be the string \"gpt2\" (got %s)",
                         path, json_kind(mt));
        goto out;
    }
    if ((rc = json_int(root, "n_layer", NULL, &c->n_layer, -1, path)) ||
        (rc = json_int(root, "n_head", NULL, &c->n_head, -1, path)) ||
        (rc = json_int(root, "n_embd", NULL, &c->n_embd, -1, path)) ||
        (rc = json_int(root, "n_positions", "n_ctx", &c->n_ctx, -1, path)) ||
        (rc = json_int(root, "vocab_size", NULL, &c->vocab_size, -1, path)) ||
        (rc = json_int(root, "n_inner", NULL, &c->n_inner, 0, path)))
        goto out;
    /* null n_inner means 4*n_embd; an n_embd too large for that is left to the range check. A
       literal 0 is HF's MLP of width 0 (it was read as 4*n_embd, an audit) */
    const cJSON *ni = cJSON_GetObjectItemCaseSensitive(root, "n_inner");
    if (ni && cJSON_IsNumber(ni) && c->n_inner == 0) {
        rc = err_set(ERR_FORMAT, "%s: \"n_inner\" 0 is an MLP of width 0 (null means 4 x n_embd)", path);
        goto out;
    }
    if (c->n_inner == 0) c->n_inner = c->n_embd > 0 && c->n_embd <= (1 << 28) ? 4 * c->n_embd : -1;
    c->ln_eps = 1e-5f;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "layer_norm_epsilon");
    if (e && !cJSON_IsNull(e)) {
        if (!cJSON_IsNumber(e)) {
            rc = err_set(ERR_FORMAT, "%s: \"layer_norm_epsilon\" must be a number", path);
            goto out;
        }
        c->ln_eps = (float)e->valuedouble;
    }
    /* HF's ACT2FN[...] looks the name up: anything but a string (null, 1) fails there, and
       used to become gelu_new here */
    *gelu = OP_GELU_TANH;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "activation_function");
    if (a && !cJSON_IsString(a)) {
        rc = err_set(ERR_FORMAT,
                     "%s: \"activation_function\" must be a string: gelu_new, gelu_pytorch_tanh, "
                     "gelu_fast or gelu (got %s)",
                     path, json_kind(a));
        goto out;
    }
    if (a) {
        /* HF's three tanh GELUs (NewGELU, PytorchGELUTanh, FastGELU) are one formula */
        if (!strcmp(a->valuestring, "gelu_new") || !strcmp(a->valuestring, "gelu_pytorch_tanh") ||
            !strcmp(a->valuestring, "gelu_fast"))
            *gelu = OP_GELU_TANH;
        else if (!strcmp(a->valuestring, "gelu")) *gelu = OP_GELU_ERF;
        else {
            rc = err_set(ERR_FORMAT,
                         "%s: activation_function \"%s\" is not supported (gelu_new, "
                         "gelu_pytorch_tanh, gelu_fast, gelu)",
                         path, a->valuestring);
            goto out;
        }
    }
    if ((rc = json_bool(root, "tie_word_embeddings", 1, tie_flag, path)) ||
        (rc = unsupported_flag(root, "scale_attn_weights", 1, "scores are always scaled by "
                               "1/sqrt(head size)", path)) ||
        (rc = unsupported_flag(root, "scale_attn_by_inverse_layer_idx", 0, "scores are never "
                               "divided by the layer number", path)))
        goto out;
    /* reorder_and_upcast_attn only changes the order and precision of the score computation
       in half precision; in float32 it is the same maths, so either value is accepted */
    rc = check_cfg(c, path);
out:
    cJSON_Delete(root);
    return rc;
}

static int is_buffer_name(const char *n)
{
    size_t len = strlen(n);
    return (len >= 10 && !strcmp(n + len - 10, ".attn.bias")) ||
           (len >= 17 && !strcmp(n + len - 17, ".attn.masked_bias"));
}

/* dir has no model.safetensors: when it holds another kind of checkpoint (sharded safetensors,
 * PyTorch pickles, TF/Flax files), say so and how to convert, instead of "cannot open: No such
 * file or directory". OK when there is nothing else to name (st_open then reports the file). */
static int other_checkpoint(const char *dir)
{
    static const char *const conv =
        "(convert with transformers: GPT2LMHeadModel.from_pretrained(DIR).save_pretrained(OUT, "
        "safe_serialization=True, max_shard_size=\"100GB\"))";
    static const char *const names[] = {"model.safetensors.index.json", "pytorch_model.bin",
                                        "pytorch_model.bin.index.json", "tf_model.h5",
                                        "flax_model.msgpack"};
    char p[4096];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (path_join(p, sizeof p, dir, names[i]) || access(p, F_OK)) continue;
        if (i == 0)
            return err_set(ERR_FORMAT,
                           "%s has sharded safetensors (%s) but no model.safetensors: only a "
                           "single model.safetensors is read %s",
                           dir, names[i], conv);
        return err_set(ERR_FORMAT,
                       "%s has %s but no model.safetensors: only safetensors checkpoints are "
                       "read %s",
                       dir, names[i], conv);
    }
    /* shards without their index: model-00001-of-00002.safetensors */
    DIR *d = opendir(dir);
    if (!d) return OK;
    struct dirent *e;
    int rc = OK;
    while (!rc && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (!strncmp(e->d_name, "model-", 6) && strstr(e->d_name, "-of-") && n > 12 &&
            !strcmp(e->d_name + n - 12, ".safetensors"))
            rc = err_set(ERR_FORMAT,
                         "%s has sharded safetensors (%.200s) but no model.safetensors: only a "
                         "single model.safetensors is read %s",
                         dir, e->d_name, conv);
    }
    closedir(d);
    return rc;
}

int gpt2_load(gpt2_model **out, const char *dir)
{
    gpt2_config cfg;
    int gelu = OP_GELU_TANH, tie_flag = 1, rc;
    if ((rc = load_config(dir, &cfg, &gelu, &tie_flag))) return rc;
    char path[4096];
    st_file *f;
    if ((rc = path_join(path, sizeof path, dir, "model.safetensors"))) return rc;
    if (access(path, F_OK) && errno == ENOENT && (rc = other_checkpoint(dir))) return rc;
    if ((rc = st_open(&f, path))) return rc;
    const char *pre = st_find(f, "transformer.wte.weight") ? "transformer." : "";
    int has_head = st_find(f, "lm_head.weight") || st_find(f, "transformer.lm_head.weight");
    /* tie_word_embeddings (default true) decides, as in HF, whose tie_weights() makes lm_head
       share wte after loading: a stored lm_head.weight of a tied model is unused (its shape is
       still checked below), never the unembedding */
    if (!has_head && !tie_flag) {
        st_close(f);
        return err_set(ERR_FORMAT,
                       "%s: missing tensor 'lm_head.weight' (config says tie_word_embeddings "
                       "false)",
                       path);
    }
    /* the table first: every tensor checked against the file (names, shapes) before the
       parameters are allocated, so a config.json that does not fit a small file fails without
       asking for its gigabytes first (fuzz_config); a model that passes has no more
       parameters than the file has elements */
    gpt2_model *m;
    if ((rc = model_alloc(&m, &cfg, tie_flag, gelu, 0))) {
        st_close(f);
        return rc;
    }
    /* every tensor in the file must be known (catches configs that do not fit the file) */
    size_t plen = strlen(pre);
    for (int i = 0; i < st_count(f); i++) {
        const char *n = st_at(f, i)->name;
        if (plen && !strncmp(n, pre, plen)) n += plen;
        /* HF keeps lm_head outside transformer.; a body saved without the prefix may still
           carry it on the head (refused as unexpected, an audit) */
        if (!strcmp(n, "transformer.lm_head.weight")) n += 12;
        if (is_buffer_name(n)) continue;
        int known = tie_flag && !strcmp(n, "lm_head.weight");
        for (int j = 0; j < m->ntab && !known; j++) known = !strcmp(m->tab[j].name, n);
        if (!known) {
            rc = err_set(ERR_FORMAT,
                         "%s: unexpected tensor '%s' for a %d-layer GPT-2 (wrong config.json?)",
                         path, st_at(f, i)->name, cfg.n_layer);
            goto fail;
        }
    }
    if (tie_flag && has_head) {
        const char *hn = st_find(f, "lm_head.weight") ? "lm_head.weight"
                                                       : "transformer.lm_head.weight";
        int64_t hs[2] = {cfg.vocab_size, cfg.n_embd};
        if ((rc = st_load_f32(f, hn, 2, hs, NULL))) {
            if (rc == ERR_SHAPE)
                err_wrap(rc, "config.json (n_embd %d, vocab %d) does not fit", cfg.n_embd,
                         cfg.vocab_size);
            goto fail;
        }
    }
    /* two passes over the table: present with its shape (dst NULL), then loaded */
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && (rc = model_params(m))) goto fail;
        for (int j = 0; j < m->ntab; j++) {
            char nm[160];
            const gpt2_tensor *t = &m->tab[j];
            if (!strcmp(t->name, "lm_head.weight"))
                snprintf(nm, sizeof nm, "%s", st_find(f, "lm_head.weight") ? "lm_head.weight"
                                                                           : "transformer.lm_head.weight");
            else snprintf(nm, sizeof nm, "%s%s", pre, t->name);
            float *dst = pass ? m->params + t->offset : NULL;
            if ((rc = st_load_f32(f, nm, t->ndim, t->shape, dst))) {
                if (rc == ERR_SHAPE)
                    err_wrap(rc, "config.json (n_layer %d, n_embd %d, n_inner %d, vocab %d, ctx %d) "
                                 "does not fit",
                             cfg.n_layer, cfg.n_embd, cfg.n_inner, cfg.vocab_size, cfg.n_ctx);
                if (rc == ERR_NOTFOUND) rc = ERR_FORMAT;
                goto fail;
            }
            if (!pass) continue;
            /* a NaN or Inf weight would only show as an all-NaN output much later */
            int64_t bad = ck_first_nonfinite(dst, (int64_t)t->numel);
            if (bad >= 0) {
                rc = err_set(ERR_FORMAT, "%s: tensor '%s' has a non-finite value (%g) at index %lld",
                             path, nm, isnan(dst[bad]) ? NAN : (double)dst[bad], (long long)bad);
                goto fail;
            }
        }
    }
    st_close(f);
    *out = m;
    return OK;
fail:
    st_close(f);
    gpt2_free(m);
    return rc;
}

/* ---- hooks ------------------------------------------------------------------------------ */
static void update_last_hook_layer(gpt2_model *m)
{
    int L = m->cfg.n_layer, last = -2;
    for (int i = 0; i < m->nhp; i++) {
        if (!m->hp[i].ncb) continue;
        int l = i < 2 ? -1 : i == HP_LNF(L) ? L : m->hp[i].layer;
        if (l > last) last = l;
    }
    m->last_hook_layer = last;
}

static int pattern_match(const char *pat, const char *name)
{
    size_t n = strlen(pat);
    if (n && pat[n - 1] == '*') return !strncmp(pat, name, n - 1);
    return !strcmp(pat, name);
}

int gpt2_hook_add(gpt2_model *m, const char *pattern, gpt2_hook_fn fn, void *user)
{
    int matched = 0;
    for (int i = 0; i < m->nhp; i++) {
        if (!pattern_match(pattern, m->hp[i].name)) continue;
        hook_point *h = &m->hp[i];
        hook_cb *nc = mem_realloc(h->cbs, sizeof *nc * (size_t)(h->ncb + 1));
        if (!nc) return err_set(ERR_NOMEM, "out of memory");
        h->cbs = nc;
        h->cbs[h->ncb].fn = fn;
        h->cbs[h->ncb].user = user;
        h->ncb++;
        matched++;
    }
    if (!matched) {
        int L = m->cfg.n_layer;
        return err_set(ERR_NOTFOUND,
                       "no hook point matches '%s'; valid: hook_embed, hook_pos_embed, "
                       "blocks.{0..%d}.{hook_resid_pre, ln1.hook_normalized, attn.hook_q, "
                       "attn.hook_k, attn.hook_v, attn.hook_attn_scores, attn.hook_pattern, "
                       "attn.hook_z, hook_attn_out, hook_resid_mid, ln2.hook_normalized, "
                       "mlp.hook_pre, mlp.hook_post, hook_mlp_out, hook_resid_post}, "
                       "ln_final.hook_normalized",
                       pattern, L - 1);
    }
    update_last_hook_layer(m);
    return OK;
}

void gpt2_hook_clear(gpt2_model *m)
{
    for (int i = 0; i < m->nhp; i++) {
        mem_free(m->hp[i].cbs);
        m->hp[i].cbs = NULL;
        m->hp[i].ncb = 0;
    }
    m->last_hook_layer = -2;
}

int gpt2_hook_count(const gpt2_model *m) { return m->nhp; }
const char *gpt2_hook_name(const gpt2_model *m, int i)
{
    return i >= 0 && i < m->nhp ? m->hp[i].name : NULL;
}

int gpt2_hook_info(const gpt2_model *m, const char *name, int *layer, int *width)
{
    for (int i = 0; i < m->nhp; i++)
        if (!strcmp(m->hp[i].name, name)) {
            if (layer) *layer = m->hp[i].layer;
            if (width) *width = m->hp[i].width;
            return OK;
        }
    return err_set(ERR_NOTFOUND, "unknown hook point '%s' (e.g. blocks.0.hook_resid_post; %d blocks)",
                   name, m->cfg.n_layer);
}

int gpt2_hook_token_info(const gpt2_model *m, const char *name, int *layer, int *width)
{
    int rc = gpt2_hook_info(m, name, layer, width);
    if (!rc && (strstr(name, "attn_scores") || strstr(name, "hook_pattern")))
        rc = err_set(ERR_ARG, "hook %s is [B,H,T,T] (a score per head and pair of positions), not "
                     "one vector per token", name);
    return rc;
}

const float *gpt2_hook_direct_proj(const gpt2_model *m, const char *hook, int d_in, int *ok)
{
    const gpt2_config *cfg = &m->cfg;
    int layer = -1, n = 0;
    char rest[96] = "";
    *ok = 0;
    if (!strcmp(hook, "hook_embed") || !strcmp(hook, "hook_pos_embed")) {
        *ok = d_in == cfg->n_embd;
        return NULL;
    }
    if (sscanf(hook, "blocks.%d.%95s%n", &layer, rest, &n) != 2) return NULL;
    if (!strcmp(rest, "hook_resid_pre") || !strcmp(rest, "hook_resid_mid") ||
        !strcmp(rest, "hook_resid_post") || !strcmp(rest, "hook_attn_out") ||
        !strcmp(rest, "hook_mlp_out")) {
        *ok = d_in == cfg->n_embd;
        return NULL;
    }
    char name[96];
    if (!strcmp(rest, "mlp.hook_post")) snprintf(name, sizeof name, "h.%d.mlp.c_proj.weight", layer);
    else if (!strcmp(rest, "attn.hook_z")) snprintf(name, sizeof name, "h.%d.attn.c_proj.weight", layer);
    else return NULL;
    int nd;
    int64_t shp[2];
    const float *p = gpt2_param(m, name, &nd, shp);
    *ok = p && nd == 2 && shp[0] == d_in && shp[1] == cfg->n_embd;
    return *ok ? p : NULL;
}

int gpt2_hook_order(const char *name, long long *pos)
{
    if (!strcmp(name, "hook_embed")) return *pos = HP_EMBED, OK;
    if (!strcmp(name, "hook_pos_embed")) return *pos = HP_POS, OK;
    if (!strcmp(name, "ln_final.hook_normalized")) return *pos = LLONG_MAX, OK;
    /* the layer as the model writes it ("%d" of a layer >= 0): sscanf's %d also took " 1", "+1",
       "01" and wrapped "4294967296" to 0, so imported names that are no GPT-2 point were placed
       (and a transcoder over them refused, a review) */
    if (strncmp(name, "blocks.", 7)) return ERR_NOTFOUND;
    const char *p = name + 7;
    long long layer = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (layer > (INT_MAX - (*p - '0')) / 10) return ERR_NOTFOUND;
        layer = layer * 10 + (*p - '0');
    }
    if (p == name + 7 || *p != '.' || (p - (name + 7) > 1 && name[7] == '0')) return ERR_NOTFOUND;
    for (int k = 0; k < HK_PER_BLOCK; k++)
        if (!strcmp(p + 1, hk_suffix[k])) return *pos = HP_BLOCK(layer, k), OK;
    return ERR_NOTFOUND;
}

int gpt2_hook_position_local(const gpt2_model *m, const char *hook)
{
    int L = m->cfg.n_layer;
    if (!strcmp(hook, "ln_final.hook_normalized")) return 1;
    for (int k = HK_Z; k < HK_PER_BLOCK; k++) /* after the last block's attention mix */
        if (!strcmp(hook, m->hp[HP_BLOCK(L - 1, k)].name)) return 1;
    return 0;
}

/* Fire the callbacks of point id on data with the given shape. */
static int fire(gpt2_model *m, int id, float *data, int ndim, int64_t a, int64_t b, int64_t c,
                int64_t d)
{
    hook_point *h = &m->hp[id];
    tensor_view t;
    memset(&t, 0, sizeof t);
    t.name = h->name;
    t.layer = h->layer;
    t.data = data;
    t.ndim = ndim;
    t.shape[0] = a;
    t.shape[1] = b;
    t.shape[2] = c;
    t.shape[3] = ndim > 3 ? d : 1;
    tensor_set_contiguous(&t);
    for (int i = 0; i < h->ncb; i++) {
        err_clear();
        int r = h->cbs[i].fn(&t, h->cbs[i].user);
        if (r) {
            /* a hook that recorded its own error with err_set keeps code and message */
            if (r > 0 && r < ERR__COUNT && err_msg()[0]) return r;
            return err_set(ERR_ABORTED, "forward stopped by the hook on %s", h->name);
        }
    }
    return OK;
}

#define HOOKED(id) (m->hp[id].ncb > 0)

/* ---- forward ---------------------------------------------------------------------------- */
static int alloc_acts(gpt2_model *m, int B, int T, int logits)
{
    const gpt2_config *c = &m->cfg;
    size_t N = (size_t)B * T, C = c->n_embd, F = c->n_inner, H = c->n_head;
    size_t Ls = m->train ? (size_t)c->n_layer : 1;
    int rc = OK;
    rc |= buf_need(&m->embed, N * C);
    rc |= buf_need(&m->pos, N * C);
    rc |= buf_need(&m->resid, (m->train ? Ls + 1 : 1) * N * C);
    rc |= buf_need(&m->mid, m->train ? Ls * N * C : 1);
    rc |= buf_need(&m->ln1, Ls * N * C);
    rc |= buf_need(&m->ln1m, Ls * N);
    rc |= buf_need(&m->ln1r, Ls * N);
    rc |= buf_need(&m->q, Ls * N * C);
    rc |= buf_need(&m->k, Ls * N * C);
    rc |= buf_need(&m->v, Ls * N * C);
    rc |= buf_need(&m->att, Ls * (size_t)B * H * T * T);
    rc |= buf_need(&m->z, Ls * N * C);
    rc |= buf_need(&m->attn_out, N * C);
    rc |= buf_need(&m->ln2, Ls * N * C);
    rc |= buf_need(&m->ln2m, Ls * N);
    rc |= buf_need(&m->ln2r, Ls * N);
    rc |= buf_need(&m->pre, Ls * N * F);
    rc |= buf_need(&m->post, Ls * N * F);
    rc |= buf_need(&m->mlp_out, N * C);
    rc |= buf_need(&m->lnf, N * C);
    rc |= buf_need(&m->lnfm, N);
    rc |= buf_need(&m->lnfr, N);
    if (logits) rc |= buf_need(&m->logits, N * (size_t)c->vocab_size);
    return rc ? err_set(ERR_NOMEM, "out of memory for activations of %d x %d tokens", B, T) : OK;
}

int gpt2_check_ids(const gpt2_config *c, const int *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= c->vocab_size)
            return err_set(ERR_ARG, "token id %d at position %zu is outside the vocabulary (0..%d)",
                           ids[i], i, c->vocab_size - 1);
    return OK;
}

static int check_tokens(const gpt2_model *m, const int *tokens, int B, int T)
{
    if (B < 1 || T < 1) return err_set(ERR_ARG, "empty batch (%d x %d)", B, T);
    if (T > m->cfg.n_ctx)
        return err_set(ERR_ARG, "sequence of %d tokens exceeds the model context of %d", T,
                       m->cfg.n_ctx);
    return gpt2_check_ids(&m->cfg, tokens, (size_t)B * T);
}

/* The core pass. run_to: last layer to run (n_layer-1 for all); lnf: apply ln_final; logits. */
static int forward_impl(gpt2_model *m, const int *tokens, int B, int T, int run_to, int do_lnf,
                        int do_logits)
{
    const gpt2_config *c = &m->cfg;
    int L = c->n_layer, C = c->n_embd, F = c->n_inner, H = c->n_head, V = c->vocab_size;
    int N = B * T, dh = C / H;
    float eps = c->ln_eps;
    int rc;
    m->logits_valid = 0;
    m->layers_run = 0;
    if ((rc = alloc_acts(m, B, T, do_logits))) return rc;
    m->lastB = B;
    m->lastT = T;
    size_t NC = (size_t)N * C, NF = (size_t)N * F, BHTT = (size_t)B * H * T * T;
    int tr = m->train;
    float *R = m->resid.p;
    int he = HOOKED(HP_EMBED), hpz = HOOKED(HP_POS);
    if (he || hpz) {
        op_embed_forward(R, m->embed.p, m->pos.p, tokens, m->wte, m->wpe, B, T, C);
        if (he && (rc = fire(m, HP_EMBED, m->embed.p, 3, B, T, C, 1))) return rc;
        if (hpz && (rc = fire(m, HP_POS, m->pos.p, 3, B, T, C, 1))) return rc;
        op_residual_forward(R, m->embed.p, m->pos.p, NC); /* the hooks may have edited them */
    } else
        op_embed_forward(R, NULL, NULL, tokens, m->wte, m->wpe, B, T, C);
    const float *pending_bias = NULL; /* mlp c_proj bias not yet added to the residual */
    /* without ln_final the pass ends at the last hook of layer run_to, not at the end of the
       block (mlp.hook_post of the last layer: its c_proj, a quarter of the demo model's FLOPs,
       is not needed) */
    int stop_k = -1;
    for (int k = 0; !do_lnf && run_to >= 0 && k < HK_PER_BLOCK; k++)
        if (HOOKED(HP_BLOCK(run_to, k))) stop_k = k;
    for (int l = 0; l <= run_to; l++) {
        layer_params *p = &m->lp[l];
        size_t s = tr ? (size_t)l : 0;
        float *rpre = tr ? R + (size_t)l * NC : R;
        float *rmid = tr ? m->mid.p + (size_t)l * NC : R;
        float *rpost = tr ? R + (size_t)(l + 1) * NC : R;
        float *ln1 = m->ln1.p + s * NC, *ln1m = m->ln1m.p + s * N, *ln1r = m->ln1r.p + s * N;
        float *q = m->q.p + s * NC, *k = m->k.p + s * NC, *v = m->v.p + s * NC;
        float *att = m->att.p + s * BHTT, *z = m->z.p + s * NC;
        float *ln2 = m->ln2.p + s * NC, *ln2m = m->ln2m.p + s * N, *ln2r = m->ln2r.p + s * N;
        float *pre = m->pre.p + s * NF, *post = m->post.p + s * NF;
        int id = HP_BLOCK(l, 0);
        m->layers_run = l + 1;
#define HK(k) HOOKED(id + (k))
#define STOP(k)                                                                                    \
    if (l == run_to && (k) == stop_k) return OK
        /* --- attention sublayer --- */
        if (HK(HK_RESID_PRE)) {
            if (pending_bias) op_add_bias(rpre, pending_bias, N, C);
            pending_bias = NULL;
            if ((rc = fire(m, id + HK_RESID_PRE, rpre, 3, B, T, C, 1))) return rc;
            STOP(HK_RESID_PRE);
        }
        op_residual_layernorm_forward(ln1, ln1m, ln1r, rpre, NULL, pending_bias, p->ln1w, p->ln1b,
                                      eps, N, C);
        pending_bias = NULL;
        if (HK(HK_LN1) && (rc = fire(m, id + HK_LN1, ln1, 3, B, T, C, 1))) return rc;
        STOP(HK_LN1);
        op_matmul_forward(q, C, ln1, p->qkvw, 3 * C, p->qkvb, N, C, C, 0.0f);
        op_matmul_forward(k, C, ln1, p->qkvw + C, 3 * C, p->qkvb + C, N, C, C, 0.0f);
        op_matmul_forward(v, C, ln1, p->qkvw + 2 * C, 3 * C, p->qkvb + 2 * C, N, C, C, 0.0f);
        if (HK(HK_Q) && (rc = fire(m, id + HK_Q, q, 4, B, T, H, dh))) return rc;
        STOP(HK_Q);
        if (HK(HK_K) && (rc = fire(m, id + HK_K, k, 4, B, T, H, dh))) return rc;
        STOP(HK_K);
        if (HK(HK_V) && (rc = fire(m, id + HK_V, v, 4, B, T, H, dh))) return rc;
        STOP(HK_V);
        op_attention_scores(att, q, k, B, T, C, H);
        if (HK(HK_SCORES) && (rc = fire(m, id + HK_SCORES, att, 4, B, H, T, T))) return rc;
        STOP(HK_SCORES);
        op_attention_softmax(att, B, T, H);
        if (HK(HK_PATTERN) && (rc = fire(m, id + HK_PATTERN, att, 4, B, H, T, T))) return rc;
        STOP(HK_PATTERN);
        op_attention_values(z, att, v, B, T, C, H);
        if (HK(HK_Z) && (rc = fire(m, id + HK_Z, z, 4, B, T, H, dh))) return rc;
        STOP(HK_Z);
        if (HK(HK_ATTN_OUT)) {
            float *ao = m->attn_out.p;
            op_matmul_forward(ao, C, z, p->attprojw, C, p->attprojb, N, C, C, 0.0f);
            if ((rc = fire(m, id + HK_ATTN_OUT, ao, 3, B, T, C, 1))) return rc;
            STOP(HK_ATTN_OUT);
            op_residual_forward(rmid, rpre, ao, NC);
            if (HK(HK_RESID_MID) && (rc = fire(m, id + HK_RESID_MID, rmid, 3, B, T, C, 1)))
                return rc;
            STOP(HK_RESID_MID);
            op_layernorm_forward(ln2, ln2m, ln2r, rmid, p->ln2w, p->ln2b, eps, N, C);
        } else {
            /* accumulate the projection straight into the residual stream */
            if (rmid != rpre) memcpy(rmid, rpre, sizeof(float) * NC);
            op_matmul_forward(rmid, C, z, p->attprojw, C, NULL, N, C, C, 1.0f);
            if (HK(HK_RESID_MID)) {
                op_add_bias(rmid, p->attprojb, N, C);
                if ((rc = fire(m, id + HK_RESID_MID, rmid, 3, B, T, C, 1))) return rc;
                STOP(HK_RESID_MID);
                op_layernorm_forward(ln2, ln2m, ln2r, rmid, p->ln2w, p->ln2b, eps, N, C);
            } else
                op_residual_layernorm_forward(ln2, ln2m, ln2r, rmid, NULL, p->attprojb, p->ln2w,
                                              p->ln2b, eps, N, C);
        }
        /* --- MLP sublayer --- */
        if (HK(HK_LN2) && (rc = fire(m, id + HK_LN2, ln2, 3, B, T, C, 1))) return rc;
        STOP(HK_LN2);
        op_matmul_forward(pre, F, ln2, p->fcw, F, NULL, N, C, F, 0.0f);
        op_bias_gelu_forward(post, pre, p->fcb, N, F, m->gelu);
        if (HK(HK_MLP_PRE)) {
            if ((rc = fire(m, id + HK_MLP_PRE, pre, 3, B, T, F, 1))) return rc;
            STOP(HK_MLP_PRE);
            /* the hook may have changed pre: recompute post from it */
            op_bias_gelu_forward(post, pre, NULL, N, F, m->gelu);
        }
        if (HK(HK_MLP_POST) && (rc = fire(m, id + HK_MLP_POST, post, 3, B, T, F, 1))) return rc;
        STOP(HK_MLP_POST);
        if (HK(HK_MLP_OUT)) {
            float *mo = m->mlp_out.p;
            op_matmul_forward(mo, C, post, p->fcprojw, C, p->fcprojb, N, F, C, 0.0f);
            if ((rc = fire(m, id + HK_MLP_OUT, mo, 3, B, T, C, 1))) return rc;
            STOP(HK_MLP_OUT);
            op_residual_forward(rpost, rmid, mo, NC);
        } else {
            if (rpost != rmid) memcpy(rpost, rmid, sizeof(float) * NC);
            op_matmul_forward(rpost, C, post, p->fcprojw, C, NULL, N, F, C, 1.0f);
            pending_bias = p->fcprojb;
        }
        if (HK(HK_RESID_POST) || l == run_to) {
            if (pending_bias) op_add_bias(rpost, pending_bias, N, C);
            pending_bias = NULL;
            if (HK(HK_RESID_POST) && (rc = fire(m, id + HK_RESID_POST, rpost, 3, B, T, C, 1)))
                return rc;
            STOP(HK_RESID_POST);
        }
#undef HK
#undef STOP
    }
    if (!do_lnf) return OK;
    float *rlast = tr ? R + (size_t)L * NC : R;
    op_layernorm_forward(m->lnf.p, m->lnfm.p, m->lnfr.p, rlast, m->lnfw, m->lnfb, eps, N, C);
    if (HOOKED(HP_LNF(L)) && (rc = fire(m, HP_LNF(L), m->lnf.p, 3, B, T, C, 1))) return rc;
    if (!do_logits) return OK;
    op_logits_forward(m->logits.p, m->lnf.p, m->lm_head, N, C, V);
    m->logits_valid = 1;
    return OK;
}

int gpt2_forward(gpt2_model *m, const int *tokens, int B, int T, int want_logits)
{
    int rc = check_tokens(m, tokens, B, T);
    if (rc) return rc;
    int L = m->cfg.n_layer;
    if (want_logits) return forward_impl(m, tokens, B, T, L - 1, 1, 1);
    int last = m->last_hook_layer;
    m->layers_run = 0;
    if (last == -2) return OK;
    if (last >= L) return forward_impl(m, tokens, B, T, L - 1, 1, 0);
    return forward_impl(m, tokens, B, T, last, 0, 0);
}

const float *gpt2_logits(const gpt2_model *m) { return m->logits_valid ? m->logits.p : NULL; }
int gpt2_layers_run(const gpt2_model *m) { return m->layers_run; }

static int check_targets(const gpt2_model *m, const int *targets, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (targets[i] >= m->cfg.vocab_size)
            return err_set(ERR_ARG, "target id %d at position %zu is outside the vocabulary (0..%d)",
                           targets[i], i, m->cfg.vocab_size - 1);
    return OK;
}

int gpt2_loss(gpt2_model *m, const int *tokens, const int *targets, int B, int T,
              float *loss_per_token, double *mean)
{
    int rc = check_tokens(m, tokens, B, T);
    if (rc) return rc;
    if ((rc = check_targets(m, targets, (size_t)B * T))) return rc;
    if ((rc = forward_impl(m, tokens, B, T, m->cfg.n_layer - 1, 1, 1))) return rc;
    long cnt;
    double sum = op_crossentropy(m->logits.p, loss_per_token, targets, B * T, m->cfg.vocab_size,
                                 0.0f, &cnt);
    if (mean) *mean = cnt ? sum / (double)cnt : 0.0;
    return OK;
}

/* ---- training ---------------------------------------------------------------------------- */
int gpt2_train_enable(gpt2_model *m)
{
    if (m->train) return OK;
    m->grads = mem_alloc_aligned(sizeof(float) * m->nparams);
    if (!m->grads) return err_set(ERR_NOMEM, "out of memory for gradients");
    memset(m->grads, 0, sizeof(float) * m->nparams);
    free_bufs(m); /* inference buffers are laid out for one layer */
    m->train = 1;
    return OK;
}

/* Backward from the dlogits in m->logits.p (the last forward, in train mode): parameter
 * gradients into m->grads (zeroed first). grab >= 0: stop once the gradient at hook point grab
 * is known and copy it to grab_out ([N, width] of that point). */
static int backward_impl(gpt2_model *m, const int *tokens, int B, int T, int grab,
                         float *grab_out)
{
    const gpt2_config *c = &m->cfg;
    int L = c->n_layer, C = c->n_embd, F = c->n_inner, H = c->n_head, V = c->vocab_size;
    int N = B * T;
    size_t NC = (size_t)N * C, NF = (size_t)N * F, BHTT = (size_t)B * H * T * T;
    m->logits_valid = 0; /* overwritten by dlogits */
    memset(m->grads, 0, sizeof(float) * m->nparams);
    if (buf_need(&m->dres, NC) || buf_need(&m->dln, NC) || buf_need(&m->dq, NC) ||
        buf_need(&m->dk, NC) || buf_need(&m->dv, NC) || buf_need(&m->dz, NC) ||
        buf_need(&m->datt, (size_t)B * H * T * T) || buf_need(&m->dpre, NF) ||
        buf_need(&m->dpost, NF))
        return err_set(ERR_NOMEM, "out of memory for the backward pass");
    float *G = m->grads;
#define GR(ptr) (G + ((ptr) - m->params))
#define GRAB(id, src, n)                                                                      \
    do {                                                                                      \
        if (grab == (id)) {                                                                   \
            memcpy(grab_out, (src), sizeof(float) * (n));                                     \
            return OK;                                                                        \
        }                                                                                     \
    } while (0)
    float *dres = m->dres.p, *dln = m->dln.p;
    memset(dres, 0, sizeof(float) * NC);
    memset(dln, 0, sizeof(float) * NC);
    op_logits_backward(dln, GR(m->lm_head), m->logits.p, m->lnf.p, m->lm_head, N, C, V);
    GRAB(HP_LNF(L), dln, NC);
    float *R = m->resid.p;
    op_layernorm_backward(dres, GR(m->lnfw), GR(m->lnfb), dln, R + (size_t)L * NC, m->lnfw,
                          m->lnfm.p, m->lnfr.p, N, C);
    for (int l = L - 1; l >= 0; l--) {
        layer_params *p = &m->lp[l];
        float *rpre = R + (size_t)l * NC, *rmid = m->mid.p + (size_t)l * NC;
        float *ln1 = m->ln1.p + l * NC, *ln1m = m->ln1m.p + (size_t)l * N,
              *ln1r = m->ln1r.p + (size_t)l * N;
        float *q = m->q.p + l * NC, *k = m->k.p + l * NC, *v = m->v.p + l * NC;
        float *att = m->att.p + l * BHTT, *z = m->z.p + l * NC;
        float *ln2 = m->ln2.p + l * NC, *ln2m = m->ln2m.p + (size_t)l * N,
              *ln2r = m->ln2r.p + (size_t)l * N;
        float *pre = m->pre.p + l * NF, *post = m->post.p + l * NF;
        int id = HP_BLOCK(l, 0);
        GRAB(id + HK_RESID_POST, dres, NC); /* resid_post = mid + mlp_out */
        GRAB(id + HK_MLP_OUT, dres, NC);
        /* MLP: resid_post = mid + post @ Wp + bp (scratch gradients are overwritten, not
         * zeroed and accumulated: that saved ~7% of a small-model step in memsets) */
        op_matmul_backward(m->dpost.p, 0.0f, GR(p->fcprojw), C, GR(p->fcprojb), dres, C, post,
                           p->fcprojw, N, F, C);
        GRAB(id + HK_MLP_POST, m->dpost.p, NF);
        op_gelu_backward(m->dpre.p, pre, m->dpost.p, NF, m->gelu);
        op_matmul_backward(dln, 0.0f, GR(p->fcw), F, GR(p->fcb), m->dpre.p, F, ln2, p->fcw, N, C,
                           F);
        op_layernorm_backward(dres, GR(p->ln2w), GR(p->ln2b), dln, rmid, p->ln2w, ln2m, ln2r, N, C);
        GRAB(id + HK_RESID_MID, dres, NC); /* resid_mid = pre + attn_out */
        GRAB(id + HK_ATTN_OUT, dres, NC);
        /* attention: mid = pre + z @ Wo + bo */
        op_matmul_backward(m->dz.p, 0.0f, GR(p->attprojw), C, GR(p->attprojb), dres, C, z,
                           p->attprojw, N, C, C);
        GRAB(id + HK_Z, m->dz.p, NC);
        op_attention_backward(m->dq.p, m->dk.p, m->dv.p, m->datt.p, m->dz.p, q, k, v, att, B, T, C,
                              H);
        float *gw = GR(p->qkvw), *gb = GR(p->qkvb);
        op_matmul_backward(dln, 0.0f, gw, 3 * C, gb, m->dq.p, C, ln1, p->qkvw, N, C, C);
        op_matmul_backward(dln, 1.0f, gw + C, 3 * C, gb + C, m->dk.p, C, ln1, p->qkvw + C, N, C, C);
        op_matmul_backward(dln, 1.0f, gw + 2 * C, 3 * C, gb + 2 * C, m->dv.p, C, ln1,
                           p->qkvw + 2 * C, N, C, C);
        op_layernorm_backward(dres, GR(p->ln1w), GR(p->ln1b), dln, rpre, p->ln1w, ln1m, ln1r, N, C);
        GRAB(id + HK_RESID_PRE, dres, NC);
    }
    op_embed_backward(GR(m->wte), GR(m->wpe), dres, tokens, B, T, C);
#undef GRAB
#undef GR
    return OK;
}

int gpt2_forward_backward(gpt2_model *m, const int *tokens, const int *targets, int B, int T,
                          double *mean)
{
    if (!m->train) return err_set(ERR_ARG, "gpt2_forward_backward needs gpt2_train_enable first");
    int rc = check_tokens(m, tokens, B, T);
    if (rc) return rc;
    if ((rc = check_targets(m, targets, (size_t)B * T))) return rc;
    int L = m->cfg.n_layer, V = m->cfg.vocab_size, N = B * T;
    if ((rc = forward_impl(m, tokens, B, T, L - 1, 1, 1))) return rc;
    long cnt = 0;
    for (int i = 0; i < N; i++) cnt += targets[i] >= 0;
    float scale = cnt ? 1.0f / (float)cnt : 0.0f;
    double sum = op_crossentropy(m->logits.p, NULL, targets, N, V, cnt ? scale : 0.0f, &cnt);
    if (mean) *mean = cnt ? sum / (double)cnt : 0.0;
    if (!cnt) {
        m->logits_valid = 0;
        memset(m->grads, 0, sizeof(float) * m->nparams);
        return OK;
    }
    return backward_impl(m, tokens, B, T, -1, NULL);
}

int gpt2_hook_grad(gpt2_model *m, const int *tokens, int B, int T, const float *dlogits,
                   const char *hook, float *dhook, float *logits_out)
{
    if (!m->train) return err_set(ERR_ARG, "gpt2_hook_grad needs gpt2_train_enable first");
    int id = -1;
    for (int i = 0; i < m->nhp; i++)
        if (!strcmp(m->hp[i].name, hook)) id = i;
    if (id < 0) return gpt2_hook_info(m, hook, NULL, NULL); /* the unknown-name message */
    int k = id >= 2 && id < HP_LNF(m->cfg.n_layer) ? (id - 2) % HK_PER_BLOCK : -1;
    if (id != HP_LNF(m->cfg.n_layer) && k != HK_RESID_PRE && k != HK_Z && k != HK_ATTN_OUT &&
        k != HK_RESID_MID && k != HK_MLP_POST && k != HK_MLP_OUT && k != HK_RESID_POST)
        return err_set(ERR_ARG, "no gradient at hook %s (supported: resid_pre/mid/post, attn.hook_z, "
                       "hook_attn_out, mlp.hook_post, hook_mlp_out, ln_final.hook_normalized)", hook);
    int rc = check_tokens(m, tokens, B, T);
    if (rc) return rc;
    size_t NV = (size_t)B * T * m->cfg.vocab_size;
    if ((rc = forward_impl(m, tokens, B, T, m->cfg.n_layer - 1, 1, 1))) return rc;
    if (logits_out) memcpy(logits_out, m->logits.p, sizeof(float) * NV);
    memcpy(m->logits.p, dlogits, sizeof(float) * NV);
    return backward_impl(m, tokens, B, T, id, dhook);
}

int gpt2_clone(gpt2_model **out, const gpt2_model *m)
{
    int rc = model_alloc(out, &m->cfg, m->tied, m->gelu, 1);
    if (rc) return rc;
    memcpy((*out)->params, m->params, sizeof(float) * m->nparams);
    return OK;
}

int gpt2_untie(gpt2_model *m)
{
    if (!m->tied) return OK;
    gpt2_model *n;
    int rc = model_alloc(&n, &m->cfg, 0, m->gelu, 1);
    if (rc) return rc;
    /* the untied layout is the tied one plus lm_head.weight at the end */
    memcpy(n->params, m->params, sizeof(float) * m->nparams);
    memcpy(n->lm_head, m->wte, sizeof(float) * (size_t)m->cfg.vocab_size * m->cfg.n_embd);
    gpt2_model tmp = *m;
    *m = *n;
    *n = tmp;
    gpt2_free(n);
    return OK;
}

/* ---- the directory's checksum (gpt2_dir_checksum) ---- */
int gpt2_dir_checksum(const char *dir, char out[17])
{
    char p[4096];
    uint64_t h = HASH_FNV1A_INIT;
    int rc = path_join(p, sizeof p, dir, "config.json");
    if (!rc) rc = file_fnv1a(p, &h);
    if (rc) return rc;
    if ((rc = path_join(p, sizeof p, dir, "model.safetensors"))) return rc;
    if ((rc = file_fnv1a(p, &h))) return rc;
    snprintf(out, 17, "%016llx", (unsigned long long)h);
    return OK;
}
