#!/usr/bin/env python3
"""Issue 18's real-shape check of a quantized model: pagoda's logits of it (`pagoda logits --json --last 8`) against

  1. transformers' fp32 run of the same quantized weights (bench/gpu/quant_reference.py): pagoda's kernels must compute
     what the format serves, judged as bench/gpu/compare_logits.py judges the bf16 model (limit 2e-2 of the largest
     logit, or 1.5x transformers-bf16's own error; top-1 agreement) — the verdict and the exit status;
  2. the bf16 model's fp32 logits (bench/gpu/hf_qwen3_8b.py's reference): what the quantization itself costs, as the
     mean and largest KL divergence KL(bf16 || quantized) over the rows and the rows whose top token agrees, for pagoda
     and for transformers' run of the quantized weights side by side (they should agree: the quantization's cost, not
     the kernels').

  python3 bench/gpu/compare_quantized.py BF16_REF.npy QUANT_REF.npy PAGODA_QUANT.json [HF_BF16.npy [QUANT_BF16.npy]]

QUANT_BF16.npy (quant_reference.py --dtype bf16: transformers' bf16 run of the same quantized model) sets the bound
of 1. as compare_logits.py sets it from a bf16 run: 1.5x its deviation from QUANT_REF (at least 2e-2), and top-1
agreement on all but one of the rows it agrees on. Without it the bound comes from the bf16 model's own bf16 run
(HF_BF16.npy), which a quantized model's rounding can exceed: W8A8 above all.

Prints one JSON line.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_logits import compare, pagoda_logits  # noqa: E402


def log_softmax(x):
    x = x.astype(np.float64)
    x = x - x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


def kl(p_logits, q_logits):
    """KL(P || Q) of each row, in nats."""
    lp, lq = log_softmax(p_logits), log_softmax(q_logits)
    return (np.exp(lp) * (lp - lq)).sum(axis=1)


def cost(bf16_ref, logits):
    d = kl(bf16_ref, logits)
    return {"kl_mean": float(d.mean()), "kl_max": float(d.max()),
            "top1_agree": int((logits.argmax(axis=1) == bf16_ref.argmax(axis=1)).sum())}


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    bf16_ref, quant_ref = np.load(sys.argv[1]), np.load(sys.argv[2])
    got = pagoda_logits(sys.argv[3])
    hf_bf16 = np.load(sys.argv[4]) if len(sys.argv) > 4 else None
    quant_bf16 = np.load(sys.argv[5]) if len(sys.argv) > 5 else None
    if not (got.shape == quant_ref.shape == bf16_ref.shape):
        print(json.dumps({"error": f"shapes differ: pagoda {got.shape}, quantized reference {quant_ref.shape}, "
                                   f"bf16 reference {bf16_ref.shape}"}))
        return 1
    if quant_bf16 is not None and quant_bf16.shape != quant_ref.shape:
        print(json.dumps({"error": f"shapes differ: quantized bf16 run {quant_bf16.shape}, reference {quant_ref.shape}"}))
        return 1
    exact = compare(quant_ref, got, quant_bf16)
    # Without the quantized model's own bf16 run: transformers' bf16 error on the bf16 model (against its fp32
    # reference), taken as what a quantized model's bf16 arithmetic moves its logits by.
    if quant_bf16 is None and hf_bf16 is not None:
        exact["limit"] = max(exact["limit"], 1.5 * float(compare(bf16_ref, hf_bf16)["max_rel_err"]))
        exact["ok"] = bool(exact["max_rel_err"] <= exact["limit"] and exact["top1_agree"] >= len(got) - 1)
    result = {"rows": len(got), "vs_quantized_reference": exact,
              "cost_vs_bf16": {"pagoda": cost(bf16_ref, got), "transformers": cost(bf16_ref, quant_ref)},
              "ok": exact["ok"]}
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
