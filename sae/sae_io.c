/* sae_io.c - SAELens-layout files: sae_weights.safetensors, cfg.json, sparsity.safetensors. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/checked.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/hash.h"
#include "common/json.h"
#include "common/mem.h"
#include "model/safetensors.h"
#include "sae/sae.h"

static int make_dir(const char *dir)
{
    struct stat sb;
    if (stat(dir, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode)) return err_set(ERR_IO, "%s: exists and is not a directory", dir);
        return OK;
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return err_set(ERR_IO, "%s: cannot create directory: %s", dir, strerror(errno));
    return OK;
}

int sae_save(const sae_model *s, const char *dir) { return sae_save_ex(s, dir, NULL, NULL); }

int sae_save_ex(const sae_model *s, const char *dir, const char *train_json,
                const float *log10_density)
{
    const sae_config *c = &s->cfg;
    int rc = make_dir(dir);
    if (rc) return rc;
    char path[4096];
    int64_t D = c->d_in, S = c->d_sae, Do = sae_out_dim(c);
    st_out t[6] = {
        {"W_enc", ST_F32, 2, {D, S}, s->W_enc},
        {"b_enc", ST_F32, 1, {S}, s->b_enc},
        {"W_dec", ST_F32, 2, {S, Do}, s->W_dec},
        {"b_dec", ST_F32, 1, {Do}, s->b_dec},
        {"threshold", ST_F32, 1, {S}, s->threshold},
    };
    int nt = s->threshold ? 5 : 4;
    if (s->W_skip) t[nt++] = (st_out){"W_skip", ST_F32, 2, {Do, D}, s->W_skip};
    if (c->arch == SAE_GATED) { /* SAELens "gated": b_gate, b_mag, r_mag and no b_enc */
        t[1].name = "b_gate";
        t[4] = (st_out){"b_mag", ST_F32, 1, {S}, s->b_mag};
        t[5] = (st_out){"r_mag", ST_F32, 1, {S}, s->r_mag};
        nt = 6;
    }
    if ((rc = path_join(path, sizeof path, dir, "sae_weights.safetensors"))) return rc;
    rc = st_write(path, t, nt, NULL);
    if (rc) return rc;
    if (log10_density) {
        st_out sp = {"sparsity", ST_F32, 1, {S}, log10_density};
        if ((rc = path_join(path, sizeof path, dir, "sparsity.safetensors"))) return rc;
        rc = st_write(path, &sp, 1, NULL);
        if (rc) return rc;
    }
    /* BatchTopK and Matryoshka are saved for inference as JumpReLU with their global threshold
       (as SAELens does) */
    const char *arch = c->arch == SAE_RELU       ? "standard"
                       : c->arch == SAE_TOPK     ? "topk"
                       : c->arch == SAE_GATED    ? "gated"
                                                 : "jumprelu";
    /* transcoders: SAELens' four classes, the JumpReLU ones for a threshold (SkipTranscoder has
       no threshold parameter: SAELens' strict load refused ours, an audit); the activation (when
       not what the class implies) in activation_fn / activation_fn_kwargs, as older SAELens
       configs name it */
    if (c->transcoder == SAE_SKIP_TRANSCODER)
        arch = s->threshold ? "jumprelu_skip_transcoder" : "skip_transcoder";
    else if (c->transcoder) arch = s->threshold ? "jumprelu_transcoder" : "transcoder";
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "architecture", arch);
    cJSON_AddNumberToObject(root, "d_in", c->d_in);
    cJSON_AddNumberToObject(root, "d_sae", c->d_sae);
    if (c->arch == SAE_TOPK) cJSON_AddNumberToObject(root, "k", c->k);
    if (c->arch == SAE_MATRYOSHKA && c->n_widths > 0)
        cJSON_AddItemToObject(root, "matryoshka_widths", cJSON_CreateIntArray(c->widths, c->n_widths));
    cJSON_AddStringToObject(root, "dtype", "float32");
    cJSON_AddStringToObject(root, "device", "cpu");
    cJSON_AddBoolToObject(root, "apply_b_dec_to_input", !c->transcoder);
    if (c->transcoder) {
        cJSON_AddNumberToObject(root, "d_out", c->d_out);
        cJSON_AddStringToObject(root, "hook_name_out", c->hook_name_out);
        const char *act = c->arch == SAE_TOPK ? "topk" : s->threshold ? "jumprelu" : "relu";
        cJSON_AddStringToObject(root, "activation_fn", act);
        if (c->arch == SAE_TOPK) {
            cJSON *kw = cJSON_CreateObject();
            cJSON_AddNumberToObject(kw, "k", c->k);
            cJSON_AddItemToObject(root, "activation_fn_kwargs", kw);
        }
    }
    cJSON_AddStringToObject(root, "normalize_activations", "none");
    cJSON_AddStringToObject(meta, "hook_name", c->hook_name);
    cJSON_AddStringToObject(meta, "model_name", c->model_name);
    if (c->model_checksum[0]) cJSON_AddStringToObject(meta, "model_checksum", c->model_checksum);
    if (c->center_input) { /* W_enc is centred already; loading centres it again, a no-op */
        cJSON *kw = cJSON_CreateObject();
        cJSON_AddBoolToObject(kw, "center_writing_weights", 1);
        cJSON_AddItemToObject(meta, "model_from_pretrained_kwargs", kw);
    }
    if (c->transcoder) cJSON_AddStringToObject(meta, "hook_name_out", c->hook_name_out);
    cJSON_AddNumberToObject(meta, "context_size", c->context_size);
    cJSON_AddNumberToObject(meta, "hook_head_index", -1);
    cJSON_ReplaceItemInObject(meta, "hook_head_index", cJSON_CreateNull());
    cJSON_AddBoolToObject(meta, "prepend_bos", 1);
    cJSON_AddStringToObject(meta, "sae_lens_training_version", "saelite");
    cJSON_AddItemToObject(root, "metadata", meta);
    /* older SAELens readers look for these at the top level */
    cJSON_AddStringToObject(root, "hook_name", c->hook_name);
    cJSON_AddStringToObject(root, "model_name", c->model_name);
    cJSON_AddNumberToObject(root, "context_size", c->context_size);
    if (train_json) {
        cJSON *tr = cJSON_Parse(train_json);
        if (!tr || !cJSON_IsObject(tr)) {
            cJSON_Delete(tr);
            cJSON_Delete(root);
            return err_set(ERR_ARG, "%s: training config is not a JSON object", dir);
        }
        cJSON_AddItemToObject(root, "training", tr);
    }
    char *txt = cJSON_Print(root);
    cJSON_Delete(root);
    if (!txt) return err_set(ERR_NOMEM, "%s: cannot format cfg.json", dir);
    rc = path_join(path, sizeof path, dir, "cfg.json");
    if (!rc) rc = file_write_atomic(path, txt, strlen(txt));
    cJSON_free(txt);
    return rc;
}

