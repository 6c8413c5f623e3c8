#!/usr/bin/python3
"""gpt2_ref.py - independent PyTorch reference for saelite's GPT-2 (fixture generator).

Written from the GPT-2 equations (Radford et al. 2019; HF Conv1D layout y = x W + b), not from
saelite's C code. For each small random-weight model it writes, under tests/data/<name>/:
  config.json, model.safetensors      the checkpoint (F32, F16 or BF16; optional transformer.
                                      prefix, optional explicit lm_head, HF attention buffers)
  expected.safetensors                float32 tensors: "tokens" [B,T] (ids as floats), every
                                      TransformerLens hook point with its batch axis, "logits"
                                      [B,T,V]; with --grads also "targets", "loss" [1] and
                                      "grad.<param name>" for one mean cross-entropy step.
The reference computes in float64 from the stored (rounded) weights, so the fixture is the exact
answer for the checkpoint as saved. Run: /usr/bin/python3 tools/ref/gpt2_ref.py [outdir]
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch

torch.set_default_dtype(torch.float64)


def write_safetensors(path, tensors, meta=None):
    """tensors: list of (name, dtype str, np array already in that dtype's raw form)."""
    header = {}
    blobs = []
    off = 0
    for name, dt, arr in sorted(tensors, key=lambda t: t[0]):
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if meta:
        header["__metadata__"] = meta
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(path + ".tmp", path)


def to_dtype(x32, dt):
    """float32 array -> (stored raw array, float64 values the loader will see)."""
    if dt == "F32":
        return x32, x32.astype(np.float64)
    if dt == "F16":
        h = x32.astype(np.float16)
        return h, h.astype(np.float64)
    if dt == "BF16":
        b = torch.from_numpy(x32).to(torch.bfloat16)
        return b.view(torch.int16).numpy().view(np.uint16), b.to(torch.float64).numpy()
    raise ValueError(dt)


def gelu(x, kind):
    if kind == "gelu":
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def layernorm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def forward(P, cfg, tokens, hooks):
    """P: dict name -> float64 tensor (HF names, no prefix). Returns logits; fills hooks."""
    L, C, H = cfg["n_layer"], cfg["n_embd"], cfg["n_head"]
    eps, act = cfg["layer_norm_epsilon"], cfg["activation_function"]
    dh = C // H
    B, T = tokens.shape
    embed = P["wte.weight"][tokens]
    pos = P["wpe.weight"][:T].unsqueeze(0).expand(B, T, C)
    hooks["hook_embed"] = embed
    hooks["hook_pos_embed"] = pos
    x = embed + pos
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    for l in range(L):
        p = lambda n: P["h.%d.%s" % (l, n)]
        hk = lambda n, v: hooks.__setitem__("blocks.%d.%s" % (l, n), v)
        hk("hook_resid_pre", x)
        h1 = layernorm(x, p("ln_1.weight"), p("ln_1.bias"), eps)
        hk("ln1.hook_normalized", h1)
        qkv = h1 @ p("attn.c_attn.weight") + p("attn.c_attn.bias")
        q, k, v = qkv[..., :C], qkv[..., C:2 * C], qkv[..., 2 * C:]
        q, k, v = (t.reshape(B, T, H, dh) for t in (q, k, v))
        hk("attn.hook_q", q)
        hk("attn.hook_k", k)
        hk("attn.hook_v", v)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(dh)
        scores = scores.masked_fill(mask, float("-inf"))
        hk("attn.hook_attn_scores", scores)
        pattern = torch.softmax(scores, dim=-1)
        hk("attn.hook_pattern", pattern)
        z = torch.einsum("bhqk,bkhd->bqhd", pattern, v)
        hk("attn.hook_z", z)
        attn_out = z.reshape(B, T, C) @ p("attn.c_proj.weight") + p("attn.c_proj.bias")
        hk("hook_attn_out", attn_out)
        x = x + attn_out
        hk("hook_resid_mid", x)
        h2 = layernorm(x, p("ln_2.weight"), p("ln_2.bias"), eps)
        hk("ln2.hook_normalized", h2)
        pre = h2 @ p("mlp.c_fc.weight") + p("mlp.c_fc.bias")
        hk("mlp.hook_pre", pre)
        post = gelu(pre, act)
        hk("mlp.hook_post", post)
        mlp_out = post @ p("mlp.c_proj.weight") + p("mlp.c_proj.bias")
        hk("hook_mlp_out", mlp_out)
        x = x + mlp_out
        hk("hook_resid_post", x)
    xf = layernorm(x, P["ln_f.weight"], P["ln_f.bias"], eps)
    hooks["ln_final.hook_normalized"] = xf
    head = P.get("lm_head.weight", P["wte.weight"])
    return xf @ head.T


def make_model(outdir, name, L, C, H, V, N, n_inner, dtype, prefix, tied, act, buffers, seed,
               B, T, grads):
    rng = np.random.default_rng(seed)
    F = n_inner or 4 * C
    shapes = [("wte.weight", (V, C)), ("wpe.weight", (N, C))]
    for l in range(L):
        h = "h.%d." % l
        shapes += [(h + "ln_1.weight", (C,)), (h + "ln_1.bias", (C,)),
                   (h + "attn.c_attn.weight", (C, 3 * C)), (h + "attn.c_attn.bias", (3 * C,)),
                   (h + "attn.c_proj.weight", (C, C)), (h + "attn.c_proj.bias", (C,)),
                   (h + "ln_2.weight", (C,)), (h + "ln_2.bias", (C,)),
                   (h + "mlp.c_fc.weight", (C, F)), (h + "mlp.c_fc.bias", (F,)),
                   (h + "mlp.c_proj.weight", (F, C)), (h + "mlp.c_proj.bias", (C,))]
    shapes += [("ln_f.weight", (C,)), ("ln_f.bias", (C,))]
    if not tied:
        shapes.append(("lm_head.weight", (V, C)))
    stored, P = [], {}
    for n, shp in shapes:
        if n.endswith("ln_1.weight") or n.endswith("ln_2.weight") or n == "ln_f.weight":
            x = 1.0 + 0.1 * rng.standard_normal(shp)
        elif len(shp) == 1:
            x = 0.1 * rng.standard_normal(shp)
        elif n in ("wte.weight", "lm_head.weight", "wpe.weight"):
            x = 0.5 * rng.standard_normal(shp)
        else:
            x = rng.standard_normal(shp) / math.sqrt(shp[0])
        raw, val = to_dtype(x.astype(np.float32), dtype)
        full = n if (n == "lm_head.weight" or not prefix) else "transformer." + n
        stored.append((full, dtype, raw))
        P[n] = torch.from_numpy(val.copy())
    if buffers:  # what older HF GPT-2 checkpoints carry: causal mask and masked_bias per block
        for l in range(L):
            pfx = ("transformer." if prefix else "") + "h.%d.attn." % l
            stored.append((pfx + "bias", "U8", np.tril(np.ones((1, 1, N, N), np.uint8))))
            stored.append((pfx + "masked_bias", "F32", np.array(-1e4, np.float32)))
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    cfg = {"model_type": "gpt2", "n_layer": L, "n_head": H, "n_embd": C, "n_positions": N,
           "n_ctx": N, "vocab_size": V, "n_inner": n_inner, "layer_norm_epsilon": 1e-5,
           "activation_function": act, "tie_word_embeddings": tied}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    write_safetensors(os.path.join(d, "model.safetensors"), stored, {"format": "pt"})

    tokens = torch.from_numpy(rng.integers(0, V, size=(B, T)))
    if grads:
        for t in P.values():
            t.requires_grad_(True)
    hooks = {}
    logits = forward(P, cfg, tokens, hooks)
    exp = [("tokens", "F32", tokens.numpy().astype(np.float32))]
    for k, v in hooks.items():
        exp.append((k, "F32", v.detach().numpy().astype(np.float32)))
    exp.append(("logits", "F32", logits.detach().numpy().astype(np.float32)))
    if grads:
        targets = torch.from_numpy(rng.integers(0, V, size=(B, T)))
        targets[0, 1] = -1  # ignored positions
        targets[1, T - 1] = -1
        keep = targets >= 0
        logp = torch.log_softmax(logits, dim=-1)
        nll = -logp.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        loss = nll[keep].mean()
        loss.backward()
        exp.append(("targets", "F32", targets.numpy().astype(np.float32)))
        exp.append(("loss", "F32", np.array([loss.item()], np.float32)))
        for n, t in P.items():
            exp.append(("grad." + n, "F32", t.grad.numpy().astype(np.float32)))
    write_safetensors(os.path.join(d, "expected.safetensors"), exp)
    print("wrote %s (%d hook points%s)" % (d, len(hooks), ", grads" if grads else ""))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data"
    make_model(out, "gpt2_tiny_f32", L=2, C=32, H=4, V=96, N=16, n_inner=None, dtype="F32",
               prefix=False, tied=True, act="gelu_new", buffers=False, seed=1, B=2, T=12,
               grads=True)
    make_model(out, "gpt2_tiny_bf16", L=2, C=48, H=3, V=120, N=16, n_inner=100, dtype="BF16",
               prefix=True, tied=False, act="gelu", buffers=True, seed=2, B=2, T=16, grads=False)
    make_model(out, "gpt2_tiny_f16", L=1, C=64, H=2, V=80, N=12, n_inner=None, dtype="F16",
               prefix=False, tied=True, act="gelu_pytorch_tanh", buffers=False, seed=3, B=3, T=9,
               grads=False)


if __name__ == "__main__":
    main()
