#!/usr/bin/env python3
"""How far transformers' own bf16 forward lands from the fp32 reference logits of each tiny golden model.

  python3 bench/gpu/golden_bf16_drift.py tests/golden [--device cuda]

tests/golden/<name>/logits.bin holds transformers' fp32 logits (tools/make_tiny_models.py). The same checkpoint run by
transformers in bf16 (weights as stored, activations in bf16) moves them by some amount that depends on the model:
hybrid and MoE models amplify rounding more than dense ones (a gate or a top-k routing decision that flips). The CUDA
golden test (tests/unit/cuda/cuda_golden_test.cpp) holds pagoda's bf16 GPU path to a bound derived from this number,
recorded as "transformers_bf16_max_abs_diff" in each reference.json. Prints one JSON line per model.
"""
import argparse
import json
import os

import numpy as np
import torch
from transformers import AutoModelForCausalLM


def model_class(model_type):
    if model_type == "qwen3_5":
        from transformers import Qwen3_5ForConditionalGeneration
        return Qwen3_5ForConditionalGeneration
    if model_type == "qwen3_5_moe":
        from transformers import Qwen3_5MoeForConditionalGeneration
        return Qwen3_5MoeForConditionalGeneration
    return AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--write", action="store_true", help="record the drift in each reference.json")
    a = ap.parse_args()
    for name in sorted(os.listdir(a.root)):
        d = os.path.join(a.root, name)
        if not os.path.isfile(os.path.join(d, "reference.json")):
            continue
        ref = json.load(open(os.path.join(d, "reference.json")))
        want = np.fromfile(os.path.join(d, "logits.bin"), dtype=np.float32).reshape(ref["logits_shape"])
        model_type = json.load(open(os.path.join(d, "config.json")))["model_type"]
        cls = model_class(model_type)
        row = {"model": name}
        for dtype in (torch.float32, torch.bfloat16):
            model = cls.from_pretrained(d, dtype=dtype, attn_implementation="eager").to(a.device).eval()
            with torch.no_grad():
                got = model(input_ids=torch.tensor([ref["ids"]], device=a.device), use_cache=False).logits[0]
            diff = np.abs(got.float().cpu().numpy() - want)
            key = "fp32" if dtype == torch.float32 else "bf16"
            row[f"{key}_max_abs_diff"] = float(diff.max())
            row[f"{key}_worst_position"] = int(diff.max(axis=1).argmax())
            del model
        row["max_abs_ref"] = float(np.abs(want).max())
        row["bf16_rel"] = row["bf16_max_abs_diff"] / row["max_abs_ref"]
        print(json.dumps(row), flush=True)
        if a.write:
            ref["transformers_bf16_max_abs_diff"] = round(row["bf16_max_abs_diff"], 6)
            with open(os.path.join(d, "reference.json"), "w") as f:
                json.dump(ref, f, indent=1)


if __name__ == "__main__":
    main()
