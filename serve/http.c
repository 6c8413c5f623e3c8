/* http.c - srv_run: GNU libmicrohttpd feeding srv_handle (serve.h), and srv_ctx_open.
 *
 * libmicrohttpd parses HTTP; the request target it receives is taken raw (the URI log callback)
 * and split by srv_parse_target, so the fuzzed parser is the one in use. Each connection's state
 * (its target and POST body) lives in a conn struct from the URI callback to the completion
 * callback. Each TCP connection is also in a registry (sock, below) from libmicrohttpd's
 * connection-started to its connection-closed notice, so srv_run can shut down one that is
 * past the request deadline. */
#include <arpa/inet.h>
#include <limits.h>
#include <stdlib.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/mem.h"
#include "common/progress.h" /* now_seconds */
#include "serve/serve.h"
#include "serve/serve_internal.h"
#include "sae/sae.h"
#include "sae/sae_run.h"
#include "store/store.h"
#include "store/store_sae.h"
#include "store/store_serve.h"

void srv_defaults(srv_opts *o)
{
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8080;
    o->threads = 256;
    o->query_timeout = STORE_SRV_QUERY_MS / 1000.0;
    o->request_deadline = SRV_DEADLINE_S;
}

/* The newest analysed SAE whose directory exists (for --model without --sae). */
typedef struct { char dir[1024]; int64_t id; } first_sae;
static int dicts_cb(void *user, int nc, const char *const *names, const store_val *v)
{
    first_sae *f = user;
    struct stat st;
    if (nc > 3 && v[1].type == STORE_Q_TEXT && !strcmp(v[1].s, "sae") && v[3].type == STORE_Q_TEXT &&
        stat(v[3].s, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(f->dir, sizeof f->dir, "%s", v[3].s);
        f->id = v[0].i;
    }
    return 0;
}

/* The analysed SAE directories (ana_dicts.name of kind 'sae') that are dir by realpath: the
 * name analyze recorded is the --sae string it was given, so "--sae ./runs/demo/sae", an
 * absolute path or a symlink to it matched nothing by string, and serve ran without live
 * activations or steering, silently (an audit). Also lists the analysed names for the warning. */
typedef struct {
    char want[PATH_MAX];
    int64_t id;
    char names[400];
    const char *hook; /* the loaded SAE's hook and width: a recorded relative name resolves */
    int64_t d_sae;    /* against serve's directory, not analyze's, so it must fit (a review) */
} sae_match;
static int match_cb(void *user, int nc, const char *const *names, const store_val *v)
{
    (void)names;
    sae_match *m = user;
    char rp[PATH_MAX];
    if (nc < 4 || v[1].type != STORE_Q_TEXT || strcmp(v[1].s, "sae") || v[3].type != STORE_Q_TEXT)
        return 0;
    size_t n = strlen(m->names);
    char one[sizeof m->names];
    snprintf(one, sizeof one, "%s%s (dictionary %lld)", n ? ", " : "", v[3].s, (long long)v[0].i);
    if (n + strlen(one) < sizeof m->names - 4) memcpy(m->names + n, one, strlen(one) + 1);
    else if (n + 6 < sizeof m->names && (n < 3 || strcmp(m->names + n - 3, "...")))
        strcpy(m->names + n, n ? ", ..." : "...");
    int fits = nc > 6 && v[4].type == STORE_Q_TEXT && (!m->hook || !strcmp(v[4].s, m->hook)) &&
               v[6].type == STORE_Q_INT && (m->d_sae <= 0 || v[6].i == m->d_sae);
    if (m->want[0] && fits && realpath(v[3].s, rp) && !strcmp(rp, m->want)) m->id = v[0].i; /* newest wins */
    return 0;
}

int srv_ctx_open(srv_ctx **out, const srv_opts *o, srv_result *res)
{
    *out = NULL;
    srv_ctx *c = mem_calloc(1, sizeof *c);
    if (!c) return err_set(ERR_NOMEM, "out of memory");
    c->test_dict = -1;
    if (res) res->test_dict = -1;
    int rc = store_srv_open(&c->st, o->db, (int)(o->query_timeout * 1000 + 0.5),
                            res ? &res->index_seconds : NULL);
    if (!rc && res) res->fts5 = store_srv_fts5(c->st);
    if (!rc && res) res->slow_acts = store_srv_slow_acts(c->st);
    if (!rc && o->model_dir) {
        char dir[4096] = "";
        int64_t id = -1;
        store_sae_entry reg;
        if (o->sae) { /* a directory, or a registry id: its row, checked against the SAE below */
            int by_id = 0;
            if (sae_registry_arg_is_id(o->sae)) { /* the registry only for an id */
                store *s = NULL;
                rc = store_open(&s, o->db, STORE_READONLY);
                if (!rc) rc = sae_registry_arg(s, o->db, o->sae, &reg, &by_id);
                store_close(s);
            }
            if (by_id) id = reg.id;
            snprintf(dir, sizeof dir, "%s", by_id ? reg.dir : o->sae);
        } else {
            first_sae f = {"", -1};
            rc = store_srv_query(c->st, STORE_SRV_DICTS, NULL, 0, dicts_cb, &f);
            if (!rc && !f.dir[0])
                rc = err_set(ERR_NOTFOUND, "%s: no analysed SAE whose directory exists here; give "
                             "--sae DIR", o->db);
            snprintf(dir, sizeof dir, "%s", f.dir);
        }
        if (!rc) rc = srv_model_open(&c->model, o->model_dir, dir);
        /* a directory that now holds another SAE must not steer under the row's analysis */
        if (!rc && id >= 0) rc = sae_check_registered(srv_model_sae_weights(c->model), dir, &reg, o->db);
        if (!rc) {
            store_val p[] = {{.type = STORE_Q_TEXT, .s = dir, .n = strlen(dir)},
                             {.type = STORE_Q_INT, .i = id}};
            rc = store_srv_query(c->st, STORE_SRV_DICT_BY_SAE, p, 2, srv_int_cb, &c->test_dict);
        }
        if (!rc && c->test_dict < 0) {
            const sae_model *sm = srv_model_sae_weights(c->model);
            sae_match m = {"", -1, "", sm ? sm->cfg.hook_name : NULL, sm ? sm->cfg.d_sae : 0};
            if (m.hook && !m.hook[0]) m.hook = NULL;
            if (!realpath(dir, m.want)) m.want[0] = 0;
            rc = store_srv_query(c->st, STORE_SRV_DICTS, NULL, 0, match_cb, &m);
            c->test_dict = m.id;
            if (res) snprintf(res->analysed, sizeof res->analysed, "%s", m.names[0] ? m.names : "none");
        }
        /* the SAE's weights decide: an analysis of them under another name (analyze ran from
           another directory), none when the name's analysis is of other weights (retrained in
           place: its links and steering would be another SAE's) */
        char wsum[17], stale[17] = "";
        int64_t named = c->test_dict;
        if (!rc && sae_weights_checksum(dir, wsum) == OK) {
            int64_t wid;
            const sae_model *sm = srv_model_sae_weights(c->model);
            const char *hk = sm && sm->cfg.hook_name[0] ? sm->cfg.hook_name : NULL;
            rc = store_srv_dict_by_weights(c->st, wsum, hk, sm ? sm->cfg.d_sae : 0, named, &wid, stale);
            if (!rc) c->test_dict = wid;
        }
        if (!rc) err_clear();
        if (res && stale[0])
            snprintf(res->stale, sizeof res->stale, "its analysis (dictionary %lld) was made from "
                     "other weights (recorded: %s; its sae_weights.safetensors now: %s)",
                     (long long)named, stale, wsum);
        if (res) {
            res->test_dict = c->test_dict;
            snprintf(res->test_sae, sizeof res->test_sae, "%s", dir);
        }
    }
    if (!rc && o->report_dir) {
        int n = 0;
        rc = srv_report_open(&c->report, o->report_dir, c->st, &n);
        if (!rc && res) res->dashboards = n;
    }
    if (rc) {
        srv_ctx_close(c);
        return rc;
    }
    *out = c;
    return OK;
}

void srv_ctx_close(srv_ctx *c)
{
    if (!c) return;
    store_srv_close(c->st);
    srv_model_close(c->model);
    srv_report_close(c->report);
    mem_free(c);
}

/* ---- libmicrohttpd ------------------------------------------------------------------------ */
typedef struct server server;

/* One TCP connection (libmicrohttpd's socket context). The idle timeout closes a connection
 * only after 30 s without a byte, so a client sending a byte every few seconds (or reading the
 * answer that slowly) kept its connection, and --threads of them filled the connection limit.
 * The deadline bounds the time a client has for each request: receiving it (from the
 * connection's start or the previous request's completion until the handler has the whole
 * request) and, counted afresh, sending its answer (from the handler's return to the request's
 * completion). The handler's own time is not counted: its work has limits of its own (the
 * console's 2 s, --query-timeout, steering's 10 s). All fields but fd under server.mu. */
typedef struct sock {
    int fd;             /* the connection's socket, set before it is listed */
    double since;       /* now_seconds() when the phase that counts began */
    int running;        /* the handler runs: the deadline waits for it */
    int cut;            /* shut down already */
    struct sock *prev, *next;
} sock;

typedef struct {
    char *target;   /* raw request target (mem_strdup) */
    char *body;     /* request body so far (any method: srv_handle refuses a GET's) */
    size_t n;
    int too_big;    /* body above SRV_MAX_BODY: the rest is dropped, the answer is 413 */
    int seen;       /* the first call (headers only) has happened */
    server *sv;     /* counted in sv->inflight from its headers to its completion */
    sock *s;        /* its connection (NULL: not listed, out of memory) */
} conn;

struct server {
    srv_ctx *ctx;
    volatile int64_t requests;
    struct in_addr bind; /* the address listened on */
    int inflight;        /* requests past their headers and not yet answered (atomic) */
    int stopping;        /* set once: new requests get 503 while those in flight finish */
    double deadline;     /* seconds (srv_opts.request_deadline) */
    pthread_mutex_t mu;  /* guards socks and every sock's phase, and cut */
    sock *socks;         /* the open connections */
    int64_t cut;         /* connections shut down at the deadline */
};

/* MHD_OPTION_NOTIFY_CONNECTION. STARTED comes from the listening thread before the
 * connection's own thread exists; CLOSED after that thread was joined and before the socket is
 * closed (libmicrohttpd's MHD_cleanup_connections: join, notify CLOSED, then
 * MHD_socket_close_chk_; the connection thread itself only shuts down SHUT_WR). So a listed fd
 * is always this connection's open socket, never a number reused by a later one. */
static void on_conn(void *cls, struct MHD_Connection *con, void **socket_context,
                    enum MHD_ConnectionNotificationCode toe)
{
    server *sv = cls;
    sock *s = *socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!ci || !(s = mem_calloc(1, sizeof *s))) return; /* served, without a deadline */
        s->fd = ci->connect_fd;
        pthread_mutex_lock(&sv->mu);
        s->since = now_seconds();
        s->next = sv->socks;
        if (sv->socks) sv->socks->prev = s;
        sv->socks = s;
        pthread_mutex_unlock(&sv->mu);
        *socket_context = s;
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && s) { /* CLOSED without STARTED: NULL */
        pthread_mutex_lock(&sv->mu);
        if (s->prev) s->prev->next = s->next;
        else sv->socks = s->next;
        if (s->next) s->next->prev = s->prev;
        pthread_mutex_unlock(&sv->mu);
        mem_free(s);
        *socket_context = NULL;
    }
}

