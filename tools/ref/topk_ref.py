#!/usr/bin/python3
"""topk_ref.py - a plain PyTorch TopK SAE recipe: the peer saelite's trainer is measured against.

Written from the equations (Gao et al. 2024, "Scaling and evaluating sparse autoencoders";
OpenAI sparse_autoencoder train.py for AuxK), not from saelite's C code:
  f = TopK_k(ReLU((x - b_dec) W_enc + b_enc)),  xhat = f W_dec + b_dec
  loss = ||x - xhat||^2 summed over d, mean over the batch
       + aux_coef * ||e - ehat||^2 / ||e - mean(e)||^2   (OpenAI's normalized_mse; e = x - xhat
         detached, ehat = the top-k_aux of the latents dead for dead_tokens, decoded without b_dec)
  Adam (lr 1e-3, constant), batch 4096; W_dec rows unit norm (the gradient component parallel to
  each row removed before the step, rows renormalised after it); W_enc = W_dec^T at init;
  b_enc = 0; b_dec = mean of the data; raw (unnormalised) inputs.
Data: --npy ACTS.npy (finite set, a fresh permutation each pass) or --gen (fresh samples from
tools/ref/gt_gen.py's generator with the same configuration flags). Writes OUTDIR in SAELens
layout (cfg.json, sae_weights.safetensors: W_enc [d, S], b_enc, W_dec [S, d], b_dec), which
`saelite sae-eval --sae OUTDIR --ground-truth truth.npy` scores like saelite's own SAEs.
Usage: /usr/bin/python3 tools/ref/topk_ref.py --npy ACTS.npy --out DIR [--d-sae 1024] [--k 6]
         [--tokens 6000000] [--lr 1e-3] [--batch 4096] [--k-aux 256] [--aux-coef 0.03125]
         [--dead-tokens 200000] [--seed 0] [--threads 1] [--batch-topk] [--matryoshka W1,W2,...]
--batch-topk: the same recipe with BatchTopK's selection (Bussmann et al. 2024, "BatchTopK
  sparse autoencoders"): the k * batch largest ReLU'd pre-activations of the whole batch are kept
  instead of k per row; gradients by autograd through the kept mask. The saved cfg.json then says
  "batchtopk", with the mean over the run's last 10% of steps of the smallest kept value as its
  inference threshold (a "threshold" tensor, read as JumpReLU; the paper's estimate);
  ground-truth scoring reads only the decoder.
--matryoshka W1,W2,...: Matryoshka BatchTopK (Bussmann et al. 2025, "Learning multi-level
  features with Matryoshka sparse autoencoders", arXiv 2503.17547): --batch-topk plus, for every
  inner width m (increasing, below d_sae), the loss ||x - (f[:, :m] W_dec[:m] + b_dec)||^2 summed
  over d and averaged over the batch, unweighted, where f is the one full-width BatchTopK code
  truncated to its first m latents (the paper's code and SAELens' current
  matryoshka_batchtopk_sae.py; SAELens' earlier version re-selected a BatchTopK inside each
  prefix instead). Saved as "matryoshka_batchtopk" with its widths and the threshold.
--npy-out TARGETS.npy: a TopK transcoder (Dunefsky et al. 2024; Paulo et al. 2025; sparsify's
  transcode mode), the same recipe with the target y (row for row with --npy) in place of x:
  f = TopK_k(ReLU(x W_enc + b_enc)) (no b_dec subtracted from the input: b_dec lives in y's
  space), yhat = f W_dec + b_dec, loss ||y - yhat||^2 + the same AuxK on e = y - yhat; b_dec =
  mean of y; W_enc = W_dec^T at init where d_in = d_out, else its own random unit rows. Saved as
  SAELens' "transcoder" (d_out, activation_fn topk); sae-eval --ground-truth scores its decoder
  against the output directions (tools/ref/gt_gen.py --d-out writes both). With --gen, --d-out N
  draws fresh (x, y) pairs instead, y from gt_gen.py's second dictionary in N dimensions (the
  generator of `gt_gen.py --d-out N`, its own sample stream as --gen has). With --batch-topk: a
  BatchTopK transcoder (the selection above, the transcoder's loss), saved as SAELens'
  "jumprelu_transcoder" with the threshold.
--skip (with a transcoder): a skip transcoder (Paulo et al. 2025): yhat += x W_skip^T, W_skip
  [d_out, d_in] from zeros, trained by the main loss (AuxK's residual is detached); saved as
  "skip_transcoder".
"""
import argparse
import json
import os
import struct
import sys
import time

