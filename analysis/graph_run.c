/* graph_run.c - `saelite graph` as a runner: load, build, prune, write the JSON graph and the
 * database tables (see graph.h; the format is in docs/explore.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

#include "analysis/graph.h"
#include "analysis/steer.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "common/utf8.h"
#include "model/tokenizer.h"
#include "store/store_graph.h"

void ana_graph_run_defaults(ana_graph_run_opts *o)
{
    memset(o, 0, sizeof *o);
    o->node_threshold = 0.8;
    o->edge_threshold = 0.98;
    o->p.logit_prob = 0.95;
    o->p.max_logits = 10;
    o->p.max_feature_nodes = 4096;
}

void ana_graph_run_free(ana_graph_run_result *res)
{
    if (!res) return;
    if (res->tok_text)
        for (int t = 0; t < res->T; t++) mem_free(res->tok_text[t]);
    if (res->logit_text)
        for (int j = 0; j < res->g.n_logits; j++) mem_free(res->logit_text[j]);
    mem_free(res->tok_text);
    mem_free(res->logit_text);
    mem_free(res->tokens);
    ana_graph_free(&res->g);
    memset(res, 0, sizeof *res);
}

/* A token's bytes, whole (GPT-2 has tokens of 66 and 128 bytes: they were cut at 63, an audit),
 * as a string: a NUL byte (GPT-2's token 188 is one) becomes U+FFFD, as in the tokens table,
 * where it ended the string. Other bytes stay as they are: the picture escapes a split
 * character's bytes; JSON and the database get clean_dup's copy. */
static char *token_text(const tok_tokenizer *tk, int id)
{
    size_t n;
    const char *b = tok_token_bytes(tk, id, &n);
    if (!b) {
        char s[32];
        snprintf(s, sizeof s, "#%d", id);
        return mem_strdup(s);
    }
    char *s = mem_alloc(3 * n + 1), *q = s;
    if (!s) return NULL;
    for (size_t i = 0; i < n; i++)
        if (b[i]) *q++ = b[i];
        else {
            memcpy(q, "\xef\xbf\xbd", 3); /* U+FFFD */
            q += 3;
        }
    *q = 0;
    return s;
}

/* JSON and the database take valid UTF-8 only: python's json.load failed on a prompt with a
 * euro sign, and on a --slug or --text with a byte that is not UTF-8 (audits). Bytes that are
 * not valid UTF-8 on their own become U+FFFD, as in the tokens table. A mem_alloc'd copy. */
static char *clean_n(const char *s, size_t n)
{
    char *out = mem_alloc(4 * n + 1); /* utf8_clean's bound */
    if (out) utf8_clean(s, n, out, 4 * n + 1);
    return out;
}

static char *clean_dup(const char *s) { return clean_n(s, strlen(s)); }

/* s[0..n) cleaned as a JSON string into b */
static int json_text(buf *b, const char *s, size_t n)
{
    char *t = clean_n(s, n);
    if (!t) return err_set(ERR_NOMEM, "out of memory");
    int rc = buf_json(b, t, strlen(t), 0);
    mem_free(t);
    return rc;
}

static const char *const TYPE[] = {"cross layer transcoder", "mlp reconstruction error", "embedding",
                                   "logit"};

static int num(buf *b, const char *key, double v)
{
    return isfinite(v) ? buf_printf(b, ",\"%s\":%.9g", key, v) : buf_printf(b, ",\"%s\":null", key);
}

