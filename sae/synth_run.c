/* synth_run.c - `saelite synth` as a library call (see synth.h: sae_synth_run). */
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>

#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "common/npy.h"
#include "common/progress.h"
#include "extract/extract.h"
#include "sae/synth.h"
#include "store/store.h"

/* An existing store must open and its hook must take these rows, before any file is replaced: a
 * damaged store, or a width or sequence length that does not match, failed after --out and
 * --truth were (an audit). An empty or missing file is a new store. */
static int check_store(const sae_synth_run_opts *o)
{
    struct stat sb;
    if (!o->db) return OK;
    int rc = store_hook_size_check(o->db, o->hook, o->c.d, STORE_F32, o->seq_len);
    if (rc || stat(o->db, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0) return rc;
    store *st;
    rc = store_open(&st, o->db, 0);
    if (rc) return rc;
    rc = store_hook_check(st, o->hook, o->c.d, STORE_F32, o->seq_len);
    store_close(st);
    return rc;
}

/* The samples as rows of hook o->hook (model 'import'), through the one .npy importer. */
static int store_rows(const sae_synth_run_opts *o, sae_synth_run_result *r)
{
    store *st;
    int rc = store_open_blobs(&st, o->db, STORE_CREATE,
                              (int64_t)o->seq_len * o->c.d * (int64_t)sizeof(float));
    if (rc) return rc;
    rc = ext_import_npy(st, o->out, NULL, o->hook, o->seq_len, STORE_F32, &r->rows, &r->seqs);
    store_hook h; /* rows of other files stay: the caller says so, sae-train --db reads them all */
    if (!rc) {
        if (store_hook_find(st, o->hook, &h) == OK) r->held = h.n_tokens;
        err_clear(); /* only a note: not finding it is no error */
    }
    store_close(st);
    return rc;
}

int sae_synth_run(const sae_synth_run_opts *o, sae_synth_run_result *r)
{
    memset(r, 0, sizeof *r);
    const synth_config *c = &o->c;
    int64_t tokens = o->tokens;
    if (o->db && (!o->hook || !o->hook[0])) return err_set(ERR_ARG, "--hook needs a name");
    int rc = check_store(o);
    if (rc) return rc;
    sae_synth *g;
    if ((rc = sae_synth_new(&g, c))) return rc;
    float *x = mem_alloc(sizeof(float) * (size_t)tokens * c->d);
    int *act = mem_alloc(sizeof(int) * (size_t)tokens);
    rc = x && act ? OK : err_set(ERR_NOMEM, "out of memory for %" PRId64 " tokens", tokens);
    /* in blocks (a multiple of the generator's own 1024-row chunks: the same draws as one
       call) with progress and a clean stop: 1M tokens of d 512 ran a minute in silence */
    progress pr;
    progress_begin(&pr, "synth", (double)tokens, "tok");
    for (int64_t r0 = 0; !rc && r0 < tokens; r0 += 64 * 1024) {
        int n = (int)(tokens - r0 < 64 * 1024 ? tokens - r0 : 64 * 1024);
        rc = sae_synth_sample(g, x + r0 * c->d, n, act + r0);
        if (!rc && o->stop && *o->stop) rc = err_set(ERR_ABORTED, "interrupted; nothing written");
        progress_update(&pr, (double)(r0 + n), NULL);
    }
    progress_end(&pr);
    int64_t sh[2] = {tokens, c->d}, tsh[2] = {c->n_features, c->d};
    /* the activations first: a kill while they are written (the long part) leaves the old pair
       as it was, not a new truth beside the old activations (an audit) */
    file_remove_dead_temps(o->out); /* a killed synth's temps (up to GBs) */
    file_remove_dead_temps(o->truth);
    if (!rc) rc = npy_write(o->out, x, 2, sh);
    if (!rc) rc = npy_write(o->truth, sae_synth_directions(g), 2, tsh);
    if (!rc && o->spec_out) rc = sae_synth_spec_save(c, o->spec_out);
    double active = 0;
    for (int64_t i = 0; !rc && i < tokens; i++) active += act[i];
    r->mean_active = tokens > 0 ? active / tokens : 0;
    mem_free(x);
    mem_free(act);
    sae_synth_free(g);
    if (!rc && o->db) rc = store_rows(o, r);
    return rc;
}