/* key from metadata{} first, then the top level (older SAELens), then an alternative name. */
static const cJSON *cfg_get(const cJSON *root, const char *key, const char *alt)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "metadata"), *v = NULL;
    if (cJSON_IsObject(meta)) v = cJSON_GetObjectItemCaseSensitive(meta, key);
    if (!v || cJSON_IsNull(v)) v = cJSON_GetObjectItemCaseSensitive(root, key);
    if ((!v || cJSON_IsNull(v)) && alt) v = cJSON_GetObjectItemCaseSensitive(root, alt);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static int get_int(const cJSON *root, const char *key, const char *path, int *out)
{
    const cJSON *v = cfg_get(root, key, NULL);
    if (!v) return err_set(ERR_FORMAT, "%s: '%s' is missing", path, key);
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 1)
        return err_set(ERR_FORMAT, "%s: '%s' must be a positive integer", path, key);
    if (v->valuedouble > 1e8)
        return err_set(ERR_FORMAT, "%s: '%s' is %g, above the limit of 1e8", path, key,
                       v->valuedouble);
    *out = (int)v->valuedouble;
    return OK;
}

/* A key given both in metadata{} and at the top level must say the same thing: cfg_get reads the
 * metadata one, and a file whose two hook_names differ names no one hook (SAELens 6 writes
 * metadata, older readers the top level; sae_save writes both, equal). ERR_FORMAT naming both. */
static int cfg_agree(const cJSON *root, const char *path)
{
    static const char *const keys[] = {"architecture", "d_in", "d_sae", "d_out", "k",
                                       "activation_fn", "activation_fn_str", "activation_fn_kwargs",
                                       "matryoshka_widths", "normalize_activations",
                                       "apply_b_dec_to_input", "hook_name", "hook_name_out",
                                       "model_name", "context_size",
                                       "rescale_acts_by_decoder_norm", "finetuning_scaling_factor",
                                       "model_from_pretrained_kwargs", "model_checksum"};
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "metadata");
    /* older SAELens' hook_point is read only without a hook_name: two different ones contradict */
    const cJSON *hn = cfg_get(root, "hook_name", NULL), *hp = cJSON_GetObjectItemCaseSensitive(root, "hook_point");
    if (cJSON_IsString(hn) && cJSON_IsString(hp) && strcmp(hn->valuestring, hp->valuestring))
        return err_set(ERR_FORMAT, "%s: hook_name is \"%.80s\" but hook_point is \"%.80s\" (which one "
                       "is meant?)", path, hn->valuestring, hp->valuestring);
    if (!cJSON_IsObject(meta)) return OK;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(meta, keys[i]);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, keys[i]);
        if (!m || !t || cJSON_IsNull(m) || cJSON_IsNull(t) || cJSON_Compare(m, t, 1)) continue;
        char *a = cJSON_PrintUnformatted(m), *b = cJSON_PrintUnformatted(t);
        int rc = err_set(ERR_FORMAT, "%s: metadata.%s is %.80s but the top-level %s is %.80s (which "
                         "one is meant?)", path, keys[i], a ? a : "?", keys[i], b ? b : "?");
        cJSON_free(a);
        cJSON_free(b);
        return rc;
    }
    return OK;
}

