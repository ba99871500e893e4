#!/usr/bin/env python3
"""Build tiny random Qwen checkpoints with transformers and record reference logits.

Needs torch + transformers (the GPU test machine has both; see ../shared/GPU.md). Runs on the CPU in fp32.

For every architecture it writes OUT/<name>/:
  config.json, model.safetensors (or shards + index)   exactly as save_pretrained writes them (bf16 weights)
  reference.json   prompt ids (100), greedy continuation ids (16), shapes, notes
  logits.bin       float32 [T, V] logits of transformers' full forward over prompt+continuation (T = 116),
                   computed in fp32 from the bf16 checkpoint reloaded with dtype=float32, eager attention, no cache
  hidden.bin       float32 [n, T, H] hidden states (output_hidden_states) for debugging a mismatch

Qwen3.5 checkpoints are then post-processed (no torch needed) to the released layout: fused MoE experts and
MTP tensors (see postprocess()).

Usage: python3 tools/make_tiny_models.py OUT_DIR [name ...]
       python3 tools/make_tiny_models.py --postprocess OUT_DIR
"""
import json
import math
import os
import sys
import time
import traceback

import numpy as np

try:  # the post-processing step (--postprocess DIR) runs without torch
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM
    no_grad = torch.no_grad
except ImportError:  # pragma: no cover
    torch = None

    def no_grad():
        return lambda f: f

PROMPT_LEN = 100
NEW_TOKENS = 16
LEGACY_ROPE = {"qwen3_yarn"}  # config.json with the transformers 4 rope fields, as the released checkpoints have them


def rope(theta, **extra):
    d = {"rope_type": "default", "rope_theta": theta}
    d.update(extra)
    return d


def yarn(theta, **extra):
    return rope(theta, rope_type="yarn", factor=4.0, **extra)


def specs():
    """name -> (kind, config kwargs). Sizes vary between models to catch shape assumptions."""
    s = {}
    s["qwen2"] = ("qwen2", dict(vocab_size=1000, hidden_size=96, intermediate_size=160, num_hidden_layers=2,
                                num_attention_heads=6, num_key_value_heads=2, tie_word_embeddings=False,
                                rms_norm_eps=1e-6, max_position_embeddings=512, rope_parameters=rope(1e6)))
    s["qwen2_tied"] = ("qwen2", dict(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
                                     rms_norm_eps=1e-6, max_position_embeddings=512, rope_parameters=rope(1e6)))
    s["qwen3"] = ("qwen3", dict(vocab_size=1024, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                                num_attention_heads=4, num_key_value_heads=2, head_dim=32, tie_word_embeddings=False,
                                rms_norm_eps=1e-6, max_position_embeddings=512, rope_parameters=rope(1e6)))
    # YaRN (factor 4, as Qwen3's model card sets it) over an original context of 32 tokens, so that the 116 positions
    # of the reference run far past it: the blended frequencies and the attention factor both show. Its config.json
    # is rewritten to the released Qwen3 form (rope_scaling + rope_theta; LEGACY_ROPE) before the reference is taken.
    s["qwen3_yarn"] = ("qwen3", dict(s["qwen3"][1], max_position_embeddings=128,
                                     rope_parameters=yarn(1e5, original_max_position_embeddings=32)))
    s["qwen3_moe"] = ("qwen3_moe", dict(vocab_size=1024, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                                        num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                                        tie_word_embeddings=False, rms_norm_eps=1e-6, max_position_embeddings=512,
                                        rope_parameters=rope(1e6), num_experts=8, num_experts_per_tok=2,
                                        moe_intermediate_size=32, norm_topk_prob=True, decoder_sparse_step=1,
                                        mlp_only_layers=[1]))
    s["qwen3_next"] = ("qwen3_next", dict(vocab_size=1024, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                                          num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                                          tie_word_embeddings=False, rms_norm_eps=1e-6, max_position_embeddings=512,
                                          rope_parameters=rope(1e7, partial_rotary_factor=0.25),
                                          linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=32,
                                          linear_num_key_heads=2, linear_num_value_heads=4,
                                          num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                                          shared_expert_intermediate_size=48, norm_topk_prob=True,
                                          decoder_sparse_step=1, mlp_only_layers=[],
                                          layer_types=["linear_attention", "full_attention",
                                                       "linear_attention", "full_attention"]))
    text35 = dict(vocab_size=1024, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-6, max_position_embeddings=512,
                  rope_parameters=rope(1e7, partial_rotary_factor=0.25, mrope_section=[2, 1, 1],
                                       mrope_interleaved=True),
                  linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=32,
                  linear_num_key_heads=2, linear_num_value_heads=4,
                  layer_types=["linear_attention", "linear_attention", "full_attention", "linear_attention"])
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, in_channels=3, patch_size=16,
                  spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=64, num_position_embeddings=64)
    s["qwen3_5"] = ("qwen3_5", dict(text_config=dict(text35, intermediate_size=128, tie_word_embeddings=True),
                                    vision_config=vision, tie_word_embeddings=True))
    s["qwen3_5_moe"] = ("qwen3_5_moe", dict(text_config=dict(text35, num_experts=8, num_experts_per_tok=2,
                                                             moe_intermediate_size=32,
                                                             shared_expert_intermediate_size=48,
                                                             tie_word_embeddings=False),
                                            vision_config=vision, tie_word_embeddings=False))
    # Qwen3.5 with YaRN in rope_parameters (its 1M-context setting), over its partial rotary dims (8 of 32 here).
    # Three full-attention layers and theta 1e4 (pairs 1-3 of 4 are slowed by the factor and still turn): the scaling
    # must move the logits by well over transformers' own bf16 drift, which the CUDA test's bound is made of.
    s["qwen3_5_yarn"] = ("qwen3_5", dict(text_config=dict(text35, intermediate_size=128, tie_word_embeddings=True,
                                                          max_position_embeddings=128,
                                                          layer_types=["linear_attention", "full_attention",
                                                                       "full_attention", "full_attention"],
                                                          rope_parameters=yarn(1e4, partial_rotary_factor=0.25,
                                                                               mrope_section=[2, 1, 1],
                                                                               mrope_interleaved=True,
                                                                               original_max_position_embeddings=32)),
                                         vision_config=vision, tie_word_embeddings=True))
    return s


