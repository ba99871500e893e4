#!/usr/bin/env python3
"""INT4 (and GPTQ INT8) golden checkpoints: tiny golden models (tests/golden/<name>) with their decoder-layer
projections quantized to 4 bits in the AWQ, GPTQ and compressed-tensors (W4A16) formats, or to 8 bits in the GPTQ
format (Qwen2.5-*-GPTQ-Int8), packed by those formats' own tools, and the reference logits of each quantized
checkpoint.

Needs torch, transformers, accelerate, gptqmodel (transformers' AWQ and GPTQ loader, and the AWQ / GPTQ packers) and
compressed-tensors; runs on the CPU.

For every entry of SPECS it writes OUT/<name>/ from the source model tests/golden/<source>/:
  config.json        the source's, plus the quantization_config the format's tool writes
  model.safetensors  each decoder-layer projection (q/k/v/o, gate/up/down) as the format stores it; everything else
                     (embedding, norms, q/k/v biases, lm_head) as the source stores it
  logits.bin, hidden.bin, reference.json   as tools/make_tiny_models.py writes them (fp32 on the CPU)

Quantization: round to nearest per group of inputs (min/max asymmetric with a zero point for AWQ and GPTQ sym=False,
absmax symmetric for GPTQ sym=True and compressed-tensors), the scales rounded to the dtype the format stores first.
(The formats' calibrating algorithms choose other scales; the packed layout and its dequantisation, which is what
pagoda reads, are the same.) Packing, by the formats' own code:
  awq         gptqmodel's AwqTorchLinear.pack (AutoAWQ's GEMM layout: qweight [K, N/8] in AWQ's interleaved order,
              qzeros [K/group, N/8], scales F16 [K/group, N])
  gptq        gptqmodel's TorchQuantLinear.pack, then its convert_gptq_v2_to_v1_format_module (the "gptq" checkpoint
              format: qzeros stored as zero - 1), as GPTQModel.save writes it; 4 or 8 bits (8: qweight [K/4, N], four
              inputs a word, qzeros [K/group, N/4]; symmetric zero 128); act-order entries (ACT_ORDER, desc_act true) form
              each group over a permuted order of the inputs and hand the packer that g_idx, as GPTQ's desc_act does
  w4a16       compressed-tensors' PackedQuantizationCompressor (weight_packed [N, K/8], q + 8; 8 bits: [N, K/4],
              q + 128), weight_scale [N, K/group] (per channel: [N, 1]) in the model's dtype, weight_shape, and for
              symmetric false weight_zero_point [N/8, K/group] (packed along the outputs, zero + 8); the
              quantization_config from compressed-tensors' QuantizationConfig
The reference is computed from each tool's own dequantisation of the stored tensors (AWQ: gptqmodel's dequantize_gemm,
the AutoAWQ reference; GPTQ: TorchLinear.dequantize_weight; compressed-tensors: unpack_from_int32 and its dequantize), each product in the
dtype of the stored scales as those functions compute it (F16 for AWQ/GPTQ, BF16 for compressed-tensors),
put into the fp32 source model in place of each projection's weight; transformers' own loading of the same checkpoint
(gptqmodel / compressed-tensors kernels) is run too and its distance to that reference recorded in reference.json.

The prompt is the source model's; the greedy continuation is the quantized model's own.

Usage: python3 tools/make_int4_golden.py OUT_DIR [name ...]   (then copy OUT/<name> to tests/golden/)
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zlib

import numpy as np
import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_models as tiny  # noqa: E402
from make_fp8_golden import split_fused_experts, to_torch  # noqa: E402

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden")

# output name -> (source model, format, group size, symmetric[, bits: 4 when left out])
SPECS = {
    "qwen3_awq": ("qwen3", "awq", 32, False),
    "qwen3_gptq": ("qwen3", "gptq", 64, True),
    "qwen2_gptq": ("qwen2", "gptq", 32, False),
    "qwen3_w4a16": ("qwen3", "w4a16", 32, True),
    # llm-compressor's W4A16_ASYM (zero points packed along the outputs) and W8A16 (8 bits, one scale per output
    # channel) presets; group 0 is per channel.
    "qwen3_w4a16_asym": ("qwen3", "w4a16", 32, False),
    "qwen2_w8a16": ("qwen2", "w4a16", 0, True, 8),
    # Qwen3-MoE with every expert quantized (the router mlp.gate stays bf16, as GPTQModel and AutoAWQ leave it):
    # Qwen3-30B-A3B-GPTQ-Int4 is GPTQ, symmetric; the expert width (32) bounds the group of down_proj.
    "qwen3_moe_gptq": ("qwen3_moe", "gptq", 32, True),
    "qwen3_moe_awq": ("qwen3_moe", "awq", 16, False),
    "qwen3_moe_w4a16": ("qwen3_moe", "w4a16", 32, True),
    # Qwen3-Next as GPTQModel's definition quantizes it: attention, the experts and the Gated DeltaNet's packed
    # in_proj_qkvz and its out_proj int4; in_proj_ba, the router and the shared expert's gate bf16. The shared expert
    # would be int4 too, but its 48 features are not a multiple of 32, which GPTQModel's packer needs (Qwen3-Next-80B's
    # 512 are): a `dynamic` rule leaves it bf16 (DYNAMIC), as GPTQModel's loader then reads it.
    "qwen3_next_gptq": ("qwen3_next", "gptq", 32, True),
    # GPTQ 8-bit (Qwen2.5-*-GPTQ-Int8 are symmetric; the asymmetric variant checks stored zero points too).
    "qwen2_gptq_int8": ("qwen2", "gptq", 32, True, 8),
    "qwen2_gptq_int8_asym": ("qwen2", "gptq", 32, False, 8),
    # GPTQ act-order (desc_act true): each module's inputs grouped in a permuted order given by g_idx (ACT_ORDER).
    "qwen3_gptq_actorder": ("qwen3", "gptq", 32, True),
    # Qwen3.5-MoE as Qwen's GPTQ-Int4 releases lay it out: the routed experts stored one by one (the bf16 source fuses
    # them), int4; both kinds of attention left bf16 by GPTQModel's `dynamic` rule "-:.*attn.*" (DYNAMIC); the
    # router and the shared-expert gate bf16, and here the shared expert too (48 wide: gptqmodel packs only inputs a
    # multiple of 32), by a second "-:" rule (GPTQModel reads `dynamic`, not modules_to_not_convert).
    "qwen3_5_moe_gptq": ("qwen3_5_moe", "gptq", 32, True),
    # GPTQModel's mixed quantization: `dynamic` rules giving modules their own bits and groups (DYNAMIC).
    "qwen3_gptq_dynamic": ("qwen3", "gptq", 32, True),
    # llm-compressor's mixed recipes: compressed-tensors config groups of their own beside the "Linear" one
    # (CT_GROUPS).
    "qwen3_w4a16_mixed": ("qwen3", "w4a16", 32, True),
}
# GPTQModel's `dynamic` rules a checkpoint carries in its quantization_config, matched from the start of the module's
# name (re.match), the first that matches deciding: "-:regex" leaves the modules it matches unquantized, "+:regex" (or
# a bare regex) gives them the settings it lists (bits, group_size), the rest being the checkpoint's.
DYNAMIC = {"qwen3_5_moe_gptq": {"-:.*attn.*": {}, "-:.*shared_expert\\.": {}},
           "qwen3_next_gptq": {"-:.*shared_expert\\.": {}},
           "qwen3_gptq_dynamic": {"+:.*layers\\.0\\.mlp\\.down_proj": {}, "+:.*down_proj": {"bits": 8, "group_size": 64},
                                  "-:.*layers\\.2\\.self_attn\\.o_proj": {}, ".*v_proj": {"bits": 8}}}
# compressed-tensors config groups beside the entry's own (which targets "Linear"): (targets, group, symmetric, bits)
# each. A module takes the group of its first matching target, exact names first, then the "re:" expressions
# (re.match) in sorted order, then "Linear" (compressed-tensors' match_targets); settings_of follows that, and
# compressed-tensors' own apply_quantization_config checks it (note_compressed_tensors_groups). Here: down_proj 8-bit
# per channel, but layer 0's (its exact name, before the expression) and all of layer 1 4-bit in groups of 16 with
# zero points: layer 1's down_proj matches both expressions, and "re:.*layers..." sorts before "re:.*mlp..." though
# its group is listed second (vLLM, which takes the first in the config's order, would read it 8-bit).
CT_GROUPS = {"qwen3_w4a16_mixed": [(["re:.*mlp\\.down_proj$"], 0, True, 8),
                                   (["re:.*layers\\.1\\..*", "model.layers.0.mlp.down_proj"], 16, False, 4)]}
# Entries written with act-order: GPTQ processes a module's inputs in the order of its Hessian's diagonal, descending,
# and forms the groups in that order, so g_idx[k] is the group of input k and the groups are not contiguous. Here the
# order is a random permutation, seeded by the module's name (a Hessian-like order is as arbitrary to the format).
ACT_ORDER = {"qwen3_gptq_actorder"}


def spec(name):
    """(source, format, group, symmetric, bits) of SPECS[name]."""
    return (SPECS[name] + (4,))[:5]

# The decoder layers' projections, each MoE expert's too; the router (mlp.gate), embeddings, norms and lm_head stay
# as the source stores them.
QUANTIZED = re.compile(
    r"^model\.(language_model\.)?layers\.\d+\.(self_attn|mlp)\.(experts\.\d+\.)?\w+_proj\.weight$")
# And what a source's GPTQModel definition quantizes beside those: Qwen3-Next's packed in_proj_qkvz and out_proj (its
# in_proj_ba it leaves bf16).
ALSO_QUANTIZED = {"qwen3_next": re.compile(r"^model\.layers\.\d+\.linear_attn\.(in_proj_qkvz|out_proj)\.weight$")}
EXPERT = re.compile(r"^(.*\.mlp\.experts)\.(\d+)\.(gate|up|down)_proj\.weight$")
# What each MoE source keeps bf16 by name in the quantization_config: the router (a Linear the formats' tools leave
# unquantized), and Qwen3-Next's shared-expert gate and in_proj_ba.
NOT_CONVERTED = {"qwen3_moe": ["mlp.gate"],
                 "qwen3_next": ["mlp.gate", "mlp.shared_expert_gate", "linear_attn.in_proj_ba"],
                 "qwen3_5_moe": ["mlp.gate", "mlp.shared_expert"]}
# The dense MLP of a MoE model's mlp_only_layers: GPTQModel's Qwen3-MoE definition quantizes attention and experts
# only (its loader reports such a layer "not quantized" and reads it dense), so the golden keeps it bf16 as well.
MOE_DENSE_MLP = re.compile(r"^model\.layers\.\d+\.mlp\.(gate|up|down)_proj\.weight$")


def set_weight(params, name, w):
    """Writes the checkpoint weight `name` into transformers' model: experts stored one by one are fused there into
    experts.gate_up_proj [E, 2I, H] (gate rows first) and experts.down_proj [E, H, I]. (Once GPTQModel.load has run,
    its defuser has patched transformers to build per-expert Linears: each MoE golden is made in a process of its own,
    see main.)"""
    if m := EXPERT.match(name):
        e, part = int(m.group(2)), m.group(3)
        fused = params[m.group(1) + (".down_proj" if part == "down" else ".gate_up_proj")]
        rows = w.shape[0]
        dst = fused[e] if part == "down" else fused[e, :rows] if part == "gate" else fused[e, rows:]
        dst.copy_(w)
    else:
        params[name].copy_(w)


def st_entry(t):
    """A torch tensor as a (dtype, shape, bytes) safetensors entry."""
    names = {torch.int32: "I32", torch.int64: "I64", torch.float16: "F16", torch.bfloat16: "BF16",
             torch.float32: "F32"}
    t = t.detach().contiguous().cpu()
    raw = t.view(torch.int16) if t.dtype == torch.bfloat16 else t
    return names[t.dtype], list(t.shape), raw.numpy().tobytes()


def rtn(w, group, sym, scale_dtype, bits=4):
    """Round-to-nearest `bits`-bit codes of w [N, K] per group: (q [N, K] in 0..maxq, scales [N, G], zeros [N, G])
    with w ≈ (q - zero) · scale, maxq = 2^bits - 1; symmetric: zero 2^(bits-1), scale = absmax / (maxq / 2) (4 bits:
    7.5, so that -8 · scale reaches -absmax')."""
    N, K = w.shape
    maxq = 2 ** bits - 1
    g = w.view(N, K // group, group)
    if sym:
        scale = (g.abs().amax(-1) / (maxq / 2)).clamp(min=1e-8)
        zero = torch.full_like(scale, float(2 ** (bits - 1)))
    else:
        lo, hi = g.amin(-1).clamp(max=0), g.amax(-1).clamp(min=0)
        scale = ((hi - lo) / maxq).clamp(min=1e-8)
    scale = scale.to(scale_dtype).float()  # quantize with the scale as stored
    if not sym:
        zero = torch.round(-lo / scale).clamp(0, maxq)
    q = torch.clamp(torch.round(g / scale[..., None]) + zero[..., None], 0, maxq)
    return q.view(N, K).to(torch.int32), scale, zero


def dequantised(q, scale, zero, group):
    return ((q.float() - zero.repeat_interleave(group, 1)) * scale.repeat_interleave(group, 1))


# ---- the formats: each returns (stored tensors of the module, the weight its tool dequantises them to) ----------

def pack_awq(module, w, group, sym, bits=4):
    from gptqmodel.nn_modules.qlinear.torch_awq import AwqTorchLinear
    from gptqmodel.quantization.awq.utils.packing_utils import dequantize_gemm
    N, K = w.shape
    q, scale, zero = rtn(w, group, sym, torch.float16)
    lin = torch.nn.Linear(K, N, bias=False)
    lin.weight.data = dequantised(q, scale, zero, group)  # the pack's round() then gives q back exactly
    ql = AwqTorchLinear(bits=4, group_size=group, sym=sym, desc_act=False, in_features=K, out_features=N, bias=False,
                        register_buffers=False)
    ql.pack(lin, scale.half(), zero.to(torch.int32))
    stored = {module + "qweight": ql.qweight, module + "qzeros": ql.qzeros, module + "scales": ql.scales.half()}
    ref = dequantize_gemm(ql.qweight, ql.qzeros, ql.scales.half(), 4, group).float().t()  # [K, N] -> [N, K]
    check_codes(ref, q, scale, zero, group, module)
    return stored, ref


def pack_gptq(module, w, group, sym, bits=4, act_order=False):
    from gptqmodel.nn_modules.qlinear.torch import TorchLinear
    from gptqmodel.quantization import QuantizeConfig
    from gptqmodel.utils.model import convert_gptq_v2_to_v1_format_module
    N, K = w.shape
    # perm[j] is the input GPTQ processed j-th; group j // group takes it (act-order), else the identity.
    if act_order:
        perm = torch.randperm(K, generator=torch.Generator().manual_seed(zlib.crc32(module.encode())))
    else:
        perm = torch.arange(K)
    inverse = torch.argsort(perm)
    q, scale, zero = rtn(w[:, perm], group, sym, torch.float16, bits)  # codes of the inputs in processing order
    g_idx = torch.empty(K, dtype=torch.int32)
    g_idx[perm] = (torch.arange(K, dtype=torch.int32) // group)
    lin = torch.nn.Linear(K, N, bias=False)
    lin.weight.data = dequantised(q, scale, zero, group)[:, inverse]  # back in input order, as the checkpoint's
    ql = TorchLinear(bits=bits, group_size=group, sym=sym, desc_act=act_order, in_features=K, out_features=N,
                     bias=False, register_buffers=False)
    ql.pack(lin, scale.half(), zero.to(torch.int32), g_idx)
    ref = ql.dequantize_weight().float().t()  # the module's own dequantisation of its (v2) buffers, via its g_idx
    check_codes(ref[:, perm], q, scale, zero, group, module)
    convert_gptq_v2_to_v1_format_module(ql, QuantizeConfig(bits=bits, group_size=group, sym=sym, desc_act=act_order))
    stored = {module + "qweight": ql.qweight, module + "qzeros": ql.qzeros, module + "scales": ql.scales.half(),
              module + "g_idx": ql.g_idx.to(torch.int32)}
    return stored, ref


def ct_weight_args(group, sym, bits):
    """compressed-tensors' QuantizationArgs of the weights: int, `bits` bits, groups of `group` inputs (0: per output
    channel), symmetric or with zero points."""
    from compressed_tensors.quantization import QuantizationArgs
    if group:
        return QuantizationArgs(num_bits=bits, type="int", symmetric=sym, strategy="group", group_size=group)
    return QuantizationArgs(num_bits=bits, type="int", symmetric=sym, strategy="channel")


def pack_w4a16(module, w, group, sym, bits=4):
    """compressed-tensors pack-quantized (W4A16, W8A16; _ASYM with zero points): the scales (and signed zero points)
    handed to the format's own PackedQuantizationCompressor with the weight they quantize exactly, which quantizes,
    packs and (asymmetric) packs the zero points along the outputs; the reference is its decompress of what it
    stored."""
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
    from compressed_tensors.quantization import QuantizationScheme
    N, K = w.shape
    g = group or K
    q, scale, zero = rtn(w, g, sym, torch.bfloat16, bits)
    scheme = QuantizationScheme(targets=["Linear"], weights=ct_weight_args(group, sym, bits))
    half = 2 ** (bits - 1)
    state = {"weight": dequantised(q, scale, zero, g), "weight_scale": scale.to(torch.bfloat16)}
    if not sym:
        state["weight_zero_point"] = (zero - half).to(torch.int8)  # signed, as the format keeps it before packing
    stored = PackedQuantizationCompressor.compress(state, scheme)
    ref = PackedQuantizationCompressor.decompress(dict(stored), scheme)["weight"].float()  # bf16, as it loads
    check_codes(ref, q, scale, zero, g, module)
    return {module + k: v for k, v in stored.items()}, ref


def check_codes(ref, q, scale, zero, group, module):
    """The tool's dequantisation of what it packed must be our codes' (q - zero) · scale (up to the rounding of the
    product to the scales' 16-bit dtype)."""
    want = dequantised(q, scale, zero, group)
    err = float(((ref - want).abs() - 2.0 ** -8 * want.abs()).max())
    if err > 1e-9:
        raise AssertionError(f"{module}: the tool's dequantisation differs from the codes by {err}")


PACKERS = {"awq": pack_awq, "gptq": pack_gptq, "w4a16": pack_w4a16}


def quantization_config(fmt, group, sym, not_converted=None, bits=4, act_order=False, dynamic=None, groups=()):
    if fmt == "awq":  # as AutoAWQ / GPTQModel write it for Qwen*-AWQ
        return {"quant_method": "awq", "bits": 4, "group_size": group, "zero_point": not sym, "version": "gemm",
                "modules_to_not_convert": not_converted}
    if fmt == "gptq":
        out = {"quant_method": "gptq", "bits": bits, "group_size": group, "sym": sym, "desc_act": act_order,
               "checkpoint_format": "gptq", "true_sequential": True, "damp_percent": 0.01}
        if not_converted:
            out["modules_to_not_convert"] = not_converted
        if dynamic:
            out["dynamic"] = dynamic
        return out
    from compressed_tensors.quantization import QuantizationConfig, QuantizationScheme
    schemes = [QuantizationScheme(targets=["Linear"], weights=ct_weight_args(group, sym, bits))]
    schemes += [QuantizationScheme(targets=t, weights=ct_weight_args(g, sy, b)) for t, g, sy, b in groups]
    ignore = ["lm_head"] + ["re:.*" + m.replace(".", "\\.") + "$" for m in not_converted or []]
    cfg = QuantizationConfig(config_groups={f"group_{i}": x for i, x in enumerate(schemes)}, format="pack-quantized",
                             ignore=ignore, quantization_status="compressed")
    out = cfg.model_dump(exclude_none=False) if hasattr(cfg, "model_dump") else cfg.dict()
    out["quant_method"] = "compressed-tensors"
    return json.loads(json.dumps(out, default=str))


def make_one(name, out_root, log):
    t0 = time.time()
    source, fmt, group, sym, bits = spec(name)
    src = os.path.join(GOLDEN, source)
    d = os.path.join(out_root, name)
    os.makedirs(d, exist_ok=True)
    files, tensors, meta = tiny.load_checkpoint(src)
    tensors = split_fused_experts(tensors)  # a no-op but for Qwen3.5-MoE, whose bf16 checkpoint fuses its experts
    act_order = {"act_order": True} if name in ACT_ORDER else {}
    rules = [(re.compile(rule[2:] if rule[:2] in ("+:", "-:") else rule), rule.startswith("-:"), settings)
             for rule, settings in DYNAMIC.get(name, {}).items()]

    groups = CT_GROUPS.get(name, [])
    targets = {t: (g, sy, b) for ts, g, sy, b in groups for t in ts}  # (a later group's target wins, as there)

    def settings_of(module):
        """(group, bits, symmetric) of a module by the dynamic rules or config groups, None when a rule leaves it
        unquantized."""
        for rx, excludes, settings in rules:
            if rx.match(module):
                return None if excludes else (settings.get("group_size", group), settings.get("bits", bits), sym)
        for t in sorted(targets, key=lambda x: ("re:" in x, x)):
            if (re.match(t[3:], module) if t.startswith("re:") else t == module):
                g, sy, b = targets[t]
                return g, b, sy
        return group, bits, sym

    out, refs, chosen = {}, {}, {}  # chosen: each quantized module's (group, bits, symmetric)
    for n in sorted(tensors):
        dtype, shape, data = tensors[n]
        own = settings_of(n[: -len(".weight")])
        also = ALSO_QUANTIZED.get(source)
        if (not (QUANTIZED.match(n) or (also and also.match(n)))
                or (("moe" in source or "next" in source) and MOE_DENSE_MLP.match(n)) or own is None):
            out[n] = tensors[n]
            continue
        module = n[: -len("weight")]
        chosen[module[:-1]] = own
        stored, ref = PACKERS[fmt](module, to_torch(dtype, shape, data), own[0], own[2], own[1], **act_order)
        for k, v in stored.items():
            out[k] = st_entry(v)
        refs[n] = ref
    tiny.st_write(os.path.join(d, "model.safetensors"), out, meta)
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg["quantization_config"] = quantization_config(fmt, group, sym, NOT_CONVERTED.get(source), bits,
                                                    bool(act_order), DYNAMIC.get(name), groups)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    if os.path.exists(os.path.join(src, "generation_config.json")):
        shutil.copy(os.path.join(src, "generation_config.json"), d)

    kind = record_dequantised(src, d, name, refs, log, f"the {fmt} tool's dequantisation of the stored tensors")
    # transformers' GPTQ loader (through optimum) gives every module the checkpoint's bits: a checkpoint whose dynamic
    # rules give modules their own is read by GPTQModel.load, which follows them, as the MoE ones are.
    own_settings = any(not rule.startswith("-:") and settings for rule, settings in DYNAMIC.get(name, {}).items())
    if "moe" in source or "next" in source or own_settings:
        note_gptqmodel_load(d, fmt, refs, log, name)
    elif name in CT_GROUPS:
        note_compressed_tensors_groups(src, d, kind, log, name, chosen)
    else:
        note_transformers_load(d, kind, log, name)
    log(f"{name}: {len(refs)} weights quantized ({fmt} {bits}-bit, group {group}, "
        f"{'symmetric' if sym else 'zero points'}), "
        f"ok in {time.time() - t0:.1f}s, {tiny.dir_summary(d)}")


def record_dequantised(src, d, name, refs, log, how):
    """The reference of a quantized copy of the golden `src` in d: the source model in fp32 with each projection's
    weight replaced by `refs` (the tool's dequantisation, `how`), then transformers' bf16 drift of the same weights.
    Returns the model type."""
    ref = json.load(open(os.path.join(src, "reference.json")))
    kind = ref["model_type"]
    model = tiny.type_for(kind).from_pretrained(src, dtype=torch.float32, attn_implementation="eager").eval()
    params = dict(model.named_parameters())
    with torch.no_grad():
        for n, w in refs.items():
            set_weight(params, n, w)
    tiny.record_reference(model, d, name, kind, ref["prompt_ids"], log,
                          f"fp32 on CPU: transformers {transformers.__version__}, the source model with each "
                          f"projection's weight replaced by {how}")
    drift = bf16_drift(src, d, kind, refs)
    log(f"{name}: transformers' bf16 forward moves the logits by {drift:.6f}")
    return kind


def bf16_drift(src, d, kind, refs):
    """transformers' bf16 forward of the same dequantised weights (the source model loaded in bf16, each projection's
    weight the tool's dequantisation rounded to bf16) against the fp32 reference just recorded: the number from which
    the CUDA golden test derives its bound, as bench/gpu/golden_bf16_drift.py records it for the bf16 goldens. Measured
    on the CPU. Recorded in reference.json."""
    ref_path = os.path.join(d, "reference.json")
    ref = json.load(open(ref_path))
    want = np.fromfile(os.path.join(d, "logits.bin"), dtype=np.float32).reshape(ref["logits_shape"])
    model = tiny.type_for(kind).from_pretrained(src, dtype=torch.bfloat16, attn_implementation="eager").eval()
    params = dict(model.named_parameters())
    with torch.no_grad():
        for n, w in refs.items():
            set_weight(params, n, w.to(torch.bfloat16))
        got = model(input_ids=torch.tensor([ref["ids"]]), use_cache=False).logits[0].float().numpy()
    drift = float(np.abs(got - want).max())
    ref["transformers_bf16_max_abs_diff"] = round(drift, 6)
    ref["transformers_bf16_note"] = "measured on the CPU by tools/make_int4_golden.py (dequantised weights in bf16)"
    with open(ref_path, "w") as f:
        json.dump(ref, f, indent=1)
    return drift


def note_gptqmodel_load(d, fmt, refs, log, name):
    """MoE checkpoints: transformers (5.x) fuses Qwen3-MoE's experts into 3-D parameters and its GPTQ/AWQ loaders leave
    them uninitialised from per-expert packed tensors (it reports experts.gate_up_proj MISSING), so the format's own
    loader reads the checkpoint instead: GPTQModel.load (it unfuses the experts into per-expert quantized Linears, as
    vLLM serves them), with its exact torch kernel. Recorded: whether every quantized module's own dequantisation of
    what it loaded equals the weight put into the reference (bit for bit), and its f16 forward's distance to the
    reference (its torch kernel runs in f16 or bf16 only). compressed-tensors is loaded by transformers' own
    integration, decompressed (run_compressed False), its per-expert weights compared the same way, and its forward run
    in f32."""
    ref_path = os.path.join(d, "reference.json")
    ref = json.load(open(ref_path))
    want = np.fromfile(os.path.join(d, "logits.bin"), dtype=np.float32).reshape(ref["logits_shape"])
    try:
        if fmt == "w4a16":
            from transformers import AutoModelForCausalLM, CompressedTensorsConfig
            # Decompressed experts come out in the scales' dtype (bf16) whatever dtype is asked: widened to f32
            # (exactly) so that the forward is transformers' f32 one.
            model = AutoModelForCausalLM.from_pretrained(
                d, dtype=torch.float32, quantization_config=CompressedTensorsConfig(run_compressed=False)).float().eval()
            params = dict(model.named_parameters())
            loaded = {}
            for n in refs:
                if m := EXPERT.match(n):
                    e, part = int(m.group(2)), m.group(3)
                    fused = params[m.group(1) + (".down_proj" if part == "down" else ".gate_up_proj")][e]
                    rows = refs[n].shape[0]
                    loaded[n] = fused if part == "down" else fused[:rows] if part == "gate" else fused[rows:]
                else:
                    loaded[n] = params[n]
            dtype, who = torch.float32, "transformers (compressed-tensors, decompressed)"
        else:
            from gptqmodel import BACKEND, GPTQModel
            from gptqmodel.models.definitions.qwen3_5_moe import Qwen3_5_MoeQModel
            # Its Qwen3.5 definitions load the multimodal processor too, which a tiny text-only golden lacks.
            Qwen3_5_MoeQModel.require_load_processor = False
            dtype = torch.float16
            wrapper = GPTQModel.load(d, device="cpu", dtype=dtype,
                                     backend=BACKEND.TORCH if fmt == "gptq" else BACKEND.TORCH_AWQ)
            model = wrapper.model.eval()
            modules = dict(model.named_modules())
            loaded = {}
            for n in refs:
                mod = modules[n[: -len(".weight")]]
                if fmt == "gptq":
                    loaded[n] = mod.dequantize_weight().t()
                else:
                    from gptqmodel.quantization.awq.utils.packing_utils import dequantize_gemm
                    loaded[n] = dequantize_gemm(mod.qweight, mod.qzeros, mod.scales, 4, mod.group_size).t()
            who = f"GPTQModel.load ({type(next(iter(modules[n[: -len('.weight')]] for n in refs))).__name__})"
        equal = all(torch.equal(loaded[n].detach().float(), refs[n]) for n in refs)
        with torch.no_grad():
            got = model(input_ids=torch.tensor([ref["ids"]]), use_cache=False).logits[0].float().numpy()
        ref["loader_weights_equal_reference"] = equal
        ref["loader_max_abs_diff"] = round(float(np.abs(got - want).max()), 6)
        ref["loader_note"] = f"{who} of this checkpoint on the CPU in {dtype}: every quantized weight as it " \
                             f"dequantises it equal to the reference's: {equal}; its forward's max |Δ| to the reference"
        log(f"{name}: {who} in {dtype}: weights equal to the reference's: {equal}, forward max |Δ| "
            f"{ref['loader_max_abs_diff']}")
        if not equal:
            raise AssertionError(f"{name}: the loader's weights differ from the reference's")
    except Exception as e:  # noqa: BLE001
        ref["loader_error"] = repr(e)[:400]
        log(f"{name}: the format's loader could not check the checkpoint here: {repr(e)[:300]}")
    with open(ref_path, "w") as f:
        json.dump(ref, f, indent=1)


def note_compressed_tensors_groups(src, d, kind, log, name, chosen):
    """compressed-tensors' own reading of a checkpoint of several config groups: apply_quantization_config gives each
    module of the source model the scheme compressed-tensors matches to it, the format's compressor decompresses the
    module's stored tensors with that scheme: each module's scheme must be settings_of's choice, and the model's
    logits the reference's (made with that choice). transformers 5.25's loader cannot be the judge here: it decompresses every dense module
    with one group's scheme (get_dense_scheme) and fails on the others."""
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
    from compressed_tensors.quantization import QuantizationConfig, apply_quantization_config
    ref_path = os.path.join(d, "reference.json")
    ref = json.load(open(ref_path))
    want = np.fromfile(os.path.join(d, "logits.bin"), dtype=np.float32).reshape(ref["logits_shape"])
    cfg = json.load(open(os.path.join(d, "config.json")))
    model = tiny.type_for(kind).from_pretrained(src, dtype=torch.float32, attn_implementation="eager").eval()
    apply_quantization_config(model, QuantizationConfig.model_validate(cfg["quantization_config"]))
    from safetensors.torch import load_file
    tensors = load_file(os.path.join(d, "model.safetensors"))
    decompressed = 0
    with torch.no_grad():
        for module_name, module in model.named_modules():
            scheme = getattr(module, "quantization_scheme", None)
            prefix = module_name + "."
            if scheme is None or prefix + "weight_packed" not in tensors:
                continue
            args = scheme.weights
            theirs = (args.group_size or 0, args.num_bits, args.symmetric)
            if chosen.get(module_name) != theirs:
                raise AssertionError(f"{module_name}: compressed-tensors gives it {theirs}, settings_of "
                                     f"{chosen.get(module_name)}")
            state = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
            w = PackedQuantizationCompressor.decompress(state, scheme)["weight"].float()
            module.weight.data = w  # (the parameter apply_quantization_config left there, replaced)
            decompressed += 1
        got = model(input_ids=torch.tensor([ref["ids"]]), use_cache=False).logits[0].float().numpy()
    if decompressed != len(chosen):
        raise AssertionError(f"compressed-tensors gave a scheme to {decompressed} packed modules of {len(chosen)}")
    ref["compressed_tensors_load_max_abs_diff"] = round(float(np.abs(got - want).max()), 6)
    if ref["compressed_tensors_load_max_abs_diff"] > 1e-4:
        raise AssertionError(f"compressed-tensors' reading differs from the reference by "
                             f"{ref['compressed_tensors_load_max_abs_diff']}")
    ref["compressed_tensors_load_note"] = (f"compressed-tensors' apply_quantization_config chose each module's config "
                                           f"group and its compressor decompressed the {decompressed} packed modules "
                                           f"(fp32 on the CPU)")
    log(f"{name}: compressed-tensors' own choice of each module's group: max |Δ| "
        f"{ref['compressed_tensors_load_max_abs_diff']} over {decompressed} modules")
    with open(ref_path, "w") as f:
        json.dump(ref, f, indent=1)


def note_transformers_load(d, kind, log, name):
    """transformers' own loading of the quantized checkpoint (its AWQ/GPTQ integration through gptqmodel, its
    compressed-tensors integration decompressing), in fp32 where it allows: its logits' distance to the reference is
    recorded; an error loading is recorded instead."""
    ref_path = os.path.join(d, "reference.json")
    ref = json.load(open(ref_path))
    want = np.fromfile(os.path.join(d, "logits.bin"), dtype=np.float32).reshape(ref["logits_shape"])
    try:
        kwargs = {}
        if spec(name)[1] == "w4a16":
            from transformers import CompressedTensorsConfig
            kwargs["quantization_config"] = CompressedTensorsConfig(run_compressed=False)
        model = tiny.type_for(kind).from_pretrained(d, dtype=torch.float32, device_map="cpu", **kwargs).eval()
        dtype = str(next(p for p in model.parameters() if p.is_floating_point()).dtype)
        with torch.no_grad():
            got = model(input_ids=torch.tensor([ref["ids"]]), use_cache=False).logits[0].float().numpy()
        ref["transformers_load_max_abs_diff"] = round(float(np.abs(got - want).max()), 6)
        ref["transformers_load_note"] = f"transformers.from_pretrained of this checkpoint on the CPU (first float " \
                                        f"parameter {dtype})"
        log(f"{name}: transformers' own load of the checkpoint: max |Δ| {ref['transformers_load_max_abs_diff']}")
    except Exception as e:  # noqa: BLE001
        ref["transformers_load_error"] = repr(e)[:400]
        log(f"{name}: transformers could not load the checkpoint here: {repr(e)[:200]}")
    with open(ref_path, "w") as f:
        json.dump(ref, f, indent=1)


def main():
    out_root = sys.argv[1]
    names = sys.argv[2:] or list(SPECS)
    os.makedirs(out_root, exist_ok=True)
    torch.set_num_threads(2)
    log = tiny.open_log(out_root, "make_int4_golden.log")

    import compressed_tensors
    import gptqmodel
    log(f"torch {torch.__version__} transformers {transformers.__version__} gptqmodel {gptqmodel.__version__} "
        f"compressed-tensors {compressed_tensors.__version__}")
    if len(names) > 1:  # one process each: GPTQModel.load patches transformers' MoE classes for the process
        for name in names:
            if subprocess.call([sys.executable, os.path.abspath(__file__), out_root, name]) != 0:
                return 1
        return 0
    make_one(names[0], out_root, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
