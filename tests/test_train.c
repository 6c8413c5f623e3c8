/* test_train.c - schedule, clipping, AdamW, data split, learning, checkpoint + bit-identical resume. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/mem.h"
#include "harness.h"
#include "tok_fixture.h"
#include "model/gpt2.h"
#include "model/tokenizer.h"
#include "model/train.h"

static void test_schedule(void)
{
    train_opts o;
    train_opts_default(&o);
    o.lr = 1.0;
    o.warmup = 10;
    o.steps = 110;
    o.min_lr_frac = 0.1;
    CHECK_NEAR(train_lr(&o, 0), 0.1, 1e-12);
    CHECK_NEAR(train_lr(&o, 9), 1.0, 1e-12);
    CHECK_NEAR(train_lr(&o, 10), 1.0, 1e-12);
    CHECK_NEAR(train_lr(&o, 60), 0.55, 1e-12); /* half way down the cosine */
    CHECK_NEAR(train_lr(&o, 110), 0.1, 1e-12);
    CHECK(train_lr(&o, 30) > train_lr(&o, 31));
}

static void test_clip(void)
{
    float g[4] = {3, 4, 0, 0};
    CHECK_NEAR(train_clip(g, 4, 1.0), 5.0, 1e-9);
    CHECK_NEAR(g[0], 0.6, 1e-6);
    CHECK_NEAR(g[1], 0.8, 1e-6);
    float h[2] = {0.3f, 0.4f};
    CHECK_NEAR(train_clip(h, 2, 1.0), 0.5, 1e-7);
    CHECK(h[0] == 0.3f, "no scaling below the threshold");
}

static gpt2_model *tiny(uint64_t seed)
{
    gpt2_config c = {1, 2, 32, 16, 16, 64, 1e-5f};
    gpt2_model *m = NULL;
    CHECK(gpt2_create(&m, &c, seed) == OK);
    return m;
}

/* options that would train wrongly (a negative learning rate, a negative clip) are refused */
static void test_bad_opts(void)
{
    gpt2_model *m = tiny(1);
    train_opts o;
    train_state s;
    for (int k = 0; k < 8; k++) {
        train_opts_default(&o);
        o.seq = 16;
        switch (k) {
        case 0: o.lr = 0; break;
        case 1: o.min_lr_frac = -1; break;
        case 2: o.min_lr_frac = 2; break;
        case 3: o.weight_decay = -50; break;
        case 4: o.clip = -1; break;
        case 5: o.beta1 = 1; break;
        case 6: o.eps = 0; break;
        case 7: o.warmup = -1; break;
        }
        CHECK(train_init(&s, m, &o) == ERR_ARG && strstr(err_msg(), "bad optimizer options"),
              "case %d: %s", k, err_msg());
    }
    /* a batch past physical memory is refused before allocating (the kernel killed it) */
    train_opts_default(&o);
    o.seq = 16;
    o.batch = 1 << 26;
    CHECK(train_init(&s, m, &o) == ERR_ARG && strstr(err_msg(), "--batch 67108864: a step over"),
          "%s", err_msg());
    o.batch = 1 << 28;
    CHECK(train_init(&s, m, &o) == ERR_ARG && strstr(err_msg(), "tokens per step"), "%s", err_msg());
    gpt2_free(m);
}

