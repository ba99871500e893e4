#!/usr/bin/env python3
"""An AWQ int4 checkpoint (AutoAWQ's "gemm" layout) of a bf16 Hugging Face checkpoint, by round-to-nearest
asymmetric quantization: what the GPU machine, which has torch but no AutoAWQ, needs to time int4 decode at real
shapes (issue 18) on the random checkpoints bench/gpu/hf_qwen3_8b.py makes.

  python3 bench/gpu/make_awq_checkpoint.py SRC_DIR OUT_DIR [--group 128] [--not-convert NAME ...]
      [--device cuda|cpu] [--max-shard-gb 4]

No calibration (AWQ's activation-aware scaling is not done): each group of `group` inputs of each output row gets
scale = (max - min) / 15 (at least 1e-5, then rounded to f16) and zero = clamp(-round(min / scale), 0, 15), and each
weight q = clamp(round(w / scale) + zero, 0, 15), so that the served weight is (q - zero) * scale. That is AutoAWQ's
own pseudo-quantization (w_bit 4, zero_point); the numbers of a random checkpoint do not need more.

Which weights: every 2-D projection of the text model's decoder layers ({model.,model.language_model.}layers.N.*)
whose output features are a multiple of 8 and input features a multiple of the group, as AutoAWQ quantizes every
nn.Linear of a decoder layer; never the MoE routers (mlp.gate), the embedding or lm_head. Everything else is copied as
stored (norms, conv1d, A_log, the vision tower, MTP). quantization_config.modules_to_not_convert names what is left
unquantized: lm_head, the routers, any decoder-layer projection too small to pack (a shared_expert_gate [1, H]; the
Qwen3.5 in_proj_a / in_proj_b of a tiny model, whose value heads are not a multiple of 8; at real shapes they are,
and they are quantized: pagoda serves them as int4), and the top-level modules outside the text model (visual, mtp).
Loaders match these names as substrings, and so does the plan: with mlp.gate listed, the mlp.gate_proj of a MoE
model's dense layers (mlp_only_layers) stays bf16 too. --not-convert NAME leaves more projections unquantized (any
weight whose name contains NAME): Qwen3-Next's packed in_proj_qkvz / in_proj_ba are quantized like any projection and
pagoda refuses them as int4, so `--not-convert in_proj_qkvz --not-convert in_proj_ba` makes a Qwen3-Next checkpoint
pagoda serves. Fused MoE experts (Qwen3.5-MoE's experts.gate_up_proj [E, 2I, H]) are refused: AWQ's layout is per
expert.

The layout written (pagoda's loader reads it in src/model/int4_repack.h: repack_awq_gemm, and the golden
tests/golden/qwen3_awq, packed by gptqmodel, has it) for a weight W [N, K] of module M with G = K / group:
  M.qweight  I32 [K, N / 8]: word (k, c) holds columns 8c .. 8c+7 of input k, nibble i (bits 4i .. 4i+3) holding column
             8c + [0, 2, 4, 6, 1, 3, 5, 7][i] (AutoAWQ's interleaved "gemm" order);
  M.qzeros   I32 [G, N / 8]: the zero points (whole numbers 0..15) of group g packed the same way;
  M.scales   F16 [G, N].
config.json gets quantization_config {"quant_method": "awq", "bits": 4, "group_size": group, "zero_point": true,
"version": "gemm", "modules_to_not_convert": [...]} at its top level.

Streams: one tensor at a time is read (memory-mapped), quantized on the device and packed; the output shards are
written as they fill (--max-shard-gb), so memory holds about two shards (safetensors' save_file serialises a shard in
memory) and one tensor, never the whole model: for a 1.2 GB Qwen3-0.6B-shaped checkpoint in 0.25 GB shards, 1.4 GB of
anonymous memory at most, 0.5 GB of it torch itself. Copies generation_config.json and the tokenizer files when
present (not the reference logits hf_qwen3_8b.py leaves beside a checkpoint: they are the bf16 model's). Prints one
JSON line: weights quantized, bytes, the RMS quantization error relative to the weights' RMS, seconds.
"""
import argparse
import fnmatch
import json
import math
import os
import re
import shutil
import sys
import time

import torch
from safetensors import safe_open
from safetensors.torch import save_file

# Column of each nibble within its word of 8 output columns (AutoAWQ's WQLinear_GEMM packing).
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
# The decoder layers of the text model: Qwen2/Qwen3(-MoE, -Next) under model.layers, Qwen3.5 under
# model.language_model.layers. mtp.layers.N (Qwen3.5's MTP head) and model.visual.blocks.N are not among them.
DECODER_LAYER = re.compile(r"^model\.(?:language_model\.)?layers\.\d+\.")
DTYPE_BYTES = {"F64": 8, "I64": 8, "F32": 4, "I32": 4, "U32": 4, "BF16": 2, "F16": 2, "I16": 2}
# What is copied beside the weights.
AUX_FILES = ["generation_config.json", "tokenizer*", "vocab.json", "merges.txt", "special_tokens_map.json",
             "added_tokens.json", "chat_template*", "*preprocessor_config.json"]


