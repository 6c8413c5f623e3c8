/* test_params.c - parameter counts: GPT-3 175B breakdown, GPT-2 family totals, config.json. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "harness.h"
#include "model/params.h"
#include "model/safetensors.h"

static void test_presets(void)
{
    params_shape s;
    params_count c;
    CHECK(params_preset("gpt3", &s) == OK);
    params_compute(&s, &c);
    /* the well-known breakdown: 2 * 50257 * 12288 + 96 * 12 * 12288^2 */
    CHECK(c.by_category[PARAMS_MATRIX] == 175181291520LL, "gpt3 matrices %lld",
          (long long)c.by_category[PARAMS_MATRIX]);
    CHECK(c.by_category[PARAMS_POS] == 2048LL * 12288, "wpe");
    CHECK(c.by_category[PARAMS_BIAS] == 96LL * 9 * 12288, "biases %lld",
          (long long)c.by_category[PARAMS_BIAS]);
    CHECK(c.by_category[PARAMS_NORM] == 96LL * 4 * 12288 + 2 * 12288);
    CHECK(c.total == c.by_category[0] + c.by_category[1] + c.by_category[2] + c.by_category[3]);
    /* Hugging Face's counts of the GPT-2 checkpoints (tied embeddings) */
    const char *names[4] = {"gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"};
    long long want[4] = {124439808LL, 354823168LL, 774030080LL, 1557611200LL};
    for (int i = 0; i < 4; i++) {
        CHECK(params_preset(names[i], &s) == OK);
        params_compute(&s, &c);
        CHECK(c.total == want[i], "%s: %lld, want %lld", names[i], (long long)c.total, want[i]);
    }
    CHECK(params_preset("gpt4", &s) == ERR_NOTFOUND && strstr(err_msg(), "gpt2-medium"),
          "%s", err_msg());
}

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    fputs(text, f);
    return fclose(f) == 0;
}