static int write_json(const char *path, const ana_graph_run_opts *o, const ana_graph_run_result *res)
{
    const ana_graph *g = &res->g;
    buf b = {0};
    char id[64];
    int rc = buf_str(&b, "{\"metadata\":{\"slug\":");
    if (!rc) rc = json_text(&b, o->slug ? o->slug : "graph", strlen(o->slug ? o->slug : "graph"));
    if (!rc) rc = buf_str(&b, ",\"scan\":\"saelite\",\"transcoder_list\":[");
    const char *p = o->tc_dirs;
    for (int k = 0; !rc && *p; k++) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        rc = buf_str(&b, k ? "," : "");
        if (!rc) rc = json_text(&b, p, n);
        p += n + (e != NULL);
    }
    if (!rc) rc = buf_str(&b, "],\"prompt_tokens\":[");
    for (int t = 0; !rc && t < res->T; t++) {
        rc = buf_str(&b, t ? "," : "");
        if (!rc) rc = json_text(&b, res->tok_text[t], strlen(res->tok_text[t]));
    }
    if (!rc) rc = buf_str(&b, "],\"prompt\":");
    if (!rc) rc = json_text(&b, o->text, strlen(o->text));
    if (!rc)
        rc = buf_printf(&b, ",\"node_threshold\":%.9g,\"edge_threshold\":%.9g,\"schema_version\":1,"
                        "\"generator\":\"saelite graph\",\"n_layers\":%d,\"n_nodes_total\":%d,"
                        "\"n_edges_total\":%lld,\"completeness_max_rel_err\":%.9g},"
                        "\"qParams\":{\"pinnedIds\":[],\"supernodes\":[],\"linkType\":\"both\","
                        "\"clickedId\":\"\",\"sg_pos\":\"\"},\"nodes\":[",
                        o->node_threshold, o->edge_threshold, g->n_layers, g->n, (long long)g->n_edges,
                        g->max_rel_err);
    int first = 1;
    for (int i = 0; !rc && i < g->n; i++) {
        const ana_graph_node *nd = &g->nodes[i];
        if (!nd->kept) continue;
        ana_graph_node_id(g, i, id, sizeof id);
        char layer[16], js[64];
        int feature = nd->kind == ANA_NODE_EMBED ? nd->pos : nd->id;
        if (nd->kind == ANA_NODE_EMBED) snprintf(layer, sizeof layer, "E");
        else if (nd->kind == ANA_NODE_LOGIT) snprintf(layer, sizeof layer, "%d", g->n_layers + 1);
        else snprintf(layer, sizeof layer, "%d", nd->layer);
        switch (nd->kind) {
        case ANA_NODE_FEATURE: snprintf(js, sizeof js, "%d_%d-0", nd->layer, nd->id); break;
        case ANA_NODE_ERROR: snprintf(js, sizeof js, "%d_-1-%d", nd->layer, nd->pos); break;
        case ANA_NODE_EMBED: snprintf(js, sizeof js, "E_%d-%d", nd->id, nd->pos); break;
        default: snprintf(js, sizeof js, "L_%d-%d", nd->id, nd->pos); break;
        }
        const char *tt = nd->kind == ANA_NODE_LOGIT ? res->logit_text[i - (g->n - g->n_logits)]
                         : nd->kind == ANA_NODE_EMBED ? res->tok_text[nd->pos] : NULL;
        char *clerp = NULL; /* a logit's label, whole (a long token was cut mid-character) */
        if (nd->kind == ANA_NODE_LOGIT) {
            size_t cl = strlen(tt) + 64;
            if ((clerp = mem_alloc(cl))) snprintf(clerp, cl, "Output \"%s\" (p=%.3f)", tt, nd->activation);
            else rc = err_set(ERR_NOMEM, "out of memory");
        }
        rc = buf_str(&b, first ? "{\"node_id\":" : ",{\"node_id\":");
        first = 0;
        if (!rc) rc = buf_json(&b, id, strlen(id), 0);
        if (!rc) rc = buf_printf(&b, ",\"feature\":%d,\"layer\":\"%s\",\"ctx_idx\":%d,\"feature_type\":\"%s\","
                                 "\"token_prob\":%.9g,\"is_target_logit\":%s,\"run_idx\":0,"
                                 "\"reverse_ctx_idx\":0,\"jsNodeId\":\"%s\",\"clerp\":",
                                 feature, layer, nd->pos, TYPE[nd->kind],
                                 nd->kind == ANA_NODE_LOGIT ? nd->activation : 0.0,
                                 nd->kind == ANA_NODE_LOGIT && i == g->n - g->n_logits ? "true" : "false", js);
        if (!rc) rc = json_text(&b, clerp ? clerp : "", clerp ? strlen(clerp) : 0);
        mem_free(clerp);
        if (!rc) rc = num(&b, "influence", nd->cum);
        if (!rc) rc = num(&b, "activation", nd->kind == ANA_NODE_FEATURE ? nd->activation : NAN);
        if (!rc) rc = num(&b, "value", nd->value);
        if (!rc) rc = num(&b, "bias", nd->kind == ANA_NODE_FEATURE || nd->kind == ANA_NODE_LOGIT ? nd->bias : NAN);
        if (!rc && tt) {
            rc = buf_str(&b, ",\"token\":");
            if (!rc) rc = json_text(&b, tt, strlen(tt));
        }
        if (!rc) rc = buf_str(&b, "}");
    }
    if (!rc) rc = buf_str(&b, "],\"links\":[");
    first = 1;
    char sid[64];
    for (int t = 0; !rc && t < g->n; t++)
        for (int s = 0; !rc && s < g->n; s++) {
            size_t k = (size_t)t * g->n + s;
            if (!g->edge_kept[k]) continue;
            ana_graph_node_id(g, s, sid, sizeof sid);
            ana_graph_node_id(g, t, id, sizeof id);
            rc = buf_printf(&b, "%s{\"source\":\"%s\",\"target\":\"%s\",\"weight\":%.9g}", first ? "" : ",",
                            sid, id, g->adj[k]);
            first = 0;
        }
    if (!rc) rc = buf_str(&b, "]}\n");
    if (!rc) rc = file_write_atomic(path, b.p, b.n);
    buf_free(&b);
    return rc;
}