static void test_adamw(void)
{
    gpt2_model *m = tiny(1);
    train_opts o;
    train_opts_default(&o);
    o.weight_decay = 0.5;
    o.seq = 16;
    train_state s;
    CHECK(train_init(&s, m, &o) == OK);
    size_t n;
    float *p = gpt2_params(m, &n), *g = gpt2_grads(m);
    float *p0 = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) g[i] = (float)((i % 7) - 3) * 0.01f;
    memcpy(p0, p, sizeof(float) * n);
    train_adamw(&s, 0.01);
    int nt;
    const gpt2_tensor *tab = gpt2_param_table(m, &nt);
    int bad = 0, saw_decay = 0, saw_nodecay = 0;
    for (int t = 0; t < nt; t++)
        for (size_t j = tab[t].offset; j < tab[t].offset + tab[t].numel; j += 97) {
            /* first step: m_hat = g, v_hat = g^2 -> update = sign(g) (up to eps) */
            double gg = g[j], upd = gg / (fabs(gg) + 1e-8);
            double want = p0[j] - 0.01 * (upd + (tab[t].decay ? 0.5 * p0[j] : 0.0));
            if (fabs(p[j] - want) > 1e-6) bad++;
            saw_decay |= tab[t].decay;
            saw_nodecay |= !tab[t].decay;
        }
    CHECK(bad == 0, "%d AdamW updates differ", bad);
    CHECK(saw_decay && saw_nodecay);
    /* decay flags: matrices yes, biases and LayerNorm no */
    for (int t = 0; t < nt; t++)
        if (strstr(tab[t].name, "bias") || strstr(tab[t].name, "ln_"))
            CHECK(!tab[t].decay, "%s must not decay", tab[t].name);
    free(p0);
    train_free(&s);
    gpt2_free(m);
}

/* documents over a 16-token vocabulary following a deterministic rule the model can learn:
 * next = (cur + 7) mod 15, with token 15 as end-of-text. */
static void make_data(train_data *d, double val_frac)
{
    train_data_init(d, 15, val_frac, 9);
    for (int doc = 0; doc < 200; doc++) {
        int ids[40], len = 10 + doc % 30, x = doc % 15;
        for (int i = 0; i < len; i++) {
            ids[i] = x;
            x = (x + 7) % 15;
        }
        train_data_add(d, ids, (size_t)len);
    }
}

static void test_data(void)
{
    train_data a, b;
    make_data(&a, 0.1);
    make_data(&b, 0.1);
    CHECK(a.ndocs == 200 && a.ndocs_val > 5 && a.ndocs_val < 40, "val docs %zu", a.ndocs_val);
    CHECK(a.nval == b.nval && !memcmp(a.val, b.val, a.nval * sizeof(int)), "split is deterministic");
    size_t tot = 0;
    for (int doc = 0; doc < 200; doc++) tot += 10 + doc % 30 + 1;
    CHECK(a.ntrain + a.nval == tot, "%zu + %zu tokens, want %zu", a.ntrain, a.nval, tot);
    CHECK(a.train[a.ntrain - 1] == 15 && a.val[a.nval - 1] == 15, "documents end with EOT");
    double h = train_unigram_entropy(&a, 16);
    CHECK(h > 2.0 && h < log(16.0) + 1e-9, "entropy %g", h);
    train_data_free(&a);
    train_data_free(&b);
}

/* the defaults with the toy data's shape: 8 windows of 16 */
static train_opts toy_opts(int steps)
{
    train_opts o;
    train_opts_default(&o);
    o.batch = 8;
    o.seq = 16;
    o.steps = steps;
    return o;
}

/* A training stream of exactly seq + 1 tokens is one window (seq inputs, seq targets): it trains
 * (the audit's ctx 22 on 23 tokens was refused as "fewer than one window of 23"); seq is refused. */
static void test_one_window(void)
{
    train_opts o = toy_opts(1);
    o.batch = 2;
    for (int extra = 0; extra <= 1; extra++) {
        train_data d = {0};
        size_t n = (size_t)o.seq + (size_t)extra;
        int buf[32];
        for (size_t i = 0; i < n; i++) buf[i] = (int)(i % 15);
        d.train = buf;
        d.ntrain = n;
        gpt2_model *m = tiny(3);
        train_state s;
        CHECK(train_init(&s, m, &o) == OK);
        double l = 0;
        int rc = train_step(&s, &d, &l, NULL, NULL);
        if (extra) CHECK(rc == OK && isfinite(l), "one window of %zu tokens: %s", n, err_msg());
        else CHECK(rc == ERR_ARG && strstr(err_msg(), "fewer than one window"), "%s", err_msg());
        train_free(&s);
        gpt2_free(m);
    }
}