/* A new phase of connection s: running 1 while the handler runs (not counted), 0 when the
 * client's time starts again (counted from now). */
static void sock_phase(server *sv, sock *s, int running)
{
    if (!s) return;
    pthread_mutex_lock(&sv->mu);
    s->running = running;
    s->since = now_seconds();
    pthread_mutex_unlock(&sv->mu);
}

/* Shuts down every connection past the deadline; its own thread then sees the socket end and
 * closes it (never close() here: the fd is libmicrohttpd's until CLOSED). */
static void cut_late(server *sv)
{
    double now = now_seconds();
    pthread_mutex_lock(&sv->mu);
    for (sock *s = sv->socks; s; s = s->next)
        if (!s->running && !s->cut && now - s->since >= sv->deadline) {
            shutdown(s->fd, SHUT_RDWR);
            s->cut = 1;
            sv->cut++;
        }
    pthread_mutex_unlock(&sv->mu);
}

/* ---- requests refused on their headers ------------------------------------------------------ */
typedef struct { const char *name; int n; const char *first; } hdr_count;
static enum MHD_Result count_hdr(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
    (void)kind;
    hdr_count *h = cls;
    if (key && !strcasecmp(key, h->name) && h->n++ == 0) h->first = value ? value : "";
    return MHD_YES;
}

