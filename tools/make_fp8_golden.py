#!/usr/bin/env python3
"""FP8 golden checkpoints: tiny golden models (tests/golden/<name>) with their linear weights quantized to e4m3 the
way Qwen's FP8 checkpoints are, and transformers' logits for the quantized checkpoint.

Needs torch, transformers and accelerate (transformers' fp8 quantizer asks for it); runs on the CPU.

For every entry of SPECS it writes OUT/<name>/ from the source model tests/golden/<source>/:
  config.json        the source's, plus quantization_config {"quant_method": "fp8", "fmt": "e4m3",
                     "activation_scheme": "dynamic", "weight_block_size": [br, bc], "modules_to_not_convert": [...]}
  model.safetensors  each decoder-layer projection (q/k/v/o, gate/up/down, the Gated DeltaNet in/out projections)
                     as F8_E4M3 [N, K] beside <module>.weight_scale_inv [ceil(N/br), ceil(K/bc)]: per block,
                     scale_inv = amax/448 and q = e4m3(w / scale_inv) (saturated at ±448); every other tensor (embedding,
                     norms, biases, lm_head, router gates, the vision tower, MTP) as the source stores it
  logits.bin, hidden.bin, reference.json   as tools/make_tiny_models.py writes them, from transformers loading this
                     checkpoint with FineGrainedFP8Config(dequantize=True) and dtype=float32: its Fp8Dequantize load op
                     turns each (weight, weight_scale_inv) pair into an f32 weight, q.float() * scale_inv per block (the
                     CPU path; its fp8 kernels need a GPU), then the model runs in fp32 like the bf16 goldens.

The prompt is the source model's; the greedy continuation is the quantized model's own.

transformers derives the block size from the scale grid (rows // scale_rows), so a dimension that is neither within
one block nor a multiple of the block would be dequantised differently from the format (ceil grid, ragged last
block); the generator refuses such shapes. pagoda's ragged blocks are checked by the op tests instead.

W8A8 (`--w8a8 name ...`, in place in tests/golden/<name>): the same checkpoint computed as its activation_scheme
dynamic says on a GPU (`--fp8-activations`): transformers' dequantised fp32 model with every quantized projection's
input rounded to e4m3 first by a forward pre-hook, per token in groups of the blocks' width (scale max(amax / 448,
1e-12)). Writes w8a8_logits_last8.bin: f32 [8, vocab], the logits of the last 8 positions of the golden ids.

Usage: python3 tools/make_fp8_golden.py OUT_DIR [name ...]   (then copy OUT/<name> to tests/golden/)
       python3 tools/make_fp8_golden.py --w8a8 [name ...]
       python3 tools/make_fp8_golden.py --w8a8-drift [name ...]   (after --w8a8: transformers' bf16 run of the same
                                                                   computation, the CUDA test's bound)
"""
import json
import math
import os
import re
import shutil
import sys
import time

import numpy as np
import torch
import transformers
from transformers import FineGrainedFP8Config

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_models as tiny  # noqa: E402

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden")
E4M3_MAX = 448.0

# output name -> (source model, block size, scale dtype, modules_to_not_convert[, RELEASE_LAYOUT]). qwen3_fp8 takes Qwen3-8B-FP8's config
# verbatim (every tiny matrix is then one block); qwen2 and qwen3_5 use 32x32 blocks so that each matrix has several,
# and store the scales in bf16 (the loader reads either). qwen3_fp8_channel has one scale per output row (blocks of
# [1, 128] cover a row of every qwen3 matrix): the quantization `--quantization fp8` does at load to the bf16 qwen3,
# so pagoda's online quantization is checked byte for byte against this torch one (and both against transformers);
# qwen3_moe_fp8_channel the same for qwen3_moe, whose experts --quantization fp8 quantizes per channel too.
SPECS = {
    "qwen3_fp8": ("qwen3", (128, 128), "F32", ["lm_head"]),
    "qwen2_fp8": ("qwen2", (32, 32), "BF16", ["lm_head"]),
    "qwen3_5_fp8": ("qwen3_5", (32, 32), "BF16", ["lm_head", "model.visual", "mtp"]),
    "qwen3_fp8_channel": ("qwen3", (1, 128), "F32", ["lm_head"]),
    "qwen3_moe_fp8": ("qwen3_moe", (32, 32), "F32", ["lm_head", "mlp.gate"]),
    "qwen3_moe_fp8_channel": ("qwen3_moe", (1, 128), "F32", ["lm_head", "mlp.gate"]),
    "qwen3_next_fp8": ("qwen3_next", (16, 16), "F32", ["lm_head", "mlp.gate", "shared_expert_gate"]),
    "qwen3_5_moe_fp8": ("qwen3_5_moe", (16, 16), "F32",
                        ["lm_head", "mlp.gate", "shared_expert_gate", "in_proj_a", "in_proj_b", "model.visual", "mtp"],
                        "qwen3_5_moe_release"),
}