/* A --db that holds another model's activations (extract's rule, "use another --db"): the graph
 * beside them would read as of that model. Checked before the graph is computed; a database of
 * graphs alone, or one that does not exist yet, takes any model's. */
static int check_db_model(const char *path, const char *model_dir)
{
    /* an empty file (touch, mktemp) is a new database to write_db, as it was before this check;
       opened read-only it was refused as "empty database (no saelite tables)" (a review) */
    struct stat st;
    if (stat(path, &st) != 0 || (S_ISREG(st.st_mode) && st.st_size == 0)) return OK;
    store *s = NULL;
    store_model *ms = NULL;
    size_t n = 0;
    char sum[17] = "";
    int rc = store_open(&s, path, STORE_READONLY);
    if (!rc) rc = store_model_list(s, &ms, &n);
    for (size_t i = 0; !rc && i < n; i++) {
        if (!ms[i].checksum[0]) continue; /* imports: no model to compare */
        if (!sum[0] && (rc = gpt2_dir_checksum(model_dir, sum))) break;
        if (strcmp(ms[i].checksum, sum))
            rc = err_set(ERR_ARG, "%s: holds activations of another model (%s, checksum %s), not "
                         "%s (%s); use another --db", path, ms[i].path, ms[i].checksum, model_dir,
                         sum);
    }
    mem_free(ms);
    store_close(s);
    return rc;
}

static int write_db(const char *path, const ana_graph_run_opts *o, ana_graph_run_result *res)
{
    const ana_graph *g = &res->g;
    store *s = NULL;
    store_graph_writer *w = NULL;
    int rc = store_open(&s, path, STORE_CREATE);
    if (!rc) rc = store_graph_init(s);
    if (!rc) rc = store_begin(s);
    if (rc) {
        store_close(s);
        return rc;
    }
    char *slug = clean_dup(o->slug ? o->slug : "graph"), *prompt = clean_dup(o->text),
         *mdir = clean_dup(o->model_dir), *tcs = clean_dup(o->tc_dirs);
    if (!slug || !prompt || !mdir || !tcs) rc = err_set(ERR_NOMEM, "out of memory");
    store_graph_row row = {.slug = slug, .prompt = prompt, .model_dir = mdir, .transcoders = tcs,
                           .n_layers = g->n_layers, .n_pos = g->n_pos, .n_nodes = g->n,
                           .n_nodes_kept = g->n_kept, .n_edges = g->n_edges,
                           .n_edges_kept = g->n_edges_kept, .node_threshold = o->node_threshold,
                           .edge_threshold = o->edge_threshold, .max_rel_err = g->max_rel_err};
    if (!rc) rc = store_graph_writer_open(&w, s, &row, &res->graph_id);
    mem_free(slug);
    mem_free(prompt);
    mem_free(mdir);
    mem_free(tcs);
    char id[64];
    for (int i = 0; !rc && i < g->n; i++) {
        const ana_graph_node *nd = &g->nodes[i];
        ana_graph_node_id(g, i, id, sizeof id);
        int has_tok = nd->kind == ANA_NODE_EMBED || nd->kind == ANA_NODE_LOGIT;
        const char *raw = nd->kind == ANA_NODE_EMBED ? res->tok_text[nd->pos]
                          : nd->kind == ANA_NODE_LOGIT ? res->logit_text[i - (g->n - g->n_logits)]
                          : NULL;
        char *ct = raw ? clean_dup(raw) : NULL;
        if (raw && !ct) {
            rc = err_set(ERR_NOMEM, "out of memory");
            break;
        }
        store_graph_node_row r = {
            .node = i, .node_id = id, .feature_type = TYPE[nd->kind],
            .token_text = ct,
            .layer = nd->kind == ANA_NODE_EMBED ? -1 : nd->layer, .pos = nd->pos,
            .feature = nd->kind == ANA_NODE_FEATURE ? nd->id : -1, .token = has_tok ? nd->id : -1,
            .activation = nd->kind == ANA_NODE_FEATURE || nd->kind == ANA_NODE_LOGIT ? nd->activation : NAN,
            .value = nd->value,
            .bias = nd->kind == ANA_NODE_FEATURE || nd->kind == ANA_NODE_LOGIT ? nd->bias : NAN,
            .influence = nd->influence, .kept = nd->kept};
        rc = store_graph_node(w, &r);
        mem_free(ct);
    }
    for (int t = 0; !rc && t < g->n; t++)
        for (int sidx = 0; !rc && sidx < g->n; sidx++) {
            size_t k = (size_t)t * g->n + sidx;
            if (g->adj[k] != 0) rc = store_graph_edge(w, t, sidx, g->adj[k], g->edge_kept[k]);
        }
    store_graph_writer_close(w);
    if (!rc) rc = store_commit(s);
    if (rc) store_rollback(s);
    store_close(s);
    return rc;
}

