/* test_gpt2.c - GPT-2 against the PyTorch fixtures (tools/ref/gpt2_ref.py), hooks, early stop,
 * loading errors, save/load, gradients (fixture + finite differences). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/half.h"
#include "common/mem.h"
#include "common/npy.h"
#include "harness.h"
#include "model/forward_run.h"
#include "model/gpt2.h"
#include "model/ops.h"
#include "model/safetensors.h"
#include "model/tokenizer.h"
#include "tok_fixture.h"

/* max |got - want| <= tol * max|want| over finite entries; non-finite entries must match exactly */
static int close_scaled(const float *got, const float *want, size_t n, double tol, const char *label)
{
    double mx = 0, md = 0;
    size_t bad_inf = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(want[i]) && fabs(want[i]) > mx) mx = fabs(want[i]);
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(want[i])) {
            if (got[i] != want[i]) bad_inf++;
            continue;
        }
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= md)) md = isnan(d) ? INFINITY : d;
    }
    int ok = !bad_inf && md <= tol * (mx > 0 ? mx : 1);
    if (!ok)
        fprintf(stderr, "  %s: max diff %.3g vs max |want| %.3g (rel %.3g), %zu inf mismatches\n",
                label, md, mx, md / (mx > 0 ? mx : 1), bad_inf);
    return ok;
}

/* ---- capture every hook point --------------------------------------------------------- */
typedef struct {
    char name[64];
    float *data;
    int64_t n;
    int ndim;
    int64_t shape[4];
} cap_entry;
typedef struct {
    cap_entry e[128];
    int n;
} capture;

static int cap_hook(const tensor_view *t, void *user)
{
    capture *c = user;
    if (c->n >= 128) return 1;
    cap_entry *e = &c->e[c->n++];
    snprintf(e->name, sizeof e->name, "%s", t->name);
    e->n = tensor_numel(t);
    e->ndim = t->ndim;
    memcpy(e->shape, t->shape, sizeof e->shape);
    e->data = malloc(sizeof(float) * (size_t)e->n);
    memcpy(e->data, t->data, sizeof(float) * (size_t)e->n);
    return 0;
}
static void cap_free(capture *c)
{
    for (int i = 0; i < c->n; i++) free(c->e[i].data);
    c->n = 0;
}

static float *load_exp(st_file *f, const char *name, int64_t *n)
{
    const st_tensor *t = st_find(f, name);
    if (!t) return NULL;
    *n = st_numel(t);
    float *d = malloc(sizeof(float) * (size_t)(*n ? *n : 1));
    st_read_f32(f, t, d);
    return d;
}

static int *exp_ints(st_file *f, const char *name, int *B, int *T)
{
    const st_tensor *t = st_find(f, name);
    int64_t n;
    float *d = load_exp(f, name, &n);
    *B = (int)t->shape[0];
    *T = (int)t->shape[1];
    int *r = malloc(sizeof(int) * (size_t)n);
    for (int64_t i = 0; i < n; i++) r[i] = (int)d[i];
    free(d);
    return r;
}

static void test_fixture(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/expected.safetensors", dir);
    st_file *ef;
    if (st_open(&ef, path)) {
        CHECK(0, "cannot open fixture: %s", err_msg());
        return;
    }
    gpt2_model *m;
    int rc = gpt2_load(&m, dir);
    CHECK(rc == OK, "load %s: %s", dir, err_msg());
    if (rc) {
        st_close(ef);
        return;
    }
    int B, T;
    int *tok = exp_ints(ef, "tokens", &B, &T);
    capture cap = {0};
    CHECK(gpt2_hook_add(m, "*", cap_hook, &cap) == OK);
    CHECK(gpt2_forward(m, tok, B, T, 1) == OK, "%s", err_msg());
    CHECK(cap.n == gpt2_hook_count(m), "fired %d of %d hook points", cap.n, gpt2_hook_count(m));
    /* order: the firing order equals the documented name order */
    int order_ok = 1;
    for (int i = 0; i < cap.n; i++) order_ok &= !strcmp(cap.e[i].name, gpt2_hook_name(m, i));
    CHECK(order_ok, "hooks fired out of order");
    int nbad = 0;
    for (int i = 0; i < cap.n; i++) {
        int64_t n = 0;
        float *w = load_exp(ef, cap.e[i].name, &n);
        if (!w || n != cap.e[i].n) {
            CHECK(0, "%s: fixture missing or size %lld vs %lld", cap.e[i].name, (long long)n,
                  (long long)cap.e[i].n);
            free(w);
            continue;
        }
        const st_tensor *et = st_find(ef, cap.e[i].name);
        int shape_ok = et->ndim == cap.e[i].ndim;
        for (int d = 0; shape_ok && d < et->ndim; d++) shape_ok = et->shape[d] == cap.e[i].shape[d];
        CHECK(shape_ok, "%s: shape differs from the reference", cap.e[i].name);
        char label[160];
        snprintf(label, sizeof label, "%s %s", dir, cap.e[i].name);
        int ok = close_scaled(cap.e[i].data, w, (size_t)n, 1e-4, label);
        CHECK(ok, "%s", label);
        nbad += !ok;
        free(w);
    }
    int64_t n;
    float *wl = load_exp(ef, "logits", &n);
    CHECK(n == (int64_t)B * T * gpt2_cfg(m)->vocab_size);
    char label[160];
    snprintf(label, sizeof label, "%s logits", dir);
    CHECK(close_scaled(gpt2_logits(m), wl, (size_t)n, 1e-4, label), "%s", label);
    printf("  %s: %d hook points + logits compared (%d bad)\n", dir, cap.n, nbad);
    free(wl);

    /* gradients of one mean cross-entropy step, when the fixture has them */
    if (st_find(ef, "targets")) {
        int tb, tt;
        int *tg = exp_ints(ef, "targets", &tb, &tt);
        float *wloss = load_exp(ef, "loss", &n);
        gpt2_hook_clear(m);
        CHECK(gpt2_train_enable(m) == OK);
        double loss = 0;
        CHECK(gpt2_forward_backward(m, tok, tg, B, T, &loss) == OK, "%s", err_msg());
        CHECK_NEAR(loss, wloss[0], 1e-5 * fabs(wloss[0]));
        double l2 = 0;
        CHECK(gpt2_loss(m, tok, tg, B, T, NULL, &l2) == OK);
        CHECK_NEAR(l2, wloss[0], 1e-5 * fabs(wloss[0]));
        int nt;
        const gpt2_tensor *tab = gpt2_param_table(m, &nt);
        float *g = gpt2_grads(m);
        int gbad = 0;
        for (int i = 0; i < nt; i++) {
            char gname[96];
            snprintf(gname, sizeof gname, "grad.%s", tab[i].name);
            float *wg = load_exp(ef, gname, &n);
            CHECK(wg && (size_t)n == tab[i].numel, "%s missing", gname);
            if (!wg) continue;
            int ok = close_scaled(g + tab[i].offset, wg, tab[i].numel, 1e-4, gname);
            CHECK(ok, "%s", gname);
            gbad += !ok;
            free(wg);
        }
        printf("  %s: loss %.6f (ref %.6f), %d gradient tensors compared (%d bad)\n", dir, loss,
               wloss[0], nt, gbad);
        free(wloss);
        free(tg);
    }
    cap_free(&cap);
    free(tok);
    gpt2_free(m);
    st_close(ef);
}

/* ---- hooks: overwrite, early stop, errors ---------------------------------------------- */
static int zero_hook(const tensor_view *t, void *user)
{
    memset(t->data, 0, sizeof(float) * (size_t)tensor_numel(t));
    return 0;
}
static int abort_hook(const tensor_view *t, void *user) { return 1; }
static int count_hook(const tensor_view *t, void *user)
{
    (*(int *)user)++;
    return 0;
}

/* gpt2_hook_order places GPT-2's points by name and leaves every other name (an imported hook)
 * alone: sscanf's %d placed "blocks.01.x", "blocks. 1.x", "blocks.+1.x", and wrapped
 * "blocks.4294967296.x" to layer 0 (a transcoder over such imported hooks was refused). */