def type_for(kind):
    if kind == "qwen3_5":
        from transformers import Qwen3_5ForConditionalGeneration
        return Qwen3_5ForConditionalGeneration
    if kind == "qwen3_5_moe":
        from transformers import Qwen3_5MoeForConditionalGeneration
        return Qwen3_5MoeForConditionalGeneration
    return AutoModelForCausalLM


def build(kind, kw):
    if kind == "qwen3_5":
        from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration
        cfg = Qwen3_5Config(**kw)
        return Qwen3_5ForConditionalGeneration(cfg)
    if kind == "qwen3_5_moe":
        from transformers import Qwen3_5MoeConfig, Qwen3_5MoeForConditionalGeneration
        cfg = Qwen3_5MoeConfig(**kw)
        return Qwen3_5MoeForConditionalGeneration(cfg)
    cfg = AutoConfig.for_model(kind, **kw)
    return AutoModelForCausalLM.from_config(cfg)


@no_grad()
def randomise(model, gen):
    """No parameter stays at its init value: a wrong norm convention or a dropped bias must show."""
    seen = set()
    for name, p in model.named_parameters():
        if id(p) in seen:  # tied
            continue
        seen.add(id(p))
        shape = tuple(p.shape)
        if name.endswith("A_log"):
            v = torch.empty(shape).uniform_(-2.0, 0.5, generator=gen)
        elif name.endswith("dt_bias"):
            v = torch.empty(shape).uniform_(-1.0, 1.0, generator=gen)
        elif p.ndim == 1:
            d = p.detach().float()
            if "norm" in name and bool((d == 1).all()):
                v = torch.empty(shape).uniform_(0.5, 1.5, generator=gen)
            else:  # zero-centred norm weights and biases
                v = torch.empty(shape).uniform_(-0.5, 0.5, generator=gen)
        elif "embed_tokens" in name:
            # small next to the layers' outputs, so that tied models do not just repeat their input token
            v = torch.randn(shape, generator=gen) * 0.1
        elif "conv1d" in name:
            v = torch.randn(shape, generator=gen) * 0.5
        else:
            v = torch.randn(shape, generator=gen) / math.sqrt(shape[-1])
        p.copy_(v.to(p.dtype))


def legacy_rope_fields(path):
    """rope_parameters {rope_theta, rope_type, ...} -> top-level rope_theta + rope_scaling {rope_type, ...}."""
    cfg = json.load(open(path))
    rp = cfg.pop("rope_parameters")
    cfg["rope_theta"] = rp.pop("rope_theta")
    cfg["rope_scaling"] = rp
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)