# Qwen3.5-MoE's FP8 release (Qwen/Qwen3.5-35B-A3B-FP8, Qwen3.6-35B-A3B-FP8) is laid out unlike its bf16 one: each
# routed expert is stored on its own (experts.{e}.gate_proj / up_proj / down_proj .weight with their
# weight_scale_inv, where the bf16 release fuses experts.gate_up_proj / experts.down_proj), the shared expert is
# quantized too, and the Gated DeltaNet's in_proj_a / in_proj_b stay bf16 (third-party loaders' counts for 35B-A3B:
# 30,720 per-expert and 250 other scale tensors, = 40 layers x (3 shared-expert projections) + 10 x 4 attention + 30
# x 3 linear-attention ones). The tiny qwen3_5_moe's 48-wide shared expert takes 16x16 blocks.
RELEASE_KEEP = {"qwen3_5_moe_release": re.compile(r"\.linear_attn\.in_proj_[ab]\.weight$")}

# The decoder layers' projections, each expert's too; lm_head, embeddings, norms, router and shared-expert gates, the
# vision tower and MTP stay as stored (Qwen's FP8 checkpoints keep them bf16).
QUANTIZED = re.compile(
    r"^model\.(language_model\.)?layers\.\d+\.(self_attn|mlp|linear_attn)\.(experts\.\d+\.|shared_expert\.)?\w+_proj(_\w+)?"
    r"\.weight$")
EXPERT = re.compile(r"^(.*\.mlp\.experts)\.(\d+)\.(gate|up|down)_proj\.weight$")


def to_torch(dtype, shape, data):
    np_dtype = {"BF16": np.uint16, "F32": np.float32, "F16": np.float16}[dtype]
    a = np.frombuffer(data, dtype=np_dtype).reshape(shape)
    if dtype == "BF16":
        return torch.from_numpy(a.astype(np.int16)).view(torch.bfloat16).float()
    return torch.from_numpy(a.astype(np.float32))


TORCH_DTYPES = {"BF16": torch.bfloat16, "F32": torch.float32, "F16": torch.float16}


def as_torch(dtype, shape, data):
    """A stored tensor in its own dtype (as_stored gives the same bytes back)."""
    return torch.frombuffer(bytearray(data), dtype=TORCH_DTYPES[dtype]).view(shape)