/* How many times header name came, and its first value (NULL when absent). */
static int header(struct MHD_Connection *con, const char *name, const char **value)
{
    hdr_count h = {name, 0, NULL};
    MHD_get_connection_values(con, MHD_HEADER_KIND, count_hdr, &h);
    *value = h.first;
    return h.n;
}

/* What Host (as "name" or "name:port", "[v6]" or "[v6]:port") names, without DNS: a loopback
 * name or address (HOST_LOOPBACK), the address listened on or, listening on 0.0.0.0, any IPv4
 * address (HOST_BOUND), or anything else (HOST_OTHER: a DNS name other than localhost, so a page
 * whose name an attacker rebinds to 127.0.0.1 cannot read the API). *port_ok: what follows the
 * name is nothing or ":digits" (any port: an ssh tunnel's local port differs from ours). */
enum { HOST_OTHER, HOST_LOOPBACK, HOST_BOUND };
static int host_class(const char *host, struct in_addr bind, int *port_ok)
{
    char name[64];
    const char *end;
    *port_ok = 0;
    if (host[0] == '[') {
        end = strchr(host, ']');
        if (!end || (size_t)(end - host) - 1 >= sizeof name) return HOST_OTHER;
        memcpy(name, host + 1, (size_t)(end - host) - 1);
        name[end - host - 1] = 0;
        end++;
    } else {
        end = host + strcspn(host, ":");
        if ((size_t)(end - host) >= sizeof name) return HOST_OTHER;
        memcpy(name, host, (size_t)(end - host));
        name[end - host] = 0;
    }
    *port_ok = 1;
    if (*end == ':')
        for (end++; *end; end++)
            if (*end < '0' || *end > '9') *port_ok = 0;
    if (*end) *port_ok = 0;
    struct in_addr a;
    struct in6_addr a6;
    if (host[0] == '[')
        return inet_pton(AF_INET6, name, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6) ? HOST_LOOPBACK : HOST_OTHER;
    if (!strcasecmp(name, "localhost")) return HOST_LOOPBACK;
    if (inet_pton(AF_INET, name, &a) != 1) return HOST_OTHER;
    if ((ntohl(a.s_addr) >> 24) == 127) return HOST_LOOPBACK;
    return a.s_addr == bind.s_addr || bind.s_addr == INADDR_ANY ? HOST_BOUND : HOST_OTHER;
}