static void test_learning_and_resume(void)
{
    train_data d;
    make_data(&d, 0.1);
    train_opts o = toy_opts(120);
    o.warmup = 10;
    o.lr = 1e-2;
    o.seed = 4;
    gpt2_model *m = tiny(3);
    train_state s;
    CHECK(train_init(&s, m, &o) == OK);
    double v0, v1, loss = 0;
    CHECK(train_eval(&s, &d, 50, &v0, NULL) == OK, "%s", err_msg());
    for (int i = 0; i < o.steps; i++) CHECK(train_step(&s, &d, &loss, NULL, NULL) == OK || i < 0);
    CHECK(train_eval(&s, &d, 50, &v1, NULL) == OK);
    double h = train_unigram_entropy(&d, 16);
    printf("  toy rule: val loss %.3f -> %.3f after %d steps (unigram entropy %.3f)\n", v0, v1,
           o.steps, h);
    CHECK(v1 < h - 1.5, "val loss %.3f not 1.5 nats under unigram %.3f", v1, h);

    /* resume: 120 straight vs 50 + checkpoint + fresh process state + 70 */
    char dir[] = "/tmp/saelite_train_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    gpt2_model *a = tiny(3);
    train_state sa;
    CHECK(train_init(&sa, a, &o) == OK);
    for (int i = 0; i < 50; i++) train_step(&sa, &d, NULL, NULL, NULL);
    CHECK(train_save(&sa, dir) == OK, "%s", err_msg());
    train_free(&sa);
    gpt2_free(a);
    gpt2_model *b = NULL;
    CHECK(gpt2_load(&b, dir) == OK, "%s", err_msg());
    train_state sb;
    CHECK(train_init(&sb, b, &o) == OK);
    train_set_data(&sb, &d); /* the file has no data record (as before it was kept): resumes */
    CHECK(train_resume(&sb, dir) == OK, "%s", err_msg());
    CHECK(sb.step == 50);
    for (int i = 50; i < o.steps; i++) train_step(&sb, &d, NULL, NULL, NULL);
    size_t n1, n2;
    const float *p1 = gpt2_params(m, &n1), *p2 = gpt2_params(b, &n2);
    CHECK(n1 == n2 && !memcmp(p1, p2, n1 * sizeof(float)), "resumed weights differ");
    /* changed options are refused */
    train_opts o2 = o;
    o2.lr = 2e-2;
    train_state sc;
    CHECK(train_init(&sc, b, &o2) == OK);
    CHECK(train_resume(&sc, dir) == ERR_ARG && strstr(err_msg(), "different options"), "%s",
          err_msg());
    train_free(&sc);
    train_free(&sb);
    gpt2_free(b);
    char p[256];
    const char *files[] = {"config.json", "model.safetensors", "train_state.safetensors"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        CHECK(access(p, F_OK) == 0, "%s written", files[i]);
        unlink(p);
    }
    rmdir(dir);
    train_free(&s);
    gpt2_free(m);
    train_data_free(&d);
}

/* A batch split over threads (model copies) gives the one model's loss and gradient, for even
 * and uneven splits; the copies follow the weights (evaluation after steps agrees too). */
