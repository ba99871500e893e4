#!/usr/bin/env python3
"""Compares `pagoda logits --json --last 8` with transformers' fp32 logits (bench/gpu/hf_qwen3_8b.py) at a real
model shape, next to transformers' own bf16 run of the same model. Prints one JSON line; exits 1 when pagoda's
worst row error (max|diff| / max|logit|) exceeds both 2e-2 (the golden tests' tolerance, for 2-layer models) and
1.5x transformers-bf16's error (36 layers of bf16 rounding move logits further), or when the rows that agree with
fp32 on the top token are more than one fewer than all of them, or than transformers-bf16's own (a random-weight
model can be so sensitive that bf16 rounding alone changes its top tokens: the Qwen3.5-35B-A3B shape).

  python3 bench/gpu/compare_logits.py REFERENCE.npy PAGODA.json [REFERENCE_BF16.npy]
"""
import json
import sys

import numpy as np


def compare(ref, got, bf16=None):
    """The check above as a dict (its "ok" the verdict): `got` [rows, vocab] against the fp32 reference `ref`, next to
    transformers' bf16 logits `bf16` when given."""
    def rel(x):
        return np.abs(x - ref).max(axis=1) / np.abs(ref).max(axis=1)

    ours = rel(got)
    hf_bf16 = rel(bf16) if bf16 is not None else None
    top_same = int((got.argmax(axis=1) == ref.argmax(axis=1)).sum())
    hf_top_same = int((bf16.argmax(axis=1) == ref.argmax(axis=1)).sum()) if bf16 is not None else len(ref)
    limit = max(2e-2, 1.5 * float(hf_bf16.max())) if hf_bf16 is not None else 2e-2
    ok = bool(ours.max() <= limit and top_same >= min(len(ref), hf_top_same) - 1)
    return {"rows": len(ref), "max_rel_err": float(ours.max()), "mean_rel_err": float(ours.mean()),
            "hf_bf16_max_rel_err": None if hf_bf16 is None else float(hf_bf16.max()),
            "hf_bf16_mean_rel_err": None if hf_bf16 is None else float(hf_bf16.mean()),
            "limit": limit, "top1_agree": top_same, "hf_bf16_top1_agree": hf_top_same, "ok": ok}


def pagoda_logits(path):
    """The logits of a `pagoda logits --json` output, [rows, vocab] f32."""
    with open(path) as f:
        return np.array(json.load(f)["logits"], dtype=np.float32)


def main():
    ref = np.load(sys.argv[1])
    got = pagoda_logits(sys.argv[2])
    if got.shape != ref.shape:
        print(json.dumps({"error": f"shape {got.shape} differs from the reference {ref.shape}"}))
        return 1
    result = compare(ref, got, np.load(sys.argv[3]) if len(sys.argv) > 3 else None)
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