def as_stored(t):
    """A torch tensor (any device) as a safetensors entry: (dtype name, shape, bytes)."""
    t = t.detach().contiguous().cpu()
    name = {v: k for k, v in TORCH_DTYPES.items()}[t.dtype]
    return name, list(t.shape), (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()


def scale_bytes(scale, dtype):
    if dtype == "BF16":
        return scale.to(torch.bfloat16).view(torch.int16).numpy().tobytes()
    return scale.to(torch.float32).numpy().tobytes()


def quantize_blockwise(w, block, scale_dtype, name):
    """w f32 [..., N, K] on any device (a stack of experts quantized at once) -> (e4m3 [..., N, K] as uint8, scale_inv
    [..., ceil(N/br), ceil(K/bc)] as stored, as f32), both on the CPU."""
    *lead, N, K = w.shape
    br, bc = block
    for dim, b in ((N, br), (K, bc)):
        if dim > b and dim % b:
            raise ValueError(f"{name}: dimension {dim} is neither within one {b} block nor a multiple of it")
    gn, gk = math.ceil(N / br), math.ceil(K / bc)
    padded = w.new_zeros(*lead, gn * br, gk * bc)
    padded[..., :N, :K] = w
    blocks = padded.view(*lead, gn, br, gk, bc)
    amax = blocks.abs().amax(dim=(-3, -1))
    scale = (amax / E4M3_MAX).clamp(min=1e-12)
    # The stored scale is what dequantisation multiplies by: quantize with it after its rounding to the stored dtype.
    if scale_dtype == "BF16":
        scale = scale.to(torch.bfloat16).float()
    q = (blocks / scale[..., :, None, :, None]).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    q = q.reshape(*lead, gn * br, gk * bc)[..., :N, :K].contiguous()
    return q.view(torch.uint8).cpu(), scale.cpu()


FUSED_EXPERTS = re.compile(r"^(.*\.mlp\.experts)\.(gate_up|down)_proj$")


def is_quantized(name, keep):
    return QUANTIZED.match(name) is not None and not (keep and keep.search(name))


def release_entries(name, w, block, scale_dtype, keep=None, split_experts=False):
    """Source tensor `name` (torch, as the bf16 checkpoint or the model holds it) as an FP8 checkpoint stores it:
    {name: (dtype, shape, bytes)}, each quantized weight with its weight_scale_inv. With split_experts, fused experts
    (experts.gate_up_proj [E, 2I, H], gate rows first; experts.down_proj [E, H, I]) are stored one by one as
    experts.{e}.gate_proj / up_proj / down_proj .weight, as Qwen3.5-MoE's FP8 release has them."""
    m = FUSED_EXPERTS.match(name) if split_experts else None
    if m:
        rows = w.shape[1] // 2
        parts = {"down": w} if m.group(2) == "down" else {"gate": w[:, :rows], "up": w[:, rows:]}
        out = {}
        for part, stack in parts.items():
            names = [f"{m.group(1)}.{e}.{part}_proj.weight" for e in range(stack.shape[0])]
            if not is_quantized(names[0], keep):
                out.update({n: as_stored(stack[e]) for e, n in enumerate(names)})
                continue
            q, scale = quantize_blockwise(stack.float(), block, scale_dtype, names[0])
            for e, n in enumerate(names):
                out[n] = ("F8_E4M3", list(q.shape[1:]), q[e].numpy().tobytes())
                out[n[: -len("weight")] + "weight_scale_inv"] = (scale_dtype, list(scale.shape[1:]),
                                                                  scale_bytes(scale[e], scale_dtype))
        return out
    if not is_quantized(name, keep):
        return {name: as_stored(w)}
    q, scale = quantize_blockwise(w.float(), block, scale_dtype, name)
    return {name: ("F8_E4M3", list(w.shape), q.numpy().tobytes()),
            name[: -len("weight")] + "weight_scale_inv": (scale_dtype, list(scale.shape), scale_bytes(scale, scale_dtype))}


def ordered(entries):
    """The entries in name order, each quantized weight followed by its weight_scale_inv."""
    out = {}
    for n in sorted(k for k in entries if not k.endswith(".weight_scale_inv")):
        out[n] = entries[n]
        scale = n[: -len("weight")] + "weight_scale_inv"
        if scale in entries:
            out[scale] = entries[scale]
    return out


def make_one(name, out_root, log):
    t0 = time.time()
    source, block, scale_dtype, skip, *layout = SPECS[name]
    src = os.path.join(GOLDEN, source)
    d = os.path.join(out_root, name)
    os.makedirs(d, exist_ok=True)
    files, tensors, meta = tiny.load_checkpoint(src)
    keep = RELEASE_KEEP[layout[0]] if layout else None
    entries = {}
    for n, (dtype, shape, data) in tensors.items():
        entries.update(release_entries(n, as_torch(dtype, shape, data), block, scale_dtype, keep, bool(layout)))
    out = ordered(entries)
    quantized = sum(1 for dtype, _, _ in out.values() if dtype == "F8_E4M3")
    tiny.st_write(os.path.join(d, "model.safetensors"), out, meta)
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "modules_to_not_convert": skip,
                                  "quant_method": "fp8", "weight_block_size": list(block)}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    if os.path.exists(os.path.join(src, "generation_config.json")):
        shutil.copy(os.path.join(src, "generation_config.json"), d)

    ref = json.load(open(os.path.join(src, "reference.json")))
    kind = ref["model_type"]
    qc = FineGrainedFP8Config(dequantize=True, weight_block_size=tuple(block), modules_to_not_convert=skip)
    model = tiny.type_for(kind).from_pretrained(d, dtype=torch.float32, attn_implementation="eager",
                                                quantization_config=qc)
    model.eval()
    check_dequantised(model, out, block)
    tiny.record_reference(model, d, name, kind, ref["prompt_ids"], log,
                          f"fp32 on CPU: transformers {transformers.__version__} loading this fp8 checkpoint with "
                          f"FineGrainedFP8Config(dequantize=True), dtype=float32, eager attention, no cache")
    drift = bf16_drift(d, kind, qc)
    log(f"{name}: transformers' bf16 forward moves the logits by {drift:.6f}")
    log(f"{name}: {quantized} weights quantized ({block[0]}x{block[1]} blocks, {scale_dtype} scales), "
        f"ok in {time.time() - t0:.1f}s, {tiny.dir_summary(d)}")