static void test_replicas(void)
{
    train_data d;
    make_data(&d, 0.1);
    train_opts o = toy_opts(20);
    o.clip = 0; /* compare the raw gradients */
    o.seed = 5;
    float *g1 = NULL;
    size_t n = 0;
    double l1 = 0, v1 = 0;
    const int reps[] = {1, 2, 3, 8};
    for (int i = 0; i < 4; i++) {
        gpt2_model *m = tiny(3);
        train_state s;
        o.replicas = reps[i];
        CHECK(train_init(&s, m, &o) == OK, "%s", err_msg());
        CHECK(s.nrep == reps[i], "%d threads, %d wanted", s.nrep, reps[i]);
        double l;
        CHECK(train_step(&s, &d, &l, NULL, NULL) == OK, "%s", err_msg());
        const float *g = gpt2_grads(m); /* the first step's; the loop below compares the others */
        gpt2_params(m, &n);
        if (i == 0) g1 = malloc(sizeof(float) * n);
        if (i == 0) memcpy(g1, g, sizeof(float) * n);
        for (int k = 0; k < 4; k++) CHECK(train_step(&s, &d, NULL, NULL, NULL) == OK);
        double v;
        CHECK(train_eval(&s, &d, 20, &v, NULL) == OK, "%s", err_msg());
        if (i == 0) {
            l1 = l;
            v1 = v;
        } else {
            CHECK_NEAR(l, l1, 1e-6 * fabs(l1));
            /* 4 Adam steps later the weights differ by rounding only: losses agree closely */
            CHECK_NEAR(v, v1, 1e-4 * fabs(v1));
        }
        train_free(&s);
        gpt2_free(m);
    }
    /* the first step's gradient, split against not */
    for (int i = 1; i < 4; i++) {
        gpt2_model *m = tiny(3);
        train_state s;
        o.replicas = reps[i];
        CHECK(train_init(&s, m, &o) == OK);
        CHECK(train_step(&s, &d, NULL, NULL, NULL) == OK);
        const float *g = gpt2_grads(m);
        double gmax = 0, dmax = 0;
        for (size_t j = 0; j < n; j++) {
            gmax = fmax(gmax, fabs(g1[j]));
            dmax = fmax(dmax, fabs((double)g1[j] - g[j]));
        }
        CHECK(dmax <= 1e-5 * gmax, "%d threads: gradient off by %g (largest %g)", reps[i], dmax,
              gmax);
        /* the copies took the new weights: evaluating through them = through the model alone */
        double va, vb;
        CHECK(train_eval(&s, &d, 20, &va, NULL) == OK);
        train_opts o1 = o;
        o1.replicas = 1;
        train_state s1;
        CHECK(train_init(&s1, m, &o1) == OK);
        CHECK(train_eval(&s1, &d, 20, &vb, NULL) == OK);
        CHECK_NEAR(va, vb, 1e-6 * fabs(vb));
        train_free(&s1);
        train_free(&s);
        gpt2_free(m);
    }
    free(g1);
    train_data_free(&d);
}

/* The train-lm runner on a tiny byte-level tokenizer: events, a stop and a resume that give the
 * uninterrupted run's weights, refused shapes. */
typedef struct { int corpus, ready, eval; volatile int *stop; int stop_at_ready; } events;

static void count_event(int ev, const void *result, void *user)
{
    events *e = user;
    (void)result;
    e->corpus += ev == TRAIN_EV_CORPUS;
    e->ready += ev == TRAIN_EV_READY;
    e->eval += ev == TRAIN_EV_EVAL;
    if (ev == TRAIN_EV_READY && e->stop_at_ready) *e->stop = 1;
}