static void test_hook_order(void)
{
    long long a = -1, b = -1;
    CHECK(gpt2_hook_order("hook_embed", &a) == OK && gpt2_hook_order("hook_pos_embed", &b) == OK && a < b);
    CHECK(gpt2_hook_order("blocks.0.ln2.hook_normalized", &a) == OK &&
          gpt2_hook_order("blocks.0.hook_mlp_out", &b) == OK && a < b);
    CHECK(gpt2_hook_order("blocks.9.hook_resid_post", &a) == OK &&
          gpt2_hook_order("blocks.10.hook_resid_pre", &b) == OK && a < b);
    CHECK(gpt2_hook_order("blocks.2147483647.hook_resid_post", &a) == OK &&
          gpt2_hook_order("ln_final.hook_normalized", &b) == OK && a < b);
    const char *bad[] = {"blocks.-1.hook_mlp_out", "blocks.4294967296.hook_mlp_out",
                         "blocks.99999999999.hook_mlp_out", "blocks.2147483648.hook_mlp_out",
                         "blocks.01.hook_mlp_out", "blocks.00.hook_mlp_out", "blocks.+1.hook_mlp_out",
                         "blocks. 1.hook_mlp_out", "blocks..hook_mlp_out", "blocks.1hook_mlp_out",
                         "blocks.0.hook_mlp_out.extra", "hook_embedX", "blocks.0.", "blocks.", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(gpt2_hook_order(bad[i], &a) == ERR_NOTFOUND, "'%s' placed at %lld", bad[i], a);
}

static void test_hooks(void)
{
    const char *dir = "tests/data/gpt2_tiny_f32";
    gpt2_model *m;
    if (gpt2_load(&m, dir)) {
        CHECK(0, "%s", err_msg());
        return;
    }
    const gpt2_config *c = gpt2_cfg(m);
    int tok[10] = {1, 5, 7, 3, 9, 2, 4, 4, 0, 11};
    int B = 2, T = 5, C = c->n_embd;
    /* ablating the last MLP output makes ln_final's input the last resid_mid */
    capture cap = {0};
    CHECK(gpt2_hook_add(m, "blocks.1.hook_resid_mid", cap_hook, &cap) == OK);
    CHECK(gpt2_hook_add(m, "blocks.1.hook_mlp_out", zero_hook, NULL) == OK);
    CHECK(gpt2_hook_add(m, "ln_final.hook_normalized", cap_hook, &cap) == OK);
    CHECK(gpt2_forward(m, tok, B, T, 0) == OK);
    CHECK(cap.n == 2);
    if (cap.n == 2) {
        const float *w = gpt2_param(m, "ln_f.weight", NULL, NULL), *b = gpt2_param(m, "ln_f.bias", NULL, NULL);
        float *want = malloc(sizeof(float) * (size_t)B * T * C);
        for (int n = 0; n < B * T; n++) {
            const float *x = cap.e[0].data + (size_t)n * C;
            double mu = 0, var = 0;
            for (int i = 0; i < C; i++) mu += x[i];
            mu /= C;
            for (int i = 0; i < C; i++) var += (x[i] - mu) * (x[i] - mu);
            var /= C;
            for (int i = 0; i < C; i++)
                want[(size_t)n * C + i] = (float)((x[i] - mu) / sqrt(var + c->ln_eps) * w[i] + b[i]);
        }
        CHECK(close_scaled(cap.e[1].data, want, (size_t)B * T * C, 1e-5, "ablation"),
              "a hook's overwrite is not used downstream");
        free(want);
    }
    cap_free(&cap);
    gpt2_hook_clear(m);

    /* early stop: a layer-0 hook runs one block and no unembedding */
    int cnt = 0;
    CHECK(gpt2_hook_add(m, "blocks.0.mlp.hook_post", count_hook, &cnt) == OK);
    CHECK(gpt2_forward(m, tok, B, T, 0) == OK);
    CHECK(cnt == 1 && gpt2_layers_run(m) == 1, "ran %d blocks", gpt2_layers_run(m));
    CHECK(gpt2_logits(m) == NULL);
    CHECK(gpt2_forward(m, tok, B, T, 1) == OK);
    CHECK(gpt2_layers_run(m) == 2 && gpt2_logits(m) != NULL);
    gpt2_hook_clear(m);
    /* the pass ends at the last hooked point of the last layer, and what it fires is what the
       full pass (logits) fires there with the same hooks: mlp.hook_post alone, then with a
       later point of the same block (which must still fire) */
    capture full = {0}, part = {0};
    const char *late[] = {"blocks.1.mlp.hook_post", "blocks.1.hook_resid_post"};
    for (int nlate = 1; nlate <= 2; nlate++) {
        cap_free(&full);
        cap_free(&part);
        for (int i = 0; i < nlate; i++) CHECK(gpt2_hook_add(m, late[i], cap_hook, &full) == OK);
        CHECK(gpt2_forward(m, tok, B, T, 1) == OK);
        gpt2_hook_clear(m);
        for (int i = 0; i < nlate; i++) CHECK(gpt2_hook_add(m, late[i], cap_hook, &part) == OK);
        CHECK(gpt2_forward(m, tok, B, T, 0) == OK && gpt2_layers_run(m) == 2);
        int same = part.n == nlate && full.n == nlate;
        for (int i = 0; same && i < part.n; i++)
            same = !strcmp(full.e[i].name, part.e[i].name) && full.e[i].n == part.e[i].n &&
                   !memcmp(full.e[i].data, part.e[i].data, sizeof(float) * (size_t)part.e[i].n);
        CHECK(same, "early stop with %d hook(s) in the last block: fired %d, values %s", nlate,
              part.n, same ? "equal" : "differ from the full pass");
        gpt2_hook_clear(m);
    }
    cap_free(&full);
    cap_free(&part);
    /* a clone runs the same forward (extract's second thread): same bits, and none of m's hooks */
    gpt2_model *m2 = NULL;
    CHECK(gpt2_clone(&m2, m) == OK, "%s", err_msg());
    if (m2) {
        capture c1 = {0}, c2 = {0};
        CHECK(gpt2_forward(m2, tok, B, T, 0) == OK && gpt2_layers_run(m2) == 0,
              "the clone has no hooks: nothing runs");
        CHECK(gpt2_hook_add(m, late[0], cap_hook, &c1) == OK &&
              gpt2_hook_add(m2, late[0], cap_hook, &c2) == OK);
        CHECK(gpt2_forward(m, tok, B, T, 1) == OK && gpt2_forward(m2, tok, B, T, 1) == OK);
        CHECK(c1.n == 1 && c2.n == 1 && c1.e[0].n == c2.e[0].n &&
                  !memcmp(c1.e[0].data, c2.e[0].data, sizeof(float) * (size_t)c1.e[0].n) &&
                  !memcmp(gpt2_logits(m), gpt2_logits(m2), sizeof(float) * B * T * gpt2_cfg(m)->vocab_size),
              "the clone's forward differs from the model's");
        gpt2_hook_clear(m);
        cap_free(&c1);
        cap_free(&c2);
        gpt2_free(m2);
    }
    CHECK(gpt2_forward(m, tok, B, T, 0) == OK);
    CHECK(gpt2_layers_run(m) == 0, "no hooks, no logits: nothing runs");
    cnt = 0;
    CHECK(gpt2_hook_add(m, "hook_embed", count_hook, &cnt) == OK);
    CHECK(gpt2_forward(m, tok, B, T, 0) == OK && cnt == 1 && gpt2_layers_run(m) == 0);
    gpt2_hook_clear(m);
    cnt = 0;
    CHECK(gpt2_hook_add(m, "blocks.1.attn.*", count_hook, &cnt) == OK);
    CHECK(gpt2_forward(m, tok, B, T, 0) == OK && cnt == 6, "attn.* fired %d", cnt);
    gpt2_hook_clear(m);

    /* hook info and errors */
    int layer, width;
    CHECK(gpt2_hook_info(m, "blocks.1.mlp.hook_pre", &layer, &width) == OK && layer == 1 &&
          width == c->n_inner);
    CHECK(gpt2_hook_info(m, "hook_embed", &layer, &width) == OK && layer == -1 && width == C);
    CHECK(gpt2_hook_info(m, "blocks.0.attn.hook_z", &layer, &width) == OK && width == C);
    CHECK(gpt2_hook_info(m, "blocks.2.hook_resid_pre", &layer, &width) == ERR_NOTFOUND);
    /* steering at a pattern said "4 wide" (its head count; an audit): no vector per token */
    CHECK(gpt2_hook_token_info(m, "blocks.0.attn.hook_pattern", &layer, &width) == ERR_ARG &&
          strstr(err_msg(), "not one vector per token"));
    CHECK(gpt2_hook_token_info(m, "blocks.1.attn.hook_attn_scores", &layer, &width) == ERR_ARG);
    CHECK(gpt2_hook_token_info(m, "blocks.2.hook_resid_pre", &layer, &width) == ERR_NOTFOUND);
    CHECK(gpt2_hook_token_info(m, "blocks.0.attn.hook_z", &layer, &width) == OK && width == C);
    CHECK(gpt2_hook_add(m, "blocks.7.hook_resid_pre", count_hook, &cnt) == ERR_NOTFOUND);
    CHECK(strstr(err_msg(), "ln1.hook_normalized") != NULL, "message lists names: %s", err_msg());
    CHECK(gpt2_hook_add(m, "blocks.0.hook_resid_post", abort_hook, NULL) == OK);
    CHECK(gpt2_forward(m, tok, B, T, 0) == ERR_ABORTED);
    CHECK(strstr(err_msg(), "blocks.0.hook_resid_post") != NULL, "%s", err_msg());
    gpt2_hook_clear(m);
    int badtok[2] = {3, 96};
    CHECK(gpt2_forward(m, badtok, 1, 2, 1) == ERR_ARG && strstr(err_msg(), "96"));
    int longseq[17] = {0};
    CHECK(gpt2_forward(m, longseq, 1, 17, 1) == ERR_ARG && strstr(err_msg(), "context"));
    /* batch rows are independent: row 1 of a batch equals the same row run alone */
    CHECK(gpt2_forward(m, tok, B, T, 1) == OK);
    float *lb = malloc(sizeof(float) * (size_t)B * T * c->vocab_size);
    memcpy(lb, gpt2_logits(m), sizeof(float) * (size_t)B * T * c->vocab_size);
    CHECK(gpt2_forward(m, tok + T, 1, T, 1) == OK);
    CHECK(close_scaled(gpt2_logits(m), lb + (size_t)T * c->vocab_size, (size_t)T * c->vocab_size,
                       1e-6, "batch row"));
    free(lb);
    gpt2_free(m);
}

/* ---- loading errors --------------------------------------------------------------------- */
static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static void test_load_errors(void)
{
    char dir[] = "/tmp/saelite_gpt2_XXXXXX";
    if (!mkdtemp(dir)) return;
    char p[256], cfgp[256];
    snprintf(cfgp, sizeof cfgp, "%s/config.json", dir);
    gpt2_model *m = NULL;
    CHECK(gpt2_load(&m, dir) == ERR_NOTFOUND && strstr(err_msg(), "config.json: cannot open"),
          "%s", err_msg());
    /* not a regular file: refused at once, named (a FIFO blocked the loader; a directory was
       "too large for a config (9223372036854775807 bytes)") */
    CHECK(mkdir(cfgp, 0777) == 0);
    CHECK(gpt2_load(&m, dir) == ERR_IO && strstr(err_msg(), "config.json: is a directory"), "%s",
          err_msg());
    rmdir(cfgp);
    if (mkfifo(cfgp, 0600) == 0) {
        alarm(20); /* the old hang ends the test instead of stalling it */
        CHECK(gpt2_load(&m, dir) == ERR_IO && strstr(err_msg(), "config.json: not a regular file"),
              "%s", err_msg());
        alarm(0);
        unlink(cfgp);
    }
    write_file(cfgp, "{\"n_layer\": 1, \"n_head\": 2}");
    CHECK(gpt2_load(&m, dir) == ERR_FORMAT && strstr(err_msg(), "n_embd"), "%s", err_msg());
    write_file(cfgp, "{\"n_layer\": 1, \"n_head\": 3, \"n_embd\": 8, \"n_positions\": 4, "
                     "\"vocab_size\": 10}");
    CHECK(gpt2_load(&m, dir) == ERR_FORMAT && strstr(err_msg(), "multiple"), "%s", err_msg());
    write_file(cfgp, "{\"n_layer\": 1, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 4, "
                     "\"vocab_size\": 10, \"activation_function\": \"swish\"}");
    CHECK(gpt2_load(&m, dir) == ERR_FORMAT && strstr(err_msg(), "swish"), "%s", err_msg());
    write_file(cfgp, "[1,2");
    CHECK(gpt2_load(&m, dir) == ERR_FORMAT, "%s", err_msg());
    /* a valid model, then break the safetensors file in ways the loader must name */
    gpt2_config c = {1, 2, 8, 4, 10, 32, 1e-5f};
    gpt2_model *g;
    CHECK(gpt2_create(&g, &c, 7) == OK);
    CHECK(gpt2_save(g, dir, ST_F32, 0) == OK, "%s", err_msg());
    CHECK(gpt2_load(&m, dir) == OK, "%s", err_msg());
    gpt2_free(m);
    m = NULL;
    /* config with more layers than the file */
    write_file(cfgp, "{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 4, "
                     "\"vocab_size\": 10}");
    CHECK(gpt2_load(&m, dir) == ERR_FORMAT && strstr(err_msg(), "h.1.ln_1.weight"), "%s", err_msg());
    /* config with fewer layers: an unexpected tensor */
    gpt2_config c2 = {2, 2, 8, 4, 10, 32, 1e-5f};
    gpt2_model *g2;
    CHECK(gpt2_create(&g2, &c2, 7) == OK);
    CHECK(gpt2_save(g2, dir, ST_BF16, 1) == OK);
    write_file(cfgp, "{\"n_layer\": 1, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 4, "
                     "\"vocab_size\": 10}");
    CHECK(gpt2_load(&m, dir) == ERR_FORMAT && strstr(err_msg(), "transformer.h.1"), "%s", err_msg());
    /* vocab mismatch: shape error naming the tensor and the config */
    write_file(cfgp, "{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 4, "
                     "\"vocab_size\": 11}");
    CHECK(gpt2_load(&m, dir) == ERR_SHAPE && strstr(err_msg(), "wte.weight") &&
              strstr(err_msg(), "config.json"),
          "%s", err_msg());
    /* a config far larger than the file: refused by its shapes before its parameters (200 TB
       of them here) are allocated, not with an out-of-memory error (a fuzz_config finding: a
       small file could make the loader ask for gigabytes) */
    write_file(cfgp, "{\"n_layer\": 1000, \"n_head\": 1, \"n_embd\": 65536, \"n_positions\": 4, "
                     "\"vocab_size\": 10}");
    CHECK(gpt2_load(&m, dir) == ERR_SHAPE && strstr(err_msg(), "wte.weight") &&
              strstr(err_msg(), "n_layer 1000"),
          "%s", err_msg());
    /* untied config without lm_head */
    write_file(cfgp, "{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 4, "
                     "\"vocab_size\": 10, \"tie_word_embeddings\": false}");
    CHECK(gpt2_load(&m, dir) == ERR_FORMAT && strstr(err_msg(), "lm_head"), "%s", err_msg());
    /* save/load round trip in bf16 with prefix: values are the bf16 roundings */
    write_file(cfgp, "{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 4, "
                     "\"vocab_size\": 10}");
    CHECK(gpt2_load(&m, dir) == OK, "%s", err_msg());
    if (m) {
        size_t n1, n2;
        const float *a = gpt2_params(g2, &n1), *b = gpt2_params(m, &n2);
        int same = n1 == n2;
        for (size_t i = 0; same && i < n1; i++) same = b[i] == half_bf16_to_f32(half_f32_to_bf16(a[i]));
        CHECK(same, "bf16 round trip");
        gpt2_free(m);
    }
    /* each shape check names its field and range (all used to say "n_embd must be a multiple
       of n_head") */
    static const char *const shapes[][2] = {
        {"\"n_layer\": 0, \"layer_norm_epsilon\": -1", "n_layer 0 is outside 1..1000"},
        {"\"n_layer\": 1000000000", "n_layer 1000000000 is outside 1..1000"},
        {"\"n_layer\": 2, \"layer_norm_epsilon\": -1", "layer_norm_epsilon -1 is outside (0, 1)"},
        {"\"n_layer\": 2, \"n_inner\": 2000000", "n_inner 2000000 is outside 1..1048576"},
        {"\"n_layer\": 2, \"n_head\": 3", "n_embd 8 is not a multiple of n_head 3"},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        char js[400];
        /* no key twice (a config with one is refused as such) */
        snprintf(js, sizeof js, "{%s%s, \"n_embd\": 8, \"n_positions\": 4, \"vocab_size\": 10}",
                 shapes[i][0], strstr(shapes[i][0], "\"n_head\"") ? "" : ", \"n_head\": 2");
        write_file(cfgp, js);
        m = NULL;
        CHECK(gpt2_load(&m, dir) == ERR_FORMAT && strstr(err_msg(), "invalid model shape: ") &&
                  strstr(err_msg(), shapes[i][1]), "%s: %s", shapes[i][0], err_msg());
        gpt2_free(m);
    }
    /* a key twice: json.loads would take the last, cJSON's lookup took the first */
    write_file(cfgp, "{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 4, "
                     "\"vocab_size\": 10, \"n_layer\": 3}");
    m = NULL;
    CHECK(gpt2_load(&m, dir) == ERR_FORMAT && strstr(err_msg(), "key \"n_layer\" appears twice"), "%s",
          err_msg());
    gpt2_free(m);
    gpt2_config c0 = {1, 2, 8, 4, 0, 32, 1e-5f};
    CHECK(gpt2_create(&m, &c0, 7) == ERR_FORMAT &&
              !strcmp(err_msg(), "invalid model shape: vocab_size 0 is outside 1..16777216"),
          "%s", err_msg());
    /* Hugging Face options that change the attention maths: refused when not at the default we
       implement; reorder_and_upcast_attn is the same maths in float32, accepted */
    static const char *const hf[][2] = {
        {"\"scale_attn_weights\": false", "\"scale_attn_weights\": false is not supported"},
        {"\"scale_attn_by_inverse_layer_idx\": true",
         "\"scale_attn_by_inverse_layer_idx\": true is not supported"},
        {"\"scale_attn_weights\": 0", "\"scale_attn_weights\" must be true or false (got a number)"},
        /* null is not the default: HF keeps None and `if config.scale_attn_weights:` then skips
           the scaling (this was read as true); a null or string tie_word_embeddings likewise */
        {"\"scale_attn_weights\": null", "\"scale_attn_weights\" must be true or false (got null)"},
        {"\"scale_attn_by_inverse_layer_idx\": null",
         "\"scale_attn_by_inverse_layer_idx\" must be true or false (got null)"},
        {"\"tie_word_embeddings\": \"false\"",
         "config.json: \"tie_word_embeddings\" must be true or false (got a string)"},
        {"\"tie_word_embeddings\": 0", "\"tie_word_embeddings\" must be true or false (got a number)"},
        {"\"tie_word_embeddings\": null", "\"tie_word_embeddings\" must be true or false (got null)"},
        /* a non-string activation used to become gelu_new (HF's ACT2FN lookup fails); another
           model_type with GPT-2's keys used to load as a GPT-2 */
        {"\"activation_function\": null", "config.json: \"activation_function\" must be a string"},
        {"\"activation_function\": 1", "\"activation_function\" must be a string: gelu_new, "
                                        "gelu_pytorch_tanh, gelu_fast or gelu (got a number)"},
        /* HF's FastGELU is the tanh GELU; n_inner 0 is its zero-width MLP (read as 4 n_embd) */
        {"\"activation_function\": \"gelu_fast\"", NULL},
        {"\"n_inner\": 0", "\"n_inner\" 0 is an MLP of width 0"},
        {"\"model_type\": \"gpt_neo\"",
         "config.json: model_type \"gpt_neo\" is not supported (only \"gpt2\")"},
        {"\"model_type\": null", "\"model_type\" must be the string \"gpt2\" (got null)"},
        {"\"model_type\": \"gpt2\", \"activation_function\": \"gelu\"", NULL},
        {"\"scale_attn_weights\": true, \"scale_attn_by_inverse_layer_idx\": false, "
         "\"reorder_and_upcast_attn\": true", NULL},
    };
    for (size_t i = 0; i < sizeof hf / sizeof hf[0]; i++) {
        char js[400];
        snprintf(js, sizeof js, "{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, "
                 "\"n_positions\": 4, \"vocab_size\": 10, %s}", hf[i][0]);
        write_file(cfgp, js);
        m = NULL;
        int rc = gpt2_load(&m, dir);
        if (hf[i][1]) CHECK(rc == ERR_FORMAT && strstr(err_msg(), hf[i][1]), "%s", err_msg());
        else CHECK(rc == OK, "%s: %s", hf[i][0], err_msg());
        gpt2_free(m);
    }
    /* n_positions null beside n_ctx: refused as null, not "missing" (params said otherwise) */
    write_file(cfgp, "{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": null, "
                     "\"n_ctx\": 4, \"vocab_size\": 10}");
    m = NULL;
    CHECK(gpt2_load(&m, dir) == ERR_FORMAT &&
              strstr(err_msg(), "\"n_positions\" must be a positive integer (got null)"), "%s", err_msg());
    gpt2_free(m);
    write_file(cfgp, "{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 4, "
                     "\"vocab_size\": 10}");
    /* a FIFO as the weights: refused, not waited on */
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    char moved[300];
    snprintf(moved, sizeof moved, "%s/moved", dir);
    CHECK(rename(p, moved) == 0);
    if (mkfifo(p, 0600) == 0) {
        alarm(20);
        CHECK(gpt2_load(&m, dir) == ERR_IO &&
                  strstr(err_msg(), "model.safetensors: not a regular file"), "%s", err_msg());
        alarm(0);
        unlink(p);
    }
    CHECK(rename(moved, p) == 0);
    /* truncated safetensors */
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK(truncate(p, 100) == 0);
    CHECK(gpt2_load(&m, dir) != OK && strstr(err_msg(), "model.safetensors"), "%s", err_msg());
    gpt2_free(g);
    gpt2_free(g2);
    unlink(p);
    unlink(cfgp);
    rmdir(dir);
}

/* A folder with another kind of checkpoint and no model.safetensors: the error names what is
 * there and that only a single model.safetensors is read (it said "model.safetensors: cannot
 * open: No such file or directory"). */
static void test_other_checkpoints(void)
{
    char dir[] = "/tmp/saelite_gpt2_XXXXXX";
    if (!mkdtemp(dir)) return;
    char cfgp[256], p[300];
    snprintf(cfgp, sizeof cfgp, "%s/config.json", dir);
    write_file(cfgp, "{\"n_layer\": 1, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 4, "
                     "\"vocab_size\": 10}");
    static const char *const cases[][2] = {
        {"pytorch_model.bin", "has pytorch_model.bin but no model.safetensors: only safetensors "
                              "checkpoints are read (convert with transformers: "},
        {"model.safetensors.index.json", "has sharded safetensors (model.safetensors.index.json) "
                                         "but no model.safetensors: only a single "
                                         "model.safetensors is read"},
        {"model-00001-of-00002.safetensors", "has sharded safetensors "
                                             "(model-00001-of-00002.safetensors) but no "
                                             "model.safetensors"},
        {"tf_model.h5", "has tf_model.h5 but no model.safetensors"},
    };
    gpt2_model *m = NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, cases[i][0]);
        write_file(p, "x");
        CHECK(gpt2_load(&m, dir) == ERR_FORMAT && !strncmp(err_msg(), dir, strlen(dir)) &&
                  strstr(err_msg(), cases[i][1]) && !strchr(err_msg(), '\n'),
              "%s: %s", cases[i][0], err_msg());
        unlink(p);
    }
    /* nothing else there: the plain message */
    CHECK(gpt2_load(&m, dir) == ERR_IO &&
              strstr(err_msg(), "model.safetensors: cannot open: No such file or directory"),
          "%s", err_msg());
    unlink(cfgp);
    rmdir(dir);
}

