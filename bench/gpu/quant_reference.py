#!/usr/bin/env python3
"""transformers' fp32 logits for a quantized copy of a checkpoint bench/gpu/hf_qwen3_8b.py made: the reference issue
18's real-shape check (bench/gpu/compare_quantized.py) holds pagoda's logits of the quantized model to.

  python3 bench/gpu/quant_reference.py MODEL_DIR OUT.npy (--awq AWQ_DIR | --fp8-channel [--fp8-activations])
      [--dtype fp32|bf16] [--device cuda|cpu]

MODEL_DIR's model is loaded in fp32 (its bf16 weights widened exactly) and each quantized projection's weight replaced
by what the quantized model serves:
  --awq AWQ_DIR   every module AWQ_DIR stores packed (bench/gpu/make_awq_checkpoint.py's copy of MODEL_DIR): its
                  qweight / qzeros / scales read back and dequantised as AWQ does ((q - zero) * scale in f16);
  --fp8-channel   what `pagoda --quantization fp8` makes at load of the dense families' decoder-layer projections
                  (self_attn q/k/v/o, mlp gate/up/down): per output channel, scale = max(amax / 448, 1e-12) and
                  q = e4m3(w / scale) rounded to nearest even, each step in f32 (kernels/cpu/cpu_kernels.h,
                  QuantizeFp8RowsArgs; the golden test QuantizeAtLoad holds pagoda to torch's bytes).
  --fp8-activations  with --fp8-channel: each of those projections' input is also rounded to e4m3 per token before
                  the product, scale max(amax / 448, 1e-12) (`--fp8-activations`, W8A8: kernels/cpu/cpu_kernels.h,
                  QuantizeFp8ActivationsArgs), by a forward pre-hook on the module.
--dtype bf16 runs the same quantized model in bf16 instead (the served weights rounded to bf16 as pagoda's kernels
round them; W8A8's input rounding still computed in fp32 and handed back in bf16): transformers' own bf16 deviation
from the fp32 run, the bound compare_quantized.py takes for pagoda's (a quantized model's, W8A8's above all, can be
far larger than the bf16 model's: rounding inputs to e4m3 turns bf16-sized differences into e4m3 steps).
Then the prompt of MODEL_DIR/reference_ids.txt runs and the logits of its last 8 positions are saved to OUT.npy
[8, vocab], as hf_qwen3_8b.py saves the bf16 model's. Prints one JSON line: weights replaced, their RMS change relative
to the weights' RMS, seconds.
"""
import argparse
import json
import os
import re
import sys
import time

import numpy as np
import torch
from safetensors import safe_open
from transformers import AutoModelForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_awq_checkpoint import dequantize, source_tensors  # noqa: E402

DENSE_PROJECTION = re.compile(r"\.layers\.\d+\.(self_attn\.[qkvo]|mlp\.(gate|up|down))_proj\.weight$")
E4M3_MAX = 448.0


def fp8_channel(w):
    """w [N, K] f32 -> the per-channel e4m3 weight pagoda's --quantization fp8 serves, as f32."""
    scale = (w.abs().amax(dim=1, keepdim=True) / E4M3_MAX).clamp(min=1e-12)
    q = (w / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q.to(torch.float32) * scale


def fp8_per_token(x):
    """x [..., K] rounded to e4m3 per token (row), as --fp8-activations rounds a projection's input."""
    scale = (x.abs().amax(dim=-1, keepdim=True) / E4M3_MAX).clamp(min=1e-12)
    return (x / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).to(torch.float32) * scale


def awq_weights(awq_dir, device):
    """(weight name, the f32 weight AWQ_DIR serves) for every module it stores packed, one at a time."""
    config = json.load(open(os.path.join(awq_dir, "config.json")))
    group = config["quantization_config"]["group_size"]
    files = {}
    for f, name in source_tensors(awq_dir):
        files.setdefault(f, []).append(name)
    for f, names in files.items():
        with safe_open(os.path.join(awq_dir, f), "pt", device=device) as h:
            for name in names:
                if name.endswith(".qweight"):
                    m = name[: -len(".qweight")]
                    yield m + ".weight", dequantize(h.get_tensor(name), h.get_tensor(m + ".qzeros"),
                                                    h.get_tensor(m + ".scales"), group)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("out")
    kind = ap.add_mutually_exclusive_group(required=True)
    kind.add_argument("--awq", metavar="AWQ_DIR")
    kind.add_argument("--fp8-channel", action="store_true")
    ap.add_argument("--fp8-activations", action="store_true", help="with --fp8-channel: W8A8, inputs per token")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    if a.fp8_activations and not a.fp8_channel:
        sys.exit("quant_reference: --fp8-activations goes with --fp8-channel")
    t0 = time.time()
    dtype = torch.float32 if a.dtype == "fp32" else torch.bfloat16
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=dtype).to(a.device).eval()
    params = dict(model.named_parameters())
    replaced, err, energy = 0, 0.0, 0.0
    with torch.no_grad():
        if a.awq:
            items = awq_weights(a.awq, a.device)
        else:
            # From the checkpoint's bf16 weights, exactly widened either way.
            items = ((n, fp8_channel(p.float())) for n, p in params.items() if DENSE_PROJECTION.search(n))
        for name, w in items:
            p = params.get(name)
            if p is None:
                sys.exit(f"quant_reference: {name} is quantized but the model has no such weight")
            if tuple(w.shape) != tuple(p.shape):
                sys.exit(f"quant_reference: {name}: served weight {tuple(w.shape)}, model's {tuple(p.shape)}")
            err += float(((w.float() - p.float()) ** 2).sum())
            energy += float((p.float() ** 2).sum())
            p.copy_(w)
            replaced += 1
            if a.fp8_activations:
                module = model.get_submodule(name[: -len(".weight")])
                module.register_forward_pre_hook(
                    lambda _m, args: (fp8_per_token(args[0].float()).to(args[0].dtype),) + tuple(args[1:]))
        if replaced == 0:
            sys.exit("quant_reference: no weight was replaced")
        ids = [int(t) for t in open(os.path.join(a.model, "reference_ids.txt")).read().split()]
        logits = model(torch.tensor([ids], device=a.device), use_cache=False, logits_to_keep=8).logits
    np.save(a.out, logits[0].float().cpu().numpy())
    print(json.dumps({"replaced": replaced, "rel_rms_change": round((err / energy) ** 0.5, 5),
                      "variant": "awq " + a.awq if a.awq else
                      "fp8 per channel" + (", fp8 activations per token" if a.fp8_activations else ""), "dtype": a.dtype,
                      "out": a.out,
                      "seconds": round(time.time() - t0, 1)}), flush=True)


if __name__ == "__main__":
    main()
