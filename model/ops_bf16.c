/* ops_bf16.c - the bf16 path of op_matmul_forward / op_logits_forward (see ops.h). */
#include "model/ops.h"

#include <oneapi/dnnl/dnnl.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"

/* One cached weight matrix: its bf16 copy in the layout the matmul primitive chose for the
 * first call (oneDNN may block it for the matrix engine), keyed by the fp32 pointer and shape. */
typedef struct {
    const float *W;
    int ldw, trans, C, OC;
    dnnl_memory_desc_t md; /* of w16 */
    dnnl_memory_t w16;
    dnnl_primitive_t ro; /* the fp32 -> w16 reorder, kept for op_bf16_refresh (or NULL) */
    int stale;           /* op_bf16_refresh: convert again before the next use */
} wcache;

enum { MAX_W = 256 };

static struct {
    pthread_mutex_t mu;
    int init; /* 0 not tried, 1 ok, -1 no engine */
    dnnl_engine_t eng;
    dnnl_stream_t st;
    wcache w[MAX_W];
    int nw;
    char impl[64];
} G = {.mu = PTHREAD_MUTEX_INITIALIZER};

static const char *isa_name(dnnl_cpu_isa_t isa)
{
    switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "unknown";
    }
}

/* SAELITE_NO_BF16 set to anything but "" or "0", else NULL */
static const char *no_bf16_env(void)
{
    const char *e = getenv("SAELITE_NO_BF16");
    return e && e[0] && strcmp(e, "0") != 0 ? e : NULL;
}

const char *op_bf16_isa(void) { return isa_name(dnnl_get_effective_cpu_isa()); }

int op_bf16_supported(void)
{
    if (no_bf16_env()) return 0;
    unsigned isa = (unsigned)dnnl_get_effective_cpu_isa(), need = dnnl_cpu_isa_avx512_core_bf16;
    return (isa & need) == need;
}

const char *op_bf16_impl(void) { return G.impl; }

/* The CPU's own answer (cpuid), apart from oneDNN's: AVX512_BF16 (leaf 7.1 EAX bit 5) or
 * AMX-BF16 (leaf 7.0 EDX bit 22) */
static int cpu_has_bf16(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 5 & 1)) return 1;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 22 & 1)) return 1;
#endif
    return 0;
}

const char *op_bf16_why_not(char *buf, size_t n)
{
    const char *e = no_bf16_env(), *cap = getenv("ONEDNN_MAX_CPU_ISA");
    if (!cap || !cap[0]) cap = getenv("DNNL_MAX_CPU_ISA");
    if (op_bf16_supported()) snprintf(buf, n, "%s", "");
    else if (e) snprintf(buf, n, "disabled by SAELITE_NO_BF16=%s", e);
    else if (cap && cap[0] && cpu_has_bf16()) /* the user's cap, not the CPU (it blamed the CPU) */
        snprintf(buf, n, "oneDNN's ISA is %s, capped by %s=%s", op_bf16_isa(),
                 getenv("ONEDNN_MAX_CPU_ISA") && getenv("ONEDNN_MAX_CPU_ISA")[0] ? "ONEDNN_MAX_CPU_ISA"
                                                                                 : "DNNL_MAX_CPU_ISA",
                 cap);
    else
        snprintf(buf, n, "this CPU has no bf16 dot products (oneDNN's ISA is %s; bf16 needs "
                         "avx512_core_bf16 or AMX)", op_bf16_isa());
    return buf;
}

int op_bf16_refuse(void)
{
    char why[160];
    op_bf16_why_not(why, sizeof why);
    /* a variable the user set (SAELITE_NO_BF16, the ISA cap) is named in why */
    return err_set(ERR_ARG, "precision bf16: %s; HINT: %suse --precision fp32 or auto", why,
                   strchr(why, '=') ? "unset it, or " : "");
}

/* oneDNN memory over our own buffer (mem_alloc_aligned: huge pages for large ones, which
 * DNNL_MEMORY_ALLOCATE's allocator does not ask for); released with dmem_del. */
