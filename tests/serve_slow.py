#!/usr/bin/env python3
"""serve_slow.py - slow HTTP clients against `saelite serve`, for tests/test_serve.sh (the
request deadline). Each mode prints one line per connection; T is seconds since connecting.

Usage: serve_slow.py PORT MODE [N] [GIVEUP]
  headers     a request's headers, one byte per 0.3 s: "cut T" when the server closed the
              connection, "open T" when it was still open after GIVEUP s (default 8)
  chunked     POST /api/sql with a chunked body, one 1-byte chunk per 0.3 s: the same
  noread      GET about 8 MB from the SQL console with a 4 KiB receive buffer and read nothing:
              "cut T" when the server's side left ESTABLISHED (/proc/net/tcp), or "open T";
              then drained: "got BYTES of LENGTH"
  keepalive   N GET /api/info on one connection, 0.6 s apart: "ok N T" or "error I WHAT"
  hold        N "headers" connections at once; "ready" once all N are connected
"""
import select
import socket
import sys
import threading
import time
import urllib.parse

PORT = int(sys.argv[1])
MODE = sys.argv[2]
N = int(sys.argv[3]) if len(sys.argv) > 3 else 1
GIVEUP = float(sys.argv[4]) if len(sys.argv) > 4 else 8.0
HOST = f"127.0.0.1:{PORT}"
out_lock = threading.Lock()


def say(line):
    with out_lock:
        print(line, flush=True)


def closed(s):
    """True when the server ended the connection (EOF or reset); any bytes it sent are read."""
    try:
        r, _, _ = select.select([s], [], [], 0)
        if not r:
            return False
        while True:
            if not s.recv(65536):
                return True
            r, _, _ = select.select([s], [], [], 0.05)
            if not r:
                return False
    except OSError:
        return True


def trickle(s, data, t0):
    """Sends data on s one byte per 0.3 s until the server ends the connection or GIVEUP."""
    i = 0
    try:
        while time.monotonic() - t0 < GIVEUP:
            try:
                s.sendall(data[i % len(data):i % len(data) + 1])
            except OSError:
                return "cut %.2f" % (time.monotonic() - t0)
            i += 1
            end = time.monotonic() + 0.3
            while time.monotonic() < end:
                r, _, _ = select.select([s], [], [], max(0, end - time.monotonic()))
                if r and closed(s):
                    return "cut %.2f" % (time.monotonic() - t0)
        return "open %.2f" % (time.monotonic() - t0)
    finally:
        s.close()


SLOW_HEADERS = (f"GET /api/info HTTP/1.1\r\nHost: {HOST}\r\nX-Slow: ").encode() + b"a" * 4000
CHUNKED = (f"POST /api/sql HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
           "Transfer-Encoding: chunked\r\n\r\n").encode()


def server_side_established(client_port):
    """True while serve's socket of the connection from client_port is ESTABLISHED."""
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(name).read().split("\n")[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) < 4:
                continue
            lport = int(f[1].rsplit(":", 1)[1], 16)
            rport = int(f[2].rsplit(":", 1)[1], 16)
            if lport == PORT and rport == client_port:
                return f[3] == "01"
    return False


def read_response(s, buf):
    """One response from s (buf: bytes already read): (status, body, rest)."""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise ConnectionError("closed in the headers")
        buf += d
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for h in lines[1:]:
        k, _, v = h.partition(":")
        if k.strip().lower() == "content-length":
            length = int(v.strip())
    while len(buf) < length:
        d = s.recv(65536)
        if not d:
            raise ConnectionError("closed in the body")
        buf += d
    return status, buf[:length], buf[length:]


if MODE in ("headers", "chunked"):
    if MODE == "headers":
        s = socket.create_connection(("127.0.0.1", PORT))
        say(trickle(s, SLOW_HEADERS, time.monotonic()))
    else:
        s = socket.create_connection(("127.0.0.1", PORT))
        t0 = time.monotonic()
        s.sendall(CHUNKED)
        i, res = 0, None
        while time.monotonic() - t0 < GIVEUP and res is None:
            try:
                s.sendall(b"1\r\n \r\n")
            except OSError:
                res = "cut %.2f" % (time.monotonic() - t0)
                break
            end = time.monotonic() + 0.3
            while time.monotonic() < end and res is None:
                r, _, _ = select.select([s], [], [], max(0, end - time.monotonic()))
                if r and closed(s):
                    res = "cut %.2f" % (time.monotonic() - t0)
        say(res or "open %.2f" % (time.monotonic() - t0))
elif MODE == "noread":
    sql = ("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r WHERE x < 1000) "
           "SELECT printf('%.*c', 2000, 'a'), printf('%.*c', 2000, 'b'), printf('%.*c', 2000, 'c'), "
           "printf('%.*c', 2000, 'd') FROM r")
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", PORT))
    cport = s.getsockname()[1]
    t0 = time.monotonic()
    s.sendall(f"GET /api/sql?q={urllib.parse.quote(sql)} HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
    res = None
    while time.monotonic() - t0 < GIVEUP:
        if not server_side_established(cport):
            res = "cut %.2f" % (time.monotonic() - t0)
            break
        time.sleep(0.05)
    say(res or "open %.2f" % (time.monotonic() - t0))
    buf, length = b"", None
    s.settimeout(3)
    try:
        while True:
            d = s.recv(1 << 20)
            if not d:
                break
            buf += d
            if length is None and b"\r\n\r\n" in buf:
                for h in buf.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")[1:]:
                    k, _, v = h.partition(":")
                    if k.strip().lower() == "content-length":
                        length = int(v.strip())
            if length is not None and len(buf.split(b"\r\n\r\n", 1)[1]) >= length:
                break
    except OSError:
        pass
    body = buf.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in buf else b""
    say("got %d of %s" % (len(body), length))
elif MODE == "keepalive":
    s = socket.create_connection(("127.0.0.1", PORT))
    t0 = time.monotonic()
    rest = b""
    for i in range(N):
        try:
            s.sendall(f"GET /api/info HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
            status, body, rest = read_response(s, rest)
            if status != 200:
                raise ConnectionError(f"status {status}")
        except (OSError, ValueError) as e:
            say("error %d %s" % (i, e))
            sys.exit(0)
        if i + 1 < N:
            time.sleep(0.6)
    say("ok %d %.2f" % (N, time.monotonic() - t0))
elif MODE == "hold":
    socks = [socket.create_connection(("127.0.0.1", PORT)) for _ in range(N)]
    t0 = time.monotonic()
    threads = [threading.Thread(target=lambda c=c: say(trickle(c, SLOW_HEADERS, t0))) for c in socks]
    for t in threads:
        t.start()
    say("ready")
    for t in threads:
        t.join()
else:
    sys.exit(f"serve_slow.py: unknown mode {MODE}")
