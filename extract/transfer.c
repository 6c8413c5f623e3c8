/* transfer.c - `saelite export` / `saelite import`: activations between the store and .npy files
 * (see extract.h: ext_export_npy, ext_import_npy). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "common/npy.h"
#include "common/progress.h"
#include "extract/extract.h"
#include "store/store.h"

/* npy 1.0 header for a C-order array, padded so the data starts at a multiple of 64. */
static int npy_header(FILE *f, const char *descr, int64_t rows, int64_t cols, int ndim)
{
    char dict[200];
    int n = ndim == 1 ? snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, "
                                 "'shape': (%lld,), }", descr, (long long)rows)
                      : snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, "
                                 "'shape': (%lld, %lld), }", descr, (long long)rows, (long long)cols);
    int total = 10 + n + 1;
    int pad = (64 - total % 64) % 64;
    unsigned hl = (unsigned)(n + pad + 1);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 0xff),
                             (unsigned char)(hl >> 8)};
    if (fwrite(pre, 1, 10, f) != 10 || fwrite(dict, 1, (size_t)n, f) != (size_t)n) return -1;
    for (int i = 0; i < pad; i++)
        if (fputc(' ', f) == EOF) return -1;
    return fputc('\n', f) == EOF ? -1 : 0;
}

/* An .npy file streamed through common/fileio.h's atomic writer: header now, rows later. */
static int out_open(file_atomic *o, const char *path, const char *descr, int64_t rows,
                    int64_t cols, int ndim)
{
    file_remove_dead_temps(path); /* a killed export's temp (hundreds of MB) */
    int rc = file_atomic_open(o, path);
    if (rc) return rc;
    if (npy_header(o->f, descr, rows, cols, ndim)) {
        int e = errno;
        rc = err_set(ERR_IO, "%s: write error: %s", o->tmp, strerror(e));
        file_atomic_abort(o);
    }
    return rc;
}

/* ok: commit (renamed into place); else drop the temp file. A never-opened o is fine. */
static int out_close(file_atomic *o, int ok)
{
    if (!o->f) return OK;
    if (ok) return file_atomic_commit(o);
    file_atomic_abort(o);
    return OK;
}

int ext_export_npy(store *s, const char *hook, const char *npy, const char *tokens_npy,
                   int64_t limit, int64_t *rows_out, int *width_out)
{
    /* an output over the store being read, or both outputs on one file, would destroy data
       (the store replaced by the array; the activations by the ids, then removed) */
    /* its -wal too: export --npy DB-wal replaced the log and lost committed tables (an audit) */
    const char *over = file_same_db(npy, store_path(s)) ? npy
                       : file_same_db(tokens_npy, store_path(s)) ? tokens_npy : NULL;
    if (over)
        return err_set(ERR_ARG, "%s: is the database being exported from (or its journal); write "
                       "the .npy elsewhere", over);
    if (file_same(npy, tokens_npy))
        return err_set(ERR_ARG, "%s: the activations and the token ids would both go to this "
                       "file; give them two paths", npy);
    store_hook h;
    int rc = store_hook_find(s, hook, &h);
    if (rc) return rc;
    int64_t *seqs;
    size_t n;
    if ((rc = store_seq_list(s, h.id, STORE_SPLIT_ALL, 0, &seqs, &n))) return rc;
    int64_t rows = h.n_tokens;
    if (limit > 0 && limit < rows) rows = limit;
    float *buf = mem_alloc((size_t)h.seq_len * (size_t)h.width * sizeof(float));
    int *ids = mem_alloc((size_t)h.seq_len * sizeof(int));
    file_atomic a = {0}, t = {0};
    if (!buf || !ids) rc = err_set(ERR_NOMEM, "out of memory");
    if (!rc) rc = out_open(&a, npy, "<f4", rows, h.width, 2);
    if (!rc && tokens_npy) rc = out_open(&t, tokens_npy, "<i4", rows, 0, 1);
    int64_t done = 0;
    progress pr; /* a GPT-2 hook of millions of tokens is tens of GB */
    progress_begin(&pr, "export", (double)rows, "tok");
    for (size_t i = 0; !rc && i < n && done < rows; i++) {
        progress_update(&pr, (double)done, NULL);
        int T = 0;
        if ((rc = store_act_read(s, h.id, seqs[i], buf, &T))) break;
        int64_t take = rows - done < T ? rows - done : T;
        if (fwrite(buf, sizeof(float) * (size_t)h.width, (size_t)take, a.f) != (size_t)take)
            rc = err_set(ERR_IO, "%s: write error: %s", npy, strerror(errno));
        if (!rc && tokens_npy) {
            int tn = h.seq_len;
            rc = store_seq_tokens(s, seqs[i], ids, &tn);
            if (!rc && tn != T)
                rc = err_set(ERR_FORMAT, "sequence %lld: %d token ids for %d activation rows",
                             (long long)seqs[i], tn, T);
            if (rc == ERR_NOTFOUND)
                rc = err_wrap(rc, "--tokens-npy: the store has no token ids for hook %s", hook);
            if (!rc && fwrite(ids, sizeof(int), (size_t)take, t.f) != (size_t)take)
                rc = err_set(ERR_IO, "%s: write error: %s", tokens_npy, strerror(errno));
        }
        done += take;
    }
    progress_end(&pr);
    if (!rc && done != rows)
        rc = err_set(ERR_FORMAT, "%s: hook %s: found %lld activation rows, expected %lld",
                     store_path(s), hook, (long long)done, (long long)rows);
    /* the file the activations' rename replaces (a symlink's target); none for a device/FIFO */
    char *target = !rc && a.f && !a.direct ? mem_strdup(a.real ? a.real : a.path) : NULL;
    int rc2 = out_close(&a, !rc);
    int committed = !rc && !rc2;
    if (!rc) rc = rc2;
    rc2 = out_close(&t, !rc);
    if (!rc) rc = rc2;
    /* activations renamed into place must not stay without their ids; a failure before that
     * rename left the old file as it was, so nothing is removed then */
    if (rc && committed && target) unlink(target);
    mem_free(target);
    mem_free(buf);
    mem_free(ids);
    mem_free(seqs);
    if (!rc) {
        *rows_out = rows;
        *width_out = h.width;
    }
    return rc;
}