/* tie_word_embeddings decides the unembedding, as HF's tie_weights() does: a file with its own
 * lm_head.weight under a tied config (the key absent, HF's default) unembeds with wte, the
 * stored head unused (it used to win because the tensor was present); its shape is still checked.
 * Under "tie_word_embeddings": false the same file unembeds with its head. */
static void test_tied_with_head(void)
{
    char dir[] = "/tmp/saelite_gpt2_XXXXXX";
    if (!mkdtemp(dir)) return;
    char cfgp[256], stp[256];
    snprintf(cfgp, sizeof cfgp, "%s/config.json", dir);
    snprintf(stp, sizeof stp, "%s/model.safetensors", dir);
    gpt2_config c = {1, 2, 8, 6, 10, 32, 1e-5f};
    gpt2_model *tied = NULL, *g = NULL, *m = NULL;
    CHECK(gpt2_create(&tied, &c, 11) == OK && gpt2_clone(&g, tied) == OK, "%s", err_msg());
    CHECK(gpt2_untie(g) == OK, "%s", err_msg());
    int nd;
    int64_t sh[2];
    float *head = (float *)gpt2_param(g, "lm_head.weight", &nd, sh);
    for (int64_t i = 0; i < sh[0] * sh[1]; i++) head[i] = 0.5f * (float)((i * 7) % 5) - 1.0f;
    static const int tok[] = {1, 4, 9, 2};
    const char *const cfgs[] = {
        "{\"n_layer\": 1, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 6, \"vocab_size\": 10}",
        "{\"n_layer\": 1, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 6, \"vocab_size\": 10, "
        "\"tie_word_embeddings\": true}",
        "{\"n_layer\": 1, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 6, \"vocab_size\": 10, "
        "\"tie_word_embeddings\": false}",
    };
    for (int prefix = 0; prefix < 2; prefix++) {
        CHECK(gpt2_save(g, dir, ST_F32, prefix) == OK, "%s", err_msg());
        for (int k = 0; k < 3; k++) {
            int want_tied = k < 2;
            write_file(cfgp, cfgs[k]);
            CHECK(gpt2_load(&m, dir) == OK, "%s", err_msg());
            if (!m) continue;
            gpt2_model *ref = want_tied ? tied : g;
            CHECK(gpt2_tied(m) == want_tied, "config %d prefix %d: tied %d", k, prefix, gpt2_tied(m));
            CHECK(gpt2_forward(m, tok, 1, 4, 1) == OK && gpt2_forward(ref, tok, 1, 4, 1) == OK,
                  "%s", err_msg());
            CHECK(!memcmp(gpt2_logits(m), gpt2_logits(ref), sizeof(float) * 4 * 10),
                  "config %d prefix %d: logits are not the %s model's", k, prefix,
                  want_tied ? "tied" : "untied");
            gpt2_free(m);
            m = NULL;
        }
    }
    /* an unused head of the wrong shape still means a config that does not fit the file */
    int n;
    const gpt2_tensor *tab = gpt2_param_table(tied, &n);
    float *params = gpt2_params(tied, NULL);
    st_out outs[40];
    static float bad[9 * 8];
    for (int i = 0; i < n && i < 39; i++)
        outs[i] = (st_out){tab[i].name, ST_F32, tab[i].ndim, {tab[i].shape[0], tab[i].shape[1]},
                           params + tab[i].offset};
    outs[n] = (st_out){"lm_head.weight", ST_F32, 2, {9, 8}, bad};
    CHECK(n < 39 && st_write(stp, outs, n + 1, NULL) == OK, "%s", err_msg());
    write_file(cfgp, cfgs[0]);
    CHECK(gpt2_load(&m, dir) == ERR_SHAPE && strstr(err_msg(), "lm_head.weight") &&
              strstr(err_msg(), "config.json"),
          "%s", err_msg());
    gpt2_free(m);
    m = NULL;
    /* a body without the transformer. prefix and the head with it: read (it was refused as an
       unexpected tensor, an audit), under both configs */
    const gpt2_tensor *gt = gpt2_param_table(g, &n);
    float *gp = gpt2_params(g, NULL);
    for (int i = 0; i < n && i < 40; i++)
        outs[i] = (st_out){strcmp(gt[i].name, "lm_head.weight") ? gt[i].name : "transformer.lm_head.weight",
                           ST_F32, gt[i].ndim, {gt[i].shape[0], gt[i].shape[1]}, gp + gt[i].offset};
    CHECK(n <= 40 && st_write(stp, outs, n, NULL) == OK, "%s", err_msg());
    for (int k = 0; k < 3; k += 2) {
        write_file(cfgp, cfgs[k]);
        CHECK(gpt2_load(&m, dir) == OK, "mixed prefix, config %d: %s", k, err_msg());
        gpt2_model *ref = k ? g : tied;
        CHECK(m && gpt2_forward(m, tok, 1, 4, 1) == OK && gpt2_forward(ref, tok, 1, 4, 1) == OK &&
                  !memcmp(gpt2_logits(m), gpt2_logits(ref), sizeof(float) * 4 * 10),
              "mixed prefix, config %d: the logits", k);
        gpt2_free(m);
        m = NULL;
    }
    gpt2_free(tied);
    gpt2_free(g);
    unlink(cfgp);
    unlink(stp);
    rmdir(dir);
}

