#!/usr/bin/env python3
"""AutoRound golden checkpoints: a tiny golden model (tests/golden/<source>) quantized and saved by Intel's AutoRound
itself (the `auto-round` package: quant_method "auto-round", as Intel/*-int4-AutoRound and many Qwen3.5 / 3.6
quantizations are published), and the reference logits of each quantized checkpoint.

Needs torch, transformers and auto-round; runs on the CPU. AutoRound runs in its zero-shot mode (iters 0: round to
nearest, no calibration data; its tuned mode chooses other values, stored the same way). A tokenizer is required by
its API and unused in that mode: the Qwen3 one from ../shared/qwen-tokenizers (not saved in the golden).

For every entry of SPECS it writes OUT/<name>/:
  config.json, model.safetensors, generation_config.json, quantization_config.json   as AutoRound saves them
  logits.bin, hidden.bin, reference.json   as tools/make_tiny_models.py writes them (fp32 on the CPU)

The reference is AutoRound's own dequantisation of what it saved: the checkpoint loaded back by transformers with
auto-round's integration (its torch kernels on the CPU), each quantized linear's weight read off as its output for
the identity input, put into the fp32 source model in place of that projection's weight. transformers' forward of the
loaded quantized model is run too and its distance to that reference recorded in reference.json.

Usage: python3 tools/make_autoround_golden.py OUT_DIR [name ...]   (then copy OUT/<name> to tests/golden/)
"""
import json
import os
import re
import shutil
import sys
import time

import numpy as np
import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_models as tiny  # noqa: E402
from make_int4_golden import record_dequantised  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# A decoder layer's linear weight as transformers names it (MoE experts unfused, one by one, as AutoRound stores them).
PROJECTION = re.compile(r"^model\.layers\.\d+\.(self_attn|linear_attn|mlp)\.(experts\.\d+\.)?\w+\.weight$")
GOLDEN = os.path.join(HERE, "..", "tests", "golden")
TOKENIZER = os.path.join(HERE, "..", "..", "shared", "qwen-tokenizers", "qwen3-4b")

# output name -> (source model, AutoRound's save format, group size, symmetric, bits[, layer_config]). The format decides the
# packing_format it writes: "auto_round" with sym true is "auto_round:auto_gptq" (GPTQ's layout, each zero point
# stored minus one; with sym false auto-round 0.16 writes the AWQ packing instead); "auto_round:gptqmodel" is the
# same layout with the zero points as they are; "auto_round:auto_awq" is AutoAWQ's GEMM layout (read back here
# through gptqmodel's torch kernel, which auto-round uses for it on a CPU).
SPECS = {
    "qwen3_autoround": ("qwen3", "auto_round", 32, True, 4),
    "qwen3_autoround_asym": ("qwen3", "auto_round:gptqmodel", 32, False, 4),
    "qwen2_autoround_awq": ("qwen2", "auto_round:auto_awq", 32, False, 4),
    "qwen3_5_moe_autoround": ("qwen3_5_moe", "auto_round", 32, True, 4),
    # A mixed recipe (AutoRound's layer_config): modules of their own bits and groups, one left 16-bit, a regular
    # expression for every layer's up_proj; AutoRound writes them into extra_config.
    "qwen3_autoround_mixed": ("qwen3", "auto_round", 32, True, 4, {
        "model.layers.0.mlp.down_proj": {"bits": 8},
        "model.layers.1.self_attn.v_proj": {"bits": 8, "group_size": 64},
        "model.layers.2.mlp.gate_proj": {"group_size": 64},
        "model.layers.2.self_attn.o_proj": {"bits": 16},
        ".*up_proj": {"bits": 8, "group_size": 16},
    }),
}


def quantize(src, out, fmt, group, sym, bits, kind, layer_config=None):
    """AutoRound's zero-shot quantization of the source model, saved in `fmt`; returns the saved directory. The model
    is the source's own class (Qwen3.5's multimodal one: the saved config keeps its text_config, as the releases do)."""
    from auto_round import AutoRound
    model = tiny.type_for(kind).from_pretrained(src, dtype=torch.float32)
    tokenizer = transformers.AutoTokenizer.from_pretrained(TOKENIZER)
    ar = AutoRound(model, tokenizer=tokenizer, bits=bits, group_size=group, sym=sym, iters=0, disable_opt_rtn=True,
                   layer_config=layer_config)
    tmp = out + ".autoround"
    shutil.rmtree(tmp, ignore_errors=True)
    ar.quantize_and_save(tmp, format=fmt)
    saved = [os.path.join(tmp, x) for x in os.listdir(tmp)]  # it saves into a subfolder named by the scheme
    return saved[0] if len(saved) == 1 and os.path.isdir(saved[0]) else tmp


