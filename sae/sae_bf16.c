/* sae_bf16.c - see sae_bf16.h. */
#include "sae/sae_bf16.h"

#include "model/ops.h"

#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* One cached shape: the matmul (src bf16 [B,D] row-major, weights bf16 in the layout the
 * primitive prefers, bias f32 [1,S], dst f32 [B,S] row-major) and the two reorders that fill its
 * bf16 inputs from the caller's fp32 buffers (W_encT [S,D] row-major is the weights [D,S] in
 * column-major order, "ba"). The fp32 memory objects get the caller's pointers per call. */
typedef struct {
    int B, D, S;
    uint64_t used; /* LRU clock */
    dnnl_primitive_t mm, ro_src, ro_w;
    dnnl_memory_t src32, w32, bias, dst; /* caller's buffers (handles set per call) */
    dnnl_memory_t src16, w16;            /* ours */
    const float *w_of;                   /* w16 holds bf16(w_of) of generation w_gen */
    uint64_t w_gen;
} bf16_shape;

enum { N_SHAPES = 4 };

static struct {
    pthread_mutex_t mu;
    int init; /* 0 not tried, 1 ok, -1 no engine */
    dnnl_engine_t eng;
    dnnl_stream_t st;
    bf16_shape shapes[N_SHAPES];
    uint64_t clock;
    const float *last_end; /* xc + B*D of the last call: the next row chunk starts there */
    char impl[64];
} G = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The ISA query and the SAELITE_NO_BF16 switch are the model's (model/ops_bf16.c): one answer
 * for every bf16 path. */
const char *sae_bf16_isa(void) { return op_bf16_isa(); }

int sae_bf16_supported(void) { return op_bf16_supported(); }

const char *sae_bf16_impl(void) { return G.impl; }

static void shape_free(bf16_shape *c)
{
    dnnl_primitive_t *p[] = {&c->mm, &c->ro_src, &c->ro_w};
    for (int i = 0; i < 3; i++)
        if (*p[i]) dnnl_primitive_destroy(*p[i]);
    dnnl_memory_t *m[] = {&c->src32, &c->w32, &c->bias, &c->dst, &c->src16, &c->w16};
    for (int i = 0; i < 6; i++)
        if (*m[i]) dnnl_memory_destroy(*m[i]);
    memset(c, 0, sizeof *c);
}

/* A reorder primitive from *from to *to (descriptors on our engine). */
static dnnl_status_t reorder_new(dnnl_primitive_t *out, const dnnl_memory_desc_t *from,
                                 const dnnl_memory_desc_t *to)
{
    dnnl_primitive_desc_t pd;
    dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, from, G.eng, to, G.eng, NULL);
    if (s) return s;
    s = dnnl_primitive_create(out, pd);
    dnnl_primitive_desc_destroy(pd);
    return s;
}

static dnnl_status_t shape_build(bf16_shape *c, int B, int D, int S)
{
    dnnl_memory_desc_t src16, src32, w16any, w32, bias, dst;
    dnnl_dims_t ds = {B, D}, dw = {D, S}, db = {1, S}, dd = {B, S};
    dnnl_status_t s;
#define TRY(x) \
    if ((s = (x)) != dnnl_success) goto fail
    TRY(dnnl_memory_desc_init_by_tag(&src16, 2, ds, dnnl_bf16, dnnl_ab));
    TRY(dnnl_memory_desc_init_by_tag(&src32, 2, ds, dnnl_f32, dnnl_ab));
    TRY(dnnl_memory_desc_init_by_tag(&w16any, 2, dw, dnnl_bf16, dnnl_format_tag_any));
    TRY(dnnl_memory_desc_init_by_tag(&w32, 2, dw, dnnl_f32, dnnl_ba));
    TRY(dnnl_memory_desc_init_by_tag(&bias, 2, db, dnnl_f32, dnnl_ab));
    TRY(dnnl_memory_desc_init_by_tag(&dst, 2, dd, dnnl_f32, dnnl_ab));
    dnnl_matmul_desc_t md;
    TRY(dnnl_matmul_desc_init(&md, &src16, &w16any, &bias, &dst));
    dnnl_primitive_desc_t pd;
    TRY(dnnl_primitive_desc_create(&pd, &md, NULL, G.eng, NULL));
    const char *impl = "";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    dnnl_memory_desc_t w16 = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    s = dnnl_primitive_create(&c->mm, pd);
    if (!s) {
        strncpy(G.impl, impl ? impl : "", sizeof G.impl - 1);
        G.impl[sizeof G.impl - 1] = 0;
    }
    dnnl_primitive_desc_destroy(pd);
    if (s) goto fail;
    TRY(reorder_new(&c->ro_src, &src32, &src16));
    TRY(reorder_new(&c->ro_w, &w32, &w16));
    TRY(dnnl_memory_create(&c->src32, &src32, G.eng, DNNL_MEMORY_NONE));
    TRY(dnnl_memory_create(&c->w32, &w32, G.eng, DNNL_MEMORY_NONE));
    TRY(dnnl_memory_create(&c->bias, &bias, G.eng, DNNL_MEMORY_NONE));
    TRY(dnnl_memory_create(&c->dst, &dst, G.eng, DNNL_MEMORY_NONE));
    TRY(dnnl_memory_create(&c->src16, &src16, G.eng, DNNL_MEMORY_ALLOCATE));
    TRY(dnnl_memory_create(&c->w16, &w16, G.eng, DNNL_MEMORY_ALLOCATE));
#undef TRY
    c->B = B, c->D = D, c->S = S;
    return dnnl_success;
fail:
    shape_free(c);
    return s;
}

