/* dashboard.c - the per-feature dashboard (activation map, histogram, logits, POS). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/hash.h"
#include "common/mem.h"
#include "common/utf8.h"
#include "reports/dashboard.h"

#define W 1240
#define LEFT_W 800
#define ROW_H 22
#define LABEL_W 56
#define BAR_ROW 20
#define INK 0x222222
#define MUTED 0x666666

static void fmt_density(double d, char *buf, size_t cap)
{
    if (!isfinite(d)) snprintf(buf, cap, "density ?");
    else if (d <= 0) snprintf(buf, cap, "density 0 (dead)");
    else snprintf(buf, cap, "density %.3g%% (1 in %.0f tokens)", d * 100, 1 / d);
}

/* Height the left column needs. */
static double left_height(const rep_feature *f)
{
    double h = 64 + 28 + (f->ntop > 0 ? f->ntop : 1) * ROW_H;
    for (int i = 0; i < f->nintervals; i++) h += 30 + (f->intervals[i].nctx > 0 ? f->intervals[i].nctx : 1) * ROW_H;
    return h + 12;
}

static double bars_height(int n) { return 28 + (n > 0 ? n : 2) * BAR_ROW + 8; }

static int draw_contexts(rep_canvas *c, double x, double y, double w, const rep_context *ctx, int n,
                         double act_max)
{
    if (n <= 0) {
        rep_font f = rep_font_make(12, 0, rep_rgb(0x999999), REP_LEFT, REP_MIDDLE);
        rep_text(c, x + LABEL_W + 6, y + ROW_H / 2.0, "no contexts", &f, w);
        return OK;
    }
    rep_token_row *rows = mem_calloc((size_t)n, sizeof *rows);
    char(*labels)[24] = mem_alloc(sizeof *labels * (size_t)n);
    if (!rows || !labels) {
        mem_free(rows);
        mem_free(labels);
        return err_set(ERR_NOMEM, "dashboard: out of memory");
    }
    for (int i = 0; i < n; i++) {
        const rep_context *k = &ctx[i];
        rows[i].tokens = k->tokens;
        rows[i].acts = k->acts;
        rows[i].n = k->n;
        rows[i].mark = k->mark;
        if (k->mark >= 0 && k->mark < k->n && k->acts)
            snprintf(labels[i], sizeof labels[i], "%.3g", (double)k->acts[k->mark]);
        else labels[i][0] = 0;
        rows[i].label = labels[i];
    }
    int rc = rep_token_rows(c, x, y, w, ROW_H, LABEL_W, rows, n, act_max);
    mem_free(rows);
    mem_free(labels);
    return rc;
}

/* ---- the dashboard's content key ---------------------------------------------------------- */
static void key_str(uint64_t h[2], const char *s)
{
    hash_absorb128(h, s != NULL); /* NULL and "" draw differently (a missing tag, an empty one) */
    hash_absorb128_str(h, s ? s : "");
}

static void key_f64(uint64_t h[2], double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    hash_absorb128(h, b);
}

static void key_ctx(uint64_t h[2], const rep_context *c, int n)
{
    hash_absorb128(h, (uint64_t)(n > 0 ? n : 0));
    for (int i = 0; i < n; i++) {
        hash_absorb128(h, (uint64_t)(int64_t)c[i].n);
        hash_absorb128(h, (uint64_t)(int64_t)c[i].mark);
        hash_absorb128(h, (uint64_t)(c[i].acts != NULL) << 1 | (c[i].tokens != NULL));
        for (int t = 0; t < c[i].n; t++) {
            if (c[i].acts) {
                uint32_t b;
                memcpy(&b, &c[i].acts[t], sizeof b);
                hash_absorb128(h, b);
            }
            if (c[i].tokens) key_str(h, c[i].tokens[t]);
        }
    }
}

static void key_bars(uint64_t h[2], const char *const *txt, const double *v, int n)
{
    hash_absorb128(h, (uint64_t)(n > 0 ? n : 0));
    hash_absorb128(h, (uint64_t)(txt != NULL) << 1 | (v != NULL));
    for (int i = 0; i < n; i++) {
        if (txt) key_str(h, txt[i]);
        if (v) key_f64(h, v[i]);
    }
}