def dequantised_weights(d):
    """{checkpoint weight name: fp32 [N, K]} of every quantized linear, as AutoRound's own kernels compute it (the
    module's output for the identity input), and the loaded quantized model."""
    model = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, device_map="cpu").eval()
    refs = {}
    with torch.no_grad():
        for name, mod in model.named_modules():
            if not hasattr(mod, "qweight"):
                continue
            k = int(mod.infeatures if hasattr(mod, "infeatures") else mod.in_features)
            eye = torch.eye(k, dtype=torch.float32)
            # Without its bias for the moment: a kernel that adds it in f16 would round W + b (Qwen2's q/k/v).
            bias = getattr(mod, "bias", None)
            saved = bias.clone() if bias is not None else None
            if bias is not None:
                bias.zero_()
            refs[name + ".weight"] = mod(eye).float().t().contiguous()
            if bias is not None:
                bias.copy_(saved)
    return refs, model


def make_one(name, out_root, log):
    t0 = time.time()
    source, fmt, group, sym, bits, layer_config = (SPECS[name] + (None,))[:6]
    src = os.path.join(GOLDEN, source)
    d = os.path.join(out_root, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    kind = json.load(open(os.path.join(src, "reference.json")))["model_type"]
    saved = quantize(src, d, fmt, group, sym, bits, kind, layer_config)
    for f in ("config.json", "model.safetensors", "generation_config.json", "quantization_config.json"):
        if os.path.exists(os.path.join(saved, f)):
            shutil.copy(os.path.join(saved, f), d)
    shutil.rmtree(os.path.dirname(saved) if saved != d + ".autoround" else saved, ignore_errors=True)
    qc = json.load(open(os.path.join(d, "config.json")))["quantization_config"]
    log(f"{name}: AutoRound wrote quantization_config {json.dumps(qc, sort_keys=True)}")

    refs, loaded = dequantised_weights(d)
    # AutoRound chooses what it quantizes (every decoder-layer linear it can, MoE experts one by one; not routers,
    # shared experts or layers too narrow for its kernels): each must be a projection of a decoder layer.
    kinds = sorted({re.sub(r"^model\.layers\.\d+\.|\.\d+\.", ".", n) for n in refs})
    if not refs or any(not PROJECTION.match(n) for n in refs):
        raise AssertionError(f"{name}: quantized {sorted(refs)}")
    log(f"{name}: AutoRound quantized {len(refs)} weights: {kinds}")

    if kind in ("qwen3_5", "qwen3_5_moe"):  # the reference model is the multimodal class: its layers are nested
        refs = {n.replace("model.layers.", "model.language_model.layers.", 1): w for n, w in refs.items()}
    record_dequantised(src, d, name, refs, log, "AutoRound's own dequantisation of the saved checkpoint")

    # transformers' auto-round integration loads the model in float16 whatever dtype is asked (and computes RoPE's
    # inverse frequencies in it): its float parameters are widened back to f32 (exact: bf16 values of these sizes fit
    # f16) and the inverse frequencies taken from the fp32 source model, so that the forward compared is f32.
    for prm in loaded.parameters():
        if prm.is_floating_point():
            prm.data = prm.data.float()
    rotary = getattr(loaded.model, "language_model", loaded.model).rotary_emb
    source = tiny.type_for(kind).from_pretrained(src, dtype=torch.float32)
    source_rotary = getattr(source.model, "language_model", source.model).rotary_emb
    rotary.inv_freq = source_rotary.inv_freq.clone()
    rotary.original_inv_freq = source_rotary.original_inv_freq.clone()
    ref_path = os.path.join(d, "reference.json")
    out = json.load(open(ref_path))
    want = np.fromfile(os.path.join(d, "logits.bin"), dtype=np.float32).reshape(out["logits_shape"])
    with torch.no_grad():
        got = loaded(input_ids=torch.tensor([out["ids"]]), use_cache=False).logits[0].float().numpy()
    out["transformers_load_max_abs_diff"] = round(float(np.abs(got - want).max()), 6)
    out["transformers_load_note"] = ("transformers.from_pretrained of this checkpoint on the CPU with auto-round's "
                                     "integration (its torch kernels; loaded in f16 by it, its float parameters "
                                     "widened to f32 and RoPE's inverse frequencies the fp32 source model's)")
    with open(ref_path, "w") as f:
        json.dump(out, f, indent=1)
    log(f"{name}: transformers' own load of the checkpoint: max |Δ| {out['transformers_load_max_abs_diff']}")
    log(f"{name}: {len(refs)} weights quantized ({fmt}, {bits}-bit, group {group}, "
        f"{'symmetric' if sym else 'zero points'}), ok in {time.time() - t0:.1f}s, {tiny.dir_summary(d)}")


def main():
    out_root = sys.argv[1]
    names = sys.argv[2:] or list(SPECS)
    os.makedirs(out_root, exist_ok=True)
    torch.set_num_threads(2)
    log = tiny.open_log(out_root, "make_autoround_golden.log")

    import auto_round
    log(f"torch {torch.__version__} transformers {transformers.__version__} auto-round {auto_round.__version__}")
    for name in names:
        make_one(name, out_root, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