/* ---- finite differences ----------------------------------------------------------------- */
/* Central differences of the mean loss in double-checked float32: perturb the coordinates with
 * the largest analytic gradient of each tensor (where FD noise is relatively smallest). */
static void test_finite_differences(const char *dir)
{
    gpt2_model *m;
    if (gpt2_load(&m, dir)) {
        CHECK(0, "%s", err_msg());
        return;
    }
    const gpt2_config *c = gpt2_cfg(m);
    int B = 2, T = 7, V = c->vocab_size;
    int tok[14], tg[14];
    rng_state r;
    rng_seed(&r, 5);
    for (int i = 0; i < B * T; i++) {
        tok[i] = (int)(rng_next(&r) % (uint64_t)V);
        tg[i] = (int)(rng_next(&r) % (uint64_t)V);
    }
    tg[3] = -1;
    CHECK(gpt2_train_enable(m) == OK);
    double loss;
    CHECK(gpt2_forward_backward(m, tok, tg, B, T, &loss) == OK);
    size_t np;
    float *P = gpt2_params(m, &np);
    float *G = malloc(sizeof(float) * np);
    memcpy(G, gpt2_grads(m), sizeof(float) * np);
    int nt, checked = 0, bad = 0;
    const gpt2_tensor *tab = gpt2_param_table(m, &nt);
    for (int i = 0; i < nt; i++) {
        size_t best = tab[i].offset;
        for (size_t j = tab[i].offset; j < tab[i].offset + tab[i].numel; j++)
            if (fabsf(G[j]) > fabsf(G[best])) best = j;
        float old = P[best], h = 1e-2f * fmaxf(1.0f, fabsf(old));
        double lp, lm;
        P[best] = old + h;
        gpt2_loss(m, tok, tg, B, T, NULL, &lp);
        P[best] = old - h;
        gpt2_loss(m, tok, tg, B, T, NULL, &lm);
        P[best] = old;
        double fd = (lp - lm) / (2.0 * ((double)(old + h) - (double)(old - h)) / 2.0);
        double an = G[best];
        double err = fabs(fd - an) / fmax(fabs(an), 1e-3);
        checked++;
        if (err > 3e-2) {
            bad++;
            fprintf(stderr, "  FD %s[%zu]: analytic %.6g, numeric %.6g\n", tab[i].name,
                    best - tab[i].offset, an, fd);
        }
    }
    CHECK(bad == 0, "%d of %d finite-difference checks off by > 3%%", bad, checked);
    printf("  %s: %d finite-difference checks (one per tensor)\n", dir, checked);
    free(G);
    gpt2_free(m);
}

