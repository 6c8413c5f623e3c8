#!/usr/bin/env python3
"""sae_ref.py - reference forward passes of every SAE architecture, from SAELens' equations
(sae_lens/saes/*.py: encode/decode of StandardSAE, TopKSAE, JumpReLUSAE, GatedSAE; Matryoshka
BatchTopK is saved as JumpReLU; transcoder.py's Transcoder, JumpReLUTranscoder, SkipTranscoder), in
numpy, on random weights and inputs.

For each case it writes OUT/<case>/ in the SAELens file layout (cfg.json, sae_weights.safetensors)
plus x.npy [N,d_in], f.npy [N,d_sae] (encode) and xhat.npy [N,d_out] (the forward pass: decode of f,
plus x W_skip^T for a skip transcoder). tests/test_sae.c loads each directory with sae_load and checks
sae_encode and sae_forward against f and xhat (1e-5).

    /usr/bin/python3 tools/ref/sae_ref.py tests/data/sae_ref   (numpy only; deterministic)
"""
import json
import os
import struct
import sys

import numpy as np

D_IN, D_SAE, N, K, D_OUT = 6, 10, 7, 3, 4


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        f64 = arr.dtype == np.float64  # SAELens keeps BatchTopK's topk_threshold in double
        b = np.ascontiguousarray(arr, dtype="<f8" if f64 else "<f4").tobytes()
        header[name] = {"dtype": "F64" if f64 else "F32", "shape": list(arr.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as fp:
        fp.write(struct.pack("<Q", len(h)))
        fp.write(h)
        for b in blobs:
            fp.write(b)


def write_npy(path, arr):
    np.save(path, np.ascontiguousarray(arr, dtype="<f4"))


def relu(a):
    return np.maximum(a, 0)


# ---- SAELens' encode/decode, one function per architecture (float64, compared at 1e-5) ----
def sae_in(x, w, apply_b_dec):
    return x - w["b_dec"] * apply_b_dec


def enc_standard(x, w, c):
    return relu(sae_in(x, w, c["apply_b_dec_to_input"]) @ w["W_enc"] + w["b_enc"])


def topk_relu(pre, k):
    idx = np.argsort(-pre, axis=1, kind="stable")[:, :k]
    f = np.zeros_like(pre)
    np.put_along_axis(f, idx, relu(np.take_along_axis(pre, idx, axis=1)), axis=1)
    return f


def enc_topk(x, w, c):
    return topk_relu(sae_in(x, w, c["apply_b_dec_to_input"]) @ w["W_enc"] + w["b_enc"], c["k"])


def enc_jumprelu(x, w, c):
    pre = sae_in(x, w, c["apply_b_dec_to_input"]) @ w["W_enc"] + w["b_enc"]
    return relu(pre) * (pre > w["threshold"])


def enc_gated(x, w, c):
    s = sae_in(x, w, c["apply_b_dec_to_input"])
    active = (s @ w["W_enc"] + w["b_gate"]) > 0
    mag = s @ (w["W_enc"] * np.exp(w["r_mag"])) + w["b_mag"]
    return active * relu(mag)


def decode(f, w):
    return f @ w["W_dec"] + w["b_dec"]


# rescale_acts_by_decoder_norm (TopKSAE, TopKTrainingSAE and BatchTopKTrainingSAE): the
# pre-activations times ||W_dec_j|| before the activation, the activations over it before decoding
def dec_norms(w):
    return np.linalg.norm(w["W_dec"], axis=1)


def enc_topk_rescale(x, w, c):
    pre = (sae_in(x, w, c["apply_b_dec_to_input"]) @ w["W_enc"] + w["b_enc"]) * dec_norms(w)
    return topk_relu(pre, c["k"])


# BatchTopKTrainingSAE saved as a training checkpoint: its global topk_threshold, which SAELens'
# inference export turns into a JumpReLU threshold on the (rescaled) pre-activations
def enc_batchtopk_training(x, w, c):
    pre = sae_in(x, w, c["apply_b_dec_to_input"]) @ w["W_enc"] + w["b_enc"]
    if c.get("rescale_acts_by_decoder_norm"):
        pre = pre * dec_norms(w)
    return relu(pre) * (pre > w["topk_threshold"])


# transcoders: process_sae_in never subtracts b_dec (it is d_out wide)
def enc_transcoder(x, w, c):
    return relu(x @ w["W_enc"] + w["b_enc"])


def enc_jumprelu_transcoder(x, w, c):
    pre = x @ w["W_enc"] + w["b_enc"]
    return relu(pre) * (pre > w["threshold"])


def centre(x):
    return x - x.mean(axis=1, keepdims=True)


def forward(x, f, w, c):
    if c.get("rescale_acts_by_decoder_norm"):
        f = f / dec_norms(w)
    if c.get("finetuning_scaling_factor"):  # SAELens 3-5: apply_finetuning_scaling_factor
        f = f * w["finetuning_scaling_factor"]
    out = decode(f, w)
    if "W_skip" in w:
        out = out + x @ w["W_skip"].T
    if c.get("metadata", {}).get("model_from_pretrained_kwargs", {}).get("center_writing_weights"):
        out = out + x.mean(axis=1, keepdims=True)
    return out


def cfg_base(arch, apply_b_dec=True):
    return {"architecture": arch, "d_in": D_IN, "d_sae": D_SAE, "dtype": "float32", "device": "cpu",
            "apply_b_dec_to_input": apply_b_dec, "normalize_activations": "none",
            "metadata": {"hook_name": "blocks.0.hook_resid_post", "model_name": "ref",
                         "context_size": 16, "hook_head_index": None, "prepend_bos": True,
                         "sae_lens_training_version": "sae_ref.py"}}


def main(out):
    rng = np.random.default_rng(1234)
    x = rng.normal(size=(N, D_IN)) * 2

    def weights():
        W_dec = rng.normal(size=(D_SAE, D_IN))
        W_dec /= np.linalg.norm(W_dec, axis=1, keepdims=True)
        return {"W_enc": W_dec.T * rng.uniform(0.5, 1.5, size=D_SAE) + 0.1 * rng.normal(size=(D_IN, D_SAE)),
                "b_enc": rng.normal(size=D_SAE) * 0.3, "W_dec": W_dec, "b_dec": rng.normal(size=D_IN) * 0.5}

    cases = []
    w = weights()
    cases.append(("standard", cfg_base("standard"), w, enc_standard))
    w = weights()
    cases.append(("standard_nobdec", cfg_base("standard", False), w, enc_standard))
    w = weights()
    c = cfg_base("topk")
    c["k"] = K
    cases.append(("topk", c, w, enc_topk))
    w = weights()
    w["threshold"] = rng.uniform(0.2, 1.0, size=D_SAE)
    cases.append(("jumprelu", cfg_base("jumprelu"), w, enc_jumprelu))
    w = weights()
    w["threshold"] = np.full(D_SAE, 0.4)  # BatchTopK's global threshold, broadcast
    c = cfg_base("jumprelu")
    c["matryoshka_widths"] = [3, 6, D_SAE]
    cases.append(("matryoshka", c, w, enc_jumprelu))
    for name, nob in (("gated", True), ("gated_nobdec", False)):
        w = weights()
        w["b_gate"] = w.pop("b_enc")
        w["b_mag"] = rng.normal(size=D_SAE) * 0.3
        w["r_mag"] = rng.normal(size=D_SAE) * 0.3
        cases.append((name, cfg_base("gated", nob), w, enc_gated))

    for name, arch, thr, skip in (("transcoder", "transcoder", False, False),
                                  ("jumprelu_transcoder", "jumprelu_transcoder", True, False),
                                  ("skip_transcoder", "skip_transcoder", False, True)):
        W_dec = rng.normal(size=(D_SAE, D_OUT))
        W_dec /= np.linalg.norm(W_dec, axis=1, keepdims=True)
        w = {"W_enc": rng.normal(size=(D_IN, D_SAE)) * 0.6, "b_enc": rng.normal(size=D_SAE) * 0.3,
             "W_dec": W_dec, "b_dec": rng.normal(size=D_OUT) * 0.5}
        if thr:
            w["threshold"] = rng.uniform(0.2, 1.0, size=D_SAE)
        if skip:
            w["W_skip"] = rng.normal(size=(D_OUT, D_IN)) * 0.3
        c = cfg_base(arch, False)
        c["d_out"] = D_OUT
        c["hook_name_out"] = "blocks.0.hook_mlp_out"
        c["metadata"]["hook_name"] = "blocks.0.ln2.hook_normalized"
        c["metadata"]["hook_name_out"] = "blocks.0.hook_mlp_out"
        cases.append((name, c, w, enc_jumprelu_transcoder if thr else enc_transcoder))

    # training-state files (appended last: the cases above keep their random draws): decoder rows
    # of norms 0.05-3, as SAELens' decoder_init_norm 0.1 leaves them, not unit
    w = weights()
    w["W_dec"] *= rng.uniform(0.05, 3.0, size=(D_SAE, 1))
    c = cfg_base("topk", False)
    c["k"] = K
    c["rescale_acts_by_decoder_norm"] = True
    cases.append(("topk_rescale", c, w, enc_topk_rescale))
    w = weights()
    w["W_dec"] *= rng.uniform(0.05, 3.0, size=(D_SAE, 1))
    w["topk_threshold"] = np.array(0.35, dtype=np.float64).reshape(())
    c = cfg_base("batchtopk")
    c["k"] = 2.5
    c["rescale_acts_by_decoder_norm"] = True
    cases.append(("batchtopk_training", c, w, enc_batchtopk_training))
    w = weights()
    w["finetuning_scaling_factor"] = rng.uniform(0.5, 2.0, size=D_SAE)
    c = cfg_base("standard")
    c["finetuning_scaling_factor"] = True
    cases.append(("finetuning_scale", c, w, enc_standard))
    # SAEs trained on TransformerLens' center_writing_weights residuals (SAELens' gpt2-small-res-jb
    # loads its model with model_from_pretrained_kwargs {"center_writing_weights": true}): they
    # read C x, x centred along d_in; saelite's x_hat is SAELens' x_hat of C x plus the mean C took
    for name, arch, nob in (("standard_centered", "standard", True), ("gated_centered", "gated", True),
                            ("jumprelu_centered_nobdec", "jumprelu", False)):
        w = weights()
        if arch == "gated":
            w["b_gate"] = w.pop("b_enc")
            w["b_mag"] = rng.normal(size=D_SAE) * 0.3
            w["r_mag"] = rng.normal(size=D_SAE) * 0.3
        if arch == "jumprelu":
            w["threshold"] = rng.uniform(0.2, 1.0, size=D_SAE)
        c = cfg_base(arch, nob)
        c["metadata"]["model_from_pretrained_kwargs"] = {"center_writing_weights": True}
        base = {"standard": enc_standard, "gated": enc_gated, "jumprelu": enc_jumprelu}[arch]
        cases.append((name, c, w, lambda x, w, c, base=base: base(centre(x), w, c)))

    # SAELens' JumpReLUSkipTranscoder (Gemma Scope 2's affine transcoders): JumpReLU encode, the
    # decode plus x @ W_skip^T
    W_dec = rng.normal(size=(D_SAE, D_OUT))
    W_dec /= np.linalg.norm(W_dec, axis=1, keepdims=True)
    w = {"W_enc": rng.normal(size=(D_IN, D_SAE)) * 0.6, "b_enc": rng.normal(size=D_SAE) * 0.3,
         "W_dec": W_dec, "b_dec": rng.normal(size=D_OUT) * 0.5,
         "threshold": rng.uniform(0.2, 1.0, size=D_SAE), "W_skip": rng.normal(size=(D_OUT, D_IN)) * 0.3}
    c = cfg_base("jumprelu_skip_transcoder", False)
    c["d_out"] = D_OUT
    c["hook_name_out"] = "blocks.0.hook_mlp_out"
    c["metadata"]["hook_name"] = "blocks.0.ln2.hook_normalized"
    c["metadata"]["hook_name_out"] = "blocks.0.hook_mlp_out"
    cases.append(("jumprelu_skip_transcoder", c, w, enc_jumprelu_transcoder))

    for name, cfg, w, enc in cases:
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        w = {k: v if k == "topk_threshold" else v.astype(np.float32) for k, v in w.items()}
        w64 = {k: v.astype(np.float64) for k, v in w.items()}
        x32 = x.astype(np.float32).astype(np.float64)
        f = enc(x32, w64, cfg)
        xhat = forward(x32, f, w64, cfg)
        write_safetensors(os.path.join(d, "sae_weights.safetensors"), w)
        with open(os.path.join(d, "cfg.json"), "w") as fp:
            json.dump(cfg, fp, indent=1)
        write_npy(os.path.join(d, "x.npy"), x32)
        write_npy(os.path.join(d, "f.npy"), f)
        write_npy(os.path.join(d, "xhat.npy"), xhat)
        print(f"{name}: L0 {np.mean(np.sum(f > 0, axis=1)):.2f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/sae_ref")
