/* embed_run.c - `saelite embed` as a library call: an expression of words, the query vector
 * from their embedding rows, and the rows nearest to it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"
#include "toy/toy.h"

int toy_embed_parse(const char *s, toy_embed_term *t, int *nt)
{
    int n = 0, sign = 1, pending = 0; /* an operator waiting for its term */
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '+' || *p == '-') {
            sign = *p == '-' ? -sign : sign;
            pending = 1;
            p++;
            continue;
        }
        if (!*p) break;
        pending = 0;
        const char *e = p;
        while (*e && *e != '+' && *e != '-') e++;
        const char *q = e;
        while (q > p && (q[-1] == ' ' || q[-1] == '\t')) q--;
        if (n == TOY_EMBED_MAX_TERMS || (size_t)(q - p) >= sizeof t[0].text)
            return err_set(ERR_ARG, "expression: too many or too long terms");
        t[n].sign = sign;
        memcpy(t[n].text, p, (size_t)(q - p));
        t[n].text[q - p] = 0;
        t[n].ids = NULL;
        t[n].nids = 0;
        n++;
        sign = 1;
        p = e;
        if (!*p) break;
    }
    if (n == 0) return err_set(ERR_ARG, "expression '%s' has no terms", s);
    /* "king -" answered for "king" as if the operator were not there (audit) */
    if (pending) return err_set(ERR_ARG, "expression '%s' ends with an operator", s);
    *nt = n;
    return OK;
}

void toy_embed_result_free(toy_embed_result *r)
{
    for (int k = 0; r->terms && k < r->nterms; k++) mem_free(r->terms[k].ids);
    mem_free(r->terms);
    mem_free(r->ids);
    mem_free(r->cos);
    memset(r, 0, sizeof *r);
}

/* Term k looked up, its rows' mean added to q[C] with its sign, its ids marked in excl[V] and
 * sqrt(sum of its rows' squared norms) added to *scale. */
static int add_term(const toy_embed_opts *o, toy_embed_term *t, int V, float *q,
                    unsigned char *excl, double *scale)
{
    char buf[TOY_EMBED_TERM_MAX + 44];
    int C = o->dim;
    snprintf(buf, sizeof buf, "%s%s", o->no_space ? "" : " ", t->text);
    int rc = o->lookup(buf, &t->ids, &t->nids, o->user);
    if (rc) return rc;
    const int *ids = t->ids;
    size_t n = t->nids;
    if (n == 0) return err_set(ERR_ARG, "term '%s' encodes to no tokens", t->text);
    double tn = 0;
    /* a word of several tokens contributes the mean of their vectors */
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= V)
            return err_set(ERR_SHAPE, "token %d of '%s' is outside the model's vocabulary (%d "
                           "rows; the tokenizer %s has %d tokens: wrong --tokenizer?)", ids[i],
                           t->text, o->rows, o->lookup_name, o->vocab);
        excl[ids[i]] = 1;
        const float *e = o->E + (size_t)ids[i] * C;
        for (int j = 0; j < C; j++) {
            q[j] += (float)t->sign * e[j] / (float)n;
            tn += (double)e[j] * e[j];
        }
    }
    *scale += sqrt(tn);
    return OK;
}

int toy_embed_run(const toy_embed_opts *o, toy_embed_result *r)
{
    memset(r, 0, sizeof *r);
    if (o->rows < 1 || o->dim < 1 || o->top < 1 || !o->E || !o->lookup)
        return err_set(ERR_ARG, "embed: bad sizes (%d rows of %d, top %d) or no lookup", o->rows,
                       o->dim, o->top);
    int V = o->rows < o->vocab ? o->rows : o->vocab, C = o->dim, nt = 0;
    r->terms = mem_alloc(sizeof *r->terms * TOY_EMBED_MAX_TERMS);
    if (!r->terms) return err_set(ERR_NOMEM, "out of memory");
    int rc = toy_embed_parse(o->expr, r->terms, &nt);
    if (rc) {
        toy_embed_result_free(r);
        return rc;
    }
    r->nterms = nt;
    float *q = mem_calloc((size_t)C, sizeof(float));
    unsigned char *excl = mem_calloc((size_t)V, 1);
    /* at most the V rows: --top 2147483647 asked for 16 GB, "out of memory" under a memory
       limit (an audit), where any --top above V lists every row */
    int top = o->top < V ? o->top : V;
    r->ids = mem_alloc(sizeof(int) * (size_t)top);
    r->cos = mem_alloc(sizeof(float) * (size_t)top);
    if (!q || !excl || !r->ids || !r->cos) rc = err_set(ERR_NOMEM, "out of memory");
    double scale = 0; /* sum of the input vectors' norms, to tell a cancelled query */
    for (int k = 0; !rc && k < nt; k++) rc = add_term(o, &r->terms[k], V, q, excl, &scale);
    if (!rc) {
        double qn = 0;
        for (int j = 0; j < C; j++) qn += (double)q[j] * q[j];
        qn = sqrt(qn);
        if (qn <= 1e-6 * scale)
            rc = err_set(ERR_ARG, "the expression's vector is zero (terms cancel)");
    }
    if (!rc) rc = toy_nearest(o->E, V, C, q, excl, top, r->ids, r->cos, &r->found);
    mem_free(q);
    mem_free(excl);
    if (rc) toy_embed_result_free(r);
    return rc;
}