/* What cfg.json says beyond sae_config, which sae_load applies to the weights it reads. */
typedef struct {
    int apply_b_dec; /* 0: apply_b_dec_to_input false (b_dec is folded into b_enc) */
    int rescale;     /* rescale_acts_by_decoder_norm true (the decoder norms are folded) */
    double k;        /* k as written (a SAELens >= 6.11 BatchTopK k may be fractional) */
    int ft_scale;    /* finetuning_scaling_factor true (SAELens 3-5: decode scales each latent) */
    int center;      /* trained on residual values centred along d_model (TransformerLens'
                        center_writing_weights): folded into W_enc, cfg.center_input set */
    int trained;     /* sae-train's "training" object: the architecture it trained (-1: none) */
    int trained_k;   /* and its k (0: none) */
} cfg_extra;

/* Hooks whose values TransformerLens' center_writing_weights changes: the residual stream and
 * everything written into it (each write is centred along d_model, so their sum is too). */
static int hook_in_residual(const char *h)
{
    static const char *const tails[] = {"hook_embed", "hook_pos_embed", "hook_resid_pre",
                                        "hook_resid_mid", "hook_resid_post", "hook_attn_out",
                                        "hook_mlp_out"};
    size_t n = strlen(h);
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        size_t t = strlen(tails[i]);
        if (n >= t && !strcmp(h + n - t, tails[i]) && (n == t || h[n - t - 1] == '.')) return 1;
    }
    return 0;
}

static int ends_with(const char *s, const char *t)
{
    size_t n = strlen(s), m = strlen(t);
    return n >= m && !strcmp(s + n - m, t);
}

/* SAELens loads the model of an SAE with HookedTransformer.from_pretrained_no_processing(name,
 * **model_from_pretrained_kwargs): no weight processing, the values saelite's hooks have, unless
 * these kwargs turn some on. center_writing_weights on a residual hook is folded in (the SAE then
 * reads C x, C the centring along d_model); one that changes the hook otherwise is refused rather
 * than applied to values it was not trained on. */
static int read_tl_kwargs(const cJSON *root, const char *path, const sae_config *c, cfg_extra *ex)
{
    const cJSON *kw = cfg_get(root, "model_from_pretrained_kwargs", NULL);
    if (!kw) return OK;
    if (!cJSON_IsObject(kw))
        return err_set(ERR_FORMAT, "%s: model_from_pretrained_kwargs must be an object", path);
    static const char *const keys[] = {"center_writing_weights", "fold_ln", "fold_value_biases",
                                       "refactor_factored_attn_matrices", "center_unembed"};
    int on[5] = {0};
    for (int i = 0; i < 5; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(kw, keys[i]);
        if (v && !cJSON_IsBool(v))
            return err_set(ERR_FORMAT, "%s: model_from_pretrained_kwargs.%s must be true or false",
                           path, keys[i]);
        on[i] = cJSON_IsTrue(v);
    }
    const char *h = c->hook_name, *ho = c->hook_name_out;
    const char *why = NULL, *key = NULL;
    if (on[1] && (ends_with(h, "hook_normalized") || (c->transcoder && ends_with(ho, "hook_normalized"))))
        why = "LayerNorm outputs without their weight and bias", key = keys[1];
    if (!why && on[2] && (ends_with(h, "attn.hook_v") || ends_with(h, "attn.hook_z")))
        why = "value vectors without b_V (folded into b_O)", key = keys[2];
    if (!why && on[3] && (ends_with(h, "attn.hook_q") || ends_with(h, "attn.hook_k") ||
                          ends_with(h, "attn.hook_v") || ends_with(h, "attn.hook_z")))
        why = "queries, keys and values of refactored attention matrices", key = keys[3];
    if (!why && on[0] && c->transcoder && (hook_in_residual(h) || hook_in_residual(ho)))
        why = "residual values centred along d_model (not folded for transcoders)", key = keys[0];
    if (why)
        return err_set(ERR_FORMAT, "%s: model_from_pretrained_kwargs.%s: the SAE was trained on "
                       "TransformerLens-processed %s, which saelite's %s is not", path, key, why,
                       c->hook_name);
    ex->center = on[0] && hook_in_residual(h);
    return OK;
}

