/* params.c - parameter counting by matrix (see params.h). */
#include "model/params.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/checked.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/json.h"
#include "common/mem.h"
#include "model/safetensors.h"

const char *const params_presets[] = {"gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "gpt3",
                                      NULL};

static const struct {
    const char *name, *title;
    int64_t L, C, H, V, N;
    int tied;
} presets[] = {
    {"gpt2", "GPT-2 small (124M)", 12, 768, 12, 50257, 1024, 1},
    {"gpt2-medium", "GPT-2 medium (355M)", 24, 1024, 16, 50257, 1024, 1},
    {"gpt2-large", "GPT-2 large (774M)", 36, 1280, 20, 50257, 1024, 1},
    {"gpt2-xl", "GPT-2 XL (1.5B)", 48, 1600, 25, 50257, 1024, 1},
    /* GPT-3 175B (Brown et al. 2020, table 2.1); untied as in the usual 175,181,291,520 count */
    {"gpt3", "GPT-3 175B", 96, 12288, 96, 50257, 2048, 0},
};

int params_preset(const char *name, params_shape *out)
{
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (strcmp(presets[i].name, name)) continue;
        memset(out, 0, sizeof *out);
        snprintf(out->name, sizeof out->name, "%s", presets[i].title);
        out->n_layer = presets[i].L;
        out->n_embd = presets[i].C;
        out->n_head = presets[i].H;
        out->n_inner = 4 * presets[i].C;
        out->vocab = presets[i].V;
        out->n_ctx = presets[i].N;
        out->tied = presets[i].tied;
        out->stored = -1;
        return OK;
    }
    return err_set(ERR_NOTFOUND,
                   "unknown preset '%s' (presets: gpt2, gpt2-medium, gpt2-large, gpt2-xl, gpt3)",
                   name);
}

/* Positive integer key; `alt` is an older spelling (n_ctx for n_positions). */
static int get_int(const cJSON *root, const char *path, const char *key, const char *alt,
                   int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v && alt) v = cJSON_GetObjectItemCaseSensitive(root, alt);
    if (!v) return err_set(ERR_FORMAT, "%s: missing \"%s\"", path, key);
    if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble != floor(v->valuedouble))
        return err_set(ERR_FORMAT, "%s: \"%s\" must be a positive integer%s", path, key,
                       cJSON_IsNull(v) ? " (got null)" : ""); /* the loader's words */
    if (v->valuedouble > 1e9)
        return err_set(ERR_FORMAT, "%s: \"%s\" is %g, above the limit of 1e9", path, key,
                       v->valuedouble);
    *out = (int64_t)v->valuedouble;
    return OK;
}