def source_tensors(src):
    """[(file, name)] of every tensor of the checkpoint in SRC_DIR, in file order (an index file, when there is one,
    names the shards)."""
    index = os.path.join(src, "model.safetensors.index.json")
    if os.path.exists(index):
        files = sorted(set(json.load(open(index))["weight_map"].values()))
    else:
        files = sorted(f for f in os.listdir(src) if f.endswith(".safetensors"))
    if not files:
        sys.exit(f"make_awq_checkpoint: no *.safetensors in {src}")
    out = []
    for f in files:
        with safe_open(os.path.join(src, f), "pt") as h:
            out += [(f, name) for name in h.keys()]
    return out


def module_of(name):
    return name[: -len(".weight")] if name.endswith(".weight") else name


def plan(name, shape, dtype, group, not_convert):
    """Whether the weight is quantized, and if not, the modules_to_not_convert entry it needs (or None)."""
    floating = dtype in ("BF16", "F16", "F32")
    layer = DECODER_LAYER.match(name)
    if layer is not None and ".experts." in name and len(shape) == 3:
        sys.exit(f"make_awq_checkpoint: {name} {shape}: fused MoE experts are not written (AWQ's layout is per "
                 "expert)")
    if not name.endswith(".weight") or not floating or len(shape) < 2:
        return False, None
    if "embed_tokens" in name:
        return False, None  # the embedding is not a linear layer
    if layer is None:
        if name.startswith("lm_head"):
            return False, "lm_head"
        # A module outside the text model's decoder (the vision tower, the MTP head): its top-level name.
        parts = name.split(".")
        return False, parts[1] if parts[0] == "model" and len(parts) > 2 else parts[0]
    suffix = module_of(name[layer.end():])
    if len(shape) != 2:
        return False, None
    if suffix == "mlp.gate":  # the MoE router
        return False, suffix
    if any(n in name for n in not_convert):
        return False, suffix
    N, K = shape
    if N % 8 != 0 or K % group != 0:
        return False, suffix
    return True, None


