/* generate_run.c - `saelite generate` as a library call (see steer.h: ana_generate_run). */
#include <string.h>

#include "analysis/steer.h"
#include "common/err.h"
#include "common/mem.h"
#include "common/progress.h"
#include "model/ops.h"

typedef struct {
    const ana_generate_opts *o;
    const tok_tokenizer *tok;
    int eot, made, stopped;
} stream;

/* Each sampled token's bytes to the caller as it comes; <|endoftext|> ends the pass unless
 * no_stop (it is counted, not shown); a set stop flag ends it too. */
static int on_token(int id, void *user)
{
    stream *s = user;
    s->made++;
    if (id == s->eot && !s->o->no_stop) {
        s->stopped = 1;
        return 0;
    }
    size_t bl;
    const char *b = tok_token_bytes(s->tok, id, &bl);
    if (s->o->token) s->o->token(s->o->user, b, b ? bl : 0);
    return s->o->stop && *s->o->stop;
}

int ana_generate_run(const ana_generate_opts *o, ana_generate_result *r)
{
    memset(r, 0, sizeof *r);
    gpt2_model *m = NULL;
    tok_tokenizer *tok = NULL;
    sae_model *sae = NULL;
    ana_steer *st = NULL;
    ana_steer_term *terms = NULL;
    int *ctx = NULL, nterms = 0;
    int rc = op_set_precision(o->precision);
    if (!rc) rc = gpt2_load(&m, o->model_dir);
    const char *tok_dir = o->tokenizer_dir ? o->tokenizer_dir : o->model_dir;
    if (!rc) rc = tok_load(&tok, tok_dir);
    if (!rc) rc = tok_check_model(tok, tok_dir, gpt2_cfg(m)->vocab_size, o->model_dir);
    if (!rc && o->sae_dir) {
        if (!(rc = sae_load(&sae, o->sae_dir)) &&
            !(rc = ana_check_sae_model(sae, o->sae_dir, o->model_dir)) &&
            !(rc = ana_steer_parse(o->steer, sae->cfg.d_sae, &terms, &nterms)))
            rc = ana_steer_new(&st, sae, o->method, terms, nterms);
    }
    size_t len = 0;
    if (!rc)
        rc = ana_gen_context(tok, gpt2_cfg(m)->vocab_size, o->prompt, strlen(o->prompt),
                             o->max_tokens, &ctx, &len);
    if (!rc && st) { /* the hook must exist and fit before anything is shown */
        rc = ana_steer_attach(st, m, o->hook);
        gpt2_hook_clear(m);
    }
    /* one run, or with compare the steered run then the unsteered one from the same seed */
    size_t len0 = len;
    int Vt = rc ? 0 : tok_vocab_size(tok), eot = rc ? -1 : tok_eot(tok);
    for (int pass = 0; !rc && pass < 1 + (o->compare && st) && !(o->stop && *o->stop); pass++) {
        int steered = st && pass == 0;
        if (o->pass_begin) o->pass_begin(o->user, pass, steered, terms, steered ? nterms : 0);
        len = len0;
        double t0 = now_seconds();
        stream ss = {o, tok, eot, 0, 0};
        ana_gen_opts go = {.max_new = o->max_tokens, .top_k = o->top_k, .vocab_limit = Vt,
                           .stop_id = o->no_stop ? -1 : eot, .temperature = o->temperature,
                           .seed = o->seed, .hook = o->hook, .on_token = on_token, .user = &ss};
        if ((rc = ana_steer_generate(m, st, steered, &go, ctx, &len))) break;
        r->passes++;
        if (o->pass_end) o->pass_end(o->user, ss.made, ss.stopped, now_seconds() - t0);
    }
    mem_free(ctx);
    mem_free(terms);
    ana_steer_free(st);
    sae_free(sae);
    tok_free(tok);
    gpt2_free(m);
    return rc;
}