import numpy as np
import torch


def save_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        b = t.detach().cpu().contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs: f.write(b)


def decode(idx, val, W_dec):
    """sum_j val[b, j] W_dec[idx[b, j]]: [B, k] x [S, d] -> [B, d]."""
    return torch.nn.functional.embedding_bag(idx, W_dec, per_sample_weights=val, mode="sum")


def forward(P, x, k, dead, k_aux, center=True):
    """Pre-activations, the top-k (idx, val >= 0), xhat; and the AuxK top-k over dead latents.
    center=False (a transcoder): the input is not centred by b_dec."""
    xc = x - P["b_dec"] if center else x
    pre = torch.relu(xc @ P["W_encT"].t() + P["b_enc"])
    val, idx = pre.topk(k, dim=1)
    xhat = decode(idx, val, P["W_dec"]) + P["b_dec"]
    if "W_skip" in P: xhat = xhat + x @ P["W_skip"].t()
    aux = None
    nd = int(dead.sum())
    if nd > 0:
        dead_ids = torch.nonzero(dead).squeeze(1)
        aval, apos = pre[:, dead_ids].topk(min(k_aux, nd), dim=1)
        aux = (dead_ids[apos], aval)
    return xc, idx, val, xhat, aux


def loss_fn(P, x, k, dead, k_aux, aux_coef, y=None):
    """The loss as autograd sees it (used to check loss_and_grads); y: a transcoder's target."""
    xc, idx, val, xhat, aux = forward(P, x, k, dead, k_aux, y is None)
    y = x if y is None else y
    loss = (xhat - y).pow(2).sum(1).mean()
    if aux is not None:
        e = (y - xhat).detach()
        ehat = decode(aux[0], aux[1], P["W_dec"])
        loss = loss + aux_coef * (ehat - e).pow(2).sum(1).mean() / (e - e.mean(0)).pow(2).sum(1).mean()
    return loss


def sparse_backward(g, P, xc, idx, val, dout):
    """Add to g the gradients of xhat = decode(idx, val, W_dec) (+ b_dec) given dL/dxhat = dout,
    through val = relu(pre) at the selected latents and pre = xc W_enc + b_enc."""
    B, kk = idx.shape
    if kk > 16:  # AuxK's k_aux: dense GEMMs instead of [B, k_aux, d] temporaries
        S = P["W_dec"].shape[0]
        A = torch.zeros(B, S, dtype=val.dtype).scatter_(1, idx, val)
        g["W_dec"] += A.t() @ dout
        dpre = torch.zeros_like(A).scatter_(1, idx, (dout @ P["W_dec"].t()).gather(1, idx) * (val > 0))
        g["W_encT"] += dpre.t() @ xc
        g["b_enc"] += dpre.sum(0)
        return
    flat = idx.reshape(-1)
    g["W_dec"].index_add_(0, flat, (val.unsqueeze(2) * dout.unsqueeze(1)).reshape(B * kk, -1))
    dval = (P["W_dec"][idx] * dout.unsqueeze(1)).sum(2) * (val > 0)
    g["W_encT"].index_add_(0, flat, (dval.unsqueeze(2) * xc.unsqueeze(1)).reshape(B * kk, -1))
    g["b_enc"].index_add_(0, flat, dval.reshape(-1))