/* Which parameters carry a hook's space to the residual stream (the logit-effect analysis). */
static void test_direct_proj(void)
{
    gpt2_config c = {2, 2, 8, 4, 10, 32, 1e-5f};
    gpt2_model *g;
    CHECK(gpt2_create(&g, &c, 3) == OK);
    int ok, nd;
    int64_t shp[2];
    const float *p = gpt2_hook_direct_proj(g, "blocks.1.mlp.hook_post", 32, &ok);
    CHECK(ok && p == gpt2_param(g, "h.1.mlp.c_proj.weight", &nd, shp) && shp[0] == 32 && shp[1] == 8);
    p = gpt2_hook_direct_proj(g, "blocks.0.attn.hook_z", 8, &ok);
    CHECK(ok && p == gpt2_param(g, "h.0.attn.c_proj.weight", &nd, shp));
    CHECK(gpt2_hook_direct_proj(g, "blocks.0.hook_resid_post", 8, &ok) == NULL && ok, "residual: identity");
    CHECK(gpt2_hook_direct_proj(g, "hook_embed", 8, &ok) == NULL && ok);
    CHECK(gpt2_hook_direct_proj(g, "blocks.0.hook_resid_pre", 7, &ok) == NULL && !ok, "width mismatch");
    CHECK(gpt2_hook_direct_proj(g, "blocks.0.mlp.hook_pre", 32, &ok) == NULL && !ok, "a GELU follows");
    CHECK(gpt2_hook_direct_proj(g, "blocks.0.mlp.hook_post", 8, &ok) == NULL && !ok, "c_proj is [32,8]");
    CHECK(gpt2_hook_direct_proj(g, "blocks.5.mlp.hook_post", 32, &ok) == NULL && !ok, "no such block");
    gpt2_free(g);
}

/* The kernels on NaN/Inf inputs (issue 20): no undefined behaviour (exp_s converted
 * nearbyintf(NaN) to int32; the ASan/UBSan build aborts on that), NaN propagates, the widths
 * below 8 take the scalar path. */
static void test_nan_kernels(void)
{
    float pre[3] = {NAN, INFINITY, -INFINITY}, post[3];
    op_bias_gelu_forward(post, pre, NULL, 1, 3, OP_GELU_TANH);
    CHECK(isnan(post[0]) && post[1] == INFINITY, "%g %g", post[0], post[1]); /* -inf: 0 * -inf */
    float pre2[3] = {NAN, 1.0f, -1.0f};
    op_bias_gelu_forward(post, pre2, NULL, 1, 3, OP_GELU_ERF);
    CHECK(isnan(post[0]) && isfinite(post[1]), "%g %g", post[0], post[1]);
    float logits[3] = {0.5f, NAN, 1.0f}, loss = 0;
    int target = 0;
    long count = 0;
    double sum = op_crossentropy(logits, &loss, &target, 1, 3, 0.0f, &count);
    CHECK(isnan(sum) && isnan(loss) && count == 1, "loss %g", loss);
}

/* op_bf16_matmul splits its rows (a multiple of 64, then pieces of at most 32: oneDNN 2.6's
 * AMX matmul is 5-20x slower at some row counts): row counts that split into 1, 2 and 3 pieces,
 * with a bias into a strided output, must write every row (a NaN sentinel before) within the
 * bf16 bound of the fp32 product, and nothing past OC. */
