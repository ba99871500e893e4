#!/usr/bin/env python3
"""Make small PEFT LoRA adapters for the tiny golden models and record transformers + peft logits for them.

Needs torch, transformers and peft (a throwaway venv; `make test` only reads what this writes). Runs on the CPU in
fp32. For each case below it loads tests/golden/<model> as make_tiny_models.py recorded it (fp32, eager attention),
adds a LoRA adapter with peft (LoraConfig: rank, alpha, rslora, target_modules as a list or a regular expression),
fills lora_A and lora_B with random non-zero values (peft would start B at zero: no delta to test), saves it with
save_pretrained (adapter_config.json + adapter_model.safetensors; some in bf16), loads it back with
PeftModel.from_pretrained, and records the logits of a random prompt at every position.

Writes OUT/<model>/<adapter>/ (the adapter), OUT/<model>/logits_<adapter>.bin (float32 [T, vocab]) and
OUT/<model>/reference.json (prompt ids, per adapter: rank, scale, dtype, max |logits|, max |delta from the base|).

Usage: python3 tools/make_lora_golden.py [OUT_DIR]   (default tests/golden/lora)
"""
import json
import os
import sys

import numpy as np
import torch
import transformers
import peft
from peft import LoraConfig, PeftModel, get_peft_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMPT_LEN = 20
QWEN3_5_TEXT = r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|in_proj_qkv|in_proj_z|in_proj_b|in_proj_a|out_proj|gate_proj|up_proj|down_proj)"
QWEN3_NEXT = r".*(self_attn\.(q_proj|k_proj|v_proj|o_proj)|linear_attn\.(in_proj_qkvz|in_proj_ba|out_proj))"

# model -> [(adapter name, LoraConfig kwargs, saved dtype)]
CASES = {
    "qwen3": [
        ("attn", dict(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]), torch.float32),
        ("mlp_rslora", dict(r=4, lora_alpha=8, use_rslora=True, target_modules=["gate_proj", "up_proj", "down_proj"]),
         torch.bfloat16),
        ("regex", dict(r=2, lora_alpha=3, target_modules=r".*\.(q_proj|down_proj)"), torch.float32),
    ],
    "qwen3_5": [("all", dict(r=4, lora_alpha=8, target_modules=QWEN3_5_TEXT), torch.float32)],
    "qwen3_moe": [("attn", dict(r=4, lora_alpha=4, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]),
                   torch.float32)],
    "qwen3_next": [
        ("mixed", dict(r=4, lora_alpha=8, target_modules=QWEN3_NEXT), torch.float32),
        # Asking for the MLP projections of a model whose experts transformers fuses makes peft target the experts'
        # parameters (target_parameters): pagoda refuses such an adapter; no reference is recorded for it.
        ("experts", dict(r=2, lora_alpha=2, target_modules=["gate_proj", "up_proj", "down_proj"]), torch.bfloat16),
    ],
}
NO_REFERENCE = {("qwen3_next", "experts")}


def model_class(name):
    if name == "qwen3_5":
        from transformers import Qwen3_5ForConditionalGeneration
        return Qwen3_5ForConditionalGeneration
    return transformers.AutoModelForCausalLM


def load_base(name):
    d = os.path.join(ROOT, "tests", "golden", name)
    cls = model_class(name)
    try:
        model = cls.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
    except Exception:  # noqa: BLE001 (the hybrid models' linear attention has no eager switch)
        model = cls.from_pretrained(d, dtype=torch.float32)
    return model.eval()


@torch.no_grad()
def logits_of(model, ids):
    return model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].float().numpy().astype(np.float32)


def main():
    out_root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "golden", "lora")
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}")
    for model_name, adapters in CASES.items():
        base = load_base(model_name)
        vocab = base.get_output_embeddings().weight.shape[0]
        rng = np.random.default_rng(7 + len(model_name))
        prompt = [int(x) for x in rng.integers(0, vocab, PROMPT_LEN)]
        base_logits = logits_of(base, prompt)
        model_dir = os.path.join(out_root, model_name)
        os.makedirs(model_dir, exist_ok=True)
        ref = {"model": model_name, "prompt_ids": prompt, "vocab": vocab, "adapters": {},
               "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                            "peft": peft.__version__}}
        for i, (adapter, kwargs, dtype) in enumerate(CASES[model_name]):
            gen = torch.Generator().manual_seed(100 + 17 * i + len(model_name))
            peft_model = get_peft_model(load_base(model_name), LoraConfig(bias="none", **kwargs))
            with torch.no_grad():
                for n, p in peft_model.named_parameters():
                    if "lora_A" in n or "lora_B" in n:
                        p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
            adapter_dir = os.path.join(model_dir, adapter)
            peft_model.to(dtype).save_pretrained(adapter_dir)
            os.remove(os.path.join(adapter_dir, "README.md"))  # peft's model card template: nothing to keep
            config_path = os.path.join(adapter_dir, "adapter_config.json")
            with open(config_path) as f:
                config = json.load(f)
            config["base_model_name_or_path"] = f"tests/golden/{model_name}"  # not this machine's path
            with open(config_path, "w") as f:
                json.dump(config, f, indent=2, sort_keys=True)
                f.write("\n")
            del peft_model
            if (model_name, adapter) in NO_REFERENCE:
                continue
            # The reference is what peft computes from the saved files.
            loaded = PeftModel.from_pretrained(load_base(model_name), adapter_dir).float().eval()
            logits = logits_of(loaded, prompt)
            logits.tofile(os.path.join(model_dir, f"logits_{adapter}.bin"))
            r = kwargs["r"]
            scale = kwargs["lora_alpha"] / (r ** 0.5 if kwargs.get("use_rslora") else r)
            ref["adapters"][adapter] = {
                "rank": r, "scale": scale, "saved_dtype": str(dtype).replace("torch.", ""),
                "target_modules": kwargs["target_modules"],
                "logits_shape": list(logits.shape),
                "logits_max_abs": float(np.abs(logits).max()),
                "max_abs_diff_from_base": float(np.abs(logits - base_logits).max()),
            }
            print(f"{model_name}/{adapter}: max |logits| {np.abs(logits).max():.3f}, "
                  f"max |delta from base| {np.abs(logits - base_logits).max():.3f}")
        with open(os.path.join(model_dir, "reference.json"), "w") as f:
            json.dump(ref, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
