"""bench/gpu/make_awq_checkpoint.py (the AWQ checkpoints the GPU machine times int4 decode on) against pagoda's own AWQ
loader, on the tiny golden qwen3 model.

The packed tensors are read back here by an independent reading of AutoAWQ's gemm layout (qweight I32 [K, N/8], nibble
i of word c holding column 8c + [0, 2, 4, 6, 1, 3, 5, 7][i]; qzeros likewise; scales F16 [K/group, N]) and dequantised
as AWQ does, (q - zero) * scale rounded to f16. A dense F32 checkpoint of those values must give the AWQ checkpoint's
logits through `pagoda logits` (pagoda's repack_awq_gemm, checked against gptqmodel's and transformers' goldens, reads
the packing): a wrong nibble order, transposition or zero point would move them. The round-to-nearest bound on each
weight says the quantization is what the script claims; the original bf16 model's logits are close, not equal.
"""
import json
import pathlib
import shutil
import subprocess
import sys

import pytest

np = pytest.importorskip("numpy")
# torch is not in the test environment (its wheel brings gigabytes of CUDA libraries): this runs where torch is, as on
# the GPU machine the script is for; CI skips it.
torch = pytest.importorskip("torch", reason="torch is not installed")
st_torch = pytest.importorskip("safetensors.torch")

ROOT = pathlib.Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "bench" / "gpu" / "make_awq_checkpoint.py"
GOLDEN = ROOT / "tests" / "golden"
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
IDS = "3 14 15 92 65 35 89 79 323 84 626 43 383 279 502 88"


