#!/usr/bin/env python3
"""Random-weight Qwen3-8B-shaped bf16 checkpoint, made by transformers on the GPU, and the transformers baseline
(eager attention, batch 1) measured on it in the same process.

  python3 bench/gpu/hf_qwen3_8b.py OUT_DIR [--context 512] [--decode 128] [--prefill 2048] [--layers N]
      [--shape qwen3-8b | qwen2.5-7b | qwen3.5-9b | qwen3.5-27b | qwen3-30b-a3b | qwen3.5-35b-a3b |
               qwen3-next-80b-a3b]
      [--reference-only | --save-only | --speed-only] [--fp8-blocks 128]

--shape qwen2.5-7b makes a Qwen2.5-7B-shaped checkpoint instead (q/k/v biases, 28 query heads over 4 KV heads);
qwen3.5-9b the text model of Qwen3.5-9B (Gated DeltaNet 3:1 gated attention, head_dim 256); qwen3-30b-a3b and
qwen3.5-35b-a3b the MoE models (--layers N keeps the first N layers: the disk holds the checkpoint and a GGUF);
qwen3-next-80b-a3b Qwen3-Next-80B-A3B (512 experts, top 10, packed in_proj_qkvz; use --layers);
qwen3.5-27b the dense Qwen3.5-27B (64 layers, H 5120; with --save-only, as its fp32 copy would not fit the GPU);
--reference-only skips the speed baseline and only saves the reference logits below; --save-only saves the
checkpoint and nothing else; --speed-only the checkpoint and the speed baseline. --fp8-blocks B (with --save-only)
saves the checkpoint as Qwen's FP8 releases store theirs instead, its projections e4m3 in B x B blocks
(save_fp8): no bf16 copy on disk, so Qwen3.5-35B-A3B's whole 40 layers (35 GB in fp8, 67 GB in bf16) fit the disk.

Prints one JSON line: hf_decode_tok_s, hf_prefill_ms. Then, for the correctness check at this real shape
(bench/gpu/compare_logits.py), the model in fp32 (its bf16 weights widened exactly) gives the logits of the last 8
positions of a 300-token prompt: OUT_DIR/reference_ids.txt and OUT_DIR/reference_logits.npy; the same from the
bf16 model (OUT_DIR/reference_logits_bf16.npy) says how much bf16 arithmetic alone moves them.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

try:
    import torch
except ImportError:  # --config-only needs transformers alone
    torch = None
from transformers import AutoConfig, AutoModelForCausalLM, Qwen2Config, Qwen3Config


def qwen3_5_text(layers, **kw):
    """A Qwen3.5 text-model config (shared fields of the released sizes: vocab 248,320, rope θ 1e7 over 64 of 256
    dims, linear heads of 128, conv 4, one full-attention layer in four)."""
    return AutoConfig.for_model(
        kw.pop("model_type"), vocab_size=248320, num_hidden_layers=layers, head_dim=256,
        linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4,
        layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)],
        rms_norm_eps=1e-6, max_position_embeddings=262144, tie_word_embeddings=False,
        rope_parameters=dict(rope_type="default", rope_theta=1e7, partial_rotary_factor=0.25,
                             mrope_section=[11, 11, 10], mrope_interleaved=True), **kw)


def make_config(shape, layers):
    if shape == "qwen3-8b":
        return Qwen3Config(hidden_size=4096, intermediate_size=12288, num_hidden_layers=layers or 36,
                           num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                           max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6,
                           tie_word_embeddings=False, attention_bias=False)
    if shape == "qwen2.5-7b":  # Qwen2 always has q/k/v biases
        return Qwen2Config(hidden_size=3584, intermediate_size=18944, num_hidden_layers=layers or 28,
                           num_attention_heads=28, num_key_value_heads=4, vocab_size=152064,
                           max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-6,
                           tie_word_embeddings=False)
    if shape == "qwen3-30b-a3b":
        return AutoConfig.for_model("qwen3_moe", hidden_size=2048, intermediate_size=6144,
                                    num_hidden_layers=layers or 48, num_attention_heads=32, num_key_value_heads=4,
                                    head_dim=128, vocab_size=151936, max_position_embeddings=40960,
                                    rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=False,
                                    num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768,
                                    norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[])
    if shape == "qwen3.5-9b":
        return qwen3_5_text(layers or 32, model_type="qwen3_5_text", hidden_size=4096, intermediate_size=12288,
                            num_attention_heads=16, num_key_value_heads=4, linear_num_key_heads=16,
                            linear_num_value_heads=32)
    if shape == "qwen3-next-80b-a3b":  # 160 GB in bf16 at 48 layers: take a few (--layers)
        return AutoConfig.for_model(
            "qwen3_next", vocab_size=151936, hidden_size=2048, num_hidden_layers=layers or 48, num_attention_heads=16,
            num_key_value_heads=2, head_dim=256, intermediate_size=5120, moe_intermediate_size=512,
            shared_expert_intermediate_size=512, num_experts=512, num_experts_per_tok=10, norm_topk_prob=True,
            decoder_sparse_step=1, mlp_only_layers=[], linear_conv_kernel_dim=4, linear_key_head_dim=128,
            linear_value_head_dim=128, linear_num_key_heads=16, linear_num_value_heads=32,
            layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers or 48)],
            rms_norm_eps=1e-6, max_position_embeddings=262144, tie_word_embeddings=False,
            rope_parameters=dict(rope_type="default", rope_theta=1e7, partial_rotary_factor=0.25))
    if shape == "qwen3.5-27b":  # 56 GB in bf16: fits one H200 (and its 64 GiB disk); --save-only skips the fp32 run
        return qwen3_5_text(layers or 64, model_type="qwen3_5_text", hidden_size=5120, intermediate_size=17408,
                            num_attention_heads=24, num_key_value_heads=4, linear_num_key_heads=16,
                            linear_num_value_heads=48)
    return qwen3_5_text(layers or 40, model_type="qwen3_5_moe_text", hidden_size=2048, num_attention_heads=16,
                        num_key_value_heads=2, linear_num_key_heads=16, linear_num_value_heads=32, num_experts=256,
                        num_experts_per_tok=8, moe_intermediate_size=512, shared_expert_intermediate_size=512)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--prefill", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=None, help="default: the shape's own")
    ap.add_argument("--shape", choices=["qwen3-8b", "qwen2.5-7b", "qwen3.5-9b", "qwen3.5-27b", "qwen3-30b-a3b",
                                        "qwen3.5-35b-a3b", "qwen3-next-80b-a3b"], default="qwen3-8b")
    ap.add_argument("--reference-only", action="store_true")
    ap.add_argument("--save-only", action="store_true", help="the checkpoint only: no timing, no reference logits")
    ap.add_argument("--speed-only", action="store_true",
                    help="the checkpoint and transformers' timing, no reference logits (their fp32 copy of a large MoE "
                         "shape would not fit beside the bf16 one)")
    ap.add_argument("--config-only", action="store_true",
                    help="config.json alone (no weights, no GPU): for `--load-format dummy`, shapes too big for disk")
    # Random routers score experts so evenly that bf16 rounding flips top-k choices (the Qwen3.5-35B-A3B shape's 256
    # experts: transformers' own bf16 logits 17% off its fp32 at 4 layers); scaled-up router weights make the choices
    # clear, which tells such sensitivity from an error in the computation.
    ap.add_argument("--router-scale", type=float, default=1.0, help="multiply the MoE routers' weights by this")
    ap.add_argument("--fp8-blocks", type=int, default=0, help="with --save-only: save as an FP8 checkpoint (save_fp8)")
    a = ap.parse_args()
    if a.fp8_blocks and not a.save_only:
        ap.error("--fp8-blocks needs --save-only (transformers' timing and logits are of the bf16 model)")

    cfg = make_config(a.shape, a.layers)
    if a.config_only:
        cfg.save_pretrained(a.out)
        return
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    t0 = time.time()
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    model.eval()
    if a.router_scale != 1.0:
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("mlp.gate.weight"):  # the router (the experts' gate is gate_up_proj / gate_proj)
                    p.mul_(a.router_scale)
    t_init = time.time() - t0
    t0 = time.time()
    if a.fp8_blocks:
        save_fp8(model, cfg, a.out, a.fp8_blocks)
        print(json.dumps({"hf_init_s": round(t_init, 1), "fp8_save_s": round(time.time() - t0, 1)}), flush=True)
        return
    model.save_pretrained(a.out)
    t_save = time.time() - t0

    g = torch.Generator(device="cpu").manual_seed(1)
    if a.save_only:
        return
    if a.reference_only:
        save_references(model, cfg, a.out, g)
        return
    with torch.no_grad():
        # Prefill latency (last-position logits only), best of three after a warm-up.
        ids = torch.randint(0, cfg.vocab_size, (1, a.prefill), generator=g).cuda()
        best = 1e30
        for rep in range(4):
            torch.cuda.synchronize()
            t = time.time()
            model(ids, use_cache=False, logits_to_keep=1)
            torch.cuda.synchronize()
            if rep:
                best = min(best, time.time() - t)
        # Batch-1 greedy decode after a `context`-token prompt, one forward per token with the dynamic cache.
        ids = torch.randint(0, cfg.vocab_size, (1, a.context), generator=g).cuda()
        out = model(ids, use_cache=True, logits_to_keep=1)
        past = out.past_key_values
        nxt = out.logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
        t = time.time()
        for _ in range(a.decode):
            out = model(nxt, past_key_values=past, use_cache=True)
            past = out.past_key_values
            nxt = out.logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
        dt = time.time() - t
    print(json.dumps({"hf_init_s": round(t_init, 1), "hf_save_s": round(t_save, 1),
                      "hf_prefill_ms": round(best * 1e3, 1), "hf_decode_tok_s": round(a.decode / dt, 1),
                      "torch": torch.__version__}), flush=True)
    if a.speed_only:
        return
    save_references(model, cfg, a.out, g)


def save_fp8(model, cfg, out, block, shard_bytes=4 << 30):
    """The model as Qwen's FP8 checkpoints store theirs (tools/make_fp8_golden.py's release_entries, the layout its
    golden checkpoints have, which pagoda's golden tests check against transformers): every decoder-layer projection
    e4m3 in block x block blocks with an F32 weight_scale_inv; lm_head, embeddings, norms and router gates bf16; for
    Qwen3.5-MoE its release's layout (each routed expert stored on its own, the shared expert quantized, the Gated
    DeltaNet's in_proj_a / in_proj_b bf16). Quantized on the GPU one tensor (or expert stack) at a time, written in
    shards of about shard_bytes with their index."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
    import make_fp8_golden as fp8
    import make_tiny_models as tiny

    release = cfg.model_type in ("qwen3_5_moe_text", "qwen3_5_moe")
    skip = ["lm_head", "mlp.gate", "shared_expert_gate"] + (["in_proj_a", "in_proj_b"] if release else [])
    keep = fp8.RELEASE_KEEP["qwen3_5_moe_release"] if release else None
    os.makedirs(out, exist_ok=True)
    shards, entries = [], {}

    def flush():
        shards.append(fp8.ordered(entries))
        tiny.st_write(os.path.join(out, f"shard-{len(shards)}.safetensors"), shards[-1], {"format": "pt"})
        shards[-1] = list(shards[-1])  # the names alone, for the index
        entries.clear()

    with torch.no_grad():
        for name, w in model.state_dict().items():
            entries.update(fp8.release_entries(name, w, (block, block), "F32", keep, split_experts=release))
            if sum(len(e[2]) for e in entries.values()) >= shard_bytes:
                flush()
    if entries:
        flush()
    weight_map = {}
    for i, names in enumerate(shards):
        final = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        os.rename(os.path.join(out, f"shard-{i + 1}.safetensors"), os.path.join(out, final))
        weight_map.update({n: final for n in names})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=1)
    config = cfg.to_dict()
    config["architectures"] = [type(model).__name__]
    config["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "modules_to_not_convert": skip,
                                     "quant_method": "fp8", "weight_block_size": [block, block]}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    model.generation_config.save_pretrained(out)