/* 1 when the browser says another site made the request (Sec-Fetch-Site, sent by Chromium,
 * Firefox and Safari on every request; absent from curl, "none" for a typed URL). */
static int other_site(const char *sfs)
{
    return sfs && (!strcasecmp(sfs, "cross-site") || !strcasecmp(sfs, "same-site"));
}

/* 1 when the raw request target's path is under /api/ or /report/ (percent-decoded first, so
 * /%61pi/ counts too; a malformed target is left to srv_parse_target's 400); 2 when it is one
 * of the two GET forms that run something, /api/sql and /api/test. */
static int api_target(const char *target)
{
    char buf[SRV_MAX_URL + 1];
    const char *path;
    srv_arg args[SRV_MAX_ARGS];
    int n;
    if (!target || strlen(target) > SRV_MAX_URL) return 0;
    strcpy(buf, target);
    if (srv_parse_target(buf, &path, args, &n)) return 0;
    if (!strcmp(path, "/api/sql") || !strcmp(path, "/api/test")) return 2;
    return !strncmp(path, "/api/", 5) || !strncmp(path, "/report/", 8);
}

/* A refusal the headers decide (1 and *r), before any body is read: a Host that is not this
 * server (421), an Origin other than the request's own, i.e. a cross-site page (403), an API or
 * dashboard request another site made (Sec-Fetch-Site cross-site or same-site: 403), Host,
 * Origin, Sec-Fetch-Site, Content-Length or Transfer-Encoding given twice, Content-Length
 * together with Transfer-Encoding (400), a transfer coding other than chunked (501), or a body
 * declared above SRV_MAX_BODY (413, unread). The caller closes the connection after each. */