static int dmem_new(dnnl_memory_t *m, const dnnl_memory_desc_t *md)
{
    size_t n = dnnl_memory_desc_get_size(md);
    void *p = mem_alloc_aligned(n);
    if (!p) return 1;
    if (dnnl_memory_create(m, md, G.eng, p) != dnnl_success) {
        mem_free_aligned(p);
        return 1;
    }
    return 0;
}

static void dmem_del(dnnl_memory_t m)
{
    void *p = NULL;
    if (!m) return;
    dnnl_memory_get_data_handle(m, &p);
    dnnl_memory_destroy(m);
    mem_free_aligned(p);
}

void op_bf16_forget(const void *base, size_t bytes)
{
    pthread_mutex_lock(&G.mu);
    const char *lo = base, *hi = lo + bytes;
    int n = 0;
    for (int i = 0; i < G.nw; i++) {
        const char *p = (const char *)G.w[i].W;
        if (p >= lo && p < hi) {
            dmem_del(G.w[i].w16);
            if (G.w[i].ro) dnnl_primitive_destroy(G.w[i].ro);
        } else {
            G.w[n++] = G.w[i];
        }
    }
    G.nw = n;
    pthread_mutex_unlock(&G.mu);
}

void op_bf16_refresh(const void *base, size_t bytes)
{
    pthread_mutex_lock(&G.mu);
    const char *lo = base, *hi = lo + bytes;
    for (int i = 0; i < G.nw; i++) {
        const char *p = (const char *)G.w[i].W;
        if (p >= lo && p < hi) G.w[i].stale = 1;
    }
    pthread_mutex_unlock(&G.mu);
}

static int engine_up(void)
{
    if (!G.init) {
        G.init = -1;
        if (dnnl_engine_create(&G.eng, dnnl_cpu, 0) == dnnl_success) {
            if (dnnl_stream_create(&G.st, G.eng, dnnl_stream_default_flags) == dnnl_success)
                G.init = 1;
            else
                dnnl_engine_destroy(G.eng);
        }
    }
    return G.init > 0;
}

/* Converts src (layout *from) into to. keep: where the reorder primitive is kept between calls
 * (created on the first; NULL: made and destroyed here). */
static int reorder(const dnnl_memory_desc_t *from, void *src, dnnl_memory_t to,
                   dnnl_primitive_t *keep)
{
    const dnnl_memory_desc_t *tmd;
    if (dnnl_memory_get_memory_desc(to, &tmd)) return 1;
    dnnl_primitive_t p = keep ? *keep : NULL;
    dnnl_memory_t m;
    if (!p) {
        dnnl_primitive_desc_t pd;
        if (dnnl_reorder_primitive_desc_create(&pd, from, G.eng, tmd, G.eng, NULL)) return 1;
        int rc = dnnl_primitive_create(&p, pd) != dnnl_success;
        dnnl_primitive_desc_destroy(pd);
        if (rc) return 1;
        if (keep) *keep = p;
    }
    int rc = dnnl_memory_create(&m, from, G.eng, src) != dnnl_success;
    if (!rc) {
        dnnl_exec_arg_t a[] = {{DNNL_ARG_FROM, m}, {DNNL_ARG_TO, to}};
        rc = dnnl_primitive_execute(p, G.st, 2, a) != dnnl_success ||
             dnnl_stream_wait(G.st) != dnnl_success;
        dnnl_memory_destroy(m);
    }
    if (!keep) dnnl_primitive_destroy(p);
    return rc;
}

/* The bf16 weights for (W, shape) in layout *want: the cached copy when its layout matches,
 * else a new one (cached when the cache has room and nothing is cached for W yet; *tmp set when
 * the caller must destroy it). NULL on failure. */