@no_grad()
def without_rope_scaling(model_dir, cls, ids, logits):
    """max |Δ| between the recorded logits and the same checkpoint run with plain RoPE: what ignoring the scaling
    would miss by. Empty for models without a rope scaling."""
    cfg = AutoConfig.from_pretrained(model_dir)
    text = getattr(cfg, "text_config", None) or cfg
    rp = dict(text.rope_parameters)
    if rp.get("rope_type", "default") == "default":
        return {}
    text.rope_parameters = {k: rp[k] for k in ("rope_theta", "partial_rotary_factor", "mrope_section",
                                               "mrope_interleaved") if k in rp}
    text.rope_parameters["rope_type"] = "default"
    plain = cls.from_pretrained(model_dir, config=cfg, dtype=torch.float32, attn_implementation="eager").eval()
    got = plain(input_ids=torch.tensor([ids]), use_cache=False).logits[0].float().numpy()
    return {"without_rope_scaling_max_abs_diff": float(np.abs(got - logits).max())}


def logits_of(model, ids, hidden=False):
    out = model(input_ids=torch.tensor([ids]), use_cache=False, output_hidden_states=hidden)
    return out


def run_one(name, kind, kw, out_root, log):
    t0 = time.time()
    gen = torch.Generator().manual_seed(1234 + sum(map(ord, name)))
    torch.manual_seed(1234)
    model = build(kind, kw)
    model.eval()
    model.float()
    randomise(model, gen)
    # bf16 checkpoint; A_log kept fp32 for Qwen3.5 (mamba_ssm_dtype float32), bf16 elsewhere.
    model.to(torch.bfloat16)
    if kind.startswith("qwen3_5"):
        for n, p in model.named_parameters():
            if n.endswith("A_log"):
                p.data = p.data.float()
    d = os.path.join(out_root, name)
    os.makedirs(d, exist_ok=True)
    save_kw = {}
    if name == "qwen3_5_moe":
        save_kw["max_shard_size"] = "400KB"  # exercise the sharded layout + index
    model.save_pretrained(d, **save_kw)
    if name in LEGACY_ROPE:
        legacy_rope_fields(os.path.join(d, "config.json"))
    # fp32 compute from exactly the bf16 values: load the saved checkpoint back in fp32. (Casting the in-memory
    # model back with .float() would keep RoPE's inv_freq buffer rounded to bf16 by the .to(bfloat16) above.)
    del model
    cls = type_for(kind)
    try:
        model = cls.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
    except Exception as e:  # noqa: BLE001
        log(f"{name}: eager attention unavailable ({e}); default attention")
        model = cls.from_pretrained(d, dtype=torch.float32)
    model.eval()
    vocab = model.get_output_embeddings().weight.shape[0]
    rng = np.random.default_rng(42 + len(name))
    prompt = [int(x) for x in rng.integers(0, vocab, PROMPT_LEN)]
    record_reference(model, d, name, kind, prompt, log,
                     "fp32 on CPU from the bf16 checkpoint reloaded with dtype=float32, eager attention, no cache")
    log(f"{name}: ok in {time.time() - t0:.1f}s, {dir_summary(d)}")


def open_log(out_root, filename):
    """A log function that prints each message and appends it to OUT_ROOT/filename (the generators' logs)."""
    logf = open(os.path.join(out_root, filename), "a")

    def log(msg):
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    return log


def dir_summary(d):
    files = sorted(os.listdir(d))
    size = sum(os.path.getsize(os.path.join(d, x)) for x in files)
    return f"{size / 1e6:.2f} MB, files {files}"