def make_awq(src, out, *args):
    p = subprocess.run([sys.executable, str(SCRIPT), str(src), str(out), *args], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def unpack(words):
    """I32 [R, C/8] in AWQ's order -> int [R, C]."""
    w = words.to(torch.int64) & 0xFFFFFFFF
    R, C8 = w.shape
    out = torch.empty(R, C8 * 8, dtype=torch.int64)
    for i, col in enumerate(AWQ_ORDER):
        out[:, col::8] = (w >> (4 * i)) & 0xF
    return out


def dequantize(tensors, module, group):
    """The [N, K] weight AWQ serves for `module`: (q - zero) * scale, rounded to f16, as f32."""
    q = unpack(tensors[module + ".qweight"])  # [K, N]
    zeros = unpack(tensors[module + ".qzeros"])  # [G, N]
    scales = tensors[module + ".scales"]  # [G, N] f16
    assert scales.dtype == torch.float16
    K, N = q.shape
    assert zeros.shape == (K // group, N) and scales.shape == (K // group, N)
    g = torch.arange(K) // group
    w = (q - zeros[g]).to(torch.float32) * scales[g].to(torch.float32)
    return w.to(torch.float16).to(torch.float32).t().contiguous(), scales.to(torch.float32).t()


def write_dequantized(awq_dir, out_dir, group):
    """A dense checkpoint of awq_dir whose projections are their dequantised values (F32, exact); the rest as stored."""
    tensors = st_torch.load_file(str(awq_dir / "model.safetensors"))
    dense = {}
    for name, t in tensors.items():
        if name.endswith(".qweight"):
            module = name[: -len(".qweight")]
            dense[module + ".weight"] = dequantize(tensors, module, group)[0]
        elif not name.endswith((".qzeros", ".scales")):
            dense[name] = t
    out_dir.mkdir()
    st_torch.save_file(dense, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((awq_dir / "config.json").read_text())
    del config["quantization_config"]
    (out_dir / "config.json").write_text(json.dumps(config))


def logits(pagoda_bin, model_dir):
    p = subprocess.run([str(pagoda_bin), "logits", "--model", str(model_dir), "--ids", IDS, "--json", "--threads", "2"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return np.array(json.loads(p.stdout)["logits"], dtype=np.float64)


def served_equals_dequantized(pagoda_bin, src_dir, awq_dir, group):
    """pagoda's logits of the AWQ checkpoint equal those of the dense checkpoint of its dequantised weights; returns
    them with the original model's."""
    dense = awq_dir.parent / (awq_dir.name + "_dequantized")
    write_dequantized(awq_dir, dense, group)
    got, want = logits(pagoda_bin, awq_dir), logits(pagoda_bin, dense)
    assert float(np.abs(got - want).max()) <= 1e-5 * float(np.abs(want).max())
    return got, logits(pagoda_bin, src_dir)


def check_round_to_nearest(src_dir, awq_dir, group):
    """Each served weight is within half a step (plus the f16 roundings) of the original: round-to-nearest of an
    asymmetric min/max grid, no value clamped away."""
    original = st_torch.load_file(str(src_dir / "model.safetensors"))
    tensors = st_torch.load_file(str(awq_dir / "model.safetensors"))
    modules = [n[: -len(".qweight")] for n in tensors if n.endswith(".qweight")]
    assert modules
    for m in modules:
        w = original[m + ".weight"].to(torch.float32)
        served, scales = dequantize(tensors, m, group)
        step = scales.repeat_interleave(group, dim=1)
        bound = step * (0.5 + 16 * 2.0**-11) + served.abs() * 2.0**-11 + 1e-12
        assert bool(((served - w).abs() <= bound).all()), m
        # Each group's codes span the grid (its min and max map to 0 and 15, give or take one where the f16 scale's
        # rounding puts an end at a half step).
        q = unpack(tensors[m + ".qweight"]).t().reshape(w.shape[0], -1, group)
        assert int(q.amin(-1).max()) <= 1 and int(q.amax(-1).min()) >= 14, m
    return modules


def test_awq_checkpoint_of_the_qwen3_golden(tmp_path, pagoda_bin):
    src = tmp_path / "qwen3"
    shutil.copytree(GOLDEN / "qwen3", src)
    awq = tmp_path / "qwen3_awq"
    group = 32  # the model's inputs are 64 and 128 wide
    summary = make_awq(src, awq, "--group", str(group))

    config = json.loads((awq / "config.json").read_text())
    assert config["quantization_config"] == {"quant_method": "awq", "bits": 4, "group_size": group,
                                             "zero_point": True, "version": "gemm",
                                             "modules_to_not_convert": ["lm_head"]}
    assert (awq / "generation_config.json").exists()
    tensors = st_torch.load_file(str(awq / "model.safetensors"))
    for name in ["model.layers.0.self_attn.q_proj", "model.layers.2.mlp.down_proj"]:
        assert tensors[name + ".qweight"].dtype == torch.int32 and tensors[name + ".qzeros"].dtype == torch.int32
        assert name + ".weight" not in tensors
    assert tensors["lm_head.weight"].dtype == torch.bfloat16
    assert tensors["model.embed_tokens.weight"].dtype == torch.bfloat16
    assert summary["quantized"] == len(check_round_to_nearest(src, awq, group)) == 21  # 3 layers x 7 projections

    inspect = subprocess.run([str(pagoda_bin), "inspect", str(awq)], capture_output=True, text=True, timeout=60)
    assert inspect.returncode == 0, inspect.stderr
    assert "layers 0-2:     int4 (group 32, zero points), AWQ GEMM packing" in inspect.stdout

    got, original = served_equals_dequantized(pagoda_bin, src, awq, group)
    # Quantization moves the original model's logits (4 bits over groups of 32 inputs: 8% RMS weight error), but
    # each position's logits stay correlated with the original's (0.94 on average here).
    assert float(np.abs(got - original).max()) > 1e-3 * float(np.abs(original).max())
    correlation = np.mean([np.corrcoef(got[i], original[i])[0, 1] for i in range(len(got))])
    assert correlation > 0.85, correlation

    # Written in shards of ~100 KB (a real checkpoint's are GBs), read from shards: the same model.
    sharded = tmp_path / "qwen3_awq_sharded"
    assert make_awq(awq.parent / "qwen3", sharded, "--group", str(group), "--max-shard-gb", "1e-4")["shards"] > 2
    index = json.loads((sharded / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"]) == set(tensors)
    assert np.array_equal(logits(pagoda_bin, sharded), got)


def test_awq_checkpoint_of_the_qwen3_5_golden(tmp_path, pagoda_bin):
    """Qwen3.5 (the dense golden): its in_proj_a / in_proj_b have 4 value heads, not a multiple of 8, so they stay bf16
    and are named in modules_to_not_convert, as are the vision tower and the MTP head, copied as stored; pagoda serves
    the rest (Gated DeltaNet qkv / z / out, gated attention, MLP) as int4."""
    src = tmp_path / "qwen3_5"
    shutil.copytree(GOLDEN / "qwen3_5", src)
    awq = tmp_path / "qwen3_5_awq"
    make_awq(src, awq, "--group", "32")
    config = json.loads((awq / "config.json").read_text())
    assert config["quantization_config"]["modules_to_not_convert"] == [
        "linear_attn.in_proj_a", "linear_attn.in_proj_b", "lm_head", "mtp", "visual"]
    tensors = st_torch.load_file(str(awq / "model.safetensors"))
    p = "model.language_model.layers.0.linear_attn."
    assert tensors[p + "in_proj_a.weight"].dtype == torch.bfloat16
    assert tensors[p + "in_proj_qkv.qweight"].dtype == torch.int32
    assert tensors["mtp.layers.0.self_attn.q_proj.weight"].dtype == torch.bfloat16
    assert tensors["model.visual.blocks.0.attn.qkv.weight"].dtype == torch.bfloat16
    assert len(check_round_to_nearest(src, awq, 32)) == 25  # 3 DeltaNet x 3, 1 attention x 4, 4 MLPs x 3
    served_equals_dequantized(pagoda_bin, src, awq, 32)


def test_fused_experts_are_refused(tmp_path):
    """Qwen3.5-MoE stores its routed experts fused ([E, 2I, H]); AWQ's layout is per expert, so the tool says so and
    writes nothing rather than a checkpoint whose experts stay bf16."""
    p = subprocess.run([sys.executable, str(SCRIPT), str(GOLDEN / "qwen3_5_moe"), str(tmp_path / "out"), "--group",
                        "16"], capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "fused MoE experts are not written" in p.stderr
    assert not (tmp_path / "out").exists()