/* The cached shape (B, D, S), built when missing (evicting the least recently used). */
static bf16_shape *shape_get(int B, int D, int S)
{
    bf16_shape *lru = &G.shapes[0];
    for (int i = 0; i < N_SHAPES; i++) {
        bf16_shape *c = &G.shapes[i];
        if (c->mm && c->B == B && c->D == D && c->S == S) {
            c->used = ++G.clock;
            return c;
        }
        if (!c->mm || c->used < lru->used) lru = c;
        if (!c->mm) break;
    }
    shape_free(lru);
    if (shape_build(lru, B, D, S)) return NULL;
    lru->used = ++G.clock;
    return lru;
}

static int run(dnnl_primitive_t p, int n, const dnnl_exec_arg_t *args)
{
    return dnnl_primitive_execute(p, G.st, n, args) != dnnl_success;
}

int sae_bf16_encode(float *pre, const float *xc, const float *W_encT, const float *b_enc, int B,
                    int D, int S, uint64_t wgen)
{
    pthread_mutex_lock(&G.mu);
    int rc = 1;
    if (!G.init) {
        G.init = -1;
        if (dnnl_engine_create(&G.eng, dnnl_cpu, 0) == dnnl_success) {
            if (dnnl_stream_create(&G.st, G.eng, dnnl_stream_default_flags) == dnnl_success)
                G.init = 1;
            else
                dnnl_engine_destroy(G.eng);
        }
    }
    bf16_shape *c = G.init > 0 ? shape_get(B, D, S) : NULL;
    if (c && !dnnl_memory_set_data_handle(c->src32, (void *)xc) &&
        !dnnl_memory_set_data_handle(c->w32, (void *)W_encT) &&
        !dnnl_memory_set_data_handle(c->bias, (void *)b_enc) &&
        !dnnl_memory_set_data_handle(c->dst, pre)) {
        dnnl_exec_arg_t rs[] = {{DNNL_ARG_FROM, c->src32}, {DNNL_ARG_TO, c->src16}};
        dnnl_exec_arg_t rw[] = {{DNNL_ARG_FROM, c->w32}, {DNNL_ARG_TO, c->w16}};
        dnnl_exec_arg_t mm[] = {{DNNL_ARG_SRC, c->src16},
                                {DNNL_ARG_WEIGHTS, c->w16},
                                {DNNL_ARG_BIAS, c->bias},
                                {DNNL_ARG_DST, c->dst}};
        int reuse = c->w_of == W_encT && c->w_gen == wgen && xc == G.last_end;
        c->w_of = NULL; /* until the reorder below has run */
        rc = run(c->ro_src, 2, rs) || (!reuse && run(c->ro_w, 2, rw)) || run(c->mm, 4, mm) ||
             dnnl_stream_wait(G.st) != dnnl_success;
        if (!rc) {
            c->w_of = W_encT;
            c->w_gen = wgen;
        }
    }
    G.last_end = rc ? NULL : xc + (int64_t)B * D;
    pthread_mutex_unlock(&G.mu);
    return rc;
}