static void test_bf16_rows_split(void)
{
    if (!op_bf16_supported()) {
        SKIP("no bf16 on this CPU (or SAELITE_NO_BF16): the bf16 row split is not tested");
        return;
    }
    enum { NMAX = 157, C = 72, OC = 40, LDO = OC + 5 };
    float *x = malloc(sizeof(float) * NMAX * C), *W = malloc(sizeof(float) * OC * C), b[OC];
    float *o = malloc(sizeof(float) * NMAX * LDO);
    uint64_t st = 11;
    for (int i = 0; i < NMAX * C; i++) x[i] = (float)((st = st * 6364136223846793005ULL + 1) >> 40) / 16777216.0f - 0.5f;
    for (int i = 0; i < OC * C; i++) W[i] = (float)((st = st * 6364136223846793005ULL + 1) >> 40) / 16777216.0f - 0.5f;
    for (int i = 0; i < OC; i++) b[i] = 0.01f * i;
    const int counts[] = {29, 53, 64, 100, 157};
    for (size_t t = 0; t < sizeof counts / sizeof *counts; t++) {
        int N = counts[t], bad = 0, past = 0;
        for (int i = 0; i < NMAX * LDO; i++) o[i] = NAN;
        CHECK(op_bf16_matmul(o, LDO, x, W, C, 1, b, N, C, OC, 0.0f) == 0);
        for (int n = 0; n < NMAX; n++)
            for (int j = 0; j < LDO; j++) {
                float v = o[n * LDO + j];
                if (n >= N || j >= OC) {
                    past += !isnan(v);
                    continue;
                }
                double ref = b[j], sa = 0;
                for (int c = 0; c < C; c++) {
                    ref += (double)x[n * C + c] * W[j * C + c];
                    sa += fabs(x[n * C + c] * W[j * C + c]);
                }
                bad += !(fabs(v - ref) <= (ldexp(1, -8) + C * ldexp(1, -23)) * sa * 1.01 + 1e-6);
            }
        CHECK(bad == 0 && past == 0, "bf16 matmul of %d rows: %d entries beyond the bound, %d "
              "written outside [N, OC]", N, bad, past);
    }
    /* the primitive cache knows beta's value: beta 0.5 after beta 1 on the same shape ran as 1 */
    float *o1 = malloc(sizeof(float) * 64 * LDO);
    for (int i = 0; i < 64 * LDO; i++) o[i] = o1[i] = 2.0f;
    CHECK(op_bf16_matmul(o1, LDO, x, W, C, 1, b, 64, C, OC, 1.0f) == 0 &&
          op_bf16_matmul(o, LDO, x, W, C, 1, b, 64, C, OC, 0.5f) == 0);
    double worst = 0;
    for (int n = 0; n < 64; n++)
        for (int j = 0; j < OC; j++) worst = fmax(worst, fabs(o1[n * LDO + j] - o[n * LDO + j] - 1.0));
    CHECK(worst < 1e-5, "bf16 matmul with beta 0.5 after beta 1: out off by %g", worst);
    free(o1);
    op_bf16_forget(W, sizeof(float) * OC * C);
    free(x), free(W), free(o);
}

/* The bf16 forward matmuls: every entry within the bound of rounding x and W to bf16 (relative
 * 2^-9 each, so 2^-8 of sum |x||w| for the product, plus fp32 summation), with a row stride,
 * bias, accumulation (beta 1) and the transposed logits form; not equal to fp32 (it did run in
 * bf16); SAELITE_NO_BF16 refuses bf16 and makes auto fp32. The fixture model's hook outputs in
 * bf16 stay within 3% of their scale. */
static void test_bf16_forward(void)
{
    const char *old = getenv("SAELITE_NO_BF16");
    char keep[64] = "";
    if (old) snprintf(keep, sizeof keep, "%s", old);
    setenv("SAELITE_NO_BF16", "1", 1);
    CHECK(op_set_precision(OP_PRECISION_BF16) == ERR_ARG && strstr(err_msg(), "SAELITE_NO_BF16=1") &&
              strstr(err_msg(), "HINT: unset it") && !strstr(err_msg(), "needs"),
          "bf16 refused: %s", err_msg());
    char why[160];
    CHECK(!strcmp(op_bf16_why_not(why, sizeof why), "disabled by SAELITE_NO_BF16=1"), "%s", why);
    CHECK(op_set_precision(OP_PRECISION_AUTO) == OK && !op_precision_bf16());
    if (old) setenv("SAELITE_NO_BF16", keep, 1);
    else unsetenv("SAELITE_NO_BF16");
    if (!op_bf16_supported()) {
        SKIP("no bf16 on this CPU (or SAELITE_NO_BF16): the bf16 forward is not tested");
        return;
    }
    enum { N = 37, C = 96, OC = 50, LDW = 3 * OC, LDO = OC + 3 };
    float *x = malloc(sizeof(float) * N * C), *W = malloc(sizeof(float) * C * LDW);
    float b[OC], o32[N * LDO], o16[N * LDO];
    uint64_t st = 5;
    for (int i = 0; i < N * C; i++) x[i] = (float)((st = st * 6364136223846793005ULL + 1) >> 40) / 16777216.0f - 0.5f;
    for (int i = 0; i < C * LDW; i++) W[i] = (float)((st = st * 6364136223846793005ULL + 1) >> 40) / 16777216.0f - 0.5f;
    for (int i = 0; i < OC; i++) b[i] = 0.1f * i;
    for (int trans = 1; trans >= 0; trans--)
        for (int beta = 0; beta < 2; beta++) {
            for (int i = 0; i < N * LDO; i++) o32[i] = o16[i] = 0.25f * (i % 7);
            CHECK(op_set_precision(OP_PRECISION_FP32) == OK);
            if (trans) op_logits_forward(o32, x, W, N, C, OC); /* W as [OC, C] */
            else op_matmul_forward(o32, LDO, x, W + OC, LDW, b, N, C, OC, (float)beta);
            CHECK(op_set_precision(OP_PRECISION_BF16) == OK && op_precision_bf16());
            if (trans) op_logits_forward(o16, x, W, N, C, OC);
            else op_matmul_forward(o16, LDO, x, W + OC, LDW, b, N, C, OC, (float)beta);
            int ld = trans ? OC : LDO, bad = 0;
            double worst = 0, maxd = 0;
            for (int n = 0; n < N; n++)
                for (int j = 0; j < OC; j++) {
                    double sa = 0;
                    for (int c = 0; c < C; c++)
                        sa += fabs(x[n * C + c]) * fabs(trans ? W[j * C + c] : W[c * LDW + OC + j]);
                    double bound = (ldexp(1, -8) + C * ldexp(1, -23)) * sa * 1.01 + 1e-6;
                    double d = fabs(o16[n * ld + j] - o32[n * ld + j]);
                    if (d > bound) bad++;
                    if (d / bound > worst) worst = d / bound;
                    if (d > maxd) maxd = d;
                }
            CHECK(bad == 0, "bf16 matmul (trans %d, beta %d): %d entries beyond the bound (worst "
                  "%.2f of it)", trans, beta, bad, worst);
            CHECK(maxd > 0, "bf16 matmul (trans %d, beta %d) equals fp32: bf16 did not run", trans,
                  beta);
            if (!trans && beta)
                printf("bf16 matmul: max |bf16 - fp32| %.3g (%.2f of the bound) [oneDNN %s, ISA "
                       "%s]\n", maxd, worst, op_bf16_impl(), op_bf16_isa());
        }
    int past = 0; /* the last run (beta 1, row stride LDO): columns OC..LDO-1 untouched */
    for (int n = 0; n < N; n++)
        for (int j = OC; j < LDO; j++) past += o16[n * LDO + j] != 0.25f * ((n * LDO + j) % 7);
    CHECK(past == 0, "bf16 matmul wrote %d entries past OC", past);
    /* the weight cache: a changed W is not seen until op_bf16_refresh, which converts it again
       into the same buffer (the bits of a first conversion, after op_bf16_forget) */
    float *r1 = malloc(sizeof(float) * N * OC), *r2 = malloc(sizeof(float) * N * OC);
    float *r3 = malloc(sizeof(float) * N * OC);
    CHECK(op_bf16_matmul(r1, OC, x, W, C, 1, b, N, C, OC, 0) == 0);
    for (int i = 0; i < OC * C; i++) W[i] = -2 * W[i];
    CHECK(op_bf16_matmul(r2, OC, x, W, C, 1, b, N, C, OC, 0) == 0);
    CHECK(!memcmp(r1, r2, sizeof(float) * N * OC), "bf16 weight cache: W changed without a refresh "
          "was converted again");
    op_bf16_refresh(W, sizeof(float) * C * LDW);
    CHECK(op_bf16_matmul(r2, OC, x, W, C, 1, b, N, C, OC, 0) == 0);
    op_bf16_forget(W, sizeof(float) * C * LDW);
    CHECK(op_bf16_matmul(r3, OC, x, W, C, 1, b, N, C, OC, 0) == 0);
    CHECK(memcmp(r1, r2, sizeof(float) * N * OC) && !memcmp(r2, r3, sizeof(float) * N * OC),
          "op_bf16_refresh: not the bits of a fresh conversion");
    op_bf16_forget(W, sizeof(float) * C * LDW);
    free(r1), free(r2), free(r3);
    free(x), free(W);
    /* the fixture model, every hook point, bf16 against fp32 */
    gpt2_model *m;
    if (gpt2_load(&m, "tests/data/gpt2_tiny_f32")) {
        CHECK(0, "%s", err_msg());
        op_set_precision(OP_PRECISION_FP32);
        return;
    }
    int tok[10] = {1, 5, 7, 3, 9, 2, 4, 4, 0, 11}, nh = gpt2_hook_count(m);
    capture c32 = {0}, c16 = {0};
    CHECK(gpt2_hook_add(m, "*", cap_hook, &c32) == OK);
    CHECK(op_set_precision(OP_PRECISION_FP32) == OK);
    CHECK(gpt2_forward(m, tok, 2, 5, 1) == OK);
    gpt2_hook_clear(m);
    CHECK(gpt2_hook_add(m, "*", cap_hook, &c16) == OK);
    CHECK(op_set_precision(OP_PRECISION_BF16) == OK);
    CHECK(gpt2_forward(m, tok, 2, 5, 1) == OK);
    CHECK(op_set_precision(OP_PRECISION_FP32) == OK);
    int far = 0;
    double worst = 0;
    for (int h = 0; h < nh && h < c32.n && h < c16.n; h++) {
        double scale = 0, d = 0;
        for (int64_t i = 0; i < c32.e[h].n; i++) {
            scale = fmax(scale, fabs(c32.e[h].data[i]));
            d = fmax(d, fabs(c32.e[h].data[i] - c16.e[h].data[i]));
        }
        if (d > 0.03 * scale + 1e-6) far++;
        if (scale > 0 && d / scale > worst) worst = d / scale;
    }
    CHECK(c32.n == nh && c16.n == nh && far == 0, "bf16 forward: %d of %d hook points beyond 3%% "
          "(worst %.3f)", far, nh, worst);
    printf("bf16 forward: worst hook point max|bf16 - fp32| / max|fp32| = %.4f\n", worst);
    cap_free(&c32);
    cap_free(&c16);
    gpt2_free(m);
}

