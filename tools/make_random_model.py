#!/usr/bin/env python3
"""Write a random-weight bf16 checkpoint of a real Qwen3 shape (numpy only, no torch), for speed measurements.

  python3 tools/make_random_model.py OUT_DIR [--shape qwen3-0.6b]

The words such a model produces are random; its speed is that of the real model of the same shape.
"""
import argparse
import json
import os

import numpy as np

SHAPES = {
    # hidden, layers, heads, kv heads, head_dim, intermediate, vocab, tied
    "qwen3-0.6b": (1024, 28, 16, 8, 128, 3072, 151936, True),
    "qwen3-1.7b": (2048, 28, 16, 8, 128, 6144, 151936, True),
    "tiny": (64, 2, 4, 2, 16, 128, 1024, True),
}


def bf16(rng, shape, scale):
    a = rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)
    return ((a.view(np.uint32) + 0x8000) >> 16).astype(np.uint16)  # round half up; fine for random data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--shape", default="qwen3-0.6b", choices=sorted(SHAPES))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    H, L, nq, nkv, hd, I, V, tied = SHAPES[args.shape]
    rng = np.random.default_rng(args.seed)
    t = {}
    t["model.embed_tokens.weight"] = bf16(rng, (V, H), 0.02)
    t["model.norm.weight"] = bf16(rng, (H,), 0.0) + np.uint16(0x3F80)  # 1.0
    for i in range(L):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = np.full((H,), 0x3F80, np.uint16)
        t[p + "post_attention_layernorm.weight"] = np.full((H,), 0x3F80, np.uint16)
        t[p + "self_attn.q_proj.weight"] = bf16(rng, (nq * hd, H), H ** -0.5)
        t[p + "self_attn.k_proj.weight"] = bf16(rng, (nkv * hd, H), H ** -0.5)
        t[p + "self_attn.v_proj.weight"] = bf16(rng, (nkv * hd, H), H ** -0.5)
        t[p + "self_attn.o_proj.weight"] = bf16(rng, (H, nq * hd), (nq * hd) ** -0.5)
        t[p + "self_attn.q_norm.weight"] = np.full((hd,), 0x3F80, np.uint16)
        t[p + "self_attn.k_norm.weight"] = np.full((hd,), 0x3F80, np.uint16)
        t[p + "mlp.gate_proj.weight"] = bf16(rng, (I, H), H ** -0.5)
        t[p + "mlp.up_proj.weight"] = bf16(rng, (I, H), H ** -0.5)
        t[p + "mlp.down_proj.weight"] = bf16(rng, (H, I), I ** -0.5)
    if not tied:
        t["lm_head.weight"] = bf16(rng, (V, H), H ** -0.5)
    os.makedirs(args.out, exist_ok=True)
    header, off = {}, 0
    for name, a in t.items():
        header[name] = {"dtype": "BF16", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(args.out, "model.safetensors"), "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for a in t.values():
            f.write(a.tobytes())
    config = {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": H, "num_hidden_layers": L,
        "num_attention_heads": nq, "num_key_value_heads": nkv, "head_dim": hd, "intermediate_size": I,
        "vocab_size": V, "tie_word_embeddings": tied, "rms_norm_eps": 1e-6, "hidden_act": "silu",
        "max_position_embeddings": 40960, "rope_theta": 1000000.0, "attention_bias": False,
        "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151645,
    }
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    n = sum(a.size for a in t.values())
    print(f"wrote {args.out}: {n / 1e6:.1f}M parameters, {off / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