void rep_feature_key(const rep_feature *f, uint64_t h[2])
{
    /* every field rep_feature_dashboard reads, in declaration order: a new field goes here too */
    key_str(h, "rep_feature_dashboard 1");
    hash_absorb128(h, (uint64_t)f->feature);
    key_str(h, f->sae);
    key_str(h, f->transcoder_out);
    hash_absorb128(h, (uint64_t)f->sampled_only);
    key_f64(h, f->density);
    key_f64(h, f->max_act);
    key_f64(h, f->mean_act);
    key_str(h, f->best_tag);
    key_f64(h, f->best_tag_precision);
    hash_absorb128(h, (uint64_t)f->nearest);
    key_f64(h, f->nearest_cos);
    key_ctx(h, f->top, f->ntop);
    hash_absorb128(h, (uint64_t)(f->nintervals > 0 ? f->nintervals : 0));
    for (int i = 0; i < f->nintervals; i++) {
        key_str(h, f->intervals[i].name);
        key_f64(h, f->intervals[i].lo);
        key_f64(h, f->intervals[i].hi);
        key_ctx(h, f->intervals[i].ctx, f->intervals[i].nctx);
    }
    hash_absorb128(h, (uint64_t)(f->hist_bins > 0 ? f->hist_bins : 0));
    hash_absorb128(h, (uint64_t)(f->hist_counts != NULL) << 1 | (f->hist_edges != NULL));
    for (int i = 0; f->hist_counts && i < f->hist_bins; i++) key_f64(h, f->hist_counts[i]);
    for (int i = 0; f->hist_edges && f->hist_bins > 0 && i <= f->hist_bins; i++) key_f64(h, f->hist_edges[i]);
    hash_absorb128(h, (uint64_t)f->hist_log_x);
    key_bars(h, f->logit_pos, f->logit_pos_val, f->nlogit_pos);
    key_bars(h, f->logit_neg, f->logit_neg_val, f->nlogit_neg);
    key_bars(h, f->tags, f->tag_frac, f->ntags);
}