static int refuse_early(const server *sv, struct MHD_Connection *con, const char *method,
                        const char *target, srv_response *r)
{
    const char *host, *origin, *clen, *sfs, *te;
    int nh = header(con, MHD_HTTP_HEADER_HOST, &host), no = header(con, "Origin", &origin),
        nc = header(con, MHD_HTTP_HEADER_CONTENT_LENGTH, &clen),
        ns = header(con, "Sec-Fetch-Site", &sfs),
        nt = header(con, MHD_HTTP_HEADER_TRANSFER_ENCODING, &te);
    if (nh > 1 || no > 1 || nc > 1 || ns > 1 || nt > 1)
        return !srv_error(r, 400, "header %s given twice", nh > 1 ? "Host" : no > 1 ? "Origin"
                          : ns > 1 ? "Sec-Fetch-Site" : nc > 1 ? "Content-Length"
                          : "Transfer-Encoding");
    /* Both: libmicrohttpd reads the body as chunked and ignores the length, a proxy in front
       may do the opposite (request smuggling); RFC 9112 6.1 says refuse and close. */
    if (te && clen)
        return !srv_error(r, 400, "Content-Length and Transfer-Encoding given together");
    /* libmicrohttpd knows only "chunked": any other coding ("gzip", "identity, chunked") it
       takes as a body that ends when the client closes, and never calls back, so the client
       waited for the request deadline without an answer (a review). RFC 9112 6.1: 501. */
    if (te && strcasecmp(te, "chunked"))
        return !srv_error(r, 501, "Transfer-Encoding '%.40s' not implemented (only chunked)", te);
    /* A browser sends no Origin on a no-cors GET (<img src>, <script src>, a link), so the
       Origin check below let another site's page run console SQL and the model through
       GET /api/sql?q= and /api/test?text= (an audit kept the console busy that way). The
       page's own requests are same-origin; only navigations to a page may come from
       elsewhere. */
    int api = api_target(target), port_ok = 0;
    /* loopback names: the addresses a browser counts as potentially trustworthy over http, the
       only ones it sends Sec-Fetch-Site to */
    int hclass = host ? host_class(host, sv->bind, &port_ok) : HOST_OTHER;
    if (other_site(sfs) && api)
        return !srv_error(r, 403, "request from another site (Sec-Fetch-Site: %.20s) refused: "
                          "the API answers only this server's own page", sfs);
    /* ... but a browser sends Sec-Fetch-Site only to loopback names (and https): at a LAN
       address (--host 0.0.0.0) another site's <img src=.../api/sql?q=...> came without it (a
       review). There the two GET forms that run something are refused; a POST carries an
       Origin, which the check below compares. */
    if (api == 2 && method && (!strcmp(method, "GET") || !strcmp(method, "HEAD")) &&
        host && hclass != HOST_LOOPBACK)
        return !srv_error(r, 403, "GET /api/sql and /api/test answer only at a loopback address "
                          "(a browser tells no other site's request apart elsewhere): POST a JSON "
                          "body");
    /* HTTP/1.1 requires Host (libmicrohttpd, strict, refuses its absence); HTTP/1.0 may omit it */
    if (host && (hclass == HOST_OTHER || !port_ok))
        return !srv_error(r, 421, "Host '%.80s' is not this server (use http://127.0.0.1:PORT/ or "
                          "http://localhost:PORT/)", host);
    if (origin && (!host || strncasecmp(origin, "http://", 7) || strcasecmp(origin + 7, host)))
        return !srv_error(r, 403, "cross-origin request from '%.80s' refused", origin);
    int64_t n;
    if (clen && !srv_parse_int(clen, 0, INT64_MAX, &n))
        return !srv_error(r, 400, "bad Content-Length '%.40s'", clen);
    if (clen && n > SRV_MAX_BODY)
        return !srv_error(r, 413, "request body above %d bytes", SRV_MAX_BODY);
    return 0;
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *con)
{
    (void)cls;
    conn *k = mem_calloc(1, sizeof *k);
    if (!k) return NULL;
    k->target = mem_strdup(uri ? uri : "");
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(con, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    k->s = ci ? ci->socket_context : NULL;
    return k;
}

static void on_done(void *cls, struct MHD_Connection *con, void **req_cls,
                    enum MHD_RequestTerminationCode toe)
{
    (void)con; (void)toe;
    conn *k = *req_cls;
    if (!k) return;
    sock_phase(cls, k->s, 0); /* answered: the next request's time starts */
    if (k->sv) __atomic_sub_fetch(&k->sv->inflight, 1, __ATOMIC_RELEASE);
    mem_free(k->target);
    mem_free(k->body);
    mem_free(k);
    *req_cls = NULL;
}

/* xsite: the page was opened from another site; it is told so (a Server-Timing entry, which
 * its script reads from the navigation's timing) and then does not run the SQL or text its URL
 * carries until the user presses Run (a link elsewhere to /sql?sql=... ran it). */
static enum MHD_Result send_resp(struct MHD_Connection *con, const srv_response *r, int xsite,
                                 int close)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        r->len, (void *)r->data, r->owned ? MHD_RESPMEM_MUST_COPY : MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", r->type ? r->type : "application/octet-stream");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Content-Security-Policy",
                            "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                            "script-src 'self'; connect-src 'self'; frame-ancestors 'none'");
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    if (r->allow) MHD_add_response_header(resp, "Allow", r->allow);
    /* close: libmicrohttpd closes the connection after a response that says so */
    if (close) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    if (xsite && r->type && !strncmp(r->type, "text/html", 9))
        MHD_add_response_header(resp, "Server-Timing", "xsite");
    enum MHD_Result ret = MHD_queue_response(con, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *con, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **req_cls)
{
    (void)url; (void)version;
    server *sv = cls;
    conn *k = *req_cls;
    if (!k) return MHD_NO; /* out of memory in on_uri */
    if (!k->seen) {
        /* headers only: answer on a later call, once any body is read (a response queued now
           makes libmicrohttpd close the connection instead of keeping it alive, which is what
           a refusal wants) */
        k->seen = 1;
        k->sv = sv;
        __atomic_add_fetch(&sv->inflight, 1, __ATOMIC_ACQ_REL);
        srv_response r;
        if (__atomic_load_n(&sv->stopping, __ATOMIC_ACQUIRE))
            srv_error(&r, 503, "serve is stopping");
        else if (!refuse_early(sv, con, method, k->target, &r))
            return MHD_YES;
        __atomic_add_fetch(&sv->requests, 1, __ATOMIC_RELAXED);
        /* closed after it: the body is unread, and its framing may be what was refused, so
           whatever follows on the socket cannot be trusted as the next request (a pipelined
           GET after a Content-Length + chunked POST was answered; RFC 9112 6.1) */
        enum MHD_Result ret = send_resp(con, &r, 0, 1);
        srv_response_free(&r);
        sock_phase(sv, k->s, 0); /* sending the refusal */
        return ret;
    }
    if (*upload_size) {
        /* body chunks arrive before the final call; every method's body is read (one left
           unread makes libmicrohttpd drop the connection without an answer) */
        if (!k->too_big && k->n + *upload_size <= SRV_MAX_BODY) {
            char *nb = mem_realloc(k->body, k->n + *upload_size + 1);
            if (!nb) return MHD_NO;
            memcpy(nb + k->n, upload_data, *upload_size);
            k->body = nb;
            k->n += *upload_size;
            k->body[k->n] = 0;
        } else {
            k->too_big = 1;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    srv_response r;
    srv_arg args[SRV_MAX_ARGS];
    int nargs = 0;
    const char *path = NULL;
    int rc;
    sock_phase(sv, k->s, 1); /* the whole request is here: the handler's time is its own */
    if (k->too_big) rc = srv_error(&r, 413, "request body above %d bytes", SRV_MAX_BODY);
    else if (srv_parse_target(k->target, &path, args, &nargs))
        rc = srv_error(&r, 400, "%s", err_msg());
    else {
        srv_request rq = {method, path, args, nargs, k->body, k->n};
        rc = srv_handle(sv->ctx, &rq, &r);
    }
    if (rc) {
        sock_phase(sv, k->s, 0);
        return MHD_NO;
    }
    __atomic_add_fetch(&sv->requests, 1, __ATOMIC_RELAXED);
    const char *sfs;
    header(con, "Sec-Fetch-Site", &sfs);
    enum MHD_Result ret = send_resp(con, &r, other_site(sfs), 0);
    srv_response_free(&r);
    sock_phase(sv, k->s, 0); /* sending the answer */
    return ret;
}

int srv_run(const srv_opts *o, srv_result *res)
{
    memset(res, 0, sizeof *res);
    if (!o->db) return err_set(ERR_ARG, "no database given");
    if (o->port < 0 || o->port > 65535) return err_set(ERR_ARG, "port %d out of range", o->port);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    const char *host = o->host ? o->host : "127.0.0.1";
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        return err_set(ERR_ARG, "--host must be an IPv4 address, got '%s'", host);
    if (!(o->request_deadline > 0))
        return err_set(ERR_ARG, "request deadline %g s is not positive", o->request_deadline);
    server sv = {.bind = sa.sin_addr, .deadline = o->request_deadline};
    int rc = srv_ctx_open(&sv.ctx, o, res);
    if (rc) return rc;
    pthread_mutex_init(&sv.mu, NULL);
    struct MHD_Daemon *d = MHD_start_daemon(
        /* a thread per connection: a slow handler (a steering run, a console query) holds only
           its own connection's thread; with a pool of 4, each thread's other connections, and
           new ones once all 4 were busy, waited behind it (/app.js 1.8 s behind 6 steering
           requests here, 9.4 s in an audit); the connection limit bounds the threads */
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
            MHD_USE_ITC, /* MHD_quiesce_daemon needs it in this mode */
        0, NULL,
        NULL, on_request, &sv,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, on_done, &sv,
        MHD_OPTION_NOTIFY_CONNECTION, on_conn, &sv,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)(o->threads > 0 ? o->threads : 256),
        /* idle seconds; a slow client that keeps sending or reading is cut by cut_late */
        MHD_OPTION_CONNECTION_TIMEOUT, 30u,
        /* RFC 9112's MUSTs for a server: an HTTP/1.1 request without Host, "Host :" with a space
           and folded header lines are 400 (the default accepted all three, and a request with
           no Host passed the Host check below; an audit) */
        MHD_OPTION_STRICT_FOR_CLIENT, (int)1,
        MHD_OPTION_END);
    if (!d) {
        pthread_mutex_destroy(&sv.mu);
        srv_ctx_close(sv.ctx);
        return err_set(ERR_IO, "cannot listen on %s:%d (in use? try --port)", host, o->port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    res->port = info ? info->port : o->port;
    char url[128];
    snprintf(url, sizeof url, "http://%s:%d/", host, res->port);
    if (o->on_ready) o->on_ready(o->user, url, res);
    struct timespec tick = {0, 100 * 1000000L};
    while (!(o->stop && *o->stop)) {
        nanosleep(&tick, NULL);
        cut_late(&sv);
    }
    /* Requests in flight get their answers (queries stopped now rather than at their time
       limit answer 503, a steering run ends within its own 10 s limit); new ones get 503.
       MHD_stop_daemon alone closed every socket first, so those answers were lost: "Empty
       reply from server" while serve reported them served (an audit). Idle keep-alive
       connections hold no request and do not delay the stop; a request whose body comes (or
       whose answer is read) slowly is cut at its deadline, not waited for the whole 12 s. */
    __atomic_store_n(&sv.stopping, 1, __ATOMIC_RELEASE);
    store_srv_stop(sv.ctx->st);
    MHD_quiesce_daemon(d);
    struct timespec wait = {0, 10 * 1000000L};
    for (double t0 = now_seconds();
         __atomic_load_n(&sv.inflight, __ATOMIC_ACQUIRE) && now_seconds() - t0 < SRV_STOP_WAIT_S;) {
        nanosleep(&wait, NULL);
        cut_late(&sv);
    }
    MHD_stop_daemon(d); /* every connection's CLOSED has come: the registry is empty */
    res->requests = sv.requests;
    res->cut = sv.cut;
    pthread_mutex_destroy(&sv.mu);
    srv_ctx_close(sv.ctx);
    return OK;
}