static int compute(const params_shape *s, params_count *o, const char *name);

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* The stored parameter count, for comparison with the computed one (a tied model's file may
 * still hold an unused lm_head.weight, which the loader ignores: counted apart, or a valid file
 * read as DIFFERS, an audit; tying is config.json's). */
static int scan_checkpoint(const char *dir, params_shape *out)
{
    char path[4096];
    int prc = path_join(path, sizeof path, dir, "model.safetensors");
    if (prc) return prc;
    if (access(path, F_OK) != 0) return OK;
    st_file *f;
    int rc = st_open(&f, path);
    if (rc) return rc;
    int64_t n = 0;
    for (int i = 0; i < st_count(f); i++) {
        const st_tensor *t = st_at(f, i);
        if (ends_with(t->name, ".attn.bias") || ends_with(t->name, ".attn.masked_bias")) continue;
        if (out->tied && (!strcmp(t->name, "lm_head.weight") || !strcmp(t->name, "transformer.lm_head.weight"))) {
            out->unused_head = st_numel(t);
            continue;
        }
        n += st_numel(t);
    }
    st_close(f);
    out->stored = n;
    return OK;
}

int params_from_dir(const char *dir, params_shape *out)
{
    char path[4096];
    int prc = path_join(path, sizeof path, dir, "config.json");
    if (prc) return prc;
    cJSON *root;
    int rc = json_read_object_file(path, NULL, (size_t)64 << 20, &root);
    if (rc) return rc;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", dir);
    /* as the loader: gpt_bigcode's config has GPT-2's keys (n_layer, n_embd, n_inner, ...) and
       was counted as a GPT-2, its multi-query attention's K and V as full matrices (an audit) */
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (mt && !(cJSON_IsString(mt) && !strcmp(mt->valuestring, "gpt2"))) {
        rc = cJSON_IsString(mt)
                 ? err_set(ERR_FORMAT, "%s: model_type \"%.60s\" is not supported (only \"gpt2\")",
                           path, mt->valuestring)
                 : err_set(ERR_FORMAT, "%s: \"model_type\" must be the string \"gpt2\"", path);
        goto done;
    }
    if ((rc = get_int(root, path, "n_layer", NULL, &out->n_layer)) ||
        (rc = get_int(root, path, "n_embd", NULL, &out->n_embd)) ||
        (rc = get_int(root, path, "n_head", NULL, &out->n_head)) ||
        (rc = get_int(root, path, "vocab_size", NULL, &out->vocab)) ||
        (rc = get_int(root, path, "n_positions", "n_ctx", &out->n_ctx)))
        goto done;
    const cJSON *inner = cJSON_GetObjectItemCaseSensitive(root, "n_inner");
    if (!inner || cJSON_IsNull(inner)) out->n_inner = 4 * out->n_embd;
    else if ((rc = get_int(root, path, "n_inner", NULL, &out->n_inner))) goto done;
    /* as the loader: absent is true, anything but a JSON boolean is refused */
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
    if (tie && !cJSON_IsBool(tie)) {
        rc = err_set(ERR_FORMAT, "%s: \"tie_word_embeddings\" must be true or false", path);
        goto done;
    }
    out->tied = !tie || cJSON_IsTrue(tie);
    out->stored = -1;
    if (out->n_embd % out->n_head)
        rc = err_set(ERR_FORMAT, "%s: n_embd %lld is not a multiple of n_head %lld", path,
                     (long long)out->n_embd, (long long)out->n_head);
    /* the loader's limits do not apply here (params sizes hypothetical models), but every
     * count must fit: refuse the config, naming it, rather than print a wrapped total */
    params_count probe;
    if (!rc) rc = compute(out, &probe, path);
done:
    cJSON_Delete(root);
    if (rc) return rc;
    return scan_checkpoint(dir, out);
}

/* One row; 1 when its count (or a running total) does not fit in int64. */
static int add(params_count *o, const char *label, int64_t rows, int64_t cols, int64_t layers,
               int cat)
{
    params_row *r = &o->rows[o->nrows++];
    r->label = label;
    r->rows = rows;
    r->cols = cols;
    int64_t one, total;
    if (ck_mul_i64(rows, cols, &one) || ck_mul_i64(one, layers ? layers : 1, &total) ||
        ck_add_i64(o->by_category[cat], total, &o->by_category[cat]) ||
        ck_add_i64(o->total, total, &o->total)) {
        err_set(ERR_FORMAT,
                "%s: the parameter count does not fit in 64 bits (%s: %lld x %lld x %lld "
                "layers)",
                o->name, label, (long long)rows, (long long)cols, (long long)(layers ? layers : 1));
        return 1;
    }
    r->per_layer = layers ? one : 0;
    r->total = total;
    r->category = cat;
    return 0;
}

static int compute(const params_shape *s, params_count *o, const char *name)
{
    memset(o, 0, sizeof *o);
    o->name = name;
    int64_t L = s->n_layer, C = s->n_embd, F = s->n_inner, V = s->vocab, N = s->n_ctx;
    /* fields are >= 1 and <= 1e9 (presets and get_int), so 2 * C and 3 * C cannot overflow */
    int bad = add(o, "token embedding (wte)", V, C, 0, PARAMS_MATRIX) ||
              add(o, "attention query W_Q", C, C, L, PARAMS_MATRIX) ||
              add(o, "attention key W_K", C, C, L, PARAMS_MATRIX) ||
              add(o, "attention value W_V", C, C, L, PARAMS_MATRIX) ||
              add(o, "attention output W_O", C, C, L, PARAMS_MATRIX) ||
              add(o, "MLP up (c_fc)", C, F, L, PARAMS_MATRIX) ||
              add(o, "MLP down (c_proj)", F, C, L, PARAMS_MATRIX) ||
              (!s->tied && add(o, "unembedding (lm_head)", C, V, 0, PARAMS_MATRIX)) ||
              add(o, "attention q,k,v biases", 3 * C, 1, L, PARAMS_BIAS) ||
              add(o, "attention output bias", C, 1, L, PARAMS_BIAS) ||
              add(o, "MLP up bias", F, 1, L, PARAMS_BIAS) ||
              add(o, "MLP down bias", C, 1, L, PARAMS_BIAS) ||
              add(o, "LayerNorm ln_1 gain+bias", 2 * C, 1, L, PARAMS_NORM) ||
              add(o, "LayerNorm ln_2 gain+bias", 2 * C, 1, L, PARAMS_NORM) ||
              add(o, "final LayerNorm ln_f", 2 * C, 1, 0, PARAMS_NORM) ||
              add(o, "position embedding (wpe)", N, C, 0, PARAMS_POS);
    return bad ? ERR_FORMAT : OK;
}

int params_compute(const params_shape *s, params_count *o) { return compute(s, o, s->name); }
