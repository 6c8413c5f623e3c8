#!/usr/bin/env python3
"""serve_browser.py - drive headless Chromium through the DevTools protocol against a running
`saelite serve` and check what a person would see (called by tests/test_serve.sh).

Usage: serve_browser.py CHROMIUM BASE_URL OUTDIR EXPECT_JSON
EXPECT_JSON (from the test, computed with sqlite3 and curl): dict, first_feature (top of the
index by density), word (a search word), search_total, feature, n_top, top_value, text,
test_tokens, test_first_features, sql, sql_value, steer (the /api/steer answer for feature,
prompt "The big cat", add 40, 12 tokens, seed 7).
Prints "ok NAME" / "FAIL NAME: why" lines and "serve_browser: N passed, N failed"; screenshots go
to OUTDIR. Standard library only: a minimal WebSocket client (RFC 6455, text frames) is below.
"""
import base64, http.client, json, os, re, shutil, socket, struct, subprocess, sys, tempfile, time

chromium, base, outdir, expect = sys.argv[1], sys.argv[2].rstrip('/'), sys.argv[3], json.loads(sys.argv[4])
passed = failed = 0


def check(name, cond, why=''):
    global passed, failed
    if cond:
        passed += 1
        print('ok   ' + name)
    else:
        failed += 1
        print('FAIL ' + name + (': ' + why if why else ''))