static dnnl_memory_t weights(const float *W, int ldw, int trans, int C, int OC,
                             const dnnl_memory_desc_t *want, int *tmp)
{
    *tmp = 0;
    int have = -1;
    dnnl_memory_desc_t f32;
    dnnl_dims_t dims = {C, OC}, strides = {trans ? 1 : ldw, trans ? ldw : 1};
    if (dnnl_memory_desc_init_by_strides(&f32, 2, dims, dnnl_f32, strides)) return NULL;
    for (int i = 0; i < G.nw; i++)
        if (G.w[i].W == W && G.w[i].ldw == ldw && G.w[i].trans == trans && G.w[i].C == C &&
            G.w[i].OC == OC) {
            wcache *c = &G.w[i];
            if (!dnnl_memory_desc_equal(&c->md, want)) {
                have = i;
                continue;
            }
            if (c->stale) { /* op_bf16_refresh: the same buffer, converted again */
                if (reorder(&f32, (void *)W, c->w16, &c->ro)) return NULL;
                c->stale = 0;
            }
            return c->w16;
        }
    dnnl_memory_t w16;
    if (dmem_new(&w16, want)) return NULL;
    if (reorder(&f32, (void *)W, w16, NULL)) {
        dmem_del(w16);
        return NULL;
    }
    if (have >= 0 || G.nw == MAX_W) {
        *tmp = 1;
        return w16;
    }
    G.w[G.nw++] = (wcache){.W = W, .ldw = ldw, .trans = trans, .C = C, .OC = OC, .md = *want,
                           .w16 = w16};
    return w16;
}

/* One cached matmul shape: the primitive, its weights layout, the src reorder and bf16 src. */
typedef struct {
    int N, C, OC, ldo, bias;
    float beta; /* the sum post-op's scale is fixed when the primitive is made */
    dnnl_primitive_t mm, ro_src;
    dnnl_memory_desc_t wmd, src32, dmd, bmd;
    dnnl_memory_t src16;
} mcache;

enum { MAX_M = 32 }; /* shapes: op_bf16_matmul splits a call in up to 3 */
static mcache M[MAX_M];
static int nm, next_evict;

static void mcache_free(mcache *c)
{
    if (c->mm) dnnl_primitive_destroy(c->mm);
    if (c->ro_src) dnnl_primitive_destroy(c->ro_src);
    dmem_del(c->src16);
    memset(c, 0, sizeof *c);
}

static mcache *shape(int N, int C, int OC, int ldo, int bias, float beta)
{
    int sum = beta != 0;
    /* keyed on beta's value, not on beta != 0: a primitive made for beta 1 ran beta 0.5 as 1
       (no caller passes another value today; an audit) */
    for (int i = 0; i < nm; i++)
        if (M[i].N == N && M[i].C == C && M[i].OC == OC && M[i].ldo == ldo && M[i].bias == bias &&
            M[i].beta == beta)
            return &M[i];
    mcache *c = nm < MAX_M ? &M[nm++] : &M[next_evict++ % MAX_M];
    mcache_free(c);
    dnnl_memory_desc_t src16, wany;
    dnnl_dims_t ds = {N, C}, dw = {C, OC}, db = {1, OC}, dd = {N, OC}, sd = {ldo, 1};
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL, rpd = NULL;
    int ok = !dnnl_memory_desc_init_by_tag(&src16, 2, ds, dnnl_bf16, dnnl_ab) &&
             !dnnl_memory_desc_init_by_tag(&c->src32, 2, ds, dnnl_f32, dnnl_ab) &&
             !dnnl_memory_desc_init_by_tag(&wany, 2, dw, dnnl_bf16, dnnl_format_tag_any) &&
             !dnnl_memory_desc_init_by_tag(&c->bmd, 2, db, dnnl_f32, dnnl_ab) &&
             !dnnl_memory_desc_init_by_strides(&c->dmd, 2, dd, dnnl_f32, sd);
    if (ok && sum) /* out = beta out + x W (+ bias): the sum post-op */
        ok = !dnnl_primitive_attr_create(&attr) && !dnnl_post_ops_create(&po) &&
             !dnnl_post_ops_append_sum(po, beta) && !dnnl_primitive_attr_set_post_ops(attr, po);
    dnnl_matmul_desc_t md;
    ok = ok && !dnnl_matmul_desc_init(&md, &src16, &wany, bias ? &c->bmd : NULL, &c->dmd) &&
         !dnnl_primitive_desc_create(&pd, &md, attr, G.eng, NULL) &&
         !dnnl_primitive_create(&c->mm, pd);
    if (ok) {
        const char *impl = "";
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
        strncpy(G.impl, impl ? impl : "", sizeof G.impl - 1);
        c->wmd = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    }
    ok = ok && !dnnl_reorder_primitive_desc_create(&rpd, &c->src32, G.eng, &src16, G.eng, NULL) &&
         !dnnl_primitive_create(&c->ro_src, rpd) &&
         !dmem_new(&c->src16, &src16);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (!ok) {
        mcache_free(c);
        return NULL;
    }
    c->N = N, c->C = C, c->OC = OC, c->ldo = ldo, c->bias = bias, c->beta = beta;
    return c;
}

