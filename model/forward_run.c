/* forward_run.c - `saelite forward` as a library call: load, encode, one hooked forward, .npy. */
#include <string.h>

#include "common/err.h"
#include "common/mem.h"
#include "common/npy.h"
#include "model/forward_run.h"
#include "model/gpt2.h"
#include "model/tokenizer.h"

typedef struct {
    float *copy;
    int ndim;
    int64_t shape[4];
} capture;

static int grab(const tensor_view *t, void *user)
{
    capture *c = user;
    int64_t n = tensor_numel(t);
    c->copy = mem_alloc(sizeof(float) * (size_t)n);
    if (!c->copy) return err_set(ERR_NOMEM, "out of memory");
    memcpy(c->copy, t->data, sizeof(float) * (size_t)n);
    /* drop the batch axis (B = 1) */
    c->ndim = t->ndim - 1;
    for (int i = 1; i < t->ndim; i++) c->shape[i - 1] = t->shape[i];
    return 0;
}

/* The text's ids into *ids (the caller frees), <|endoftext|> first with bos. */
static int encode_text(const gpt2_forward_opts *o, int vocab, int **ids, int *n)
{
    const char *dir = o->tok_dir ? o->tok_dir : o->model;
    tok_tokenizer *tk;
    size_t nt = 0;
    int rc = tok_load(&tk, dir);
    if (rc) return rc;
    rc = tok_check_model(tk, dir, vocab, o->model);
    if (!rc) rc = tok_encode(tk, o->text, strlen(o->text), 1, ids, NULL, &nt);
    int eot = tok_eot(tk);
    tok_free(tk);
    if (rc) return rc;
    if (nt == 0 && !o->bos) /* with --bos the sequence is <|endoftext|> alone (an audit) */
        return err_set(ERR_ARG, "--text encodes to no tokens (--bos runs <|endoftext|> alone)");
    if (o->bos) {
        if (eot < 0) return err_set(ERR_ARG, "--bos: tokenizer %s has no <|endoftext|> token", dir);
        int *grown = mem_realloc(*ids, sizeof **ids * (nt + 1));
        if (!grown) return err_set(ERR_NOMEM, "out of memory");
        *ids = grown;
        if (nt) memmove(grown + 1, grown, sizeof *grown * nt);
        nt++;
        grown[0] = eot;
    }
    *n = (int)nt;
    return OK;
}

int gpt2_forward_run(const gpt2_forward_opts *o, gpt2_forward_result *r)
{
    memset(r, 0, sizeof *r);
    gpt2_model *m = NULL;
    capture cap = {0};
    int *owned = NULL, n = o->ntokens;
    const int *ids = o->tokens;
    /* the model first: a missing --model directory was reported as "no tokenizer files" */
    int rc = gpt2_load(&m, o->model);
    if (!rc && o->text) {
        rc = encode_text(o, gpt2_cfg(m)->vocab_size, &owned, &n);
        ids = owned;
    }
    if (!rc && o->hook && strchr(o->hook, '*'))
        rc = err_set(ERR_ARG, "--hook takes one exact name, not a pattern");
    if (!rc && o->hook) rc = gpt2_hook_add(m, o->hook, grab, &cap);
    if (!rc) rc = gpt2_forward(m, ids, 1, n, !o->hook);
    if (!rc && !o->hook) {
        r->ndim = 2;
        r->shape[0] = n;
        r->shape[1] = gpt2_cfg(m)->vocab_size;
        rc = npy_write(o->npy, gpt2_logits(m), 2, r->shape);
    } else if (!rc) {
        r->ndim = cap.ndim;
        memcpy(r->shape, cap.shape, sizeof r->shape);
        rc = npy_write(o->npy, cap.copy, cap.ndim, cap.shape);
    }
    if (rc) memset(r, 0, sizeof *r);
    mem_free(cap.copy);
    mem_free(owned);
    gpt2_free(m);
    return rc;
}
