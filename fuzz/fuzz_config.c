/* fuzz_config - gpt2_load on a directory whose config.json is the fuzz input, next to a tiny valid
 * model.safetensors (1 layer, d_model 8, 2 heads, ctx 8, vocab 16, written once by gpt2_save).
 * Invariants: no crash or sanitizer report; errors carry a one-line message; a model that loads
 * reports a positive config and runs a forward pass over two tokens. */
#include "common/mem.h"
#include "fuzz/fuzz.h"
#include "model/gpt2.h"

static const char *config_dir(void)
{
    static char dir[256];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/model", fuzz_tmpdir());
        gpt2_config cfg = {1, 2, 8, 8, 16, 32, 1e-5f};
        gpt2_model *m = NULL;
        if (gpt2_create(&m, &cfg, 1) || gpt2_save(m, dir, ST_F32, 0))
            fuzz_fail("cannot write the tiny model: %s", err_msg());
        gpt2_free(m);
    }
    return dir;
}

static void config_cleanup(void)
{
    char p[300];
    snprintf(p, sizeof p, "%s/config.json", config_dir());
    unlink(p);
    snprintf(p, sizeof p, "%s/model.safetensors", config_dir());
    unlink(p);
    rmdir(config_dir());
}

static int fuzz_config(const uint8_t *data, size_t n)
{
    static int registered;
    const char *dir = config_dir();
    if (!registered) { atexit(config_cleanup); registered = 1; } /* runs before fuzz_rmdir */
    char path[300];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) fuzz_fail("cannot write %s", path);
    gpt2_model *m = NULL;
    int rc = gpt2_load(&m, dir);
    fuzz_check_err(rc, "gpt2_load");
    if (!rc) {
        const gpt2_config *c = gpt2_cfg(m);
        if (c->n_layer < 1 || c->n_head < 1 || c->n_embd < 1 || c->n_ctx < 1 || c->vocab_size < 1 || c->n_inner < 1)
            fuzz_fail("loaded a model with a non-positive size");
        int tok[2] = {0, c->vocab_size - 1};
        rc = gpt2_forward(m, tok, 1, c->n_ctx >= 2 ? 2 : 1, 1);
        fuzz_check_err(rc, "gpt2_forward");
        if (rc) fuzz_fail("forward on a loaded model failed: %s", err_msg());
        gpt2_free(m);
    }
    fuzz_guard();
    return 0;
}

#ifndef FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) { return fuzz_config(data, n); }
#endif
