#!/usr/bin/env python3
"""Where a run parts from transformers, layer by layer: `pagoda logits --json --hidden --last 8` against the hidden
states bench/gpu/hf_qwen3_8b.py saved (fp32, and transformers' own bf16 run beside it). Per layer, the worst row's
max|diff| / max|reference|: a layer where pagoda's error jumps well past bf16's is where to look.
  python3 bench/gpu/compare_hidden.py MODEL_DIR PAGODA.json
"""
import json
import sys

import numpy as np


def main():
    ref = np.load(f"{sys.argv[1]}/reference_hidden.npy")
    bf16 = np.load(f"{sys.argv[1]}/reference_hidden_bf16.npy")
    with open(sys.argv[2]) as f:
        got = np.array(json.load(f)["hidden"], dtype=np.float32)
    if got.shape != ref.shape:
        print(json.dumps({"error": f"shape {got.shape} differs from the reference {ref.shape}"}))
        return 1

    def rel(x, layer):
        return float((np.abs(x[layer] - ref[layer]).max(axis=1) / np.abs(ref[layer]).max(axis=1)).max())

    # The last entry: transformers' is after the final norm, pagoda's before it.
    for layer in range(ref.shape[0] - 1):
        print(json.dumps({"after_layers": layer, "pagoda": rel(got, layer), "hf_bf16": rel(bf16, layer)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