/* The elementwise kernels and the bf16 attention split their rows or heads over threads once
 * the work is large enough: the whole call must give the bits of the same rows computed one
 * small call at a time (one thread), in fp32 and in bf16. */
static void test_threaded_kernels(void)
{
    int B = 4, H = 6, T = 96, C = 192, N = B * T, F = 4 * C; /* N*F and B*H*T*T over 2^17 */
    size_t nc = (size_t)N * C, nf = (size_t)N * F, na = (size_t)B * H * T * T;
    float *x = malloc(sizeof(float) * nf), *pre = malloc(sizeof(float) * nf);
    float *post = malloc(sizeof(float) * nf), *pre1 = malloc(sizeof(float) * nf);
    float *post1 = malloc(sizeof(float) * nf), *bias = malloc(sizeof(float) * F);
    float *w = malloc(sizeof(float) * C), *ln = malloc(sizeof(float) * nc);
    float *ln1 = malloc(sizeof(float) * nc), *mean = malloc(sizeof(float) * N);
    float *rstd = malloc(sizeof(float) * N), *m1 = malloc(sizeof(float) * N);
    float *r1 = malloc(sizeof(float) * N), *att = malloc(sizeof(float) * na);
    float *att1 = malloc(sizeof(float) * na), *z = malloc(sizeof(float) * nc);
    float *z1 = malloc(sizeof(float) * nc);
    uint64_t st = 12345;
    for (size_t i = 0; i < nf; i++) {
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)((int)(st >> 40) % 2001 - 1000) / 250.0f;
    }
    for (int i = 0; i < F; i++) bias[i] = 0.01f * (float)(i % 17 - 8);
    for (int i = 0; i < C; i++) w[i] = 1.0f + 0.01f * (float)(i % 5);
    for (int prec = 0; prec < 1 + op_bf16_supported(); prec++) {
        CHECK(op_set_precision(prec ? OP_PRECISION_BF16 : OP_PRECISION_FP32) == OK);
        memcpy(pre, x, sizeof(float) * nf);
        memcpy(pre1, x, sizeof(float) * nf);
        op_bias_gelu_forward(post, pre, bias, N, F, OP_GELU_TANH);
        for (int n = 0; n < N; n++)
            op_bias_gelu_forward(post1 + (size_t)n * F, pre1 + (size_t)n * F, bias, 1, F,
                                 OP_GELU_TANH);
        CHECK(!memcmp(post, post1, sizeof(float) * nf) && !memcmp(pre, pre1, sizeof(float) * nf),
              "gelu: threaded rows differ (%s)", prec ? "bf16" : "fp32");
        op_layernorm_forward(ln, mean, rstd, x, w, bias, 1e-5f, N, C);
        for (int n = 0; n < N; n++)
            op_layernorm_forward(ln1 + (size_t)n * C, m1 + n, r1 + n, x + (size_t)n * C, w, bias,
                                 1e-5f, 1, C);
        CHECK(!memcmp(ln, ln1, sizeof(float) * nc) && !memcmp(mean, m1, sizeof(float) * N) &&
                  !memcmp(rstd, r1, sizeof(float) * N),
              "layernorm: threaded rows differ (%s)", prec ? "bf16" : "fp32");
        /* attention: q = x, k = x shifted, v = x again; whole batch against batch by batch */
        const float *q = x, *k = x + 7, *v = x + 3;
        op_attention_scores(att, q, k, B, T, C, H);
        op_attention_softmax(att, B, T, H);
        op_attention_values(z, att, v, B, T, C, H);
        for (int b = 0; b < B; b++) {
            size_t ob = (size_t)b * T * C, oa = (size_t)b * H * T * T;
            op_attention_scores(att1 + oa, q + ob, k + ob, 1, T, C, H);
            op_attention_softmax(att1 + oa, 1, T, H);
            op_attention_values(z1 + ob, att1 + oa, v + ob, 1, T, C, H);
        }
        CHECK(!memcmp(att, att1, sizeof(float) * na) && !memcmp(z, z1, sizeof(float) * nc),
              "attention: threaded heads differ (%s)", prec ? "bf16" : "fp32");
    }
    CHECK(op_set_precision(OP_PRECISION_FP32) == OK);
    free(x), free(pre), free(post), free(pre1), free(post1), free(bias), free(w), free(ln);
    free(ln1), free(mean), free(rstd), free(m1), free(r1), free(att), free(att1), free(z), free(z1);
}

/* ---- gpt2_forward_run (`saelite forward`) -------------------------------------------- */
/* One hook's [B=1,T,...] tensor of a direct forward on tok[T], batch axis kept in the data. */
static float *direct_hook(gpt2_model *m, const char *hook, const int *tok, int T, int64_t *n)
{
    capture cap = {0};
    float *out = NULL;
    if (gpt2_hook_add(m, hook, cap_hook, &cap) == OK && gpt2_forward(m, tok, 1, T, 0) == OK &&
        cap.n == 1) {
        *n = cap.e[0].n;
        out = malloc(sizeof(float) * (size_t)*n);
        memcpy(out, cap.e[0].data, sizeof(float) * (size_t)*n);
    }
    cap_free(&cap);
    gpt2_hook_clear(m);
    return out;
}

/* The runner's .npy against what it wrote (shape) and a direct capture (values, exactly). */
static void check_npy(const char *path, const gpt2_forward_result *r, const float *want,
                      int64_t n, const char *label)
{
    float *got = NULL;
    int nd = 0;
    int64_t sh[NPY_MAX_DIMS];
    CHECK(npy_read(path, &got, &nd, sh) == OK, "%s: %s", label, err_msg());
    if (!got) return;
    int64_t numel = 1;
    for (int i = 0; i < nd; i++) numel *= sh[i];
    CHECK(nd == r->ndim && !memcmp(sh, r->shape, sizeof(int64_t) * (size_t)nd), "%s: shape", label);
    CHECK(numel == n, "%s: %lld values, want %lld", label, (long long)numel, (long long)n);
    if (numel == n) CHECK_TENSOR(got, want, n, 0, 0, label);
    mem_free(got);
}

