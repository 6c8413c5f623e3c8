#!/usr/bin/python3
"""gt_gen.py - an independent family of superposition generators with known ground truth.

Written from the toy setup of Sharkey, Braun & Millidge (2022, "Taking features out of
superposition with sparse autoencoders"), not from saelite's sae/synth.c (different correlation
model, different random streams, numpy only). For one configuration it writes, under OUTDIR:
  truth.npy   float32 [features, d]   the true unit directions (rows)
  acts.npy    float32 [samples, d]    x = sum_i c_i truth_i, one sample per row
  meta.json   the configuration and measured statistics (mean active count, mean norm)
and with --d-out N (a transcoder's task: the same sparse codes written in a second space):
  truth_out.npy float32 [features, N]  the output directions (their own random stream)
  out.npy       float32 [samples, N]   y = sum_i c_i truth_out_i, row for row with acts.npy
(acts.npy and truth.npy are the same bytes with or without it). A skip transcoder's task adds
--linear B (with --d-out): y += x M^T, M [N, d] = B G / sqrt(d), G standard normal (own stream),
written as truth_skip.npy (SAELens' W_skip layout [d_out, d_in]); and --dense A: x += A g / sqrt(d),
g standard normal [d] (own stream), a dense part no sparse code carries, so only a linear map can
write its share of y and M is identifiable (W_skip = M, the decoder rows = truth_out). Both 0 by
default: the files are then the same bytes as without them.

Model. truth_i ~ N(0, I_d) normalised. Feature i fires with probability p_i = min(1, s decay^i),
s chosen by bisection so that sum_i p_i = active. Firing is correlated through a Gaussian copula:
z = sqrt(rho) L u + sqrt(1 - rho) eps with u ~ N(0, I_r), eps ~ N(0, I_F) and L [F, r] a random
Gaussian matrix with unit rows, so corr(z_i, z_j) = rho cos(L_i, L_j) (a random correlation
matrix of rank r plus a diagonal; rho = the correlation strength) and every z_i is N(0, 1);
feature i fires when z_i < Phi^-1(p_i), so its marginal probability is exactly p_i. A firing
feature's magnitude is drawn from `--mag`: uu = U(0,1) U(0,1) (the paper's), u = U(0,1),
exp = Exp(1) clipped at 4, one = 1.

Usage: /usr/bin/python3 tools/ref/gt_gen.py OUTDIR [--d 256] [--features 512] [--active 5]
         [--decay 0.99] [--rho 0.5] [--rank 16] [--mag uu] [--samples 1000000] [--seed 1]
         [--d-out N [--linear B] [--dense A]]
Cost: about 1.5 s per 100k samples at d 256, 512 features (2 cores); 1M samples = 1 GB on disk.
"""
import argparse
import json
import math
import os

import numpy as np