int ana_graph_run(const ana_graph_run_opts *o, ana_graph_run_result *res)
{
    memset(res, 0, sizeof *res);
    res->graph_id = -1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    gpt2_model *m = NULL;
    tok_tokenizer *tk = NULL;
    sae_model **tc = NULL;
    int L = 0, rc = o->db ? check_db_model(o->db, o->model_dir) : OK;
    if (!rc) rc = gpt2_load(&m, o->model_dir);
    const char *tok_dir = o->tok_dir ? o->tok_dir : o->model_dir;
    if (!rc) rc = tok_load(&tk, tok_dir);
    if (!rc) rc = tok_check_model(tk, tok_dir, gpt2_cfg(m)->vocab_size, o->model_dir);
    if (rc) goto out;
    L = gpt2_cfg(m)->n_layer;
    if (!(tc = mem_calloc((size_t)L, sizeof *tc))) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto out;
    }
    /* the transcoder directories, each placed at the block its hook names */
    for (const char *p = o->tc_dirs; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char dir[1024];
        if (n == 0 || n >= sizeof dir || (e && !e[1])) { /* "a," too: one list rule (a review) */
            rc = err_set(ERR_ARG, "--transcoder '%s': an empty or too long directory", o->tc_dirs);
            goto out;
        }
        memcpy(dir, p, n);
        dir[n] = 0;
        sae_model *s = NULL;
        if ((rc = sae_load(&s, dir))) goto out;
        if ((rc = ana_check_sae_model(s, dir, o->model_dir))) {
            sae_free(s);
            goto out;
        }
        int layer = -1, w;
        if (!s->cfg.transcoder || gpt2_hook_info(m, s->cfg.hook_name, &layer, &w) != OK || layer < 0) {
            rc = err_set(ERR_ARG, "%s: not a transcoder on a block of this model (hook '%s'%s)", dir,
                         s->cfg.hook_name, s->cfg.transcoder ? "" : "; an SAE, not a transcoder");
            sae_free(s);
            goto out;
        }
        if (tc[layer]) {
            rc = err_set(ERR_ARG, "%s: a second transcoder for block %d", dir, layer);
            sae_free(s);
            goto out;
        }
        tc[layer] = s;
        /* here, where its directory is known (ana_graph_build's check names only the block) */
        if ((rc = ana_graph_check_transcoder(m, s, layer))) {
            err_wrap(rc, "%s", dir);
            goto out;
        }
        p += n + (e != NULL);
    }
    size_t n = 0;
    if ((rc = tok_encode(tk, o->text, strlen(o->text), 1, &res->tokens, NULL, &n))) goto out;
    if (n == 0) {
        rc = err_set(ERR_ARG, "the text has no tokens");
        goto out;
    }
    res->T = (int)n;
    if (!(res->tok_text = mem_calloc(n, sizeof *res->tok_text))) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t t = 0; t < n; t++)
        if (!(res->tok_text[t] = token_text(tk, res->tokens[t]))) {
            rc = err_set(ERR_NOMEM, "out of memory");
            goto out;
        }
    if ((rc = ana_graph_build(m, tc, res->tokens, res->T, &o->p, &res->g))) goto out;
    if ((rc = ana_graph_prune(&res->g, o->node_threshold, o->edge_threshold))) goto out;
    if (!(res->logit_text = mem_calloc((size_t)res->g.n_logits, sizeof *res->logit_text))) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int j = 0; j < res->g.n_logits; j++)
        if (!(res->logit_text[j] = token_text(tk, res->g.nodes[res->g.n - res->g.n_logits + j].id))) {
            rc = err_set(ERR_NOMEM, "out of memory");
            goto out;
        }
    /* the database first: a database that fails (not one, unwritable) left graph.json alone in
       its folder (an audit) */
    if (o->db && (rc = write_db(o->db, o, res))) goto out;
    if (o->out_dir) {
        char path[4096];
        if ((rc = file_mkdir_p(o->out_dir)) ||
            (!o->json_out && (rc = path_join(path, sizeof path, o->out_dir, "graph.json"))) ||
            (rc = write_json(o->json_out ? o->json_out : path, o, res)))
            goto out;
    }
out:
    for (int l = 0; tc && l < L; l++) sae_free(tc[l]);
    mem_free(tc);
    gpt2_free(m);
    tok_free(tk);
    if (rc) ana_graph_run_free(res);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    res->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return rc;
}
