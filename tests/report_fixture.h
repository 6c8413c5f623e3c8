/* report_fixture.h - a synthetic analysed database for the report tests and benchmark.
 *
 * Builds a store with one document, nseq sequences of 64 tokens over a small vocabulary of
 * words, and the analysis tables (store/schema_analysis.sql, read from the repository) for an
 * SAE dictionary of nfeat features (sae_id 1, name "demo-sae") and its neuron basis (16
 * neurons), filled the way `saelite analyze` fills them: feature f fires most on the word
 * fix_word(f), top-20 and 4 quantile bands x 5 samples, log histogram, logits, POS counts,
 * geometry and decoder rows. Features 3 and 7 are dead (no rows besides ana_features).
 * Feature 0 also has kind 'all' rows (0.3 x max) at the 3 tokens either side of its top ones.
 * Writes SQL through store_exec (store/store_internal.h): test code only.
 */
#ifndef SAELITE_REPORT_FIXTURE_H
#define SAELITE_REPORT_FIXTURE_H
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"
#include "store/store.h"
#include "store/store_internal.h"

#define FIX_T 64
#define FIX_DIN 16
static const char *const fix_words[] = {" the", " cat", " sat", " on", " mat", ".", "\n", " a",
    " dog", " and", " caf\xc3\xa9", " ran", " under", " tree", ",", " quickly", " house", " it",
    " was", " very", " old", " river", " bank", " money", " of", " in", "\xe2\x80\x94", " she",
    " said", " \"", " x\xff", " 1961"};
#define FIX_V (int)(sizeof fix_words / sizeof fix_words[0])
static const char *const fix_tags[] = {"NN", "VB", "JJ", "IN", "DT", "RB", "PRP", "CC"};

static int fix_word(int f) { return (f * 7 + 1) % FIX_V; }

typedef struct { char *p; size_t n, cap; } fix_sb;