def pack_columns(q):
    """q: integer tensor [R, C] of values 0..15, C a multiple of 8 -> I32 [R, C / 8] in AWQ's nibble order."""
    R, C = q.shape
    cols = q.to(torch.int64).reshape(R, C // 8, 8)[:, :, AWQ_ORDER]
    shifts = torch.arange(0, 32, 4, device=q.device, dtype=torch.int64)
    words = (cols << shifts).sum(-1)  # < 2^32, exact in int64
    words = torch.where(words >= 2**31, words - 2**32, words)  # the same 32 bits as a signed int32
    return words.to(torch.int32)


def unpack_columns(words):
    """The inverse of pack_columns: I32 [R, C / 8] -> int64 [R, C] of values 0..15."""
    w = words.to(torch.int64) & 0xFFFFFFFF
    R, C8 = w.shape
    out = torch.empty(R, C8 * 8, dtype=torch.int64, device=words.device)
    for i, col in enumerate(AWQ_ORDER):
        out[:, col::8] = (w >> (4 * i)) & 0xF
    return out


def dequantize(qweight, qzeros, scales, group):
    """The weight W [N, K] (f32) a stored qweight [K, N/8], qzeros [G, N/8], scales F16 [G, N] serve: (q - zero) *
    scale rounded to f16, as AWQ dequantises."""
    q, zeros = unpack_columns(qweight), unpack_columns(qzeros)  # [K, N], [G, N]
    g = torch.arange(q.shape[0], device=q.device) // group
    w = (q - zeros[g]).to(torch.float32) * scales[g].to(torch.float32)
    return w.to(torch.float16).to(torch.float32).t().contiguous()


def quantize(w, group):
    """w [N, K] (any float dtype, on the device) -> (qweight I32 [K, N/8], qzeros I32 [G, N/8], scales F16 [G, N], sum
    of squared errors of the dequantised weights, sum of squared weights)."""
    N, K = w.shape
    g = w.to(torch.float32).reshape(N, K // group, group)
    wmin, wmax = g.amin(-1), g.amax(-1)
    scales = ((wmax - wmin).clamp(min=1e-5) / 15).to(torch.float16)
    if not torch.isfinite(scales).all():
        raise ValueError("a group's range overflows an f16 scale")
    s = scales.to(torch.float32)
    zeros = (-torch.round(wmin / s)).clamp(0, 15)
    q = (torch.round(g / s[..., None]) + zeros[..., None]).clamp(0, 15)
    # What a loader serves: (q - zero) * scale in f16 (AWQ dequantises in its scales' dtype).
    deq = ((q - zeros[..., None]) * s[..., None]).to(torch.float16).to(torch.float32)
    err = float(((deq - g) ** 2).sum())
    energy = float((g**2).sum())
    qweight = pack_columns(q.reshape(N, K).to(torch.int32).t())
    qzeros = pack_columns(zeros.to(torch.int32).t())
    return qweight, qzeros, scales.t().contiguous(), err, energy


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--group", type=int, default=128, help="inputs per scale and zero point (default 128)")
    ap.add_argument("--not-convert", action="append", default=[], metavar="NAME",
                    help="leave weights whose name contains NAME unquantized (repeatable)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--max-shard-gb", type=float, default=4.0, help="size of each output shard (default 4)")
    a = ap.parse_args()
    if a.group <= 0 or a.group % 8 != 0:
        sys.exit("make_awq_checkpoint: --group must be a positive multiple of 8")
    t0 = time.time()
    config = json.load(open(os.path.join(a.src, "config.json")))
    if "quantization_config" in config or "quantization_config" in config.get("text_config", {}):
        sys.exit(f"make_awq_checkpoint: {a.src} is already quantized")

    # The plan, from the headers alone: what each tensor becomes and which output shard holds it.
    tensors = source_tensors(a.src)
    handles = {f: safe_open(os.path.join(a.src, f), "pt") for f in {f for f, _ in tensors}}
    planned, not_converted = [], {"lm_head"}
    for f, name in tensors:
        sl = handles[f].get_slice(name)
        shape, dtype = sl.get_shape(), sl.get_dtype()
        quant, skip = plan(name, shape, dtype, a.group, a.not_convert)
        if skip:
            not_converted.add(skip)
        planned.append((f, name, shape, dtype, quant))
    # Loaders (transformers, vLLM) skip every module whose name contains an entry of modules_to_not_convert: a
    # projection such an entry names stays unquantized too (a MoE model's dense layers' mlp.gate_proj, by "mlp.gate").
    items = []
    for f, name, shape, dtype, quant in planned:
        quant = quant and not any(n in module_of(name) for n in not_converted)
        if quant:
            N, K = shape
            size = K * N // 2 + (K // a.group) * (N // 2 + N * 2)
        else:
            size = math.prod(shape) * DTYPE_BYTES.get(dtype, 1)
        items.append((f, name, quant, size))
    cap = int(a.max_shard_gb * 2**30)
    shards, current, filled = [], [], 0
    for it in items:
        if current and filled + it[3] > cap:
            shards.append(current)
            current, filled = [], 0
        current.append(it)
        filled += it[3]
    shards.append(current)

    os.makedirs(a.out, exist_ok=True)
    names = (["model.safetensors"] if len(shards) == 1 else
             [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))])
    weight_map, total, quantized, err, energy = {}, 0, 0, 0.0, 0.0
    for shard, file_name in zip(shards, names):
        out = {}
        for f, name, quant, _ in shard:
            t = handles[f].get_tensor(name)
            if quant:
                m = module_of(name)
                try:
                    qw, qz, sc, e, en = quantize(t.to(a.device), a.group)
                except ValueError as x:
                    sys.exit(f"make_awq_checkpoint: {name}: {x}")
                out[m + ".qweight"], out[m + ".qzeros"], out[m + ".scales"] = qw.cpu(), qz.cpu(), sc.cpu()
                quantized, err, energy = quantized + 1, err + e, energy + en
            else:
                out[name] = t.contiguous()
        for k, v in out.items():
            weight_map[k] = file_name
            total += v.numel() * v.element_size()
        save_file(out, os.path.join(a.out, file_name), metadata={"format": "pt"})
        del out
    if len(shards) > 1:
        with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as fh:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, fh, indent=2)
    if quantized == 0:
        sys.exit("make_awq_checkpoint: no weight could be quantized (no decoder-layer projection of a packable shape)")

    config["quantization_config"] = {
        "quant_method": "awq", "bits": 4, "group_size": a.group, "zero_point": True, "version": "gemm",
        "modules_to_not_convert": sorted(not_converted),
    }
    with open(os.path.join(a.out, "config.json"), "w") as fh:
        json.dump(config, fh, indent=2)
    copied = []
    for f in sorted(os.listdir(a.src)):
        if os.path.isfile(os.path.join(a.src, f)) and any(fnmatch.fnmatch(f, p) for p in AUX_FILES):
            shutil.copyfile(os.path.join(a.src, f), os.path.join(a.out, f))
            copied.append(f)
    print(json.dumps({"quantized": quantized, "group": a.group, "bytes": total, "shards": len(shards),
                      "rel_rms_error": round(math.sqrt(err / energy), 5) if energy else None,
                      "modules_to_not_convert": sorted(not_converted), "copied": copied, "device": a.device,
                      "seconds": round(time.time() - t0, 1)}), flush=True)


if __name__ == "__main__":
    main()
