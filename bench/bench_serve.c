/* bench_serve - a load test for `saelite serve`: C concurrent keep-alive clients send N
 * requests in all, round-robin over the given paths (GET PATH, or "POST PATH BODY" for a JSON
 * body), and report requests/s, p50/p95/p99
 * latency and errors (a status other than 200, or a broken connection).
 * Usage: bench_serve HOST PORT CLIENTS N PATH [PATH...]   (run by bench/bench_serve.sh)
 * Prints one line: "<label> clients C requests N: R req/s, p50 X ms, p95 Y ms, p99 Z ms, E errors"
 * with label = the first path. Exit 1 when any request failed. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct sockaddr_in addr;
static char **paths;
static int npaths, total;
static int next_req; /* atomic */
static double *lat;  /* [total] seconds */
static int errors;   /* atomic */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (fd < 0) return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One request on fd; 0 for a 200 with its whole body read, -1 otherwise. Host is a loopback
 * name: serve refuses any other (DNS rebinding). */
static int one(int fd, const char *path, char *buf, size_t cap)
{
    char rq[8192];
    int n;
    if (!strncmp(path, "POST ", 5)) { /* "POST PATH BODY" */
        const char *p = path + 5, *sp = strchr(p, ' ');
        if (!sp) return -1;
        n = snprintf(rq, sizeof rq, "POST %.*s HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                     "application/json\r\nContent-Length: %zu\r\n\r\n%s", (int)(sp - p), p,
                     strlen(sp + 1), sp + 1);
    } else {
        n = snprintf(rq, sizeof rq, "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", path);
    }
    if (n <= 0 || (size_t)n >= sizeof rq || write(fd, rq, (size_t)n) != n) return -1;
    size_t got = 0;
    char *end = NULL;
    while (!end) {
        if (got + 1 >= cap) return -1;
        ssize_t r = read(fd, buf + got, cap - 1 - got);
        if (r <= 0) return -1;
        got += (size_t)r;
        buf[got] = 0;
        end = strstr(buf, "\r\n\r\n");
    }
    int status = atoi(buf + 9);
    char *cl = strcasestr(buf, "\r\ncontent-length:");
    if (!cl || cl > end) return -1;
    size_t body = strtoul(cl + 17, NULL, 10), have = got - (size_t)(end + 4 - buf);
    while (have < body) {
        ssize_t r = read(fd, buf, cap);
        if (r <= 0) return -1;
        have += (size_t)r;
    }
    return status == 200 && have == body ? 0 : -1;
}

static void *client(void *u)
{
    (void)u;
    size_t cap = 1 << 22;
    char *buf = malloc(cap);
    int fd = dial();
    for (;;) {
        int i = __atomic_fetch_add(&next_req, 1, __ATOMIC_RELAXED);
        if (i >= total) break;
        double t0 = now();
        int rc = fd < 0 ? -1 : one(fd, paths[i % npaths], buf, cap);
        lat[i] = now() - t0;
        if (rc) {
            __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
            if (fd >= 0) close(fd);
            fd = dial();
        }
    }
    if (fd >= 0) close(fd);
    free(buf);
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: bench_serve HOST PORT CLIENTS N PATH [PATH...]\n");
        return 2;
    }
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)atoi(argv[2]));
    if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1) return 2;
    int nc = atoi(argv[3]);
    total = atoi(argv[4]);
    paths = argv + 5;
    npaths = argc - 5;
    if (nc < 1 || total < 1) return 2;
    lat = calloc((size_t)total, sizeof *lat);
    pthread_t *th = calloc((size_t)nc, sizeof *th);
    double t0 = now();
    for (int i = 0; i < nc; i++) pthread_create(&th[i], NULL, client, NULL);
    for (int i = 0; i < nc; i++) pthread_join(th[i], NULL);
    double secs = now() - t0;
    qsort(lat, (size_t)total, sizeof *lat, cmp);
    printf("%.60s clients %d requests %d: %.0f req/s, p50 %.2f ms, p95 %.2f ms, p99 %.2f ms, %d errors\n",
           paths[0], nc, total, total / secs, 1e3 * lat[total / 2], 1e3 * lat[(int)(total * 0.95)],
           1e3 * lat[(int)(total * 0.99)], errors);
    free(lat);
    free(th);
    return errors ? 1 : 0;
}