static void test_dir(void)
{
    char dir[] = "/tmp/saelite_test_paramsXXXXXX", cfg[256];
    if (!mkdtemp(dir)) {
        SKIP("mkdtemp failed");
        return;
    }
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    params_shape s;
    CHECK(params_from_dir(dir, &s) == ERR_NOTFOUND && strstr(err_msg(), "config.json"), "%s", err_msg());
    write_file(cfg, "{\"n_layer\": 12, \"n_embd\": 768, \"n_head\": 12, \"n_positions\": 1024,"
                    " \"vocab_size\": 50257, \"n_inner\": null, \"activation_function\": \"gelu_new\"}");
    CHECK(params_from_dir(dir, &s) == OK, "%s", err_msg());
    params_count c;
    params_compute(&s, &c);
    CHECK(c.total == 124439808LL && s.tied, "from config: %lld", (long long)c.total);
    /* another architecture with GPT-2's keys is refused, as the loader refuses it: gpt_bigcode
       (multi-query attention) was counted as a GPT-2 */
    write_file(cfg, "{\"model_type\": \"gpt_bigcode\", \"n_layer\": 12, \"n_embd\": 768, "
                    "\"n_head\": 12, \"n_positions\": 1024, \"vocab_size\": 50257}");
    CHECK(params_from_dir(dir, &s) == ERR_FORMAT &&
              strstr(err_msg(), "model_type \"gpt_bigcode\" is not supported (only \"gpt2\")"),
          "%s", err_msg());
    write_file(cfg, "{\"model_type\": 2, \"n_layer\": 12, \"n_embd\": 768, \"n_head\": 12, "
                    "\"n_positions\": 1024, \"vocab_size\": 50257}");
    CHECK(params_from_dir(dir, &s) == ERR_FORMAT && strstr(err_msg(), "must be the string"), "%s",
          err_msg());
    write_file(cfg, "{\"n_layer\": 1, \"n_embd\": 128, \"n_head\": 4, \"n_ctx\": 128,"
                    " \"vocab_size\": 4096, \"n_inner\": 512, \"tie_word_embeddings\": false}");
    CHECK(params_from_dir(dir, &s) == OK, "%s", err_msg());
    params_compute(&s, &c);
    long long w = 2LL * 4096 * 128 + 4LL * 128 * 128 + 2LL * 128 * 512;
    CHECK(c.by_category[PARAMS_MATRIX] == w && s.n_ctx == 128 && !s.tied, "%lld vs %lld",
          (long long)c.by_category[PARAMS_MATRIX], w);
    /* config.json decides tying (default true), as in the loader and HF: a stored
     * lm_head.weight does not untie (it used to); buffers are not parameters; names may carry
     * the transformer. prefix */
    write_file(cfg, "{\"n_layer\": 1, \"n_embd\": 4, \"n_head\": 2, \"n_ctx\": 3,"
                    " \"vocab_size\": 5, \"n_inner\": 8}");
    static float zeros[64];
    char stp[256];
    snprintf(stp, sizeof stp, "%s/model.safetensors", dir);
    st_out t[] = {
        {"transformer.wte.weight", ST_F32, 2, {5, 4}, zeros},
        {"transformer.wpe.weight", ST_F32, 2, {3, 4}, zeros},
        {"transformer.h.0.attn.bias", ST_F32, 4, {1, 1, 3, 3}, zeros},
        {"transformer.h.0.attn.c_attn.weight", ST_F32, 2, {4, 12}, zeros},
        {"transformer.h.0.attn.c_attn.bias", ST_F32, 1, {12}, zeros},
        {"lm_head.weight", ST_F32, 2, {5, 4}, zeros},
    };
    CHECK(st_write(stp, t, 6, NULL) == OK, "%s", err_msg());
    CHECK(params_from_dir(dir, &s) == OK, "%s", err_msg());
    /* the unused head apart: counted as stored, a valid file read "DIFFERS" (an audit) */
    CHECK(s.tied && s.stored == 20 + 12 + 48 + 12 && s.unused_head == 20, "tied %d stored %lld "
          "unused %lld", s.tied, (long long)s.stored, (long long)s.unused_head);
    CHECK(st_write(stp, t, 5, NULL) == OK, "%s", err_msg());
    CHECK(params_from_dir(dir, &s) == OK && s.tied && s.stored == 92 && s.unused_head == 0, "%s",
          err_msg());
    write_file(cfg, "{\"n_layer\": 1, \"n_embd\": 4, \"n_head\": 2, \"n_ctx\": 3,"
                    " \"vocab_size\": 5, \"n_inner\": 8, \"tie_word_embeddings\": \"false\"}");
    CHECK(params_from_dir(dir, &s) == ERR_FORMAT &&
              strstr(err_msg(), "config.json: \"tie_word_embeddings\" must be true or false"),
          "%s", err_msg());
    unlink(stp);
    write_file(cfg, "{\"n_layer\": 2, \"n_embd\": 64}");
    CHECK(params_from_dir(dir, &s) == ERR_FORMAT && strstr(err_msg(), "n_head"), "%s", err_msg());
    write_file(cfg, "{\"n_layer\": -2, \"n_embd\": 64, \"n_head\": 4, \"n_ctx\": 8, \"vocab_size\": 9}");
    CHECK(params_from_dir(dir, &s) == ERR_FORMAT && strstr(err_msg(), "n_layer"), "%s", err_msg());
    write_file(cfg, "{\"n_layer\": 2, \"n_embd\": 64, \"n_head\": 5, \"n_ctx\": 8, \"vocab_size\": 9}");
    CHECK(params_from_dir(dir, &s) == ERR_FORMAT && strstr(err_msg(), "multiple"), "%s", err_msg());
    write_file(cfg, "[1, 2");
    CHECK(params_from_dir(dir, &s) == ERR_FORMAT && strstr(err_msg(), "JSON"), "%s", err_msg());
    unlink(cfg);
    rmdir(dir);
}

int main(void)
{
    test_presets();
    test_dir();
    return harness_report("test_params");
}
