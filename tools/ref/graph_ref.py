#!/usr/bin/python3
"""graph_ref.py - independent PyTorch check of a graph written by `saelite graph --db`.

Written from the GPT-2 equations and circuit-tracer's description (attention patterns and
LayerNorm scales detached, transcoder activations and error terms as leaves), not from
saelite's C code. It rebuilds the replacement model in float64 with autograd, takes one
gradient per target node (feature pre-activations and logits), and compares with the database:
  - the active features (layer, position, latent) and their activations,
  - every direct effect: grad x activation (features), grad . error (errors),
    grad . token embedding (tokens; positional embeddings are bias), for all pairs (zeros included),
  - each node's bias: the frozen linear model's value with every source set to zero,
  - the completeness of the reference itself (edges + bias = value).
It also reruns circuit-tracer's pruning (graph.py, re-implemented here in numpy) on the stored
adjacency and compares the kept nodes and edges.

Run: /usr/bin/python3 tools/ref/graph_ref.py DB [GRAPH_ID]   (the model and transcoder
directories are read from the graphs row). Exit status 0 when everything agrees to 1e-4
relative to the largest |edge| of the target row (edges) and to 1e-4 of max(|value|, |bias| +
sum |edges|) of the node's row (activations, biases), the graph's own completeness measure.
"""
import json
import math
import os
import sqlite3
import struct
import sys

import numpy as np
import torch

torch.set_default_dtype(torch.float64)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, b = h["data_offsets"]
        raw = data[a:b]
        if h["dtype"] == "F32":
            arr = np.frombuffer(raw, np.float32)
        elif h["dtype"] == "F16":
            arr = np.frombuffer(raw, np.float16).astype(np.float32)
        elif h["dtype"] == "BF16":
            u = np.frombuffer(raw, np.uint16).astype(np.uint32) << 16
            arr = u.view(np.float32)
        else:
            raise ValueError(h["dtype"])
        out[name.removeprefix("transformer.")] = torch.from_numpy(arr.reshape(h["shape"]).astype(np.float64))
    return out


def gelu(x, kind):
    if kind == "gelu":
        return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def ln(x, w, b, eps, frz, key):
    """LayerNorm with its scale 1/sqrt(var + eps) detached; frz (a dict) records the scale on
    the real run and hands it back on the later runs."""
    mu = x.mean(-1, keepdim=True)
    if key not in frz:
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        frz[key] = (1 / torch.sqrt(var + eps)).detach()
    return (x - mu) * frz[key] * w + b


def activation(pre, tc):
    arch = tc["arch"]
    if arch == "topk":
        k = tc["k"]
        v, i = pre.topk(k, dim=-1)
        out = torch.zeros_like(pre)
        out.scatter_(-1, i, torch.relu(v))
        return out
    if arch in ("jumprelu", "batchtopk"):
        return pre * (pre > tc["threshold"])
    return torch.relu(pre)


def load_tc(d):
    cfg = json.load(open(os.path.join(d, "cfg.json")))
    w = read_safetensors(os.path.join(d, "sae_weights.safetensors"))
    arch = cfg.get("activation_fn", cfg.get("architecture"))
    if cfg["architecture"] == "jumprelu_transcoder":
        arch = "jumprelu"
    layer = int(cfg["hook_name"].split(".")[1])
    return layer, {"arch": arch, "k": cfg.get("k") or cfg.get("activation_fn_kwargs", {}).get("k"),
                   "W_enc": w["W_enc"], "b_enc": w["b_enc"], "W_dec": w["W_dec"], "b_dec": w["b_dec"],
                   "threshold": w.get("threshold"), "W_skip": w.get("W_skip")}