static void fix_add(fix_sb *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (b->p && (size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        size_t nc = (b->cap ? b->cap * 2 : 1 << 16) + (size_t)k;
        b->p = realloc(b->p, nc);
        b->cap = nc;
    }
}

static void fix_hex(fix_sb *b, const void *data, size_t n)
{
    const unsigned char *u = data;
    fix_add(b, "X'");
    for (size_t i = 0; i < n; i++) fix_add(b, "%02x", u[i]);
    fix_add(b, "'");
}

static unsigned fix_rand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Returns OK or an err.h code. */
static int fix_make_db(const char *path, int nfeat, int nseq, const char *sql_path)
{
    FILE *f = fopen(sql_path, "rb");
    if (!f) return err_set(ERR_IO, "%s: cannot open the analysis schema", sql_path);
    static char sql[65536];
    size_t got = fread(sql, 1, sizeof sql - 1, f);
    sql[got] = 0;
    fclose(f);
    store *s;
    int rc = store_open(&s, path, STORE_CREATE);
    if (rc) return rc;
    int64_t mid, doc;
    rc = store_begin(s);
    if (!rc) rc = store_model_add(s, "fixture", "fixture", "{}", "", &mid);
    if (!rc) rc = store_doc_add(s, "fixture.txt", 0, "doc0", NULL, "fixture", 7, &doc);
    unsigned seed = 12345;
    int64_t *seq = malloc(sizeof(int64_t) * (size_t)nseq);
    static int ids[1024][FIX_T];
    for (int q = 0; q < nseq && !rc; q++) {
        for (int t = 0; t < FIX_T; t++) ids[q % 1024][t] = (int)(fix_rand(&seed) % FIX_V);
        rc = store_seq_add(s, doc, (int64_t)q * FIX_T, 0, ids[q % 1024], FIX_T, &seq[q], NULL);
    }
    if (!rc) rc = store_schema_part(s, "analysis", 1, sql);
    fix_sb b = {0};
    fix_add(&b, "INSERT INTO ana_dicts (id, kind, sae_id, name, hook_name, d_in, d_sae, split, n_seqs, "
                "n_tokens, top_n) VALUES (1, 'sae', 1, 'demo-sae', 'blocks.0.hook_resid_pre', %d, %d, "
                "'val', %d, %d, 20), (2, 'neurons', NULL, 'neurons@blocks.0.hook_resid_pre', "
                "'blocks.0.hook_resid_pre', %d, %d, 'val', %d, %d, 20);\n",
            FIX_DIN, nfeat, nseq, nseq * FIX_T, FIX_DIN, FIX_DIN, nseq, nseq * FIX_T);
    for (int v = 0; v < FIX_V; v++) {
        fix_add(&b, "INSERT INTO ana_vocab (token, text) VALUES (%d, ", v);
        fix_hex(&b, fix_words[v], strlen(fix_words[v]));
        fix_add(&b, ");\n");
    }
    for (int d = 1; d <= 2; d++) {
        int nf = d == 1 ? nfeat : FIX_DIN;
        for (int ft = 0; ft < nf; ft++) {
            int dead = d == 1 && (ft == 3 || ft == 7);
            double maxv = 10.0 - 5.0 * ft / nf, dens = dead ? 0 : pow(10, -4 + 3.5 * ((ft * 37) % nf) / (double)nf);
            int tag = ft % 8;
            double prec = d == 1 ? 0.4 + 0.55 * ((ft * 13) % 17) / 17.0 : 0.15 + 0.3 * ((ft * 5) % 7) / 7.0;
            if (dead)
                fix_add(&b, "INSERT INTO ana_features VALUES (%d, %d, 0, 0, NULL, NULL, %d, %.4f, NULL, NULL);\n",
                        d, ft, (ft + 1) % nf, 0.2);
            else
                fix_add(&b, "INSERT INTO ana_features VALUES (%d, %d, %d, %.6g, %.4f, %.4f, %d, %.4f, '%s', %.4f);\n",
                        d, ft, (int)(dens * nseq * FIX_T) + 1, dens, maxv / 4, maxv, (ft + 1) % nf,
                        0.1 + 0.5 * ((ft * 11) % 13) / 13.0, fix_tags[tag], prec);
            if (dead || d == 2) continue;
            int w = fix_word(ft);
            /* top 20: occurrences of the feature's word, values decreasing from maxv */
            int k = 0;
            fix_add(&b, "INSERT INTO ana_acts VALUES ");
            for (int q = 0; q < nseq && k < 20; q++)
                for (int t = 0; t < FIX_T && k < 20; t++)
                    if (ids[q % 1024][t] == w && (q * 31 + t + ft) % 3 == 0) {
                        fix_add(&b, "%s(1, %d, 'top', NULL, %d, %lld, %d, %d, %.4f)", k ? ", " : "", ft, k,
                                (long long)seq[q], t, w, maxv * (1 - 0.02 * k));
                        /* feature 0 was "analysed with --all-acts": complete non-zeros
                         * around its top activations, 0.3 of the max */
                        for (int u = t - 3; ft == 0 && u <= t + 3; u++)
                            if (u >= 0 && u < FIX_T && u != t && u != t + 1)
                                fix_add(&b, ", (1, 0, 'all', NULL, NULL, %lld, %d, %d, %.4f)", (long long)seq[q],
                                        u, ids[q % 1024][u], maxv * 0.3);
                        /* a weaker activation on the next token, in the same sequence */
                        if (t + 1 < FIX_T)
                            fix_add(&b, ", (1, %d, 'quantile', 0, %d, %lld, %d, %d, %.4f)", ft, 100 + k,
                                    (long long)seq[q], t + 1, ids[q % 1024][t + 1], maxv * 0.1);
                        k++;
                    }
            for (int band = 0; band < 4; band++)
                for (int r = 0; r < 5; r++) {
                    int q = (int)(fix_rand(&seed) % nseq), t = (int)(fix_rand(&seed) % FIX_T);
                    fix_add(&b, "%s(1, %d, 'quantile', %d, %d, %lld, %d, %d, %.4f)", k || band || r ? ", " : "",
                            ft, band, r, (long long)seq[q], t, ids[q % 1024][t],
                            maxv * (0.2 * band + 0.1 + 0.02 * (4 - r)));
                }
            fix_add(&b, ";\nINSERT INTO ana_hist VALUES ");
            for (int bin = 0; bin < 24; bin++) {
                double lo = 1e-3 * pow(10, bin * 4.0 / 24), hi = 1e-3 * pow(10, (bin + 1) * 4.0 / 24);
                int cnt = bin == 5 ? 0 : (int)(2000 * exp(-fabs(bin - 14.0) / 2.5));
                if (cnt > 0) fix_add(&b, "%s(1, %d, %d, %.6g, %.6g, %d)", bin ? ", " : "", ft, bin, lo, hi, cnt);
            }
            fix_add(&b, ";\nINSERT INTO ana_logits VALUES ");
            for (int r = 0; r < 10; r++)
                fix_add(&b, "%s(1, %d, 1, %d, %d, %.3f), (1, %d, -1, %d, %d, %.3f)", r ? ", " : "", ft, r,
                        (w + r) % FIX_V, 2.0 - 0.15 * r, ft, r, (w + 10 + r) % FIX_V, -1.5 + 0.12 * r);
            fix_add(&b, ";\nINSERT INTO ana_pos VALUES (1, %d, '%s', 14), (1, %d, '%s', 4), (1, %d, '%s', 2);\n",
                    ft, fix_tags[tag], ft, fix_tags[(tag + 1) % 8], ft, fix_tags[(tag + 3) % 8]);
        }
    }
    for (int src = 0; src < 2; src++)
        for (int bin = 0; bin < 36; bin++) {
            double c = 90 - (bin * 5 + 2.5), sig = src ? 14 : 20;
            double cnt = floor((double)nfeat * (nfeat - 1) / 2 * 5 / (sig * 2.5066) * exp(-c * c / (2 * sig * sig)));
            if (cnt > 0)
                fix_add(&b, "INSERT INTO ana_geometry VALUES (1, '%s', %d, %d, %d, %.0f);\n",
                        src ? "random" : "decoder", bin, bin * 5, bin * 5 + 5, cnt);
        }
    float row[FIX_DIN];
    for (int ft = 0; ft < nfeat; ft++) {
        /* decoder row ft = ground-truth direction ft % FIX_DIN plus a little noise */
        for (int k = 0; k < FIX_DIN; k++)
            row[k] = (k == ft % FIX_DIN ? 1.0f : 0.0f) + 0.05f * ((int)(fix_rand(&seed) % 200) - 100) / 100.0f;
        fix_add(&b, "INSERT INTO ana_decoder VALUES (1, %d, ", ft);
        fix_hex(&b, row, sizeof row);
        fix_add(&b, ");\n");
    }
    if (!rc) rc = store_exec(s, b.p);
    free(b.p);
    free(seq);
    if (!rc) rc = store_commit(s);
    else store_rollback(s);
    store_close(s);
    return rc;
}

#endif