def bf16_drift(d, kind, qc):
    """transformers' own bf16 forward of the checkpoint (dequantised to bf16, bf16 activations) against the fp32
    reference just recorded: the number bench/gpu/golden_bf16_drift.py records for the bf16 goldens, from which the
    CUDA golden test derives its bound. Measured here on the CPU (on a GPU transformers would run its fp8 kernels, which
    quantize the activations too: another computation than pagoda's weight-only one). Recorded in reference.json."""
    ref_path = os.path.join(d, "reference.json")
    ref = json.load(open(ref_path))
    want = np.fromfile(os.path.join(d, "logits.bin"), dtype=np.float32).reshape(ref["logits_shape"])
    model = tiny.type_for(kind).from_pretrained(d, dtype=torch.bfloat16, attn_implementation="eager",
                                                quantization_config=qc).eval()
    with torch.no_grad():
        got = model(input_ids=torch.tensor([ref["ids"]]), use_cache=False).logits[0].float().numpy()
    drift = float(np.abs(got - want).max())
    ref["transformers_bf16_max_abs_diff"] = round(drift, 6)
    ref["transformers_bf16_note"] = "measured on the CPU by tools/make_fp8_golden.py (dequantize=True, dtype=bfloat16)"
    with open(ref_path, "w") as f:
        json.dump(ref, f, indent=1)
    return drift


def check_dequantised(model, tensors, block):
    """transformers must hold exactly q · scale_inv for every quantized weight (else the reference is not of the
    format): compares each with our own dequantisation of the stored bytes."""
    params = dict(model.named_parameters())
    for n, (dtype, shape, data) in tensors.items():
        if dtype != "F8_E4M3":
            continue
        q = torch.from_numpy(np.frombuffer(data, dtype=np.uint8).copy()).view(torch.float8_e4m3fn).float()
        q = q.view(shape)
        sd, sshape, sdata = tensors[n[: -len("weight")] + "weight_scale_inv"]
        s = to_torch(sd, sshape, sdata)
        full = s.repeat_interleave(block[0], 0).repeat_interleave(block[1], 1)[: shape[0], : shape[1]]
        want = q * full
        # transformers' name for the parameter (Qwen3.5 loads model.language_model.* under the same names); experts
        # are fused into experts.gate_up_proj [E, 2I, H] and experts.down_proj [E, H, I].
        got = params.get(n)
        if m := EXPERT.match(n):
            e, part = int(m.group(2)), m.group(3)
            fused = params[m.group(1) + (".down_proj" if part == "down" else ".gate_up_proj")][e]
            rows = shape[0]
            got = fused if part == "down" else fused[:rows] if part == "gate" else fused[rows:]
        if got is None:
            raise KeyError(f"{n}: transformers has no such parameter")
        if not torch.equal(got.detach().float(), want):
            raise AssertionError(f"{n}: transformers' dequantised weight differs from q * scale_inv")


def fp8_round_groups(x, group):
    """x [..., K] rounded to e4m3 in groups of `group` inputs along K (the last may be shorter), each group's scale
    max(amax / 448, 1e-12): what --fp8-activations does to a projection's input."""
    out = torch.empty_like(x)
    for k0 in range(0, x.shape[-1], group):
        g = x[..., k0:k0 + group]
        scale = (g.abs().amax(dim=-1, keepdim=True) / E4M3_MAX).clamp(min=1e-12)
        out[..., k0:k0 + group] = (g / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).float() * scale
    return out