def run(P, cfg, tcs, toks, frz, sources=None):
    """The replacement model. sources None: the real forward (records the activations and error
    terms as leaves, and the patterns and LN scales into frz); else a dict with x0, acts[l],
    errs[l], run with frz's frozen patterns and scales."""
    L, H = cfg["n_layer"], cfg["n_head"]
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    kind = cfg.get("activation_function", "gelu_new")
    T = len(toks)
    C = P["wte.weight"].shape[1]
    dh = C // H
    rec = {"pre": [], "acts": [], "errs": []}
    x0 = P["wte.weight"][toks] if sources is None else sources["x0"]
    x = x0 + P["wpe.weight"][:T]  # positional embeddings: a constant (bias)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        p = lambda n: P[f"h.{l}.{n}"]
        h = ln(x, p("ln_1.weight"), p("ln_1.bias"), eps, frz, ("ln1", l))
        qkv = h @ p("attn.c_attn.weight") + p("attn.c_attn.bias")
        q, k, v = qkv.split(C, -1)
        q = q.view(T, H, dh).transpose(0, 1)
        k = k.view(T, H, dh).transpose(0, 1)
        v = v.view(T, H, dh).transpose(0, 1)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
        if ("pat", l) not in frz:
            frz[("pat", l)] = att.masked_fill(~mask, float("-inf")).softmax(-1).detach()
        att = frz[("pat", l)]
        z = (att @ v).transpose(0, 1).reshape(T, C)
        mid = x + z @ p("attn.c_proj.weight") + p("attn.c_proj.bias")
        h2 = ln(mid, p("ln_2.weight"), p("ln_2.bias"), eps, frz, ("ln2", l))
        tc = tcs[l]
        pre = h2 @ tc["W_enc"] + tc["b_enc"]
        rec["pre"].append(pre)
        if sources is None:
            a = activation(pre.detach(), tc)
            mlp = gelu(h2 @ p("mlp.c_fc.weight") + p("mlp.c_fc.bias"), kind) @ p("mlp.c_proj.weight") + p("mlp.c_proj.bias")
            out = a @ tc["W_dec"] + tc["b_dec"]
            if tc["W_skip"] is not None:
                out = out + h2.detach() @ tc["W_skip"].T
            e = (mlp - out).detach()
            a = a.clone().requires_grad_()
            e = e.clone().requires_grad_()
            rec["acts"].append(a)
            rec["errs"].append(e)
        else:
            a, e = sources["acts"][l], sources["errs"][l]
        y = a @ tc["W_dec"] + tc["b_dec"] + e
        if tc["W_skip"] is not None:
            y = y + h2 @ tc["W_skip"].T
        x = mid + y
    hf = ln(x, P["ln_f.weight"], P["ln_f.bias"], eps, frz, "lnf")
    W_U = P.get("lm_head.weight", P["wte.weight"])
    rec["logits"] = hf @ W_U.T
    return rec


def prune(A, n_feat, n_err, n_tok, probs, node_thr, edge_thr):
    """circuit-tracer graph.py's prune_graph, in numpy."""
    n = A.shape[0]
    n_log = len(probs)

    def norm(M):
        a = np.abs(M)
        return a / np.maximum(a.sum(1, keepdims=True), 1e-10)

    def influence(An, w):
        cur = w @ An
        tot = cur.copy()
        for _ in range(n + 2):
            if not cur.any():
                break
            cur = cur @ An
            tot += cur
        return tot

    def thresh(s, t):
        s = np.sort(s)[::-1]
        c = np.cumsum(s) / s.sum()
        i = min(int(np.searchsorted(c, t)), len(c) - 1)
        return s[i]

    w = np.zeros(n)
    w[n - n_log:] = probs
    infl = influence(norm(A), w)
    nm = infl >= thresh(infl, node_thr)
    nm[n - n_log - n_tok:] = True
    Pm = A.copy()
    Pm[~nm] = 0
    Pm[:, ~nm] = 0
    Pn = norm(Pm)
    pinf = influence(Pn, w) + w
    sc = Pn * pinf[:, None]
    em = (sc >= thresh(sc.flatten(), edge_thr)) & (A != 0)
    fe = n_feat + n_err
    while True:
        old = nm.copy()
        em[~nm] = False
        em[:, ~nm] = False
        nm[:fe] &= em[:, :fe].any(0)
        nm[:n_feat] &= em[:n_feat].any(1)
        if (nm == old).all():
            break
    return nm, em


