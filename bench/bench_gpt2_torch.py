#!/usr/bin/python3
"""bench_gpt2_torch.py - the PyTorch peer of `saelite extract` on a GPT-2-small-shaped model
(bench_extract_peer.sh runs both): the forward of batch x ctx tokens through embeddings and
blocks 0..L-1, stopping after block L-1's MLP activation (blocks.<L-1>.mlp.hook_post), as
extract does; no storage. Random weights (the cost does not depend on them), GPT-2 small's shape
(d_model 768, 12 heads, d_mlp 3072, vocab 50257), HF Conv1D layout; fp32, or bf16 under
torch.autocast("cpu", torch.bfloat16) (oneDNN, AMX where the CPU has it).
Prints "torch <precision> <tok/s median> <min> <max>".
--cold times the first forward too (no untimed warm-up), as extract's own tok/s counts its first
batch: the first bf16 call builds oneDNN's kernels on either side. In bf16 the linear layers'
weights and biases are cast to bf16 once, before timing, as extract converts its weights once
(under autocast fp32 weights were cast at every call: 1.09-1.16x of the peer's time, an audit);
LayerNorm, softmax and the embeddings stay fp32 under autocast, as in extract.
Run it with GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (bench_extract_peer.sh does), on huge pages as
saelite's buffers are.
Usage: OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/bench_gpt2_torch.py [--layers 6]
         [--batch 8] [--ctx 128] [--batches 4] [--precision fp32|bf16] [--threads 2] [--reps 3]
         [--cold]
"""
import argparse
import math
import time

import torch
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--cold", action="store_true", help="no untimed warm-up forward")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    C, H, Fd, V, L = 768, 12, 3072, 50257, a.layers
    wte, wpe = torch.randn(V, C) * 0.02, torch.randn(1024, C) * 0.01
    blocks = [{k: torch.randn(*s) * 0.02 for k, s in
               [("qkvw", (3 * C, C)), ("projw", (C, C)), ("fcw", (Fd, C)), ("fcprojw", (C, Fd))]}
              for _ in range(L)]
    for b in blocks:
        b.update(qkvb=torch.zeros(3 * C), projb=torch.zeros(C), fcb=torch.zeros(Fd),
                 fcprojb=torch.zeros(C), ln1w=torch.ones(C), ln1b=torch.zeros(C),
                 ln2w=torch.ones(C), ln2b=torch.zeros(C))
    if a.precision == "bf16":
        for b in blocks:
            for kk in ("qkvw", "projw", "fcw", "fcprojw", "qkvb", "projb", "fcb", "fcprojb"):
                b[kk] = b[kk].bfloat16()
    B, T, dh = a.batch, a.ctx, C // H
    mask = torch.full((T, T), float("-inf")).triu(1)

    def forward(tok):
        x = wte[tok] + wpe[:T]
        post = None
        for li, p in enumerate(blocks):
            h = F.layer_norm(x, (C,), p["ln1w"], p["ln1b"])
            q, k, v = F.linear(h, p["qkvw"], p["qkvb"]).split(C, dim=2)
            q, k, v = (t.reshape(B, T, H, dh).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-1, -2)) / math.sqrt(dh) + mask
            z = (att.float().softmax(-1).to(v.dtype) @ v).transpose(1, 2).reshape(B, T, C)
            x = x + F.linear(z, p["projw"], p["projb"])
            h = F.layer_norm(x, (C,), p["ln2w"], p["ln2b"])
            post = F.gelu(F.linear(h, p["fcw"], p["fcb"]), approximate="tanh")
            if li == L - 1:
                return post  # extract stops at the hooked layer
            x = x + F.linear(post, p["fcprojw"], p["fcprojb"])
        return post

    tok = torch.randint(0, V, (B, T))
    rates = []
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
        if not a.cold:
            forward(tok)  # warm-up
        for _ in range(a.reps):
            t0 = time.perf_counter()
            for _ in range(a.batches):
                forward(tok).float().sum()
            rates.append(a.batches * B * T / (time.perf_counter() - t0))
    rates.sort()
    print(f"torch {a.precision} {rates[len(rates) // 2]:.0f} {rates[0]:.0f} {rates[-1]:.0f}")


if __name__ == "__main__":
    main()