/* cfg.json of an SAE directory (path) into *out: architecture (SAELens names and older
 * spellings), shapes, k, Matryoshka widths, hooks and model; *ex what sae_load folds into the
 * weights. */
static int read_cfg(const char *path, sae_config *out, cfg_extra *ex)
{
    *ex = (cfg_extra){.apply_b_dec = 1};
    cJSON *root;
    int rc = json_read_object_file(path, NULL, (size_t)64 << 20, &root);
    if (rc) return rc;
    if ((rc = cfg_agree(root, path))) {
        cJSON_Delete(root);
        return rc;
    }
    sae_config c;
    memset(&c, 0, sizeof c);
    const cJSON *a = cfg_get(root, "architecture", NULL);
    const char *arch = cJSON_IsString(a) ? a->valuestring : NULL;
    if (!arch) { /* older SAELens: activation_fn_str */
        const cJSON *af = cfg_get(root, "activation_fn_str", NULL);
        arch = cJSON_IsString(af) ? af->valuestring : "standard";
        if (!strcmp(arch, "relu")) arch = "standard";
    }
    sae_arch ar;
    /* transcoders: the class names the output side; the activation is activation_fn's (relu by
       default, jumprelu for the jumprelu_ classes) */
    int jr = !strcmp(arch, "jumprelu_transcoder") || !strcmp(arch, "jumprelu_skip_transcoder");
    int tc = !strcmp(arch, "transcoder") || !strcmp(arch, "jumprelu_transcoder") ? SAE_TRANSCODER
             : !strcmp(arch, "skip_transcoder") || !strcmp(arch, "jumprelu_skip_transcoder")
                 ? SAE_SKIP_TRANSCODER
                 : SAE_NOT_TRANSCODER;
    if (tc) {
        const cJSON *af = cfg_get(root, "activation_fn", "activation_fn_str");
        const char *act = jr ? "jumprelu" : "relu";
        if (cJSON_IsString(af)) act = af->valuestring;
        arch = !strcmp(act, "relu") ? "standard" : act;
    }
    c.transcoder = tc;
    if (tc && strcmp(arch, "standard") && strcmp(arch, "topk") && strcmp(arch, "jumprelu")) {
        rc = err_set(ERR_FORMAT, "%s: transcoder activation '%s' is not supported", path, arch);
        cJSON_Delete(root);
        return rc;
    }
    if (sae_arch_parse(arch, &ar)) {
        /* arch points into root: format the message before freeing it */
        rc = err_set(ERR_FORMAT, "%s: unsupported architecture '%s'", path, arch);
        cJSON_Delete(root);
        return rc;
    }
    c.arch = ar;
    rc = get_int(root, "d_in", path, &c.d_in);
    if (!rc) rc = get_int(root, "d_sae", path, &c.d_sae);
    if (!rc && tc) rc = get_int(root, "d_out", path, &c.d_out);
    if (!rc && (ar == SAE_TOPK || ar == SAE_BATCHTOPK)) {
        const cJSON *k = cfg_get(root, "k", NULL);
        if (!k) {
            const cJSON *kw = cfg_get(root, "activation_fn_kwargs", NULL);
            if (cJSON_IsObject(kw)) k = cJSON_GetObjectItemCaseSensitive(kw, "k");
        }
        /* SAELens >= 6.11 lets a BatchTopK k be fractional (an average per token): it is only a
           label once the file has a threshold, which sae_load checks */
        int frac_ok = ar == SAE_BATCHTOPK && !tc;
        if (!k) rc = err_set(ERR_FORMAT, "%s: %s SAE without 'k'", path, arch);
        else if (!cJSON_IsNumber(k) || (!frac_ok && k->valuedouble != floor(k->valuedouble)) ||
                 !(k->valuedouble >= 1) || k->valuedouble > c.d_sae)
            rc = err_set(ERR_FORMAT, "%s: %s SAE: 'k' must be %s in 1..d_sae (%d)", path, arch,
                         frac_ok ? "a number" : "an integer", c.d_sae);
        else {
            ex->k = k->valuedouble;
            c.k = (int)floor(k->valuedouble + 0.5);
            if (c.k > c.d_sae) c.k = c.d_sae;
        }
    }
    /* SAELens' TopK family (topk, batchtopk and matryoshka_batchtopk training files) may select
       and decode as if every decoder row had norm 1; saved for inference, the norms are folded */
    const cJSON *rs = cfg_get(root, "rescale_acts_by_decoder_norm", NULL);
    if (!rc && rs && !cJSON_IsBool(rs))
        rc = err_set(ERR_FORMAT, "%s: 'rescale_acts_by_decoder_norm' must be true or false", path);
    if (!rc && cJSON_IsTrue(rs)) {
        if (ar != SAE_TOPK && ar != SAE_BATCHTOPK && ar != SAE_MATRYOSHKA)
            rc = err_set(ERR_FORMAT, "%s: rescale_acts_by_decoder_norm is a TopK option, but the "
                         "architecture is '%s'", path, arch);
        ex->rescale = 1;
    }
    /* a JumpReLU file with matryoshka_widths is a Matryoshka BatchTopK SAE saved for inference */
    const cJSON *mw = cfg_get(root, "matryoshka_widths", NULL);
    if (!rc && cJSON_IsArray(mw) && (ar == SAE_JUMPRELU || ar == SAE_MATRYOSHKA)) {
        int n = cJSON_GetArraySize(mw);
        if (n < 1 || n > SAE_MAX_WIDTHS) rc = err_set(ERR_FORMAT, "%s: %d matryoshka_widths", path, n);
        for (int i = 0; !rc && i < n; i++) {
            const cJSON *w = cJSON_GetArrayItem(mw, i);
            if (!cJSON_IsNumber(w) || w->valuedouble < 1 || w->valuedouble > c.d_sae ||
                (i && w->valuedouble <= c.widths[i - 1]))
                rc = err_set(ERR_FORMAT, "%s: matryoshka_widths must increase within 1..d_sae",
                             path);
            else c.widths[i] = (int)w->valuedouble;
        }
        c.n_widths = rc ? 0 : n;
        c.arch = ar = SAE_MATRYOSHKA;
    } else if (!rc && ar == SAE_MATRYOSHKA)
        rc = err_set(ERR_FORMAT, "%s: matryoshka SAE without matryoshka_widths", path);
    const cJSON *na = cfg_get(root, "normalize_activations", NULL);
    if (!rc && na && !(cJSON_IsString(na) && !strcmp(na->valuestring, "none"))) {
        /* the hint follows SAELens' modes: only the scalar one can be folded into the weights */
        const char *v = cJSON_IsString(na) ? na->valuestring : "?";
        const char *why =
            !strcmp(v, "expected_average_only_in")
                ? "its scaling factor is not in the file; SAELens' export folds it into the "
                  "weights and saves \"none\""
            : !strcmp(v, "constant_norm_rescale") || !strcmp(v, "layer_norm")
                ? "a per-token normalisation at run time, which saelite does not implement"
                : "unknown mode";
        rc = err_set(ERR_FORMAT, "%s: normalize_activations '%s' is not supported (%s)", path, v, why);
    }
    /* SAELens 3-5 decode (f * finetuning_scaling_factor) W_dec when this is true */
    const cJSON *fs = cfg_get(root, "finetuning_scaling_factor", NULL);
    if (!rc && fs && !cJSON_IsBool(fs))
        rc = err_set(ERR_FORMAT, "%s: 'finetuning_scaling_factor' must be true or false", path);
    ex->ft_scale = cJSON_IsTrue(fs);
    const cJSON *ab = cfg_get(root, "apply_b_dec_to_input", NULL);
    /* 0 was read as true (SAELens multiplies b_dec by it: 0 subtracts nothing; null fails), an
       audit: a flag that is not a JSON bool is refused, as the others */
    if (!rc && ab && !cJSON_IsBool(ab))
        rc = err_set(ERR_FORMAT, "%s: 'apply_b_dec_to_input' must be true or false", path);
    /* SAELens' transcoders never subtract b_dec (it is d_out wide): nothing to fold */
    int apply_b_dec = !cJSON_IsFalse(ab) || tc;
    const cJSON *v;
    if ((v = cfg_get(root, "hook_name", "hook_point")) && cJSON_IsString(v))
        snprintf(c.hook_name, sizeof c.hook_name, "%s", v->valuestring);
    if ((v = cfg_get(root, "hook_name_out", NULL)) && cJSON_IsString(v))
        snprintf(c.hook_name_out, sizeof c.hook_name_out, "%s", v->valuestring);
    if ((v = cfg_get(root, "model_name", NULL)) && cJSON_IsString(v))
        snprintf(c.model_name, sizeof c.model_name, "%s", v->valuestring);
    if (!rc && (v = cfg_get(root, "model_checksum", NULL))) {
        /* 16 hex digits, as sae-train writes it; anything else turned the check off without a
           word (an audit: "" and 123 were accepted) */
        const char *cs = cJSON_IsString(v) ? v->valuestring : NULL;
        int ok = cs && strlen(cs) == 16;
        for (int i = 0; ok && i < 16; i++) ok = isxdigit((unsigned char)cs[i]);
        if (!ok)
            rc = err_set(ERR_FORMAT, "%s: model_checksum must be 16 hex digits (the checksum extract "
                         "records for a model)", path);
        else
            for (int i = 0; i < 16; i++) c.model_checksum[i] = (char)tolower((unsigned char)cs[i]);
    }
    if (!rc && (v = cfg_get(root, "context_size", NULL)) && cJSON_IsNumber(v)) {
        /* metadata (0 where sae-train had no sequences), but an int: 1e30 was cast to int
           unchecked (UBSan, an audit) and -5 kept */
        if (!(v->valuedouble >= 0 && v->valuedouble <= 1e8) || v->valuedouble != floor(v->valuedouble))
            rc = err_set(ERR_FORMAT, "%s: 'context_size' is %g; it must be a whole number from 0 to 1e8",
                         path, v->valuedouble);
        else
            c.context_size = (int)v->valuedouble;
    }
    if (!rc) rc = read_tl_kwargs(root, path, &c, ex);
    c.center_input = ex->center;
    /* sae-train's own record of the run (a label: nothing here loads differently by it) */
    ex->trained = -1;
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(root, "training");
    if (!rc && cJSON_IsObject(tr)) {
        const cJSON *ta = cJSON_GetObjectItemCaseSensitive(tr, "architecture");
        const cJSON *tk = cJSON_GetObjectItemCaseSensitive(tr, "k");
        sae_arch t;
        if (cJSON_IsString(ta) && sae_arch_parse(ta->valuestring, &t) == OK) ex->trained = t;
        err_clear();
        if (cJSON_IsNumber(tk) && tk->valuedouble >= 1 && tk->valuedouble <= c.d_sae &&
            tk->valuedouble == floor(tk->valuedouble))
            ex->trained_k = (int)tk->valuedouble;
    }
    cJSON_Delete(root);
    ex->apply_b_dec = apply_b_dec;
    *out = c;
    return rc;
}

