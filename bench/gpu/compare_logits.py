#!/usr/bin/env python3
"""Compares `pagoda logits --json --last 8` with transformers' fp32 logits (bench/gpu/hf_qwen3_8b.py) at a real
model shape. Prints one JSON line; exits 1 when a row's max|diff| exceeds 2e-2 of its largest |logit| (the golden
tests' bf16 tolerance) or when more than one of the 8 rows disagrees on the top token.

  python3 bench/gpu/compare_logits.py REFERENCE.npy PAGODA.json
"""
import json
import sys

import numpy as np


def main():
    ref = np.load(sys.argv[1])
    with open(sys.argv[2]) as f:
        got = np.array(json.load(f)["logits"], dtype=np.float32)
    if got.shape != ref.shape:
        print(json.dumps({"error": f"shape {got.shape} differs from the reference {ref.shape}"}))
        return 1
    rel = np.abs(got - ref).max(axis=1) / np.abs(ref).max(axis=1)
    top_same = int((got.argmax(axis=1) == ref.argmax(axis=1)).sum())
    ok = bool(rel.max() <= 2e-2 and top_same >= len(ref) - 1)
    print(json.dumps({"rows": len(ref), "max_rel_err": float(rel.max()), "mean_rel_err": float(rel.mean()),
                      "top1_agree": top_same, "ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