def record_reference(model, d, name, kind, prompt, log, compute):
    """Greedy continuation of `prompt`, then logits.bin, hidden.bin and reference.json of the full sequence in d.
    `compute` says in reference.json how the model was loaded."""
    ids = list(prompt)
    margins = []
    with torch.no_grad():
        for _ in range(NEW_TOKENS):
            lg = logits_of(model, ids).logits[0, -1].float()
            top2 = torch.topk(lg, 2).values
            margins.append(float(top2[0] - top2[1]))
            ids.append(int(torch.argmax(lg)))
        out = logits_of(model, ids, hidden=True)
        logits = out.logits[0].float().numpy().astype(np.float32)
        hs = out.hidden_states
        hidden = np.stack([h[0].float().numpy() for h in hs]).astype(np.float32) if hs else None
        # the full forward must reproduce the greedy choices made step by step
        for i in range(NEW_TOKENS):
            a = int(np.argmax(logits[PROMPT_LEN - 1 + i]))
            if a != ids[PROMPT_LEN + i]:
                log(f"{name}: WARNING full-forward argmax differs at step {i}")
        # informational: transformers' own cached decode vs the uncached forward
        cache_info = {}
        try:
            g = model.generate(torch.tensor([prompt]), max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                               do_sample=False, output_logits=True, return_dict_in_generate=True,
                               eos_token_id=None, pad_token_id=0)
            gids = g.sequences[0, PROMPT_LEN:].tolist()
            glog = torch.stack(g.logits, 1)[0].float().numpy()
            diff = float(np.abs(glog - logits[PROMPT_LEN - 1:PROMPT_LEN - 1 + NEW_TOKENS]).max())
            cache_info = {"hf_cached_ids_equal": gids == ids[PROMPT_LEN:], "hf_cached_vs_uncached_max_abs": diff}
        except Exception as e:  # noqa: BLE001
            cache_info = {"hf_generate_error": repr(e)[:300]}
    scaling_info = without_rope_scaling(d, type(model), ids, logits)
    logits.tofile(os.path.join(d, "logits.bin"))
    if hidden is not None:
        hidden.tofile(os.path.join(d, "hidden.bin"))
    ref = {
        "name": name,
        "model_type": kind,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "prompt_len": PROMPT_LEN,
        "ids": ids,
        "prompt_ids": prompt,
        "greedy_ids": ids[PROMPT_LEN:],
        "greedy_top2_margin": margins,
        "logits_shape": list(logits.shape),
        "logits_max_abs": float(np.abs(logits).max()),
        "hidden_shape": list(hidden.shape) if hidden is not None else None,
        "hidden_note": "output_hidden_states of the full forward: embeddings, then each layer (last one as HF gives it)",
        "compute": compute,
        **cache_info,
        **scaling_info,
    }
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
    log(f"{name}: cache {cache_info}")


# ---------------------------------------------------------------------------------------------------------------
# Post-processing without torch: make the Qwen3.5 checkpoints look like the released ones where transformers'
# save_pretrained does not (it writes Qwen3.5-MoE experts one by one; released checkpoints store them fused as
# experts.gate_up_proj [E, 2I, H] and experts.down_proj [E, H, I]), and add MTP tensors, which released
# checkpoints carry and a loader must skip. Neither changes what transformers computes (same numbers, and
# transformers ignores mtp.*), so the recorded logits stay valid.

def st_read(path):
    with open(path, "rb") as f:
        blob = f.read()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", None)
    base = 8 + n
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        out[name] = (e["dtype"], list(e["shape"]), blob[base + b:base + end])
    return out, meta


def st_write(path, tensors, meta):
    header = {}
    off = 0
    for name, (dt, shape, data) in tensors.items():
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    if meta is not None:
        header["__metadata__"] = meta
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for _, (_, _, data) in tensors.items():
            f.write(data)