/* rescale_acts_by_decoder_norm: SAELens scales the pre-activations by ||W_dec_j|| before the
 * activation and the activations by 1 / ||W_dec_j|| before decoding. Folded into W_enc, b_enc and
 * W_dec as SAELens' own inference export does (norms clamped at 1e-8), the same latents and
 * reconstruction come from the plain equations. Thresholds apply to the scaled pre-activations,
 * so they stay. ERR_FORMAT where a folded value overflows float32. */
static int fold_decoder_norms(sae_model *s, const char *wpath)
{
    int64_t D = s->cfg.d_in, S = s->cfg.d_sae, Do = sae_out_dim(&s->cfg);
    for (int64_t j = 0; j < S; j++) {
        double n2 = 0;
        for (int64_t o = 0; o < Do; o++) n2 += (double)s->W_dec[j * Do + o] * s->W_dec[j * Do + o];
        double n = sqrt(n2) > 1e-8 ? sqrt(n2) : 1e-8;
        for (int64_t o = 0; o < Do; o++) s->W_dec[j * Do + o] = (float)(s->W_dec[j * Do + o] / n);
        for (int64_t i = 0; i < D; i++) s->W_enc[i * S + j] = (float)(s->W_enc[i * S + j] * n);
        s->b_enc[j] = (float)(s->b_enc[j] * n);
    }
    int64_t bad = ck_first_nonfinite(s->W_enc, D * S);
    if (bad < 0 && (bad = ck_first_nonfinite(s->b_enc, S)) >= 0) bad += D * S;
    if (bad >= 0)
        return err_set(ERR_FORMAT, "%s: the encoder overflows float32 once the decoder norms are "
                       "folded in (rescale_acts_by_decoder_norm; latent %lld)", wpath,
                       (long long)(bad < D * S ? bad % S : bad - D * S));
    return OK;
}