def norm_ppf(p):
    """Phi^-1 for an array of probabilities (Acklam's rational approximation, rel. err 1e-9)."""
    a = [-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02,
         1.383577518672690e02, -3.066479806614716e01, 2.506628277459239e00]
    b = [-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02,
         6.680131188771972e01, -1.328068155288572e01]
    c = [-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00,
         -2.549732539343734e00, 4.374664141464968e00, 2.938163982698783e00]
    d = [7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00,
         3.754408661907416e00]
    p = np.asarray(p, dtype=np.float64)
    out = np.empty_like(p)
    lo, hi = 0.02425, 1 - 0.02425
    m = p < lo
    q = np.sqrt(-2 * np.log(np.clip(p[m], 1e-300, None)))
    out[m] = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / \
             ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    m2 = p > hi
    q = np.sqrt(-2 * np.log(np.clip(1 - p[m2], 1e-300, None)))
    out[m2] = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / \
              ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    mid = ~(m | m2)
    q = p[mid] - 0.5
    r = q * q
    out[mid] = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / \
               (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    out[p >= 1] = np.inf
    return out


def probabilities(F, decay, active):
    base = decay ** np.arange(F, dtype=np.float64)
    lo, hi = 0.0, 1.0
    while np.minimum(1, hi * base).sum() < active:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if np.minimum(1, mid * base).sum() < active: lo = mid
        else: hi = mid
    return np.minimum(1, hi * base)


class Generator:
    def __init__(self, d=256, features=512, active=5.0, decay=0.99, rho=0.5, rank=16, mag="uu",
                 seed=1):
        if active > features: raise ValueError("active > features")
        self.d, self.F, self.rho, self.rank, self.mag = d, features, rho, rank, mag
        g = np.random.default_rng([seed, 0x7e57])  # dictionary stream
        t = g.standard_normal((features, d))
        self.truth = (t / np.linalg.norm(t, axis=1, keepdims=True)).astype(np.float32)
        L = g.standard_normal((features, max(rank, 1)))
        self.L = L / np.linalg.norm(L, axis=1, keepdims=True)
        self.p = probabilities(features, decay, active)
        self.thr = norm_ppf(self.p)
        self.rng = np.random.default_rng([seed, 0x5a3])  # sample stream
        self.seed, self.truth_out = seed, None
        self.dense, self.M = 0.0, None
        self.noise_rng = np.random.default_rng([seed, 0xd5e])  # --dense's stream

    def set_dense(self, a):
        """x gets a dense Gaussian part of expected squared norm a^2."""
        self.dense = a

    def set_linear(self, b):
        """y gets x M^T, M [d_out, d] = b G / sqrt(d) (set_d_out first)."""
        G = np.random.default_rng([self.seed, 0x5c1]).standard_normal((self.truth_out.shape[1], self.d))
        self.M = (b * G / math.sqrt(self.d)).astype(np.float32)

    def set_d_out(self, d_out):
        """A second dictionary in d_out dimensions for transcoder targets (stream of its own)."""
        t = np.random.default_rng([self.seed, 0x7d0]).standard_normal((self.F, d_out))
        self.truth_out = (t / np.linalg.norm(t, axis=1, keepdims=True)).astype(np.float32)

    def magnitudes(self, n):
        r = self.rng
        if self.mag == "uu": return r.random(n) * r.random(n)
        if self.mag == "u": return r.random(n)
        if self.mag == "exp": return np.minimum(r.exponential(1.0, n), 4.0)
        if self.mag == "one": return np.ones(n)
        raise ValueError("unknown --mag " + self.mag)

    def sample(self, n):
        """n samples: x [n, d] float32 and the firing count per sample [n]."""
        c, act = self.codes(n)
        return self.x_of(c), act

    def x_of(self, c):
        x = c @ self.truth
        if self.dense > 0:
            x += (self.dense / math.sqrt(self.d)) * self.noise_rng.standard_normal(x.shape, dtype=np.float32)
        return x

    def sample_pair(self, n):
        """n samples of x [n, d], y [n, d_out] (set_d_out first) and the firing counts."""
        c, act = self.codes(n)
        x = self.x_of(c)
        y = c @ self.truth_out
        if self.M is not None: y += x @ self.M.T
        return x, y, act

    def codes(self, n):
        """The sparse codes c [n, features] and the firing count per sample [n]."""
        r = self.rng
        z = math.sqrt(1 - self.rho) * r.standard_normal((n, self.F))
        if self.rho > 0 and self.rank > 0:
            z += math.sqrt(self.rho) * (r.standard_normal((n, self.rank)) @ self.L.T)
        fire = z < self.thr
        rows, cols = np.nonzero(fire)
        c = np.zeros((n, self.F), dtype=np.float32)
        c[rows, cols] = self.magnitudes(len(rows))
        return c, fire.sum(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--features", type=int, default=512)
    ap.add_argument("--active", type=float, default=5.0)
    ap.add_argument("--decay", type=float, default=0.99)
    ap.add_argument("--rho", type=float, default=0.5)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--mag", default="uu", choices=["uu", "u", "exp", "one"])
    ap.add_argument("--samples", type=int, default=1000000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--d-out", type=int, default=0, help="also write transcoder targets (out.npy)")
    ap.add_argument("--linear", type=float, default=0.0, help="with --d-out: y += x M^T (scale B)")
    ap.add_argument("--dense", type=float, default=0.0, help="x += a dense Gaussian part (norm A)")
    a = ap.parse_args()
    if a.linear and a.d_out <= 0: ap.error("--linear needs --d-out")
    os.makedirs(a.outdir, exist_ok=True)
    gen = Generator(a.d, a.features, a.active, a.decay, a.rho, a.rank, a.mag, a.seed)
    gen.set_dense(a.dense)
    np.save(os.path.join(a.outdir, "truth.npy"), gen.truth)
    out = np.lib.format.open_memmap(os.path.join(a.outdir, "acts.npy"), mode="w+",
                                    dtype=np.float32, shape=(a.samples, a.d))
    yout = None
    if a.d_out > 0:
        gen.set_d_out(a.d_out)
        np.save(os.path.join(a.outdir, "truth_out.npy"), gen.truth_out)
        if a.linear:
            gen.set_linear(a.linear)
            np.save(os.path.join(a.outdir, "truth_skip.npy"), gen.M)
        yout = np.lib.format.open_memmap(os.path.join(a.outdir, "out.npy"), mode="w+",
                                         dtype=np.float32, shape=(a.samples, a.d_out))
    nact, nsum, chunk = 0, 0.0, 65536
    for r0 in range(0, a.samples, chunk):
        n = min(chunk, a.samples - r0)
        if yout is None: x, act = gen.sample(n)
        else:
            x, y, act = gen.sample_pair(n)
            yout[r0:r0 + n] = y
        out[r0:r0 + n] = x
        nact += int(act.sum())
        nsum += float(np.linalg.norm(x, axis=1).sum())
    out.flush()
    if yout is not None: yout.flush()
    meta = dict(vars(a), mean_active=nact / a.samples, mean_norm=nsum / a.samples,
                p_max=float(gen.p[0]), p_min=float(gen.p[-1]))
    with open(os.path.join(a.outdir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
