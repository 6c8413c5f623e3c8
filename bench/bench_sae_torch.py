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
The encoder's backward is sparse by default, as a PyTorch user who has the embedding_bag decoder
would write it too (an audit found the peer otherwise handicapped): the pre-activations are
computed once without autograd, and a custom autograd.Function gathers the B x k entries the
top-k (and AuxK) take, its backward giving W_enc's and b_enc's gradients by a sparse matmul and
index_add and the input's by embedding_bag over W_enc's rows. --dense-enc keeps autograd through
the dense encoder (three encoder-sized GEMMs a step, the plain recipe). --check compares one
step's gradients of the two (fp32, AuxK on) and exits non-zero when they differ.
Run it with GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (bench_sae_peer.sh does): saelite's buffers sit
on huge pages, and with 4 KiB pages this VM's first writes cost the peer 1.4-3.4x (the audit).
Prints one line: "torch <precision> <tok/s median> <min> <max>".
Usage: OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/bench_sae_torch.py --d-in 512 --d-sae 4096
         [--precision fp32|bf16] [--steps 5] [--threads 2] [--dense-enc] [--check]
"""
import argparse
import time

import torch
import torch.nn.functional as F


class TakeCols(torch.autograd.Function):
    """pre[b, idx[b, j]] for pre = xc @ W_encT^T + b_enc computed once outside autograd: the
    gradient flows through the B x k entries taken only, as in saelite's backward."""

    @staticmethod
    def forward(ctx, xc, W_encT, b_enc, pre, idx):
        ctx.save_for_backward(xc, W_encT, idx)
        return pre.gather(1, idx)

    @staticmethod
    def backward(ctx, g):
        xc, W_encT, idx = ctx.saved_tensors
        B, k = idx.shape
        S = W_encT.shape[0]
        g = g.contiguous().float()
        fi = idx.reshape(-1)
        rows = torch.arange(B).repeat_interleave(k)
        Gt = torch.sparse_coo_tensor(torch.stack([fi, rows]), g.reshape(-1), (S, B))
        gW = torch.sparse.mm(Gt, xc.float())  # [S, d]
        gb = torch.zeros(S).index_add_(0, fi, g.reshape(-1))
        gxc = F.embedding_bag(idx, W_encT, per_sample_weights=g, mode="sum")
        return gxc, gW, gb, None, None


def step_loss(W_enc, b_enc, W_dec, b_dec, x, k, dead, k_aux, sparse=False):
    """W_enc is [d, S] for the dense recipe, [S, d] (W_encT) for the sparse one."""
    xc = x - b_dec
    if sparse:
        with torch.no_grad():
            pre = xc @ W_enc.t() + b_enc
        _, idx = pre.topk(k, dim=1)
        val = TakeCols.apply(xc, W_enc, b_enc, pre, idx)
    else:
        pre = xc @ W_enc + b_enc
        val, idx = pre.topk(k, dim=1)
    val = torch.relu(val).to(W_dec.dtype)
    xhat = F.embedding_bag(idx, W_dec, per_sample_weights=val, mode="sum") + b_dec
    loss = (xhat - x).pow(2).sum(1).mean()
    nd = int(dead.sum())
    if nd > 0:
        dead_ids = torch.nonzero(dead).squeeze(1)
        if sparse:
            _, apos = pre[:, dead_ids].topk(min(k_aux, nd), dim=1)
            aidx = dead_ids[apos]
            aval = TakeCols.apply(xc, W_enc, b_enc, pre, aidx)
        else:
            aval, apos = pre[:, dead_ids].topk(min(k_aux, nd), dim=1)
            aidx = dead_ids[apos]
        e = (x - xhat).detach()
        ehat = F.embedding_bag(aidx, W_dec, per_sample_weights=torch.relu(aval).to(W_dec.dtype), mode="sum")
        loss = loss + (ehat - e).pow(2).sum(1).mean() / (e - e.mean(0)).pow(2).sum(1).mean() / 32
    return loss, idx, val


def setup(B, d, S):
    torch.manual_seed(3)
    x = torch.randn(B, d)
    W_dec = torch.randn(S, d)
    W_dec /= W_dec.norm(dim=1, keepdim=True)
    W_encT = W_dec.clone()
    b_enc = torch.zeros(S)
    b_dec = x.mean(0).clone()
    return x, W_encT, b_enc, W_dec, b_dec


def check(k):
    """One step's gradients, sparse against dense autograd (fp32, a third of the latents dead so
    AuxK runs): the same function, so within float rounding."""
    B, d, S = 256, 64, 512
    x, W_encT, b_enc, W_dec, b_dec = setup(B, d, S)
    dead = torch.zeros(S, dtype=torch.bool)
    dead[::3] = True
    grads = []
    for sparse in (False, True):
        We = (W_encT if sparse else W_encT.t()).clone().requires_grad_(True)
        be, Wd, bd = b_enc.clone().requires_grad_(True), W_dec.clone().requires_grad_(True), b_dec.clone().requires_grad_(True)
        loss, _, _ = step_loss(We, be, Wd, bd, x, k, dead, d // 2, sparse)
        loss.backward()
        grads.append((loss.item(), We.grad if sparse else We.grad.t(), be.grad, Wd.grad, bd.grad))
    worst = max(float((a - b).abs().max() / (b.abs().max() + 1e-30)) for a, b in zip(grads[0][1:], grads[1][1:]))
    ok = abs(grads[0][0] - grads[1][0]) <= 1e-5 * abs(grads[0][0]) and worst < 1e-4
    print(f"torch check: loss {grads[0][0]:.6g} / {grads[1][0]:.6g}, worst relative gradient difference {worst:.2e}: {'ok' if ok else 'DIFFERENT'}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--d-in", type=int, required=True)
    ap.add_argument("--d-sae", type=int, required=True)
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--dense-enc", action="store_true", help="autograd through the dense encoder")
    ap.add_argument("--check", action="store_true", help="sparse against dense gradients, then exit")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.check:
        raise SystemExit(0 if check(a.k) else 1)
    B, d, S, k = a.batch, a.d_in, a.d_sae, a.k
    k_aux, dead_tokens = max(1, d // 2), 2 * B
    sparse = not a.dense_enc
    x, W_encT, b_enc, W_dec, b_dec = setup(B, d, S)
    W_enc = (W_encT if sparse else W_encT.t().clone()).requires_grad_(True)
    b_enc.requires_grad_(True)
    W_dec.requires_grad_(True)
    b_dec.requires_grad_(True)
    opt = torch.optim.Adam([W_enc, b_enc, W_dec, b_dec], lr=1e-3)
    since = torch.zeros(S, dtype=torch.long)
    bf16 = a.precision == "bf16"
    times = []
    for step in range(a.steps + 1):  # step 0: warm-up
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss, idx, val = step_loss(W_enc, b_enc, W_dec, b_dec, x, k, since >= dead_tokens, k_aux, sparse)
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
    print(f"torch{'' if sparse else '-dense'} {a.precision} {B / med:.0f} {B / times[-1]:.0f} {B / times[0]:.0f}")


if __name__ == "__main__":
    main()