/* One oneDNN call over all N rows; the caller holds G.mu. */
static int matmul_rows(float *out, int ldo, const float *x, const float *W, int ldw, int trans,
                       const float *bias, int N, int C, int OC, float beta)
{
    int rc = 1, wtmp = 0;
    dnnl_memory_t m32 = NULL, mdst = NULL, mbias = NULL, mw = NULL;
    mcache *c = engine_up() ? shape(N, C, OC, ldo, !!bias, beta) : NULL;
    if (!c || !(mw = weights(W, ldw, trans, C, OC, &c->wmd, &wtmp))) goto done;
    if (dnnl_memory_create(&m32, &c->src32, G.eng, (void *)x) ||
        dnnl_memory_create(&mdst, &c->dmd, G.eng, out) ||
        (bias && dnnl_memory_create(&mbias, &c->bmd, G.eng, (void *)bias)))
        goto done;
    dnnl_exec_arg_t ra[] = {{DNNL_ARG_FROM, m32}, {DNNL_ARG_TO, c->src16}};
    dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, c->src16},
                              {DNNL_ARG_WEIGHTS, mw},
                              {DNNL_ARG_DST, mdst},
                              {DNNL_ARG_BIAS, mbias}};
    rc = dnnl_primitive_execute(c->ro_src, G.st, 2, ra) != dnnl_success ||
         dnnl_primitive_execute(c->mm, G.st, bias ? 4 : 3, args) != dnnl_success ||
         dnnl_stream_wait(G.st) != dnnl_success;
done:
    if (wtmp) dmem_del(mw);
    if (m32) dnnl_memory_destroy(m32);
    if (mdst) dnnl_memory_destroy(mdst);
    if (mbias) dnnl_memory_destroy(mbias);
    return rc;
}

/* oneDNN 2.6.3's AMX matmul (brg:avx512_core_amx_bf16) runs some row counts 5-20x slower than
 * their neighbours, at every shape tried (d 512-3072, out 768-24576): 580 and 590 rows of the
 * large SAE encoder took 210 and 430 ms where 586 took 46, 1888 rows 1161 ms where 1920 took
 * 125, 53 and 59 rows 35-39 ms where 48 took 3 (tools: a loop over op_bf16_matmul, 2026-12-05,
 * Intel Xeon model 207; bench/README.md). Every multiple of 64 rows up to 16384 and every count
 * up to 48 ran at full speed, so the rows go as a multiple of 64, then pieces of at most 32.
 * The split is a function of N: a call stays a pure function of its inputs, shape and OpenMP
 * thread count. (A row's bits could already depend on how many rows its call held, and where
 * few rows meet a long sum, K 3072 under 128 rows, oneDNN splits the sum over its threads, so
 * such pieces differ in the last bit between OMP_NUM_THREADS 1 and 2; an audit.) */
int op_bf16_matmul(float *out, int ldo, const float *x, const float *W, int ldw, int trans,
                   const float *bias, int N, int C, int OC, float beta)
{
    pthread_mutex_lock(&G.mu);
    int rc = 0, r0 = 0;
    while (!rc && r0 < N) {
        int left = N - r0, n = left >= 64 ? left - left % 64 : left > 32 ? 32 : left;
        rc = matmul_rows(out + (int64_t)r0 * ldo, ldo, x + (int64_t)r0 * C, W, ldw, trans, bias, n,
                         C, OC, beta);
        r0 += n;
    }
    pthread_mutex_unlock(&G.mu);
    return rc;
}