/* Into the open store s, or (s == NULL) into db, opened once the inputs are checked. */
/* The rows of a paired import (pair_with: an imported hook) onto that hook's sequences, in the
 * order export writes them; *h is the new hook. */
static int import_paired(store *s, const char *npy, const char *hook, const char *pair_with,
                         int seq_len, int dtype, const float *x, int64_t N, int W,
                         int64_t import_model, store_hook *h, int64_t *nseq)
{
    store_hook hp;
    int rc = store_hook_find(s, pair_with, &hp);
    if (rc == ERR_NOTFOUND)
        return err_set(ERR_ARG, "%s: no hook %s to pair with", store_path(s), pair_with);
    if (rc) return rc;
    if (!strcmp(hook, pair_with))
        return err_set(ERR_ARG, "%s: --hook and --pair-with both name %s; the pair is two hooks",
                       store_path(s), hook);
    /* extracted windows are the model's: their partner hook comes from the same extract */
    if (hp.model_id != import_model)
        return err_set(ERR_ARG, "%s: hook %s holds extracted activations; --pair-with takes an "
                       "imported hook (export it and import both files, or extract both hooks "
                       "in one run)", store_path(s), pair_with);
    if (seq_len > 0 && seq_len != hp.seq_len)
        return err_set(ERR_ARG, "%s: --seq-len %d, but hook %s's sequences are of %d rows; the "
                       "paired rows take its sequences (leave --seq-len out)", npy, seq_len,
                       pair_with, hp.seq_len);
    if (N != hp.n_tokens)
        return err_set(ERR_SHAPE, "%s: %lld rows, but hook %s holds %lld tokens; a paired import "
                       "has a row for each of them, in the order export writes them", npy,
                       (long long)N, pair_with, (long long)hp.n_tokens);
    /* a hook of another sequence length holds other files' rows, which never pair: store_hook_add
       said "use ... --seq-len for import", which a paired import refuses (a review) */
    store_hook had;
    rc = store_hook_find(s, hook, &had);
    if (!rc && had.seq_len != hp.seq_len)
        return err_set(ERR_ARG, "%s: hook %s already holds sequences of %d rows, not %s's %d (rows "
                       "of another file); import the paired rows under another --hook name",
                       store_path(s), hook, had.seq_len, pair_with, hp.seq_len);
    if (rc && rc != ERR_NOTFOUND) return rc;
    if ((rc = store_hook_add(s, hp.model_id, hook, -1, W, dtype, hp.seq_len, h))) return rc;
    /* rows of other files under this name would leave a pair with unmatched sequences */
    int64_t nu = 0, first = -1;
    if ((rc = store_hook_unpaired(s, h->id, hp.id, &nu, &first))) return rc;
    if (nu > 0)
        return err_set(ERR_ARG, "%s: hook %s already holds %lld sequences that %s does not (sequence "
                       "%lld the first); import the paired rows under another --hook name",
                       store_path(s), hook, (long long)nu, pair_with, (long long)first);
    int64_t *seqs = NULL;
    size_t n = 0;
    if ((rc = store_seq_list(s, hp.id, STORE_SPLIT_ALL, 0, &seqs, &n))) return rc;
    progress pr;
    progress_begin(&pr, "import", (double)N, "tok");
    int64_t done = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        progress_update(&pr, (double)done, NULL);
        int T = 0;
        rc = store_act_rows(s, hp.id, seqs[i], &T);
        if (!rc && (T < 1 || T > N - done))
            rc = err_set(ERR_FORMAT, "%s: hook %s: sequence %lld holds %d rows, which its token "
                         "count does not account for", store_path(s), pair_with,
                         (long long)seqs[i], T);
        if (!rc) rc = store_act_write(s, h->id, seqs[i], x + done * W, T);
        done += T;
    }
    progress_end(&pr);
    if (!rc && done != N)
        rc = err_set(ERR_FORMAT, "%s: hook %s: found %lld activation rows, expected %lld",
                     store_path(s), pair_with, (long long)done, (long long)N);
    mem_free(seqs);
    *nseq = (int64_t)n;
    return rc;
}