class WS:
    def __init__(self, url):
        m = re.match(r'ws://([^/:]+):(\d+)(/.*)', url)
        self.s = socket.create_connection((m[1], int(m[2])), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall((f'GET {m[3]} HTTP/1.1\r\nHost: {m[1]}:{m[2]}\r\nUpgrade: websocket\r\n'
                        f'Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n'
                        'Sec-WebSocket-Version: 13\r\n\r\n').encode())
        self.buf = b''
        while b'\r\n\r\n' not in self.buf:
            self.buf += self.s.recv(4096)
        head, self.buf = self.buf.split(b'\r\n\r\n', 1)
        if b' 101 ' not in head.split(b'\r\n')[0]:
            raise RuntimeError('websocket handshake refused: ' + head.decode(errors='replace'))

    def send(self, text):
        data = text.encode()
        n = len(data)
        hdr = bytearray([0x81])
        if n < 126: hdr.append(0x80 | n)
        elif n < 65536: hdr += bytes([0x80 | 126]) + struct.pack('>H', n)
        else: hdr += bytes([0x80 | 127]) + struct.pack('>Q', n)
        mask = os.urandom(4)
        self.s.sendall(bytes(hdr) + mask + bytes(b ^ mask[i & 3] for i, b in enumerate(data)))

    def _read(self, n):
        while len(self.buf) < n:
            c = self.s.recv(1 << 20)
            if not c: raise EOFError('browser closed the connection')
            self.buf += c
        r, self.buf = self.buf[:n], self.buf[n:]
        return r

    def recv(self):
        msg = b''
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7f
            if n == 126: n = struct.unpack('>H', self._read(2))[0]
            elif n == 127: n = struct.unpack('>Q', self._read(8))[0]
            if b1 & 0x80: self._read(4)  # servers do not mask; skip a key if one came
            payload = self._read(n)
            if b0 & 0x0f in (9, 10): continue  # ping / pong
            msg += payload
            if b0 & 0x80: return msg.decode()


class Page:
    def __init__(self, ws):
        self.ws, self.id, self.errors = ws, 0, []

    def call(self, method, **params):
        self.id += 1
        self.ws.send(json.dumps({'id': self.id, 'method': method, 'params': params}))
        while True:
            m = json.loads(self.ws.recv())
            if m.get('id') == self.id:
                if 'error' in m: raise RuntimeError(f"{method}: {m['error']}")
                return m.get('result', {})
            self.event(m)

    def event(self, m):
        meth, p = m.get('method'), m.get('params', {})
        if meth == 'Runtime.exceptionThrown':
            self.errors.append('exception: ' + p['exceptionDetails'].get('text', '') + ' ' +
                               str(p['exceptionDetails'].get('exception', {}).get('description', '')))
        elif meth == 'Runtime.consoleAPICalled' and p.get('type') in ('error', 'warning', 'assert'):
            self.errors.append('console.' + p['type'] + ': ' +
                               ' '.join(str(a.get('value', a.get('description', ''))) for a in p.get('args', [])))
        elif meth == 'Log.entryAdded' and p['entry'].get('level') == 'error':
            self.errors.append('log: ' + p['entry'].get('text', '') + ' ' + p['entry'].get('url', ''))

    def js(self, expr):
        r = self.call('Runtime.evaluate', expression=expr, returnByValue=True, awaitPromise=True)
        if 'exceptionDetails' in r: raise RuntimeError('js: ' + expr + ': ' + str(r['exceptionDetails']))
        return r['result'].get('value')

    def wait_ready(self, what, secs=15):
        t = time.time() + secs
        while time.time() < t:
            v = self.js("document.body && document.body.dataset.ready || ''")
            if v: return v
            time.sleep(0.05)
        raise RuntimeError('page never became ready: ' + what)

    def goto(self, path):
        self.call('Page.navigate', url=base + path)
        time.sleep(0.05)
        return self.wait_ready(path)

    def action(self, what, expr):
        """Run expr (a user action) and wait for the view it starts to finish."""
        self.js("document.body.dataset.ready = ''")
        self.js(expr)
        return self.wait_ready(what)

    def shot(self, name):
        data = self.call('Page.captureScreenshot', format='png')['data']
        with open(os.path.join(outdir, name), 'wb') as f:
            f.write(base64.b64decode(data))


def key(page, k, code, vk):
    # Enter needs its text ("\r") to submit a form, as a real key press does
    extra = {'text': '\r', 'unmodifiedText': '\r'} if k == 'Enter' else {}
    page.call('Input.dispatchKeyEvent', type='keyDown', key=k, code=code, windowsVirtualKeyCode=vk, **extra)
    page.call('Input.dispatchKeyEvent', type='keyUp', key=k, code=code, windowsVirtualKeyCode=vk)


prof = tempfile.mkdtemp(prefix='saelite-chromium-')
proc = subprocess.Popen([chromium, '--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
                         '--disable-extensions', '--disable-background-networking', '--mute-audio',
                         '--remote-debugging-port=0', '--remote-allow-origins=*', '--user-data-dir=' + prof,
                         '--window-size=1280,1000', 'about:blank'],
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
try:
    ws_url = None
    t_end = time.time() + 60
    while time.time() < t_end and not ws_url:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None: break
        m = re.search(r'DevTools listening on (ws://\S+)', line)
        if m: ws_url = m[1]
    if not ws_url: raise RuntimeError('chromium did not start its DevTools endpoint')
    hp = re.match(r'ws://([^/]+)/', ws_url)[1]
    c = http.client.HTTPConnection(hp, timeout=30)
    c.request('PUT', '/json/new?about:blank')
    target = json.loads(c.getresponse().read())
    page = Page(WS(target['webSocketDebuggerUrl']))
    for d in ('Page.enable', 'Runtime.enable', 'Log.enable'): page.call(d)
    page.call('Emulation.setDeviceMetricsOverride', width=1280, height=1000, deviceScaleFactor=1, mobile=False)
    E = expect

    # ---- index: the features table, sorted by density
    page.goto('/')
    first = page.js("(document.querySelector('#features tr[data-feature]') || {}).dataset?.feature")
    check('index: first row is the densest feature', first == str(E['first_feature']), f'{first} != {E["first_feature"]}')
    check('index: 50 rows on the first page', page.js("document.querySelectorAll('#features tr[data-feature]').length") == min(50, E['n_features']))
    check('index: title', page.js("document.getElementById('title').textContent") == 'Features')
    heads = page.js("[...document.querySelectorAll('#features th')].map(t => t.textContent)")
    check('index: the measured-effect columns', 'KL ablated' in heads and 'Δ loss ablated' in heads, str(heads))
    page.shot('index.png')

    # ---- search: type a word into the box and press Enter
    page.js("document.getElementById('q').focus()")
    page.call('Input.insertText', text=E['word'])
    page.js("document.body.dataset.ready = ''")
    key(page, 'Enter', 'Enter', 13)
    page.wait_ready('search')
    cnt = page.js("document.getElementById('count').textContent")
    check('search: the count a person reads', f'of {E["search_total"]} features matching' in cnt.replace(',', ''), cnt)
    check('search: the URL is a permalink', page.js('location.search') == '?dict=%d&q=%s' % (E['dict'], E['word']),
          page.js('location.search'))

    # ---- the feature page: open it by clicking its link in the table
    page.goto('/?dict=%d&sort=feature&order=asc&offset=%d' % (E['dict'], E['feature'] // 50 * 50))
    page.action('click a feature', "document.querySelector('#features tr[data-feature=\"%d\"] a').click()" % E['feature'])
    title = page.js("document.getElementById('title').textContent")
    check('feature: title after clicking its link', title == 'Feature #%d' % E['feature'], title)
    check('feature: permalink', page.js('location.pathname') == '/feature/%d/%d' % (E['dict'], E['feature']))
    n_max = page.js("document.querySelectorAll('#top .tok.max').length")
    check('feature: one highlighted token per top activation', n_max == E['n_top'], f'{n_max} != {E["n_top"]}')
    hover = page.js("document.querySelector('#top .tok.max').title")
    check('feature: hover value of the strongest token', hover.startswith('activation %.4f (recomputed with the model)' % E['top_value']), hover)
    n_hot = page.js("document.querySelectorAll('#top .tok.hot').length")
    check('feature: every active context token shaded (live)', n_hot >= n_max, f'{n_hot} < {n_max}')
    val = page.js("document.querySelector('#top .ctx .val').textContent")
    check('feature: value column', val == '%.3f' % E['top_value'], val)
    check('feature: histogram bars', page.js("document.querySelectorAll('#hist div').length") == E['n_hist'])
    check('feature: nearest links', page.js("document.querySelectorAll('#nearest a').length") == E['n_nearest'])
    names = page.js("[...document.querySelectorAll('td')].map(t => t.textContent).filter(t => t.startsWith('matryoshka_prefix_'))")
    check('feature: a Matryoshka prefix EV among the metrics, not its mse', names == ['matryoshka_prefix_16_ev'], f'{names}')
    n_eff = page.js("document.querySelectorAll('#effect .effect-logits tr').length")
    check('feature: measured promoted / suppressed tokens', n_eff == E['n_effect_logits'] + 2, f"{n_eff} != {E['n_effect_logits']} + 2")
    check('feature: measured KL shown', bool(page.js("(document.getElementById('effect-kl') || {}).textContent")))
    dash = page.js("new Promise((ok) => { const i = document.getElementById('dashboard'); if (!i) ok(-1); else if (i.complete) ok(i.naturalWidth); else { i.onload = () => ok(i.naturalWidth); i.onerror = () => ok(0); } })")
    check('feature: the report dashboard is shown', dash and dash > 0, f'naturalWidth {dash}')
    page.shot('feature.png')
    # steering: prompt, strength, tokens, seed, click; the two columns a person compares
    S = E['steer']
    page.js("document.getElementById('steer-prompt').value = ''; document.getElementById('steer-prompt').focus()")
    page.call('Input.insertText', text='The big cat')
    page.js("document.getElementById('steer-strength').value = '40'; document.getElementById('steer-tokens').value = '12';"
            "document.getElementById('steer-seed').value = '7'")
    page.action('steer', "document.getElementById('steer-run').click()")
    vis = lambda t: t.replace('\n', '\u21b5').replace('\t', '\u21e5')
    got = page.js("(document.querySelector('#steer-steered .ctx') || {}).textContent")
    check('steer: the steered continuation', got == vis('The big cat' + S['steered']['text']), f'{got!r}')
    got = page.js("(document.querySelector('#steer-unsteered .ctx') || {}).textContent")
    check('steer: the unsteered continuation beside it', got == vis('The big cat' + S['unsteered']['text']), f'{got!r}')
    ndiff = page.js("document.querySelectorAll('#steer-steered .tok.diff').length")
    want = sum(1 for a, b in zip(S['steered']['ids'], S['unsteered']['ids'] + [None] * 99) if a != b)
    check('steer: the tokens that differ are marked', ndiff == want and want > 0, f'{ndiff} != {want}')
    page.js("document.getElementById('steer').scrollIntoView(); document.activeElement.blur()")
    page.shot('steer.png')
    # keyboard: the right arrow opens the next feature
    page.js("document.body.dataset.ready = ''")
    key(page, 'ArrowRight', 'ArrowRight', 39)
    page.wait_ready('arrow right')
    title = page.js("document.getElementById('title').textContent")
    check('feature: ArrowRight opens the next one', title == 'Feature #%d' % (E['feature'] + 1), title)

    # ---- test your text: type into the box, click Run
    page.goto('/test')
    page.js("document.getElementById('text').focus()")
    page.call('Input.insertText', text=E['text'])
    page.action('run the test text', "document.getElementById('run').click()")
    n_tok = page.js("document.querySelectorAll('#test-out .testtok').length")
    check('test: one box per token', n_tok == E['test_tokens'], f'{n_tok} != {E["test_tokens"]}')
    links = page.js("[...document.querySelectorAll('#test-out .testtok')[0].querySelectorAll('a')].map(a => a.getAttribute('href'))")
    want = ['/feature/%d/%d' % (E['dict'], f) for f in E['test_first_features']]
    check('test: the first token links its top features', links == want, f'{links} != {want}')
    page.shot('test.png')

    # ---- the SQL console
    page.goto('/sql?sql=' + E['sql'].replace(' ', '%20'))
    cell = page.js("(document.querySelector('#sql-table td') || {}).textContent")
    check('sql: the result a person reads', cell == E['sql_value'], f'{cell} != {E["sql_value"]}')
    # exact integers past 2^53 and infinities, as a person reads them (were 9,007,199,254,740,992
    # and NULL)
    page.goto('/sql?sql=SELECT%209007199254740993,%201e999,%20-1e999')
    cells = page.js("[...document.querySelectorAll('#sql-table td')].map(t => t.textContent)")
    check('sql: exact big integer and Inf', cells == ['9,007,199,254,740,993', 'Inf', '-Inf'], str(cells))
    check('no console errors or exceptions', not page.errors, '; '.join(page.errors[:3]))
    # (the refused request below logs its HTTP 400 to the console, as it should)
    page.goto('/sql?sql=DELETE%20FROM%20ana_features')
    err = page.js("(document.getElementById('error') || {}).textContent || ''")
    check('sql: a write is refused on the page', 'refused' in err, err)
    # (these log their 4xx to the console too)
    # ---- empty, bad and out-of-range states show the app's own line
    for path, want in (('/feature/1/99999999999', 'expected'), ('/feature/1', 'no feature page'),
                       ('/?dict=99', 'no dictionary 99')):
        page.goto(path)
        err = page.js("(document.getElementById('error') || {}).textContent || ''")
        check(f'{path}: the app\'s error line', want in err, err)
    page.goto('/?dict=%d&offset=%d' % (E['dict'], E['n_features'] + 50))
    cnt = page.js("document.getElementById('count').textContent")
    check('index: an offset past the end says so', 'past the last of' in cnt, cnt)
    # "fires on": how many in all, paged
    page.goto('/?dict=%d&token=%s' % (E['dict'], E['token']))
    cnt = page.js("(document.getElementById('token-count') || {}).textContent || ''")
    check('token: "1–N of TOTAL features"', cnt.replace(',', '').endswith('of %d features' % E['token_total']), cnt)
    # past the end: it said "501–500 of 40 features" (a review)
    page.goto('/?dict=%d&token=%s&token_offset=%d' % (E['dict'], E['token'], E['token_total'] + 450))
    cnt = page.js("(document.getElementById('token-count') || {}).textContent || ''")
    check('token: an offset past the end says so', 'past the last of' in cnt, cnt)
    # text from the database isolated for bidi, long strings wrapped
    st = page.js("[getComputedStyle(document.querySelector('#features .pill')).unicodeBidi, getComputedStyle(document.querySelector('#features td')).overflowWrap, document.querySelector('#dict option').textContent]")
    check('bidi: pills isolated, cells wrap, names in U+2068..2069', st[0] == 'isolate' and st[1] == 'anywhere' and '\u2068' in st[2] and '\u2069' in st[2], str(st))
    # a view that finishes after a newer navigation does not fill the page
    page.js("document.body.dataset.ready = ''")
    page.js("navigate('/feature/%d/%d'); navigate('/sql')" % (E['dict'], E['feature']))
    page.wait_ready('two navigations')
    time.sleep(1.0)
    st = page.js("[location.pathname, document.getElementById('title').textContent]")
    check('navigation race: the last URL shows its own view', st == ['/sql', 'SQL'], str(st))

    # a link from another site (localhost is another site than 127.0.0.1) to /sql?sql=...:
    # the page shows the SQL and waits for Run instead of running it
    other = base.replace('127.0.0.1', 'localhost')
    page.call('Page.navigate', url=other + '/')
    time.sleep(0.05)
    page.wait_ready('the page on another site')
    page.js("document.body.dataset.ready = ''")
    page.js("location.href = %s" % json.dumps(base + '/sql?sql=SELECT%201'))
    time.sleep(0.2)
    page.wait_ready('/sql opened from another site')
    st = page.js("[!!document.getElementById('autorun-note'), !!document.getElementById('sql-table'), location.host]")
    check('sql: opened from another site, it waits for Run', st[:2] == [True, False] and st[2].startswith('127.0.0.1'), str(st))
    page.action('run it by hand', "document.getElementById('run').click()")
    cell = page.js("(document.querySelector('#sql-table td') || {}).textContent")
    check('sql: ... and Run runs it', cell == '1', str(cell))
except Exception as e:  # a broken page or browser is a failure, not a crash of the test
    check('browser session', False, repr(e))
finally:
    proc.kill()
    proc.wait()
    # Chromium's helper processes may still write into the profile for a moment after the
    # browser is killed (under load, 'rm: Directory not empty' and a profile left in /tmp)
    for _ in range(50):
        shutil.rmtree(prof, ignore_errors=True)
        if not os.path.exists(prof):
            break
        time.sleep(0.1)
print(f'serve_browser: {passed} passed, {failed} failed')
sys.exit(1 if failed else 0)
