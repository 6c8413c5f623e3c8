#!/usr/bin/env python3
"""matryoshka_prefix_ref.py SAE_DIR ACTS.npy SAE_EVAL.out: the Matryoshka prefix metrics that
`saelite sae-eval --npy` printed, recomputed independently in float64 numpy (test_sae_cli.sh).

The SAE as SAELens runs a Matryoshka BatchTopK file (jumprelu + matryoshka_widths): the codes f
once at full width, each inner prefix m decoded from f[:, :m] @ W_dec[:m] + b_dec. Exit 1 when a
printed prefix is missing, extra, or off (EV by 2e-4, mse by 2e-4 relative, L0 by 0.01)."""
import json, re, struct, sys

import numpy as np

d, acts, out = sys.argv[1:4]
raw = open(d + "/sae_weights.safetensors", "rb").read()
hl = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + hl])
t = {k: np.frombuffer(raw[8 + hl + v["data_offsets"][0]:8 + hl + v["data_offsets"][1]], "<f4").reshape(v["shape"]).astype(np.float64)
     for k, v in hdr.items() if k != "__metadata__"}
cfg = json.load(open(d + "/cfg.json"))
x = np.load(acts).astype(np.float64)
pre = (x - t["b_dec"]) @ t["W_enc"] + t["b_enc"]
f = np.where((pre > t["threshold"]) & (pre > 0), pre, 0)
var = ((x - x.mean(0)) ** 2).sum()
got = {int(m[0]): (float(m[1]), float(m[2]), float(m[3])) for m in
       re.findall(r"prefix (\d+) of \d+ latents: mse (\S+)  explained variance (\S+)  L0 (\S+)", open(out).read())}
ends = [w for w in cfg["matryoshka_widths"] if w < cfg["d_sae"]]
bad = sorted(got) != ends
for m in ends:
    e = x - (f[:, :m] @ t["W_dec"][:m] + t["b_dec"])
    sse = (e ** 2).sum()
    want = (sse / e.size, 1 - sse / var, (f[:, :m] > 0).sum(1).mean())
    print("prefix", m, "want mse %.5g ev %.4f l0 %.2f" % want, "got", got.get(m))
    if m in got:
        g = got[m]
        bad |= abs(g[0] - want[0]) > 2e-4 * want[0] or abs(g[1] - want[1]) > 2e-4 or abs(g[2] - want[2]) > 0.01
sys.exit(1 if bad else 0)