def save_references(model, cfg, out, g):
    """The logits of the last 8 positions of a 300-token prompt: the bf16 model's, then the same model's in fp32; and
    the hidden states of those positions after the embedding and each layer ([layers + 1, 8, hidden]; the last entry
    after the final norm), for bench/gpu/compare_hidden.py."""
    ref_ids = torch.randint(0, cfg.vocab_size, (1, 300), generator=g)

    def run():
        with torch.no_grad():
            o = model(ref_ids.cuda(), use_cache=False, logits_to_keep=8, output_hidden_states=True)
        hidden = torch.stack([h[0, -8:] for h in o.hidden_states]).float().cpu().numpy()
        return o.logits[0].float().cpu().numpy(), hidden

    # transformers' own bf16 run of the same prompt: how far bf16 arithmetic alone moves the logits at this depth.
    bf16, bf16_hidden = run()
    np.save(f"{out}/reference_logits_bf16.npy", bf16)
    np.save(f"{out}/reference_hidden_bf16.npy", bf16_hidden)
    model.float()
    ref, ref_hidden = run()
    np.save(f"{out}/reference_logits.npy", ref)
    np.save(f"{out}/reference_hidden.npy", ref_hidden)
    with open(f"{out}/reference_ids.txt", "w") as f:
        f.write(" ".join(str(int(i)) for i in ref_ids[0]))


if __name__ == "__main__":
    main()