static int import_npy(store *s_open, const char *db, const char *npy, const char *tokens_npy,
                      const char *hook, const char *pair_with, int seq_len, int dtype,
                      int64_t *rows_out, int64_t *seqs_out)
{
    store *s = s_open;
    float *x = NULL;
    int64_t *tok = NULL;
    int nd = 0, tnd = 0;
    int64_t shape[NPY_MAX_DIMS], tshape[NPY_MAX_DIMS];
    /* an empty name stored rows that sae-train --db --hook could not name (an audit) */
    if (!hook || !hook[0]) return err_set(ERR_ARG, "%s: the hook to import into needs a name", npy);
    if (pair_with && tokens_npy)
        return err_set(ERR_ARG, "%s: the sequences of hook %s hold their token ids already; a paired "
                       "import takes no --tokens", tokens_npy, pair_with);
    int given_len = seq_len;
    /* a float64 file into a bf16/f16 hook: one rounding (store_act_write's), not two */
    int rc = dtype == STORE_F32 ? npy_read(npy, &x, &nd, shape)
                                : npy_read_narrow(npy, &x, &nd, shape);
    if (rc) return rc;
    if (nd != 2 || shape[0] < 1 || shape[1] < 1 || shape[1] > (1 << 24)) {
        char sh[200];
        npy_shape_str(sh, sizeof sh, nd, shape);
        mem_free(x);
        if (nd != 2)
            return err_set(ERR_SHAPE, "%s: want a [tokens, width] array, got %d dims (shape %s)",
                           npy, nd, sh);
        return err_set(ERR_SHAPE, "%s: want a [tokens, width] array with at least one token and "
                                  "a width of 1..%d, got shape %s", npy, 1 << 24, sh);
    }
    int64_t N = shape[0];
    int W = (int)shape[1];
    if (seq_len < 1) seq_len = N < 128 ? (int)N : 128;
    if (tokens_npy) {
        rc = npy_read_i64(tokens_npy, &tok, &tnd, tshape);
        int64_t tn = 1;
        for (int i = 0; !rc && i < tnd; i++) tn *= tshape[i];
        if (!rc && tn != N)
            rc = err_set(ERR_SHAPE, "%s: %lld token ids for %lld activation rows in %s", tokens_npy,
                         (long long)tn, (long long)N, npy);
        for (int64_t i = 0; !rc && i < N; i++)
            if (tok[i] < 0 || tok[i] > 0x7fffffff)
                rc = err_set(ERR_FORMAT, "%s: token id %lld at %lld out of range", tokens_npy,
                             (long long)tok[i], (long long)i);
    }
    if (!rc) rc = npy_check_finite(npy, x, N, W);
    if (!rc) { /* and what the hook's dtype cannot hold, before the database is created */
        int over;
        int64_t bad = store_act_first_bad(dtype, x, N * W, &over);
        if (bad >= 0)
            rc = err_set(ERR_ARG, "%s: %g at row %lld, column %lld is beyond %s's range; import as "
                         "%s (--dtype)", npy, (double)x[bad], (long long)(bad / W),
                         (long long)(bad % W), store_dtype_name(dtype),
                         dtype == STORE_F16 ? "bf16 or f32" : "f32");
    }
    /* (a paired import's length is its partner's, checked by store_hook_add) */
    if (!rc && !pair_with) rc = store_hook_size_check(s ? store_path(s) : db, hook, W, dtype, seq_len);
    int *ids = rc ? NULL : mem_alloc((size_t)seq_len * sizeof(int));
    if (!rc && !ids) rc = err_set(ERR_NOMEM, "out of memory");
    /* The database is opened (and created) only once the inputs are known to be good. */
    /* a paired import's partner is in db already: a missing db is not created (it was, and
       stayed behind empty after "no hook to pair with", a review) */
    if (!rc && !s) {
        rc = store_open_blobs(&s, db, pair_with ? 0 : STORE_CREATE,
                              (int64_t)seq_len * W * store_dtype_size(dtype));
        if (rc == ERR_NOTFOUND && pair_with)
            rc = err_wrap(rc, "--pair-with %s: a paired import goes into the database holding that "
                          "hook", pair_with);
    }
    if (!rc) rc = store_begin(s);
    int64_t model_id = 0, doc_id = 0, nseq = 0;
    store_hook h;
    if (!rc) {
        /* A name that already holds extracted activations stays theirs. */
        store_hook *hs = NULL;
        size_t nh = 0;
        rc = store_hook_list(s, &hs, &nh);
        if (!rc) rc = store_model_add(s, "import", STORE_IMPORT_MODEL_PATH, "{}", "", &model_id);
        for (size_t i = 0; !rc && i < nh; i++)
            if (!strcmp(hs[i].name, hook) && hs[i].model_id != model_id)
                rc = err_set(ERR_ARG, "%s: hook %s already holds extracted activations; import "
                             "under another --hook name", store_path(s), hook);
        mem_free(hs);
    }
    if (!rc && pair_with)
        rc = import_paired(s, npy, hook, pair_with, given_len, dtype, x, N, W, model_id, &h, &nseq);
    else if (!rc)
        rc = store_hook_add(s, model_id, hook, -1, W, dtype, seq_len, &h);
    if (!rc && !pair_with) {
        /* the file, not the string typed: d1/a.npy and d2/a.npy, both given as a.npy from their
           folders, replaced each other, and ok.npy then ./ok.npy stored it twice (an audit) */
        char real[PATH_MAX];
        const char *src = realpath(npy, real) ? real : npy;
        const char *base = strrchr(npy, '/');
        rc = store_doc_add(s, src, 0, base ? base + 1 : npy, NULL, NULL, 0, &doc_id);
    }
    /* the same file again replaces what the hook held from it: a shorter array left the old
       rows past its end, and a last window of another length was added beside the old one (22
       rows exported for 6 imported, exit 0, an audit) */
    if (!rc && !pair_with) rc = store_act_delete_doc(s, h.id, doc_id);
    progress pr;
    progress_begin(&pr, "import", (double)N, "tok");
    for (int64_t start = 0; !rc && !pair_with && start < N; start += seq_len, nseq++) {
        progress_update(&pr, (double)start, NULL);
        int T = (int)(N - start < seq_len ? N - start : seq_len);
        int64_t seq;
        int ins = 0;
        for (int t = 0; t < T; t++) ids[t] = tok ? (int)tok[start + t] : 0;
        rc = store_seq_add(s, doc_id, start, 0, tok ? ids : NULL, T, &seq, &ins);
        if (!rc && ins && tok) rc = store_tokens_add(s, seq, T, ids, NULL, NULL, NULL, NULL);
        if (!rc) rc = store_act_write(s, h.id, seq, x + start * W, T);
    }
    progress_end(&pr);
    if (!rc) {
        buf params = {0}; /* control bytes as \u00XX, as stored before (BUF_JSON_CTRL_U) */
        rc = buf_str(&params, "{\"npy\": ");
        if (!rc) rc = buf_json(&params, npy, strlen(npy), BUF_JSON_CTRL_U);
        if (!rc) rc = buf_str(&params, ", \"hook\": ");
        if (!rc) rc = buf_json(&params, hook, strlen(hook), BUF_JSON_CTRL_U);
        if (!rc && pair_with) rc = buf_str(&params, ", \"pair_with\": ");
        if (!rc && pair_with) rc = buf_json(&params, pair_with, strlen(pair_with), BUF_JSON_CTRL_U);
        if (!rc)
            rc = buf_printf(&params, ", \"seq_len\": %d, \"dtype\": \"%s\"}", h.seq_len,
                            store_dtype_name(dtype));
        int64_t run;
        int was;
        if (!rc) rc = store_run_begin(s, "import", params.p, &run, &was);
        if (!rc) rc = store_run_done(s, run);
        buf_free(&params);
    }
    if (!rc) rc = store_commit(s);
    if (rc && s) store_rollback(s);
    if (s != s_open) store_close(s);
    mem_free(ids);
    mem_free(x);
    mem_free(tok);
    if (!rc) {
        *rows_out = N;
        *seqs_out = nseq;
    }
    return rc;
}

int ext_import_npy(store *s, const char *npy, const char *tokens_npy, const char *hook,
                   int seq_len, int dtype, int64_t *rows, int64_t *seqs)
{
    return import_npy(s, NULL, npy, tokens_npy, hook, NULL, seq_len, dtype, rows, seqs);
}

int ext_import_npy_db(const char *db, const char *npy, const char *tokens_npy, const char *hook,
                      const char *pair_with, int seq_len, int dtype, int64_t *rows, int64_t *seqs)
{
    return import_npy(NULL, db, npy, tokens_npy, hook, pair_with, seq_len, dtype, rows, seqs);
}
