#!/usr/bin/env python3
"""Random PEFT LoRA adapters for a dense Qwen checkpoint, as peft saves them, for the multi-LoRA speed runs (issue 19):
COUNT adapter directories NAME00 ... under OUT, each an adapter_config.json and an adapter_model.safetensors with
lora_A [r, in] and lora_B [out, r] (f16) for every target module of every layer. Only DISTINCT weight files are
written (the others are symbolic links to them, round robin): a hundred registered adapters of an 8B model would
otherwise take 9 GB of the GPU machine's disk. Every adapter directory is its own adapter to the server (read,
held and placed in a slot by name), so the links change what the disk holds, not what the server does.

  python3 bench/gpu/make_lora_adapters.py MODEL_DIR OUT [--count 100] [--distinct 8] [--rank 16] [--alpha 32]
      [--targets q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj] [--prefix a]

numpy and safetensors only (the GPU machine has no peft). Values: A uniform in ±1/√in, B uniform in ±0.02/√r
(peft would start B at zero; a zero delta would measure nothing), so each adapter moves the logits without swamping
the base model.
"""
import argparse
import json
import os

import numpy as np
from safetensors.numpy import save_file

ATTN = ("q_proj", "k_proj", "v_proj", "o_proj")


def module_shapes(config):
    """(in, out) of each target module name of one layer of a dense Qwen2/Qwen3 model."""
    h = config["hidden_size"]
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads", heads)
    d = config.get("head_dim") or h // heads
    i = config["intermediate_size"]
    return {"q_proj": (h, heads * d), "k_proj": (h, kv * d), "v_proj": (h, kv * d), "o_proj": (heads * d, h),
            "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--distinct", type=int, default=8)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--alpha", type=int, default=32)
    ap.add_argument("--targets", default="q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj")
    ap.add_argument("--prefix", default="a")
    a = ap.parse_args()
    with open(os.path.join(a.model, "config.json")) as f:
        config = json.load(f)
    shapes = module_shapes(config)
    targets = a.targets.split(",")
    unknown = [t for t in targets if t not in shapes]
    if unknown:
        ap.error(f"unknown target modules {unknown}; known: {sorted(shapes)}")
    os.makedirs(a.out, exist_ok=True)
    adapter_config = {"peft_type": "LORA", "r": a.rank, "lora_alpha": a.alpha, "target_modules": targets,
                      "lora_dropout": 0.0, "bias": "none", "use_rslora": False, "use_dora": False,
                      "fan_in_fan_out": False, "modules_to_save": None, "inference_mode": True,
                      "base_model_name_or_path": os.path.abspath(a.model), "task_type": "CAUSAL_LM"}
    width = max(2, len(str(a.count - 1)))
    names = [f"{a.prefix}{i:0{width}d}" for i in range(a.count)]
    rng = np.random.default_rng(0)
    r = a.rank
    for i, name in enumerate(names):
        folder = os.path.join(a.out, name)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "adapter_config.json"), "w") as f:
            json.dump(adapter_config, f, indent=2)
        weights = os.path.join(folder, "adapter_model.safetensors")
        if os.path.lexists(weights):
            os.remove(weights)
        if i < a.distinct:
            tensors = {}
            for layer in range(config["num_hidden_layers"]):
                for t in targets:
                    k, n = shapes[t]
                    where = "self_attn" if t in ATTN else "mlp"
                    base = f"base_model.model.model.layers.{layer}.{where}.{t}"
                    tensors[base + ".lora_A.weight"] = rng.uniform(-1, 1, (r, k)).astype(np.float16) / np.float16(
                        np.sqrt(k))
                    tensors[base + ".lora_B.weight"] = (rng.uniform(-1, 1, (n, r)) * (0.02 / np.sqrt(r))).astype(
                        np.float16)
            save_file(tensors, weights, metadata={"format": "pt"})
        else:
            os.symlink(os.path.join("..", names[i % a.distinct], "adapter_model.safetensors"), weights)
    # The server's --lora-modules argument for all of them, one NAME=PATH per line.
    with open(os.path.join(a.out, "modules.txt"), "w") as f:
        for name in names:
            f.write(f"{name}={os.path.abspath(os.path.join(a.out, name))}\n")
    print(json.dumps({"adapters": a.count, "distinct_files": min(a.distinct, a.count), "rank": r,
                      "targets": targets, "out": a.out}))


if __name__ == "__main__":
    main()