int sae_load_config(const char *dir, sae_config *out)
{
    char path[4096];
    cfg_extra ex;
    int rc = path_join(path, sizeof path, dir, "cfg.json");
    if (!rc) rc = read_cfg(path, out, &ex);
    if (rc) return rc;
    /* the architecture as sae-train trained it where the saved form is another: a BatchTopK SAE
       saved as JumpReLU, and a Matryoshka's k (neither file has a top-level k) */
    if (ex.trained == SAE_BATCHTOPK && out->arch == SAE_JUMPRELU) out->arch = SAE_BATCHTOPK;
    if ((int)out->arch == ex.trained && (ex.trained == SAE_BATCHTOPK || ex.trained == SAE_MATRYOSHKA) &&
        out->k == 0)
        out->k = ex.trained_k;
    return OK;
}

int sae_load(sae_model **out, const char *dir)
{
    *out = NULL;
    char path[4096], wpath[4096];
    int rc = path_join(path, sizeof path, dir, "cfg.json");
    if (rc) return rc;
    sae_config c;
    cfg_extra ex;
    if ((rc = read_cfg(path, &c, &ex))) return rc;
    sae_arch ar = c.arch;
    if ((rc = path_join(wpath, sizeof wpath, dir, "sae_weights.safetensors"))) return rc;
    st_file *f;
    if ((rc = st_open(&f, wpath))) return rc;
    /* a BatchTopK file with a threshold (per latent, or a SAELens training file's global
       topk_threshold) is used as JumpReLU would be; without one, as TopK */
    int has_thr = st_find(f, "threshold") || st_find(f, "log_threshold") ||
                  st_find(f, "topk_threshold");
    if (ar == SAE_BATCHTOPK && !has_thr) {
        c.arch = SAE_TOPK;
        if (ex.k != floor(ex.k)) {
            rc = err_set(ERR_FORMAT, "%s: batchtopk SAE with a fractional k (%g) and no threshold "
                         "tensor: without one it is read as TopK, which needs a whole k", wpath, ex.k);
            st_close(f);
            return rc;
        }
    }
    /* check W_enc's shape before allocating d_in * d_sae floats, so a cfg.json with huge sizes
     * is a mismatch with the file (whose size bounds the tensors), not an out-of-memory */
    const st_tensor *we = st_find(f, "W_enc");
    if (we && (we->ndim != 2 || we->shape[0] != c.d_in || we->shape[1] != c.d_sae)) {
        char got[96]; /* every dimension: [512, 4096, 1] read as [512, 4096] (an audit) */
        rc = err_set(ERR_SHAPE, "%s: tensor 'W_enc' has shape %s but %s says d_in %d, d_sae %d",
                     wpath, st_shape_text(got, sizeof got, we->ndim, we->shape), path, c.d_in,
                     c.d_sae);
        st_close(f);
        return rc;
    }
    sae_model *s;
    if ((rc = sae_model_new(&s, &c))) {
        st_close(f);
        return rc;
    }
    int64_t D = c.d_in, S = c.d_sae, Do = sae_out_dim(&c), sh[2];
    int from_log = 0;
    sh[0] = D, sh[1] = S;
    rc = st_load_f32(f, "W_enc", 2, sh, s->W_enc);
    sh[0] = S, sh[1] = Do;
    if (!rc) rc = st_load_f32(f, "W_dec", 2, sh, s->W_dec);
    sh[0] = Do, sh[1] = D;
    if (!rc && s->W_skip) rc = st_load_f32(f, "W_skip", 2, sh, s->W_skip);
    if (!rc && ar == SAE_GATED) {
        rc = st_load_f32(f, "b_gate", 1, &S, s->b_enc);
        if (!rc) rc = st_load_f32(f, "b_mag", 1, &S, s->b_mag);
        if (!rc) rc = st_load_f32(f, "r_mag", 1, &S, s->r_mag);
    } else if (!rc) rc = st_load_f32(f, "b_enc", 1, &S, s->b_enc);
    if (!rc) rc = st_load_f32(f, "b_dec", 1, &Do, s->b_dec);
    if (!rc && s->threshold) {
        if (st_find(f, "threshold")) rc = st_load_f32(f, "threshold", 1, &S, s->threshold);
        else if (st_find(f, "log_threshold")) {
            from_log = 1;
            rc = st_load_f32(f, "log_threshold", 1, &S, s->threshold);
            for (int64_t j = 0; !rc && j < S; j++) s->threshold[j] = expf(s->threshold[j]);
        } else if (st_find(f, "topk_threshold")) {
            /* SAELens' BatchTopK training state: one global threshold, which its own inference
               export writes as a per-latent JumpReLU threshold */
            const st_tensor *t = st_find(f, "topk_threshold");
            int64_t one = 1;
            float g = 0;
            rc = t->ndim == 0 ? st_load_f32(f, "topk_threshold", 0, NULL, &g)
                              : st_load_f32(f, "topk_threshold", 1, &one, &g);
            for (int64_t j = 0; !rc && j < S; j++) s->threshold[j] = g;
        } else rc = err_set(ERR_FORMAT, "%s: jumprelu SAE without 'threshold'", wpath);
    }
    float *fts = NULL;
    if (!rc && ex.ft_scale) {
        fts = mem_alloc(sizeof(float) * (size_t)S);
        rc = fts ? st_load_f32(f, "finetuning_scaling_factor", 1, &S, fts)
                 : err_set(ERR_NOMEM, "%s: out of memory", wpath);
    }
    st_close(f);
    /* NaN/Inf weights are refused, naming the tensor and the first bad index */
    int gated = ar == SAE_GATED;
    struct { const char *name; const float *p; int64_t n; } ten[] = {
        {"W_enc", s->W_enc, D * S}, {"W_dec", s->W_dec, Do * S}, {gated ? "b_gate" : "b_enc", s->b_enc, S},
        {"b_dec", s->b_dec, Do},
        {from_log ? "exp(log_threshold)" : "threshold", s->threshold, s->threshold ? S : 0},
        {"W_skip", s->W_skip, s->W_skip ? Do * D : 0}, {"b_mag", s->b_mag, gated ? S : 0},
        {"r_mag", s->r_mag, gated ? S : 0}, {"finetuning_scaling_factor", fts, fts ? S : 0}};
    for (size_t i = 0; !rc && i < sizeof ten / sizeof ten[0]; i++) {
        int64_t bad = ten[i].n ? ck_first_nonfinite(ten[i].p, ten[i].n) : -1;
        if (bad >= 0)
            rc = err_set(ERR_FORMAT, "%s: tensor '%s' has a non-finite value (%g) at index %lld",
                         wpath, ten[i].name, isnan(ten[i].p[bad]) ? NAN : (double)ten[i].p[bad], (long long)bad);
    }
    if (!rc && ex.center) sae_center_encoder(s, ex.apply_b_dec);
    if (!rc && !ex.apply_b_dec) {
        /* pre = x W_enc + b_enc == (x - b_dec) W_enc + (b_enc + b_dec W_enc) */
        for (int64_t j = 0; j < S; j++) {
            double cj = 0;
            for (int64_t i = 0; i < D; i++) cj += (double)s->b_dec[i] * s->W_enc[i * S + j];
            /* gated: the gate's bias and, scaled by exp(r_mag), the magnitude's */
            if (ar == SAE_GATED) s->b_mag[j] += (float)(expf(s->r_mag[j]) * cj);
            if (ar == SAE_GATED) s->b_enc[j] += (float)cj;
        }
        if (ar != SAE_GATED)
            for (int64_t i = 0; i < D; i++)
                for (int64_t j = 0; j < S; j++) s->b_enc[j] += s->b_dec[i] * s->W_enc[i * S + j];
    }
    /* (f * scale) W_dec == f (scale_j W_dec_j): folded into the decoder rows */
    for (int64_t j = 0; !rc && fts && j < S; j++)
        for (int64_t o = 0; o < Do; o++) s->W_dec[j * Do + o] *= fts[j];
    if (!rc && fts && (ck_first_nonfinite(s->W_dec, Do * S)) >= 0)
        rc = err_set(ERR_FORMAT, "%s: W_dec overflows float32 once finetuning_scaling_factor is "
                     "folded in", wpath);
    mem_free(fts);
    if (!rc && ex.rescale) rc = fold_decoder_norms(s, wpath);
    if (rc) {
        sae_free(s);
        return rc;
    }
    *out = s;
    return OK;
}