def load_checkpoint(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        files = sorted(set(json.load(open(idx))["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    tensors, meta = {}, None
    for fn in files:
        t, meta = st_read(os.path.join(d, fn))
        tensors.update(t)
    return files, tensors, meta


def save_checkpoint(d, files, tensors, meta):
    for fn in files:
        os.remove(os.path.join(d, fn))
    names = sorted(tensors)
    if len(files) == 1:
        st_write(os.path.join(d, files[0]), {n: tensors[n] for n in names}, meta)
        return
    # same number of shards, split by bytes in name order
    total = sum(len(tensors[n][2]) for n in names)
    per = total / len(files)
    shards, cur, acc = [], [], 0
    for n in names:
        if cur and acc + len(tensors[n][2]) > per * (len(shards) + 1) and len(shards) < len(files) - 1:
            shards.append(cur)
            cur = []
        cur.append(n)
        acc += len(tensors[n][2])
    shards.append(cur)
    k = len(shards)
    weight_map = {}
    for i, group in enumerate(shards):
        fn = f"model-{i + 1:05d}-of-{k:05d}.safetensors"
        st_write(os.path.join(d, fn), {n: tensors[n] for n in group}, meta)
        for n in group:
            weight_map[n] = fn
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def fuse_experts(tensors):
    import re
    pat = re.compile(r"^(.*\.mlp\.experts)\.(\d+)\.(gate|up|down)_proj\.weight$")
    groups = {}
    for n in list(tensors):
        m = pat.match(n)
        if m and not n.startswith("mtp."):
            groups.setdefault(m.group(1), {})[(int(m.group(2)), m.group(3))] = tensors.pop(n)
    for prefix, g in groups.items():
        E = 1 + max(e for e, _ in g)
        dt, (I, H), _ = g[(0, "gate")]
        gate_up = b"".join(g[(e, "gate")][2] + g[(e, "up")][2] for e in range(E))
        down = b"".join(g[(e, "down")][2] for e in range(E))
        tensors[prefix + ".gate_up_proj"] = (dt, [E, 2 * I, H], gate_up)
        tensors[prefix + ".down_proj"] = (dt, [E, H, I], down)
    return len(groups)


def add_mtp(tensors, cfg, moe, rng):
    t = cfg.get("text_config", cfg)
    H = t["hidden_size"]

    def bf16(shape, scale=0.1):
        a = (rng.standard_normal(shape) * scale).astype(np.float32)
        return ("BF16", list(shape), (a.view(np.uint32) >> 16).astype(np.uint16).tobytes())

    tensors["mtp.fc.weight"] = bf16((H, 2 * H))
    for n in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm", "layers.0.input_layernorm",
              "layers.0.post_attention_layernorm"):
        tensors[f"mtp.{n}.weight"] = bf16((H,))
    hd, nq = t["head_dim"], t["num_attention_heads"]
    tensors["mtp.layers.0.self_attn.q_proj.weight"] = bf16((2 * nq * hd, H))
    if moe:  # unfused in released checkpoints
        I = t["moe_intermediate_size"]
        tensors["mtp.layers.0.mlp.experts.0.gate_proj.weight"] = bf16((I, H))
        tensors["mtp.layers.0.mlp.gate.weight"] = bf16((t["num_experts"], H))


def postprocess(out_root, log=print):
    rng = np.random.default_rng(7)
    for name in ("qwen3_5", "qwen3_5_moe"):
        d = os.path.join(out_root, name)
        if not os.path.isdir(d):
            continue
        files, tensors, meta = load_checkpoint(d)
        if any(n.startswith("mtp.") for n in tensors):
            log(f"{name}: already post-processed")
            continue
        cfg = json.load(open(os.path.join(d, "config.json")))
        moe = name.endswith("moe")
        fused = fuse_experts(tensors) if moe else 0
        add_mtp(tensors, cfg, moe, rng)
        save_checkpoint(d, files, tensors, meta)
        log(f"{name}: fused experts of {fused} layers, added MTP tensors")


def verify_reload(out_root, log):
    """transformers must read the post-processed checkpoints back and compute the same logits."""
    from transformers import Qwen3_5ForConditionalGeneration, Qwen3_5MoeForConditionalGeneration
    for name, cls in (("qwen3_5", Qwen3_5ForConditionalGeneration),
                      ("qwen3_5_moe", Qwen3_5MoeForConditionalGeneration)):
        d = os.path.join(out_root, name)
        if not os.path.isdir(d):
            continue
        ref = json.load(open(os.path.join(d, "reference.json")))
        want = np.fromfile(os.path.join(d, "logits.bin"), dtype=np.float32).reshape(ref["logits_shape"])
        model = cls.from_pretrained(d, dtype=torch.float32).eval()
        with torch.no_grad():
            got = model(input_ids=torch.tensor([ref["ids"]]), use_cache=False).logits[0].float().numpy()
        log(f"{name}: reloaded after post-processing, max |logits - recorded| = {float(np.abs(got - want).max())}")


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--postprocess":
        postprocess(sys.argv[2])
        return 0
    out_root = sys.argv[1]
    only = set(sys.argv[2:])
    os.makedirs(out_root, exist_ok=True)
    torch.set_num_threads(min(8, os.cpu_count() or 1))
    log = open_log(out_root, "make_tiny_models.log")
    log(f"torch {torch.__version__} transformers {transformers.__version__}")
    failed = []
    for name, (kind, kw) in specs().items():
        if only and name not in only:
            continue
        try:
            run_one(name, kind, kw, out_root, log)
        except Exception:  # noqa: BLE001
            failed.append(name)
            log(f"{name}: FAILED\n{traceback.format_exc()}")
    try:
        postprocess(out_root, log)
        verify_reload(out_root, log)
    except Exception:  # noqa: BLE001
        failed.append("postprocess")
        log(f"postprocess: FAILED\n{traceback.format_exc()}")
    log(f"failed: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