static void test_forward_run(void)
{
    char dir[64];
    if (!harness_tmpdir(dir, sizeof dir, "gpt2")) return;
    char p[512], npy[512], bytes_dir[512];
    snprintf(npy, sizeof npy, "%s/out.npy", dir);
    snprintf(bytes_dir, sizeof bytes_dir, "%s/bytes", dir);
    /* 300 ids: the 256 bytes, <|endoftext|> = 256 (the model's tokenizer), the rest unused */
    gpt2_config c = {2, 2, 16, 8, 300, 64, 1e-5f};
    gpt2_model *m = NULL;
    CHECK(gpt2_create(&m, &c, 5) == OK && gpt2_save(m, dir, ST_F32, 0) == OK, "%s", err_msg());
    gpt2_free(m);
    m = NULL;
    snprintf(p, sizeof p, "%s/encoder.json", dir);
    FILE *f = fopen(p, "w");
    fputc('{', f);
    for (int i = 0; i < 256; i++)
        fprintf(f, "\"\\u%04x\": %d, ", tok_byte_to_unicode((unsigned char)i), i);
    fputs("\"<|endoftext|>\": 256}\n", f);
    fclose(f);
    snprintf(p, sizeof p, "%s/vocab.bpe", dir);
    write_file(p, "#version: 0.2\n");
    CHECK(mkdir(bytes_dir, 0755) == 0 && fixture_byte_tokenizer(bytes_dir) == OK); /* no EOT */
    CHECK(gpt2_load(&m, dir) == OK, "%s", err_msg());
    if (!m) return;
    const char *hook = "blocks.1.hook_resid_post";
    static const int tok[] = {5, 9, 17, 3}, hi[] = {104, 105}, bos_hi[] = {256, 104, 105};
    gpt2_forward_result r;

    /* --tokens: the hook's tensor without the batch axis, the same values as a direct capture */
    int64_t n = 0;
    float *want = direct_hook(m, hook, tok, 4, &n);
    gpt2_forward_opts o = {.model = dir, .tokens = tok, .ntokens = 4, .hook = hook, .npy = npy};
    CHECK(gpt2_forward_run(&o, &r) == OK, "%s", err_msg());
    CHECK(r.ndim == 2 && r.shape[0] == 4 && r.shape[1] == 16, "ndim %d [%lld, %lld]", r.ndim,
          (long long)r.shape[0], (long long)r.shape[1]);
    if (want) check_npy(npy, &r, want, n, "forward_run tokens");
    free(want);

    /* --text: the tokenizer's ids, <|endoftext|> first with bos (position 0 changes every row) */
    want = direct_hook(m, hook, hi, 2, &n);
    gpt2_forward_opts t = {.model = dir, .text = "hi", .hook = hook, .npy = npy};
    CHECK(gpt2_forward_run(&t, &r) == OK, "%s", err_msg());
    CHECK(r.shape[0] == 2, "T %lld without bos", (long long)r.shape[0]);
    if (want) check_npy(npy, &r, want, n, "forward_run text");
    free(want);
    want = direct_hook(m, hook, bos_hi, 3, &n);
    t.bos = 1;
    CHECK(gpt2_forward_run(&t, &r) == OK, "%s", err_msg());
    CHECK(r.shape[0] == 3, "T %lld with bos", (long long)r.shape[0]);
    if (want) check_npy(npy, &r, want, n, "forward_run text bos");
    free(want);
    want = direct_hook(m, "hook_embed", bos_hi, 3, &n);
    t.hook = "hook_embed";
    CHECK(gpt2_forward_run(&t, &r) == OK, "%s", err_msg());
    const float *wte = gpt2_param(m, "wte.weight", NULL, NULL);
    float *got = NULL;
    int nd;
    int64_t sh[NPY_MAX_DIMS];
    if (npy_read(npy, &got, &nd, sh) == OK) /* row 0 is <|endoftext|>'s embedding */
        CHECK_TENSOR(got, wte + 256 * 16, 16, 0, 0, "bos row");
    mem_free(got);
    free(want);

    /* logits: [T, V] as gpt2_logits gives them */
    CHECK(gpt2_forward(m, tok, 1, 4, 1) == OK);
    gpt2_forward_opts l = {.model = dir, .tokens = tok, .ntokens = 4, .npy = npy};
    CHECK(gpt2_forward_run(&l, &r) == OK, "%s", err_msg());
    CHECK(r.ndim == 2 && r.shape[0] == 4 && r.shape[1] == 300);
    check_npy(npy, &r, gpt2_logits(m), 4 * 300, "forward_run logits");

    /* refusals: nothing written */
    unlink(npy);
    o.hook = "blocks.0.*";
    CHECK(gpt2_forward_run(&o, &r) == ERR_ARG && strstr(err_msg(), "not a pattern"), "%s",
          err_msg());
    o.hook = "blocks.0.hook_nosuch";
    CHECK(gpt2_forward_run(&o, &r) == ERR_NOTFOUND, "%s", err_msg());
    gpt2_forward_opts e = {.model = dir, .text = "", .hook = hook, .npy = npy};
    CHECK(gpt2_forward_run(&e, &r) == ERR_ARG && strstr(err_msg(), "no tokens"), "%s", err_msg());
    t.tok_dir = bytes_dir;
    CHECK(gpt2_forward_run(&t, &r) == ERR_ARG && strstr(err_msg(), "no <|endoftext|>"), "%s",
          err_msg());
    CHECK(access(npy, F_OK) != 0, "a refused run wrote %s", npy);
    /* with bos, "" is <|endoftext|> alone */
    e.bos = 1;
    CHECK(gpt2_forward_run(&e, &r) == OK && r.shape[0] == 1, "%s", err_msg());

    gpt2_free(m);
    static const char *const files[] = {"out.npy", "config.json", "model.safetensors",
                                        "encoder.json", "vocab.bpe", "bytes/encoder.json",
                                        "bytes/vocab.bpe"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(bytes_dir);
    CHECK(rmdir(dir) == 0, "%s left files behind", dir);
}

/* gpt2_init_run: the weights gpt2_create draws for the seed, untied on request, and a directory
 * holding a model (a train-lm run's too) refused unless forced (then a run's state is gone) */
static void test_init_run(void)
{
    char dir[64], out[512], state[600];
    if (!harness_tmpdir(dir, sizeof dir, "gpt2init")) return;
    snprintf(out, sizeof out, "%s/m", dir);
    snprintf(state, sizeof state, "%s/train_state.safetensors", out);
    gpt2_init_opts o = {.cfg = {2, 2, 16, 8, 40, 32, 1e-5f}, .seed = 11, .dtype = ST_F32,
                        .untied = 1, .out = out};
    size_t n = 0, nr = 0, nl = 0;
    CHECK(gpt2_init_run(&o, &n) == OK, "%s", err_msg());
    gpt2_model *ref = NULL, *got = NULL;
    CHECK(gpt2_create(&ref, &o.cfg, 11) == OK && gpt2_untie(ref) == OK && gpt2_load(&got, out) == OK,
          "%s", err_msg());
    if (ref && got) {
        const float *a = gpt2_params(ref, &nr), *b = gpt2_params(got, &nl);
        CHECK(n == nr && nr == nl && !memcmp(a, b, nr * sizeof *a) && !gpt2_tied(got),
              "%zu / %zu / %zu parameters, tied %d", n, nr, nl, gpt2_tied(got));
    }
    gpt2_free(ref);
    gpt2_free(got);
    /* any model there is refused too (a downloaded checkpoint was replaced without a word) */
    CHECK(gpt2_init_run(&o, &n) == ERR_ARG && strstr(err_msg(), "holds a model (model.safetensors)")
          && n == 0, "%s", err_msg());
    FILE *f = fopen(state, "w");
    if (f) fclose(f);
    CHECK(gpt2_init_run(&o, &n) == ERR_ARG && strstr(err_msg(), "holds a train-lm run") && n == 0,
          "%s", err_msg());
    CHECK(access(state, F_OK) == 0, "the refused run removed the state");
    o.force = 1;
    CHECK(gpt2_init_run(&o, &n) == OK && access(state, F_OK) != 0, "%s", err_msg());
    /* a stop that arrives while the weights are written: nothing renamed into place, and the
       directory this save made is gone (a SIGTERM in the write wrote the model, exit 0) */
    volatile int stop = 1;
    char fresh[600];
    snprintf(fresh, sizeof fresh, "%s/fresh", dir);
    gpt2_model *g = NULL;
    CHECK(gpt2_create(&g, &o.cfg, 3) == OK, "%s", err_msg());
    if (g) {
        CHECK(gpt2_save_stop(g, fresh, ST_F32, 0, &stop) == ERR_ABORTED && access(fresh, F_OK) != 0,
              "%s", err_msg());
        CHECK(gpt2_save_stop(g, out, ST_F32, 0, &stop) == ERR_ABORTED && gpt2_load(&ref, out) == OK,
              "a stopped save into an existing model left it unloadable: %s", err_msg());
        gpt2_free(ref);
        ref = NULL;
        stop = 0;
        CHECK(gpt2_save_stop(g, fresh, ST_F32, 0, &stop) == OK && access(fresh, F_OK) == 0, "%s",
              err_msg());
    }
    gpt2_free(g);
    harness_rmtree(dir);
}

int main(void)
{
    test_direct_proj();
    test_fixture("tests/data/gpt2_tiny_f32");
    test_fixture("tests/data/gpt2_tiny_bf16");
    test_fixture("tests/data/gpt2_tiny_f16");
    test_hooks();
    test_load_errors();
    test_tied_with_head();
    test_forward_run();
    test_init_run();
    test_other_checkpoints();
    test_nan_kernels();
    test_threaded_kernels();
    test_bf16_forward();
    test_bf16_rows_split();
    test_hook_order();
    test_finite_differences("tests/data/gpt2_tiny_bf16");
    test_finite_differences("tests/data/gpt2_tiny_f16");
    return harness_report("test_gpt2");
}