int sae_load_sparsity(const char *dir, int d_sae, float **out)
{
    *out = NULL;
    char path[4096];
    int rc = path_join(path, sizeof path, dir, "sparsity.safetensors");
    if (rc) return rc;
    if (access(path, F_OK) != 0) return err_set(ERR_NOTFOUND, "%s: no sparsity file", path);
    st_file *f;
    if ((rc = st_open(&f, path))) return rc;
    float *d = mem_alloc(sizeof(float) * (size_t)d_sae);
    int64_t S = d_sae;
    if (!d) rc = err_set(ERR_NOMEM, "%s: out of memory", path);
    else rc = st_load_f32(f, "sparsity", 1, &S, d);
    st_close(f);
    if (rc) {
        mem_free(d);
        return rc;
    }
    *out = d;
    return OK;
}

/* out = hex FNV-1a 64 over the files dir/names[0..n) in turn. */
static int files_checksum(const char *dir, const char *const *names, int n, char out[17])
{
    char p[4096];
    uint64_t h = HASH_FNV1A_INIT;
    int rc = OK;
    for (int i = 0; i < n && !rc; i++)
        if (!(rc = path_join(p, sizeof p, dir, names[i]))) rc = file_fnv1a(p, &h);
    if (!rc) snprintf(out, 17, "%016llx", (unsigned long long)h);
    return rc;
}

int sae_weights_checksum(const char *dir, char out[17])
{
    static const char *const names[] = {"sae_weights.safetensors"};
    return files_checksum(dir, names, 1, out);
}

int sae_files_checksum(const char *dir, char out[17])
{
    static const char *const names[] = {"cfg.json", "sae_weights.safetensors"};
    return files_checksum(dir, names, 2, out);
}
