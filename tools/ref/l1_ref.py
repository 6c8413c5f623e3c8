#!/usr/bin/python3
"""l1_ref.py - plain PyTorch ReLU (L1) and JumpReLU (L0) SAE recipes: peers of saelite's trainers.

Written from the published equations, not from saelite's C code (issue 22).

--arch relu: the standard L1 SAE as Anthropic's "Circuits Updates - April 2024" trains it
  (https://transformer-circuits.pub/2024/april-update/index.html#training-saes; SAELens
  `standard` architecture, sae_lens/saes/standard_sae.py):
    inputs scaled by one constant so that E||x|| = sqrt(d_in)
    f = ReLU((x - b_dec) W_enc + b_enc),  xhat = f W_dec + b_dec   (--no-bdec-input: Anthropic's
        own f = ReLU(x W_enc + b_enc); SAELens' apply_b_dec_to_input switches between the two)
    loss = ||x - xhat||^2 (sum over d, mean over the batch) + lam * sum_i f_i ||W_dec,i||
    decoder unconstrained (its norms are in the penalty); W_dec rows random directions of norm
    0.1, W_enc = W_dec^T, b_enc = b_dec = 0; lam rises linearly from 0 over the first 5% of the
    steps; Adam (beta 0.9, 0.999); gradient norm clipped to 1; lr decays linearly to 0 over the
    last 20% of the steps.
--arch jumprelu: Rajamanoharan et al. 2024, "Jumping Ahead: Improving Reconstruction Fidelity
  with JumpReLU Sparse Autoencoders" (https://arxiv.org/abs/2407.14435):
    inputs scaled by one constant so that E||x||^2 = 1
    pre = x W_enc + b_enc,  f = pre * H(pre - theta),  theta = exp(log_theta)
    xhat = f W_dec + b_dec
    loss = ||x - xhat||^2 + lam * sum_i H(pre_i - theta_i)
    straight-through estimators with the rectangle kernel K(u) = 1[|u| < 1/2] of bandwidth eps:
      d JumpReLU / d pre = H(pre - theta),  d JumpReLU / d theta = -(theta / eps) K((pre - theta) / eps)
      d H / d pre = 0,                       d H / d theta = -(1 / eps) K((pre - theta) / eps)
    theta init 0.001, eps 0.001; W_dec rows unit norm (gradient parallel to each row removed,
    rows renormalised after the step); W_enc = W_dec^T, b_enc = b_dec = 0; Adam (beta 0, 0.999);
    lam rises linearly from 0 over the first --lam-warmup of the steps; gradient norm clipped to 1.
  SAELens' jumprelu_sae.py differs: theta is a plain parameter (relu'd, not exp(log theta); its
  issue #494), init 0.01, bandwidth 0.05; --theta-param direct gives that parameterisation.
--arch gated: Rajamanoharan et al. 2024, "Improving Dictionary Learning with Gated Sparse
  Autoencoders" (https://arxiv.org/abs/2404.16014, section 3 and its pseudo-code; the loss as
  dictionary_learning's GatedSAETrainer writes it):
    inputs scaled by one constant so that E||x||^2 = 1 (as for jumprelu, the same team's
        convention)
    pi = (x - b_dec) W_gate + b_gate,  f_gate = ReLU(pi)
    mag = (x - b_dec) (W_gate * exp(r_mag)) + b_mag   (W_mag shares W_gate's directions)
    f = 1[pi > 0] * ReLU(mag),  xhat = f W_dec + b_dec
    loss = ||x - xhat||^2 + lam * sum_i f_gate,i + ||x - (f_gate W_dec' + b_dec')||^2 with W_dec',
        b_dec' copies that get no gradient (the paper's frozen decoder)
    W_dec rows unit norm (gradient parallel to each row removed, rows renormalised after the
    step: dictionary_learning's ConstrainedAdam, whose penalty is then the plain L1 of f_gate);
    W_gate = W_dec^T, r_mag = b_gate = b_mag = b_dec = 0; Adam (beta 0, 0.999, ConstrainedAdam's);
    lr warm-up over the first --lr-warmup of the steps (dictionary_learning: 1000 steps); lam
    ramped as for the others; no gradient clipping and no lr decay (neither in GatedSAETrainer).
Everything else (all three): batch 4096, data from --npy (a fresh permutation per pass), Adam with the
lr of --lr, no resampling, no auxiliary dead-latent loss.
Writes OUTDIR in SAELens layout (cfg.json + sae_weights.safetensors: W_enc [d, S], b_enc,
W_dec [S, d], b_dec, and jumprelu's threshold; gated: b_gate, r_mag, b_mag instead of b_enc) with the input scale folded in, so the SAE takes
raw inputs and `saelite sae-eval --sae OUTDIR --npy ACTS --ground-truth truth.npy` scores it.
Usage: /usr/bin/python3 tools/ref/l1_ref.py --arch relu|jumprelu|gated --npy ACTS.npy --out DIR
         --lam L [--d-sae 1024] [--tokens 6000000] [--lr X] [--seed 0] [--check-grad]
--check-grad checks the two straight-through autograd Functions against their defining formulas
and the Step estimator against autograd through the ramp it is the exact derivative of.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch

from topk_ref import save_safetensors  # one SAELens-file writer for the recipes (same folder)


def rect(u):
    return ((u > -0.5) & (u < 0.5)).to(u.dtype)


class JumpReLU(torch.autograd.Function):
    """f = pre * H(pre - theta); pre gets H, theta the rectangle-kernel pseudo-derivative."""

    @staticmethod
    def forward(ctx, pre, theta, eps):
        ctx.save_for_backward(pre, theta)
        ctx.eps = eps
        return pre * (pre > theta).to(pre.dtype)

    @staticmethod
    def backward(ctx, g):
        pre, theta = ctx.saved_tensors
        eps = ctx.eps
        g_pre = g * (pre > theta).to(pre.dtype)
        g_theta = (-(theta / eps) * rect((pre - theta) / eps) * g).sum(0)
        return g_pre, g_theta, None


class Step(torch.autograd.Function):
    """H(pre - theta); pre gets no gradient, theta -(1/eps) K((pre - theta)/eps)."""

    @staticmethod
    def forward(ctx, pre, theta, eps):
        ctx.save_for_backward(pre, theta)
        ctx.eps = eps
        return (pre > theta).to(pre.dtype)

    @staticmethod
    def backward(ctx, g):
        pre, theta = ctx.saved_tensors
        eps = ctx.eps
        return None, (-(1.0 / eps) * rect((pre - theta) / eps) * g).sum(0), None


def theta_of(P, a):
    return torch.exp(P["log_theta"]) if a.theta_param == "log" else torch.relu(P["theta"])


def losses(P, x, a, lam):
    """(loss, mse, sparsity term, f) for one batch of scaled inputs."""
    if a.arch == "relu":
        xin = x - P["b_dec"] if a.bdec_input else x
        f = torch.relu(xin @ P["W_enc"] + P["b_enc"])
        xhat = f @ P["W_dec"] + P["b_dec"]
        sp = (f * P["W_dec"].norm(dim=1)).sum(1).mean()
    elif a.arch == "gated":
        xin = x - P["b_dec"]
        pi = xin @ P["W_enc"] + P["b_enc"]  # W_enc is W_gate, b_enc is b_gate
        f_gate = torch.relu(pi)
        mag = xin @ (P["W_enc"] * torch.exp(P["r_mag"])) + P["b_mag"]
        f = (pi > 0).to(x.dtype) * torch.relu(mag)
        xhat = f @ P["W_dec"] + P["b_dec"]
        sp = f_gate.sum(1).mean()
        xfrozen = f_gate @ P["W_dec"].detach() + P["b_dec"].detach()
        aux = (xfrozen - x).pow(2).sum(1).mean()
    else:
        xin = x - P["b_dec"] if a.bdec_input else x
        pre = xin @ P["W_enc"] + P["b_enc"]
        th = theta_of(P, a)
        f = JumpReLU.apply(pre, th, a.eps)
        xhat = f @ P["W_dec"] + P["b_dec"]
        sp = Step.apply(pre, th, a.eps).sum(1).mean()
    mse = (xhat - x).pow(2).sum(1).mean()
    loss = mse + lam * sp
    return (loss + aux if a.arch == "gated" else loss), mse, sp, f


def check_grad(a):
    """The STE Functions against the formulas that define them (float64, random inputs)."""
    torch.manual_seed(1)
    B, S, eps = 64, 32, 0.05
    pre = torch.randn(B, S, dtype=torch.float64) * 0.1
    th = (torch.rand(S, dtype=torch.float64) * 0.1).requires_grad_(True)
    p = pre.clone().requires_grad_(True)
    g = torch.randn(B, S, dtype=torch.float64)
    (JumpReLU.apply(p, th, eps) * g).sum().backward()
    want_p = g * (pre > th.detach())
    K = rect((pre - th.detach()) / eps)
    want_t = (-(th.detach() / eps) * K * g).sum(0)
    e1 = float((p.grad - want_p).abs().max())
    e2 = float((th.grad - want_t).abs().max() / want_t.abs().max())
    # Step's theta gradient is exactly autograd's through the ramp clamp((pre-theta)/eps + 1/2, 0, 1)
    th2 = th.detach().clone().requires_grad_(True)
    (Step.apply(pre, th2, eps) * g).sum().backward()
    th3 = th.detach().clone().requires_grad_(True)
    (torch.clamp((pre - th3) / eps + 0.5, 0, 1) * g).sum().backward()
    e3 = float((th2.grad - th3.grad).abs().max() / th3.grad.abs().max())
    n_in = int(K.sum())
    print(f"grad check: JumpReLU d/dpre {e1:.1e}, d/dtheta {e2:.1e}, Step d/dtheta vs ramp {e3:.1e} "
          f"({n_in} of {B * S} in the kernel)", file=sys.stderr)
    if max(e1, e2, e3) > 1e-12 or n_in == 0:
        sys.exit("l1_ref: straight-through gradients disagree with their definition")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", choices=["relu", "jumprelu", "gated"], required=True)
    ap.add_argument("--npy", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--lam", type=float, required=True, help="L1 (relu, gated) or L0 (jumprelu) coefficient")
    ap.add_argument("--d-sae", type=int, default=1024)
    ap.add_argument("--tokens", type=int, default=6000000)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--lr", type=float, help="default: relu 5e-5, jumprelu 7e-5, gated 5e-5 (the papers' / "
                    "dictionary_learning's)")
    ap.add_argument("--lr-warmup", type=float, help="first fraction, linear from 0 (gated 0.05, others 0)")
    ap.add_argument("--lam-warmup", type=float, default=0.05, help="fraction of the steps")
    ap.add_argument("--lr-decay", type=float, help="last fraction, linear to 0 (relu 0.2, jumprelu 0)")
    ap.add_argument("--clip", type=float, help="gradient norm clip (0: off; default 1, gated 0)")
    ap.add_argument("--dec-init-norm", type=float, default=0.1, help="relu: W_dec row norm at init")
    ap.add_argument("--eps", type=float, default=0.001, help="jumprelu: kernel bandwidth")
    ap.add_argument("--theta-init", type=float, default=0.001, help="jumprelu: initial threshold")
    ap.add_argument("--theta-param", choices=["log", "direct"], default="log")
    ap.add_argument("--no-bdec-input", dest="bdec_input", action="store_false",
                    help="relu: do not subtract b_dec before the encoder")
    ap.add_argument("--bdec-input", dest="bdec_input", action="store_true",
                    help="jumprelu: subtract b_dec before the encoder")
    ap.add_argument("--no-normalize", action="store_true", help="raw inputs (no constant scale)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--check-grad", action="store_true")
    ap.set_defaults(bdec_input=None)
    a = ap.parse_args()
    relu, gated = a.arch == "relu", a.arch == "gated"
    if a.lr is None: a.lr = 7e-5 if a.arch == "jumprelu" else 5e-5
    if a.lr_decay is None: a.lr_decay = 0.2 if relu else 0.0
    if a.lr_warmup is None: a.lr_warmup = 0.05 if gated else 0.0
    if a.clip is None: a.clip = 0.0 if gated else 1.0
    if a.bdec_input is None: a.bdec_input = relu or gated
    torch.set_num_threads(a.threads)
    if a.check_grad: check_grad(a)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    data = np.load(a.npy, mmap_mode="r")
    N, d = data.shape
    data = torch.from_numpy(np.array(data))
    perm, pos = torch.from_numpy(rng.permutation(N)), 0
    sample = data[:min(N, 262144)].double()
    if a.no_normalize:
        scale = 1.0
    elif relu:  # E||x|| = sqrt(d)
        scale = math.sqrt(d) / float(sample.norm(dim=1).mean())
    else:  # E||x||^2 = 1
        scale = 1.0 / math.sqrt(float(sample.pow(2).sum(1).mean()))

    def batch():
        nonlocal perm, pos
        if pos + a.batch > N: perm, pos = torch.from_numpy(rng.permutation(N)), 0
        pos += a.batch
        return data[perm[pos - a.batch:pos]] * scale

    S = a.d_sae
    W_dec = torch.randn(S, d)
    W_dec /= W_dec.norm(dim=1, keepdim=True)
    if relu: W_dec *= a.dec_init_norm
    P = {"W_enc": W_dec.t().clone(), "b_enc": torch.zeros(S), "W_dec": W_dec, "b_dec": torch.zeros(d)}
    if gated:
        P["r_mag"], P["b_mag"] = torch.zeros(S), torch.zeros(S)
    elif not relu:
        if a.theta_param == "log": P["log_theta"] = torch.full((S,), math.log(a.theta_init))
        else: P["theta"] = torch.full((S,), a.theta_init)
    for t in P.values(): t.requires_grad_(True)
    opt = torch.optim.Adam(list(P.values()), lr=a.lr, betas=(0.9, 0.999) if relu else (0.0, 0.999))
    steps = a.tokens // a.batch
    warm = max(1, int(a.lam_warmup * steps))
    decay = int(a.lr_decay * steps)
    lr_warm = int(a.lr_warmup * steps)
    fired_ever = torch.zeros(S, dtype=torch.bool)
    t0 = time.time()
    for step in range(steps):
        lam = a.lam * min(1.0, (step + 1) / warm)
        lr = a.lr * (min(1.0, (steps - step) / decay) if decay > 0 else 1.0)
        if lr_warm > 0: lr *= min(1.0, (step + 1) / lr_warm)
        for grp in opt.param_groups: grp["lr"] = lr
        x = batch()
        loss, mse, sp, f = losses(P, x, a, lam)
        opt.zero_grad()
        loss.backward()
        with torch.no_grad():
            if not relu:  # unit-norm decoder rows: no step along a row
                G, W = P["W_dec"].grad, P["W_dec"]
                G -= (G * W).sum(1, keepdim=True) * W
            if a.clip > 0: torch.nn.utils.clip_grad_norm_(list(P.values()), a.clip)
            opt.step()
            if not relu: P["W_dec"] /= P["W_dec"].norm(dim=1, keepdim=True)
            fired_ever |= (f > 0).any(0)
        if step % max(1, steps // 10) == 0 or step == steps - 1:
            l0 = float((f > 0).sum(1).double().mean())
            print(f"step {step} loss {float(loss):.5f} mse {float(mse):.5f} sparsity {float(sp):.4f} "
                  f"L0 {l0:.2f} lam {lam:.4g} lr {lr:.3g} {time.time() - t0:.0f}s",
                  file=sys.stderr, flush=True)
    with torch.no_grad():
        # fold the input scale in: the saved SAE takes raw x (pre and f unchanged, xhat / scale)
        tensors = {"W_enc": P["W_enc"] * scale, "b_enc": P["b_enc"].clone(),
                   "W_dec": P["W_dec"] / scale, "b_dec": P["b_dec"] / scale}
        if gated:  # SAELens' gated tensors: b_gate instead of b_enc
            tensors["b_gate"] = tensors.pop("b_enc")
            tensors["r_mag"], tensors["b_mag"] = P["r_mag"].clone(), P["b_mag"].clone()
        elif not relu: tensors["threshold"] = theta_of(P, a).clone()
    os.makedirs(a.out, exist_ok=True)
    save_safetensors(os.path.join(a.out, "sae_weights.safetensors"), tensors)
    with open(os.path.join(a.out, "cfg.json"), "w") as fh:
        cfg = {"architecture": "standard" if relu else a.arch, "d_in": d, "d_sae": S,
               "dtype": "float32", "apply_b_dec_to_input": bool(a.bdec_input),
               "normalize_activations": "none",
               "metadata": {"hook_name": "x", "model_name": "gt_gen",
                            "sae_lens_training_version": "l1_ref.py"},
               "recipe": dict(vars(a), input_scale=scale)}
        json.dump(cfg, fh, indent=1)
    print(f"l1_ref: {a.arch} {steps} steps in {time.time() - t0:.0f} s, scale {scale:.4f}, "
          f"never fired {int((~fired_ever).sum())}/{S}")


if __name__ == "__main__":
    main()