def main():
    db = sys.argv[1]
    con = sqlite3.connect(db)
    gid = int(sys.argv[2]) if len(sys.argv) > 2 else con.execute("SELECT max(id) FROM graphs").fetchone()[0]
    model_dir, tcs_s, n_layers, T, n, nth, eth = con.execute(
        "SELECT model_dir, transcoders, n_layers, n_pos, n_nodes, node_threshold, edge_threshold "
        "FROM graphs WHERE id = ?", (gid,)).fetchone()
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    P = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    tcs = dict(load_tc(d) for d in tcs_s.split(","))
    nodes = con.execute("SELECT node, feature_type, layer, pos, feature, token, activation, value, bias, kept "
                        "FROM graph_nodes WHERE graph_id = ? ORDER BY node", (gid,)).fetchall()
    A = np.zeros((n, n))
    Ek = np.zeros((n, n), dtype=bool)
    for t, s, wgt, k in con.execute("SELECT target, source, weight, kept FROM graph_edges WHERE graph_id = ?", (gid,)):
        A[t, s] = wgt
        Ek[t, s] = bool(k)
    toks = [r[5] for r in nodes if r[1] == "embedding"]
    feats = [r for r in nodes if r[1] == "cross layer transcoder"]
    logits = [r for r in nodes if r[1] == "logit"]
    frz = {}
    rec = run(P, cfg, tcs, toks, frz)
    bad = 0
    # the active features
    ref_feats = []
    for l in range(n_layers):
        a = rec["acts"][l].detach()
        for t, i in zip(*torch.nonzero(a, as_tuple=True)):
            ref_feats.append((l, int(t), int(i), float(a[t, i])))
    ref_feats.sort()
    got = [(r[2], r[3], r[4], r[6]) for r in feats]
    if [f[:3] for f in ref_feats] != [f[:3] for f in got]:
        print("FAIL: the active features differ (%d reference, %d stored)" % (len(ref_feats), len(got)))
        return 1
    act_diff = [abs(a[3] - b[3]) for a, b in zip(ref_feats, got)]
    # reference adjacency rows
    n_feat, n_err = len(feats), n_layers * T
    idx = {(f[0], f[1], f[2]): k for k, f in enumerate(got)}
    x0 = P["wte.weight"][toks].clone().requires_grad_()
    leaves = {"x0": x0, "acts": rec["acts"], "errs": rec["errs"]}
    frozen = run(P, cfg, tcs, toks, frz, leaves)
    zero = {"x0": torch.zeros_like(x0), "acts": [torch.zeros_like(a) for a in rec["acts"]],
            "errs": [torch.zeros_like(e) for e in rec["errs"]]}
    rec0 = run(P, cfg, tcs, toks, frz, zero)  # the real run's patterns and scales
    targets = [(k, frozen["pre"][r[2]][r[3], r[4]], rec0["pre"][r[2]][r[3], r[4]]) for k, r in enumerate(feats)]
    targets += [(n - len(logits) + j, frozen["logits"][T - 1, r[5]], rec0["logits"][T - 1, r[5]])
                for j, r in enumerate(logits)]
    worst_edge = worst_bias = worst_ref = 0.0
    row_scale = {}
    for row, val, b0 in targets:
        gs = torch.autograd.grad(val, [x0] + rec["acts"] + rec["errs"], retain_graph=True, allow_unused=True)
        ref = np.zeros(n)
        gx = gs[0]
        for t in range(T):
            ref[n_feat + n_err + t] = float(gx[t] @ x0[t].detach())
        for l in range(n_layers):
            ga, ge = gs[1 + l], gs[1 + n_layers + l]
            if ga is not None:
                a = rec["acts"][l].detach()
                for t, i in zip(*torch.nonzero(a, as_tuple=True)):
                    ref[idx[(l, int(t), int(i))]] = float(ga[t, i] * a[t, i])
            if ge is not None:
                for t in range(T):
                    ref[n_feat + l * T + t] = float(ge[t] @ rec["errs"][l][t].detach())
        scale = max(np.abs(ref).max(), 1e-30)
        worst_edge = max(worst_edge, np.abs(ref - A[row]).max() / scale)
        stored_bias = nodes[row][8]
        # values relative to the size of the terms that sum to them, as the graph's own
        # completeness: a pre-activation of 2e-6 is float32's rounding of terms of size 1, and
        # read relative to itself it failed a graph that is right
        row_scale[row] = max(abs(float(val)), abs(float(b0)) + np.abs(ref).sum(), 1e-30)
        worst_bias = max(worst_bias, abs(float(b0) - stored_bias) / row_scale[row])
        worst_ref = max(worst_ref, abs(ref.sum() + float(b0) - float(val)) / abs(float(val)))
    act_err = max([d / row_scale[k] for k, d in enumerate(act_diff)] + [0])
    print(f"graph {gid}: {n} nodes ({n_feat} features, {n_err} errors, {T} tokens, {len(logits)} logits)")
    print(f"  activations: max relative difference {act_err:.3g}")
    print(f"  edges: max |reference - stored| / max |row| = {worst_edge:.3g}")
    print(f"  biases: max relative difference {worst_bias:.3g}")
    print(f"  reference completeness: max relative error {worst_ref:.3g}")
    probs = np.array([r[6] for r in logits])
    nm, em = prune(A, n_feat, n_err, T, probs, nth, eth)
    kept = np.array([bool(r[9]) for r in nodes])
    pn = int((nm != kept).sum())
    pe = int((em != Ek).sum())
    print(f"  pruning (numpy re-implementation of circuit-tracer's): {pn} nodes and {pe} edges differ "
          f"({int(kept.sum())} nodes, {int(Ek.sum())} edges kept)")
    bad = act_err > 1e-4 or worst_edge > 1e-4 or worst_bias > 1e-4 or worst_ref > 1e-4 or pn or pe
    print("OK" if not bad else "FAIL")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
