#!/usr/bin/python3
"""bench_sae_torch.py - the PyTorch peer of bench_sae's TopK step (bench_sae_peer.sh runs both).

The step as a PyTorch user writes it (OpenAI's / SAELens' TopK recipe): autograd through
pre = (x - b_dec) W_enc + b_enc, relu(top-k), an embedding_bag decoder (sparse forward),
||x - xhat||^2 summed over d, mean over the batch, plus AuxK (the top-k_aux pre-activations of
the latents dead for 2 batches, decoding the detached residual, OpenAI's normalised MSE,
coefficient 1/32); Adam (lr 1e-3); decoder rows unit norm with the gradient's parallel component
removed. Same batch shape as bench_sae (standard normal x, batch 4096, k 32, k_aux d_in/2).
--precision fp32, or bf16: the step under torch.autocast("cpu", torch.bfloat16) (oneDNN's bf16
matmuls, AMX where the CPU has it; weights, Adam and the decoder stay fp32).
Prints one line: "torch <precision> <tok/s median> <min> <max>".
Usage: OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/bench_sae_torch.py --d-in 512 --d-sae 4096
         [--precision fp32|bf16] [--steps 5] [--threads 2]
"""
import argparse
import time

import torch
import torch.nn.functional as F


def step_loss(W_enc, b_enc, W_dec, b_dec, x, k, dead, k_aux):
    pre = (x - b_dec) @ W_enc + b_enc
    val, idx = pre.topk(k, dim=1)
    val = torch.relu(val).to(W_dec.dtype)
    xhat = F.embedding_bag(idx, W_dec, per_sample_weights=val, mode="sum") + b_dec
    loss = (xhat - x).pow(2).sum(1).mean()
    nd = int(dead.sum())
    if nd > 0:
        dead_ids = torch.nonzero(dead).squeeze(1)
        aval, apos = pre[:, dead_ids].topk(min(k_aux, nd), dim=1)
        e = (x - xhat).detach()
        ehat = F.embedding_bag(dead_ids[apos], W_dec, per_sample_weights=torch.relu(aval).to(W_dec.dtype), mode="sum")
        loss = loss + (ehat - e).pow(2).sum(1).mean() / (e - e.mean(0)).pow(2).sum(1).mean() / 32
    return loss, idx, val


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--d-in", type=int, required=True)
    ap.add_argument("--d-sae", type=int, required=True)
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(3)
    B, d, S, k = a.batch, a.d_in, a.d_sae, a.k
    k_aux, dead_tokens = max(1, d // 2), 2 * B
    x = torch.randn(B, d)
    W_dec = torch.randn(S, d)
    W_dec /= W_dec.norm(dim=1, keepdim=True)
    W_enc = W_dec.t().clone().requires_grad_(True)
    b_enc = torch.zeros(S, requires_grad=True)
    W_dec.requires_grad_(True)
    b_dec = x.mean(0).clone().requires_grad_(True)
    opt = torch.optim.Adam([W_enc, b_enc, W_dec, b_dec], lr=1e-3)
    since = torch.zeros(S, dtype=torch.long)
    bf16 = a.precision == "bf16"
    times = []
    for step in range(a.steps + 1):  # step 0: warm-up
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss, idx, val = step_loss(W_enc, b_enc, W_dec, b_dec, x, k, since >= dead_tokens, k_aux)
        loss.backward()
        with torch.no_grad():
            G = W_dec.grad
            G -= (G * W_dec).sum(1, keepdim=True) * W_dec
            opt.step()
            W_dec /= W_dec.norm(dim=1, keepdim=True)
            fired = torch.zeros(S, dtype=torch.bool)
            fired[idx[val > 0]] = True
            since = torch.where(fired, torch.zeros_like(since), since + B)
        if step: times.append(time.perf_counter() - t0)
    times.sort()
    med = times[len(times) // 2] if len(times) % 2 else 0.5 * sum(times[len(times) // 2 - 1:len(times) // 2 + 1])
    print(f"torch {a.precision} {B / med:.0f} {B / times[-1]:.0f} {B / times[0]:.0f}")


if __name__ == "__main__":
    main()