static void test_train_run(void)
{
    char root[] = "/tmp/saelite_train_run_XXXXXX";
    if (!mkdtemp(root)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char tok[300], corpus[300], a[300], b[300], p[400], q[400];
    snprintf(tok, sizeof tok, "%s/tok", root);
    snprintf(corpus, sizeof corpus, "%s/corpus.txt", root);
    snprintf(a, sizeof a, "%s/a", root);
    snprintf(b, sizeof b, "%s/b", root);
    CHECK(mkdir(tok, 0755) == 0);
    CHECK(fixture_byte_tokenizer(tok) == OK, "%s", err_msg());
    FILE *f;
    f = fopen(corpus, "w");
    for (int d = 0; d < 40; d++)
        fprintf(f, "document %d: the cat sat on the mat and the dog sat on the log.\n\n", d);
    fclose(f);
    train_run_opts o;
    train_run_defaults(&o);
    o.corpus = corpus;
    o.tok_dir = tok;
    o.out = a;
    o.layers = 1;
    o.d_model = 16;
    o.heads = 2;
    o.ctx = 16;
    o.train.batch = 4;
    o.train.steps = 9;
    o.eval_every = 3;
    o.eval_windows = 4;
    o.val_frac = 0.2;
    events e = {0};
    o.on_event = count_event;
    o.user = &e;
    train_run_result r;
    CHECK(train_run(&o, &r) == OK, "%s", err_msg());
    CHECK(e.corpus == 1 && e.ready == 1 && e.eval == 3, "events %d %d %d", e.corpus, e.ready, e.eval);
    CHECK(r.steps_run == 9 && !r.stopped && r.vocab == 256 && r.ndocs == 40 && r.resumed_step == -1);
    CHECK(isfinite(r.val_loss) && r.val_loss < log(256.0), "held-out loss %g", r.val_loss);
    snprintf(p, sizeof p, "%s/vocab.bpe", a);
    CHECK(access(p, R_OK) == 0, "the tokenizer is copied next to the model");
    /* stopped after its first step, then resumed */
    volatile int stop = 0;
    events e2 = {.stop = &stop, .stop_at_ready = 1};
    o.stop = &stop;
    o.user = &e2;
    o.out = b;
    CHECK(train_run(&o, &r) == OK && r.stopped && r.interrupted && r.step == 1, "%s", err_msg());
    stop = 0;
    e2.stop_at_ready = 0;
    o.resume = 1;
    CHECK(train_run(&o, &r) == OK && !r.stopped && r.resumed_step == 1 && r.steps_run == 8, "%s", err_msg());
    snprintf(p, sizeof p, "%s/model.safetensors", a);
    snprintf(q, sizeof q, "%s/model.safetensors", b);
    CHECK(fixture_files_equal(p, q), "stopped + resumed = uninterrupted");
    /* a finished run is not replaced by a run without resume, unless forced */
    o.resume = 0;
    o.out = a;
    o.train.steps = 2;
    o.user = &e;
    CHECK(train_run(&o, &r) == ERR_ARG && strstr(err_msg(), "already holds"), "%s", err_msg());
    snprintf(p, sizeof p, "%s/train_state.safetensors", a);
    struct stat sb;
    CHECK(stat(p, &sb) == 0 && sb.st_size > 0, "the refused run left the state");
    o.force = 1;
    CHECK(train_run(&o, &r) == OK && r.steps_run == 2, "--force: %s", err_msg());
    o.force = 0;
    o.train.steps = 9;
    o.out = b;
    o.resume = 1;
    o.user = &e2;
    /* resuming a finished run trains nothing and reports its model's held-out loss */
    CHECK(train_run(&o, &r) == OK && r.steps_run == 0 && r.step == 9 && isfinite(r.val_loss),
          "finished: %s, val %g", err_msg(), r.val_loss);
    /* resuming on another corpus is refused, naming the data */
    char corpus2[300];
    snprintf(corpus2, sizeof corpus2, "%s/corpus2.txt", root);
    f = fopen(corpus2, "w");
    for (int d = 0; d < 40; d++)
        fprintf(f, "page %d: a bird sang in the tree and the fox ran over the hill.\n\n", d);
    fclose(f);
    o.corpus = corpus2;
    CHECK(train_run(&o, &r) == ERR_ARG && strstr(err_msg(), "trained on other data"), "%s", err_msg());
    o.corpus = corpus;
    o.d_model = 32;
    CHECK(train_run(&o, &r) == ERR_ARG && strstr(err_msg(), "differs"), "resume with another shape: %s", err_msg());
    o.d_model = 15;
    CHECK(train_run(&o, &r) == ERR_ARG, "d_model not a multiple of heads");
    snprintf(p, sizeof p, "rm -rf %s", root);
    if (!harness_fail) CHECK(system(p) == 0);
}

int main(void)
{
    test_train_run();
    test_schedule();
    test_clip();
    test_bad_opts();
    test_adamw();
    test_data();
    test_one_window();
    test_learning_and_resume();
    test_replicas();
    return harness_report("test_train");
}
