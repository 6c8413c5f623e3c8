/* nearest.c - nearest rows by cosine (embedding arithmetic for `saelite embed`). */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>

#include "common/err.h"
#include "common/mem.h"
#include "toy/toy.h"

typedef struct {
    float cos;
    int id;
} scored;

static int by_cos(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->cos != y->cos) return x->cos < y->cos ? 1 : -1;
    return x->id - y->id;
}

int toy_nearest(const float *E, int V, int C, const float *q, const unsigned char *exclude,
                int top, int *ids, float *cos, int *nout)
{
    *nout = 0;
    if (V < 1 || C < 1 || top < 1) return err_set(ERR_ARG, "nearest: bad sizes");
    double qn = 0;
    for (int j = 0; j < C; j++) qn += (double)q[j] * q[j];
    qn = sqrt(qn);
    if (!(qn > 0)) return err_set(ERR_ARG, "nearest: the query vector is zero");
    float *dots = mem_alloc(sizeof(float) * (size_t)V);
    scored *sc = mem_alloc(sizeof(scored) * (size_t)V);
    if (!dots || !sc) {
        mem_free(dots);
        mem_free(sc);
        return err_set(ERR_NOMEM, "nearest: out of memory for %d rows", V);
    }
    cblas_sgemv(CblasRowMajor, CblasNoTrans, V, C, 1.0f, E, C, q, 1, 0.0f, dots, 1);
    int n = 0;
    for (int v = 0; v < V; v++) {
        if (exclude && exclude[v]) continue;
        const float *e = E + (size_t)v * C;
        double en = 0;
        for (int j = 0; j < C; j++) en += (double)e[j] * e[j];
        sc[n].cos = en > 0 ? (float)(dots[v] / (sqrt(en) * qn)) : 0.0f;
        sc[n++].id = v;
    }
    qsort(sc, (size_t)n, sizeof *sc, by_cos);
    int k = n < top ? n : top;
    for (int i = 0; i < k; i++) {
        ids[i] = sc[i].id;
        cos[i] = sc[i].cos;
    }
    *nout = k;
    mem_free(dots);
    mem_free(sc);
    return OK;
}