def w8a8_logits(d, name, dtype):
    """transformers' dequantised checkpoint in `dtype` with every quantized projection's input rounded to e4m3 first
    (fp8_round_groups, computed in fp32 and handed back in the model's dtype): the logits of the last 8 positions of
    the golden ids, and how many projections were hooked."""
    _, block, _, skip, *_ = SPECS[name]
    ref = json.load(open(os.path.join(d, "reference.json")))
    qc = FineGrainedFP8Config(dequantize=True, weight_block_size=tuple(block), modules_to_not_convert=skip)
    model = tiny.type_for(ref["model_type"]).from_pretrained(d, dtype=dtype, attn_implementation="eager",
                                                             quantization_config=qc).eval()
    hooked = 0
    for module_name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and QUANTIZED.match(module_name + ".weight"):
            module.register_forward_pre_hook(
                lambda _m, args: (fp8_round_groups(args[0].float(), block[1]).to(args[0].dtype),) + args[1:])
            hooked += 1
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ref["ids"]]), use_cache=False).logits[0, -8:].float().numpy()
    return logits, hooked


def record_w8a8(name, log):
    """w8a8_logits_last8.bin of tests/golden/<name> (see the module's doc)."""
    d = os.path.join(GOLDEN, name)
    logits, hooked = w8a8_logits(d, name, torch.float32)
    logits.astype(np.float32).tofile(os.path.join(d, "w8a8_logits_last8.bin"))
    log(f"{name}: W8A8 logits of the last 8 positions ({hooked} projections' inputs rounded to e4m3 per token in "
        f"groups of {SPECS[name][1][1]}): max|logit| {float(np.abs(logits).max()):.4f}")


def record_w8a8_drift(name, log):
    """transformers' own bf16 run of the W8A8 computation against w8a8_logits_last8.bin (its fp32 run), recorded in
    reference.json as w8a8_transformers_bf16_max_abs_diff: the CUDA golden test's bound for --fp8-activations. The
    weight-only drift is no bound for it: rounding inputs to e4m3 turns a bf16-sized difference upstream into a whole
    e4m3 step (2^-3 relative) wherever it crosses a rounding boundary."""
    d = os.path.join(GOLDEN, name)
    want = np.fromfile(os.path.join(d, "w8a8_logits_last8.bin"), dtype=np.float32).reshape(8, -1)
    got, _ = w8a8_logits(d, name, torch.bfloat16)
    drift = float(np.abs(got - want).max())
    ref_path = os.path.join(d, "reference.json")
    ref = json.load(open(ref_path))
    ref["w8a8_transformers_bf16_max_abs_diff"] = round(drift, 6)
    ref["w8a8_transformers_bf16_note"] = (f"measured by tools/make_fp8_golden.py --w8a8-drift (torch {torch.__version__}, "
                                          f"transformers {transformers.__version__}, CPU)")
    with open(ref_path, "w") as f:
        json.dump(ref, f, indent=1)
    log(f"{name}: transformers' bf16 W8A8 run moves the last 8 positions' logits by {drift:.6f} "
        f"(weight-only bf16 drift {ref.get('transformers_bf16_max_abs_diff')})")


def main():
    if sys.argv[1] in ("--w8a8", "--w8a8-drift"):
        torch.set_num_threads(min(8, os.cpu_count() or 1))
        logf = open(os.path.join(GOLDEN, "make_fp8_golden.log"), "a")
        record = record_w8a8 if sys.argv[1] == "--w8a8" else record_w8a8_drift
        for name in sys.argv[2:]:
            record(name, lambda msg: (print(msg, flush=True), logf.write(msg + "\n")))
        return 0
    out_root = sys.argv[1]
    names = sys.argv[2:] or list(SPECS)
    os.makedirs(out_root, exist_ok=True)
    torch.set_num_threads(min(8, os.cpu_count() or 1))
    logf = open(os.path.join(out_root, "make_fp8_golden.log"), "a")

    def log(msg):
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    log(f"torch {torch.__version__} transformers {transformers.__version__}")
    for name in names:
        make_one(name, out_root, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