def loss_and_grads(P, x, k, dead, k_aux, aux_coef, y=None):
    """Loss, AuxK term and gradients by hand (sparse: only the selected latents), the same
    function as loss_fn. Returns (loss, aux, grads, idx, val)."""
    B = x.shape[0]
    center = y is None
    xc, idx, val, xhat, aux = forward(P, x, k, dead, k_aux, center)
    r = xhat - (x if center else y)
    loss = r.pow(2).sum(1).mean()
    g = {n: torch.zeros_like(t) for n, t in P.items()}
    dout = 2 * r / B
    g["b_dec"] += dout.sum(0)
    if "W_skip" in P: g["W_skip"] += dout.t() @ x
    sparse_backward(g, P, xc, idx, val, dout)
    auxv = 0.0
    if aux is not None:
        e = -r
        ehat = decode(aux[0], aux[1], P["W_dec"])
        den = (e - e.mean(0)).pow(2).sum(1).mean()
        auxv = float((ehat - e).pow(2).sum(1).mean() / den)
        sparse_backward(g, P, xc, aux[0], aux[1], aux_coef * 2 * (ehat - e) / (B * den))
        loss = loss + aux_coef * auxv
    # pre depends on b_dec through xc = x - b_dec: dL/db_dec -= (sum_b dL/dpre_b) W_enc^T, and
    # that sum is exactly b_enc's gradient (a transcoder's input is not centred)
    if center: g["b_dec"] -= g["b_enc"] @ P["W_encT"]
    return float(loss), auxv, g, idx, val


def batchtopk_step(P, x, k, dead, k_aux, aux_coef, widths=(), y=None):
    """BatchTopK forward and autograd backward into P[n].grad (plus the Matryoshka levels of the
    inner widths, on the truncated code); y: a transcoder's target (x is then not centred by b_dec,
    which lives in y's space). Returns (loss, aux, fired, thr)."""
    Q = {n: t.detach().requires_grad_(True) for n, t in P.items()}
    B = x.shape[0]
    xc = x - Q["b_dec"] if y is None else x
    t = x if y is None else y
    pre = torch.relu(xc @ Q["W_encT"].t() + Q["b_enc"])
    flat = pre.detach().reshape(-1)
    kept_val, kept_pos = flat.topk(min(k * B, flat.numel()))
    mask = torch.zeros_like(flat, dtype=torch.bool)
    mask[kept_pos[kept_val > 0]] = True
    mask = mask.view_as(pre)
    f = pre * mask
    xhat = f @ Q["W_dec"] + Q["b_dec"]
    loss = (xhat - t).pow(2).sum(1).mean()
    for m in widths:
        loss = loss + (f[:, :m] @ Q["W_dec"][:m] + Q["b_dec"] - t).pow(2).sum(1).mean()
    auxv = 0.0
    nd = int(dead.sum())
    if nd > 0 and aux_coef > 0:
        dead_ids = torch.nonzero(dead).squeeze(1)
        aval, apos = pre[:, dead_ids].topk(min(k_aux, nd), dim=1)
        e = (t - xhat).detach()
        ehat = decode(dead_ids[apos], aval, Q["W_dec"])
        aux = (ehat - e).pow(2).sum(1).mean() / (e - e.mean(0)).pow(2).sum(1).mean()
        auxv = float(aux)
        loss = loss + aux_coef * aux
    loss.backward()
    for n in P:
        P[n].grad = Q[n].grad
    pos = kept_val[kept_val > 0]
    return float(loss), auxv, mask.any(0), float(pos.min()) if pos.numel() else 0.0