int rep_feature_dashboard(const rep_feature *f, const char *path, const rep_kv *meta, int nmeta)
{
    double act_max = f->max_act;
    if (!(act_max > 0) || !isfinite(act_max)) { /* fall back to the contexts' own max */
        act_max = 0;
        for (int i = 0; i < f->ntop; i++)
            for (int j = 0; j < f->top[i].n; j++)
                if (f->top[i].acts && f->top[i].acts[j] > act_max) act_max = f->top[i].acts[j];
    }
    int nlp = f->nlogit_pos < 10 ? f->nlogit_pos : 10, nln = f->nlogit_neg < 10 ? f->nlogit_neg : 10;
    int nt = f->ntags < 12 ? f->ntags : 12;
    double right_h = 64 + 250 + bars_height(nlp) + bars_height(nln) + bars_height(nt) + 12;
    double lh = left_height(f);
    int H = (int)ceil(lh > right_h ? lh : right_h);
    rep_canvas *c;
    int rc = rep_canvas_new(&c, W, H, rep_rgb(0xffffff));
    if (rc) return err_wrap(rc, "%s", path);

    /* Header */
    rep_rect(c, 0, 0, W, 58, rep_rgb(0xf3f4f6));
    rep_line(c, 0, 58, W, 58, rep_rgb(0xd0d0d0), 1, 0);
    rep_font hf = rep_font_make(22, 1, rep_rgb(INK), REP_LEFT, REP_TOP);
    char buf[512];
    snprintf(buf, sizeof buf, "Feature %lld", (long long)f->feature);
    double tw = rep_text(c, 14, 6, buf, &hf, 400);
    rep_font sf = rep_font_make(13, 0, rep_rgb(MUTED), REP_LEFT, REP_BASELINE);
    if (f->sae) rep_text(c, 14 + tw + 14, 26, f->sae, &sf, W - tw - 40);
    char d[96], m[64], p[160], nb[96];
    fmt_density(f->density, d, sizeof d);
    if (isfinite(f->max_act)) {
        if (isfinite(f->mean_act)) snprintf(m, sizeof m, "max act %.3g, mean %.3g", f->max_act, f->mean_act);
        else snprintf(m, sizeof m, "max act %.3g", f->max_act);
    } else snprintf(m, sizeof m, f->density == 0 ? "dead: never active" : "max act ?"); /* as index.html */
    if (f->best_tag) {
        char tag[40];
        utf8_for_display(f->best_tag, strlen(f->best_tag), tag, sizeof tag);
        snprintf(p, sizeof p, "best POS %s (precision %.2f)", tag, f->best_tag_precision);
    } else snprintf(p, sizeof p, "POS: no tags");
    if (f->nearest >= 0) snprintf(nb, sizeof nb, "nearest #%lld (cos %.2f)", (long long)f->nearest, f->nearest_cos);
    else snprintf(nb, sizeof nb, "nearest: ?");
    snprintf(buf, sizeof buf, "%s   \xc2\xb7   %s   \xc2\xb7   %s   \xc2\xb7   %s", d, m, p, nb);
    rep_font lf = rep_font_make(14, 0, rep_rgb(INK), REP_LEFT, REP_BASELINE);
    rep_text(c, 14, 50, buf, &lf, W - 28);

    /* Left: the activation map */
    rep_font sec = rep_font_make(14, 1, rep_rgb(INK), REP_LEFT, REP_TOP);
    rep_font sub = rep_font_make(12, 0, rep_rgb(MUTED), REP_LEFT, REP_TOP);
    double y = 66;
    rep_text(c, 8, y, "Top activations", &sec, 300);
    /* white reads as zero (Neuronpedia colours every token): without every activation stored,
       say that white is "not stored" (an audit: 102 of feature 2934's context tokens fire, 23
       were coloured) */
    char cap[256];
    snprintf(cap, sizeof cap, "(%scolour = activation / max;%s box = %s)",
             f->transcoder_out ? "input side; " : "",
             f->sampled_only ? " white = not stored (analyze --all-acts);" : "",
             f->sampled_only ? "the chosen token" : "the token the context was chosen for");
    rep_text(c, 150, y + 2, cap, &sub, LEFT_W - 160);
    y += 24;
    rc = draw_contexts(c, 0, y, LEFT_W - 8, f->top, f->ntop, act_max);
    y += (f->ntop > 0 ? f->ntop : 1) * ROW_H;
    for (int i = 0; rc == OK && i < f->nintervals; i++) {
        const rep_interval *iv = &f->intervals[i];
        y += 6;
        char nm[80];
        utf8_for_display(iv->name ? iv->name : "Interval", strlen(iv->name ? iv->name : "Interval"),
                          nm, sizeof nm);
        if (act_max > 0)
            snprintf(buf, sizeof buf, "%s: activations %.3g \xe2\x80\x93 %.3g  (%.0f\xe2\x80\x93%.0f%% of max)",
                     nm, iv->lo, iv->hi, 100 * iv->lo / act_max, 100 * iv->hi / act_max);
        else snprintf(buf, sizeof buf, "%s: activations %.3g \xe2\x80\x93 %.3g", nm, iv->lo, iv->hi);
        rep_text(c, 8, y, buf, &sub, LEFT_W - 16);
        y += 24;
        rc = draw_contexts(c, 0, y, LEFT_W - 8, iv->ctx, iv->nctx, act_max);
        y += (iv->nctx > 0 ? iv->nctx : 1) * ROW_H;
    }
    rep_line(c, LEFT_W, 66, LEFT_W, H - 8, rep_rgb(0xe0e0e0), 1, 0);

    /* Right: histogram, logits, POS */
    double rx = LEFT_W + 8, rw = W - rx - 4, ry = 64;
    if (rc == OK) {
        rep_axes ax = rep_axes_make("Activation histogram", "activation", "count (log)");
        ax.log_y = 1;
        ax.y_counts = 1;
        ax.log_x = f->hist_log_x;
        rep_hist_series hs = {NULL, f->hist_counts, rep_rgb(0xf28c28)};
        rc = rep_histogram(c, rx, ry, rw, 246, &ax, f->hist_edges, f->hist_counts ? f->hist_bins : 0,
                           &hs, f->hist_counts ? 1 : 0, NULL, 0);
        ry += 250;
    }
    if (rc == OK) {
        rc = rep_barh(c, rx, ry, rw, bars_height(nlp), f->transcoder_out ? "Output side: top positive logits" : "Top positive logits", f->logit_pos,
                      f->logit_pos_val, nlp, rep_rgb(0x2b7bba), rep_rgb(0xd6604d), "%+.3g");
        ry += bars_height(nlp);
    }
    if (rc == OK) {
        rc = rep_barh(c, rx, ry, rw, bars_height(nln), f->transcoder_out ? "Output side: top negative logits" : "Top negative logits", f->logit_neg,
                      f->logit_neg_val, nln, rep_rgb(0x2b7bba), rep_rgb(0xd6604d), "%+.3g");
        ry += bars_height(nln);
    }
    if (rc == OK) {
        rc = rep_barh(c, rx, ry, rw, bars_height(nt), "POS tags of the top activations", f->tags,
                      f->tag_frac, nt, rep_rgb(0x6a51a3), rep_rgb(0x6a51a3), "%.2f");
    }
    if (rc == OK) rc = rep_png_write(c, path, meta, nmeta);
    rep_canvas_free(c);
    return rc;
}
