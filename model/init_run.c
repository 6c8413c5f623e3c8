/* init_run.c - `saelite init-model` as a library call (see gpt2.h: gpt2_init_run). */
#include <stdio.h>
#include <unistd.h>

#include "common/err.h"
#include "model/gpt2.h"

int gpt2_init_run(const gpt2_init_opts *o, size_t *nparams)
{
    *nparams = 0;
    /* a train-lm run there: its model replaced and its training state left behind, exit 0 (audit) */
    char state[4200];
    snprintf(state, sizeof state, "%s/train_state.safetensors", o->out);
    if (!o->force && access(state, F_OK) == 0)
        return err_set(ERR_ARG, "%s holds a train-lm run (train_state.safetensors): give another -o, "
                       "or --force to replace its model and drop its training state", o->out);
    /* any other model there (a downloaded or copied checkpoint) was replaced by random weights
       without a word, where bpe-train refuses to replace a tokenizer (an audit's leftover) */
    static const char *const files[] = {"model.safetensors", "config.json"};
    for (size_t i = 0; !o->force && i < sizeof files / sizeof *files; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", o->out, files[i]);
        if (access(p, F_OK) == 0)
            return err_set(ERR_ARG, "%s holds a model (%s): give another -o, or --force to replace "
                           "it with random weights", o->out, files[i]);
    }
    gpt2_model *m;
    int rc = gpt2_create(&m, &o->cfg, o->seed);
    if (rc) return rc;
    if (o->untied && (rc = gpt2_untie(m))) {
        gpt2_free(m);
        return rc;
    }
    /* drawing a large model's weights takes seconds: a SIGTERM there killed the process in its
       write, leaving config.json and a model.safetensors.tmp.PID of up to gigabytes (an audit) */
    if (o->stop && *o->stop) {
        gpt2_free(m);
        return err_set(ERR_ABORTED, "interrupted; nothing written");
    }
    gpt2_params(m, nparams);
    rc = gpt2_save_stop(m, o->out, o->dtype, o->prefix, o->stop);
    gpt2_free(m);
    if (rc) {
        *nparams = 0;
        return rc;
    }
    if (o->force) unlink(state); /* the state belongs to the model just replaced */
    return OK;
}