def check_grad(P, x, k, k_aux, aux_coef, y=None):
    """Compare loss_and_grads with autograd on one batch, with and without dead latents."""
    S = P["b_enc"].shape[0]
    yd = None if y is None else y.double()
    for dead in (torch.zeros(S, dtype=torch.bool), torch.arange(S) % 3 == 0):
        Q = {n: t.clone().double().requires_grad_(True) for n, t in P.items()}
        loss_fn(Q, x.double(), k, dead, k_aux, aux_coef, yd).backward()
        with torch.no_grad():
            _, _, g, _, _ = loss_and_grads({n: t.detach() for n, t in Q.items()}, x.double(), k,
                                           dead, k_aux, aux_coef, yd)
        for n in P:
            err = float((g[n] - Q[n].grad).abs().max() / (Q[n].grad.abs().max() + 1e-30))
            print(f"grad check {n} (dead {int(dead.sum())}): max rel err {err:.2e}", file=sys.stderr)
            if err > 1e-8: sys.exit("topk_ref: hand gradients disagree with autograd")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--npy")
    ap.add_argument("--npy-out", help="a transcoder's targets, row for row with --npy (see above)")
    ap.add_argument("--skip", action="store_true", help="with a transcoder: a skip transcoder")
    ap.add_argument("--d-out", type=int, default=0, help="with --gen: a transcoder on fresh pairs")
    ap.add_argument("--gen", action="store_true", help="fresh samples (gt_gen.py flags below)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--d-sae", type=int, default=1024)
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--tokens", type=int, default=6000000)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--k-aux", type=int, default=256)
    ap.add_argument("--aux-coef", type=float, default=1 / 32)
    ap.add_argument("--dead-tokens", type=int, default=200000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--check-grad", action="store_true", help="check the gradients vs autograd")
    ap.add_argument("--batch-topk", action="store_true", help="BatchTopK selection (see above)")
    ap.add_argument("--matryoshka", default="", help="inner widths W1,W2,... (implies --batch-topk)")
    for n, t, v in [("d", int, 256), ("features", int, 512), ("active", float, 5.0),
                    ("decay", float, 0.99), ("rho", float, 0.5), ("rank", int, 16),
                    ("mag", str, "uu"), ("gen-seed", int, 1)]:
        ap.add_argument("--" + n, type=t, default=v)
    a = ap.parse_args()
    if bool(a.npy) == a.gen: sys.exit("give exactly one of --npy, --gen")
    if a.npy_out and not a.npy: sys.exit("--npy-out goes with --npy (fresh pairs: --gen --d-out N)")
    if a.d_out and not a.gen: sys.exit("--d-out goes with --gen (stored pairs: --npy-out)")
    tc = bool(a.npy_out) or a.d_out > 0  # a transcoder: the target y is not x
    if tc and (a.matryoshka or (a.batch_topk and a.skip)):
        sys.exit("a transcoder here is TopK or BatchTopK (not --matryoshka; --skip with TopK only)")
    if a.skip and not tc: sys.exit("--skip needs a transcoder (--npy-out, or --gen --d-out N)")
    widths = [int(w) for w in a.matryoshka.split(",") if w]
    if widths:
        a.batch_topk = True
        if widths[-1] == a.d_sae: widths.pop()
        if any(w < a.k or w >= a.d_sae for w in widths) or widths != sorted(set(widths)):
            sys.exit("--matryoshka: widths must be increasing, >= k and below d_sae")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    if a.npy:
        data = np.load(a.npy, mmap_mode="r")
        N, d = data.shape
        data = torch.from_numpy(np.array(data))  # into memory (writable)
        target = data
        if a.npy_out:
            target = torch.from_numpy(np.array(np.load(a.npy_out, mmap_mode="r")))
            if target.shape[0] != N: sys.exit(f"{a.npy_out}: {target.shape[0]} rows, {a.npy} has {N}")
        perm, pos = torch.from_numpy(rng.permutation(N)), 0

        def batch():
            nonlocal perm, pos
            if pos + a.batch > N: perm, pos = torch.from_numpy(rng.permutation(N)), 0
            pos += a.batch
            rows = perm[pos - a.batch:pos]
            return data[rows], target[rows]
        mean = target[:min(N, 262144)].double().mean(0).float()
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import gt_gen
        g = gt_gen.Generator(a.d, a.features, a.active, a.decay, a.rho, a.rank, a.mag, a.gen_seed)
        g.rng = np.random.default_rng([a.gen_seed, 0x5a3, 1])  # a stream of its own
        d = a.d
        if a.d_out: g.set_d_out(a.d_out)

        def batch():
            if a.d_out:
                x, y, _ = g.sample_pair(a.batch)
                return torch.from_numpy(x), torch.from_numpy(y)
            x = torch.from_numpy(g.sample(a.batch)[0])
            return x, x
        mean = torch.cat([batch()[1] for _ in range(16)]).double().mean(0).float()

    S, k = a.d_sae, a.k
    d_out = mean.shape[0]
    W_dec = torch.randn(S, d_out)
    W_dec /= W_dec.norm(dim=1, keepdim=True)
    W_encT = W_dec.clone()
    if d_out != d:
        W_encT = torch.randn(S, d)
        W_encT /= W_encT.norm(dim=1, keepdim=True)
    P = {"W_encT": W_encT, "b_enc": torch.zeros(S), "W_dec": W_dec, "b_dec": mean.clone()}
    if a.skip: P["W_skip"] = torch.zeros(d_out, d)
    opt = torch.optim.Adam(list(P.values()), lr=a.lr)
    if a.check_grad:
        xb, yb = batch()
        check_grad(P, xb, k, a.k_aux, a.aux_coef, yb if tc else None)
    since = torch.zeros(S, dtype=torch.long)
    steps = a.tokens // a.batch
    thr_sum, thr_n = 0.0, 0
    t0 = time.time()
    for step in range(steps):
        x, y = batch()
        dead = since >= a.dead_tokens if a.aux_coef > 0 else torch.zeros(S, dtype=torch.bool)
        nd = int(dead.sum())
        if a.batch_topk:
            loss, aux, fired_bt, thr = batchtopk_step(P, x, k, dead, a.k_aux, a.aux_coef, widths,
                                                      y if tc else None)
            if step >= steps - max(1, steps // 10):
                thr_sum, thr_n = thr_sum + thr, thr_n + 1
        with torch.no_grad():
            if not a.batch_topk:
                loss, aux, grads, idx, val = loss_and_grads(P, x, k, dead, a.k_aux, a.aux_coef,
                                                            y if tc else None)
                for name, t in P.items():
                    t.grad = grads[name]
            G = P["W_dec"].grad  # keep the rows unit norm: no step along a row
            G -= (G * P["W_dec"]).sum(1, keepdim=True) * P["W_dec"]
            opt.step()
            P["W_dec"] /= P["W_dec"].norm(dim=1, keepdim=True)
            if a.batch_topk:
                fired = fired_bt
            else:
                fired = torch.zeros(S, dtype=torch.bool)
                fired[idx[val > 0]] = True
            since = torch.where(fired, torch.zeros_like(since), since + a.batch)
        if step % max(1, steps // 10) == 0 or step == steps - 1:
            print(f"step {step} loss {loss:.5f} aux {aux:.4f} dead {nd} "
                  f"{time.time() - t0:.0f}s", file=sys.stderr, flush=True)
    W_enc, b_enc, W_dec, b_dec = P["W_encT"].t(), P["b_enc"], P["W_dec"], P["b_dec"]
    os.makedirs(a.out, exist_ok=True)
    tensors = {"W_enc": W_enc, "b_enc": b_enc, "W_dec": W_dec, "b_dec": b_dec}
    if a.skip: tensors["W_skip"] = P["W_skip"]
    if a.batch_topk:  # inference as JumpReLU with the global threshold (SAELens' convention)
        tensors["threshold"] = torch.full((S,), thr_sum / max(1, thr_n))
    save_safetensors(os.path.join(a.out, "sae_weights.safetensors"), tensors)
    with open(os.path.join(a.out, "cfg.json"), "w") as f:
        arch = "matryoshka_batchtopk" if widths else "batchtopk" if a.batch_topk else "topk"
        cfg = {"architecture": arch, "d_in": d, "d_sae": S,
               "k": k, "dtype": "float32", "apply_b_dec_to_input": True,
               "normalize_activations": "none",
               "metadata": {"hook_name": "x", "model_name": "gt_gen",
                            "sae_lens_training_version": "topk_ref.py"},
               "recipe": vars(a)}
        if a.batch_topk: cfg["threshold"] = thr_sum / max(1, thr_n)
        if widths: cfg["matryoshka_widths"] = widths + [S]
        if tc and a.batch_topk:  # inference as JumpReLU with the global threshold, as above
            cfg.update(architecture="jumprelu_transcoder", d_out=d_out, apply_b_dec_to_input=False,
                       activation_fn="jumprelu")
        elif tc:
            cfg.update(architecture="skip_transcoder" if a.skip else "transcoder", d_out=d_out, apply_b_dec_to_input=False,
                       activation_fn="topk", activation_fn_kwargs={"k": k})
        json.dump(cfg, f, indent=1)
    print(f"topk_ref: {steps} steps in {time.time() - t0:.0f} s, dead {nd}/{S}")


if __name__ == "__main__":
    main()
