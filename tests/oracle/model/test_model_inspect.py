"""`pagoda inspect --json` against the reference implementations: checkpoints written by the Python
`safetensors` package (single file and sharded), and ModelSpec fields against transformers' config
classes (AutoConfig, no torch needed) for every supported model_type."""

import json
import os
import subprocess
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
st_numpy = pytest.importorskip("safetensors.numpy")
safetensors = pytest.importorskip("safetensors")

SHARED = Path(os.environ.get("PAGODA_SHARED_DIR", "/work/shared"))


@pytest.fixture(scope="module")
def pagoda_bin():
    path = os.environ.get("PAGODA_BIN")
    if not path or not Path(path).is_file():
        pytest.skip("PAGODA_BIN is not set to the built `pagoda` executable")
    return path


def inspect(pagoda_bin, model_dir, *extra):
    r = subprocess.run([pagoda_bin, "inspect", str(model_dir), "--json", *extra], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def inspect_fails(pagoda_bin, model_dir):
    r = subprocess.run([pagoda_bin, "inspect", str(model_dir), "--json"], capture_output=True, text=True)
    assert r.returncode != 0
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


NP_TO_ST = {
    "float32": "F32", "float16": "F16", "float64": "F64", "int8": "I8", "uint8": "U8", "int16": "I16",
    "int32": "I32", "int64": "I64", "bool": "BOOL", "uint16": "U16", "uint32": "U32", "uint64": "U64",
}


def reference_tensors(files):
    """Tensor name → (dtype, shape) as the safetensors package reads the files."""
    out = {}
    for f in files:
        with safetensors.safe_open(str(f), framework="np") as h:
            for name in h.keys():
                sl = h.get_slice(name)
                out[name] = (sl.get_dtype(), list(sl.get_shape()))
    return out


def qwen3_tiny_tensors(rng, prefix="model.", layers=2, hidden=16, inter=24, vocab=50, heads=2, kv=1, hd=8):
    t = {f"{prefix}embed_tokens.weight": rng.standard_normal((vocab, hidden)).astype(np.float16)}
    for i in range(layers):
        p = f"{prefix}layers.{i}."
        t[p + "input_layernorm.weight"] = np.ones(hidden, np.float32)
        t[p + "post_attention_layernorm.weight"] = np.ones(hidden, np.float32)
        t[p + "self_attn.q_proj.weight"] = rng.standard_normal((heads * hd, hidden)).astype(np.float16)
        t[p + "self_attn.k_proj.weight"] = rng.standard_normal((kv * hd, hidden)).astype(np.float16)
        t[p + "self_attn.v_proj.weight"] = rng.standard_normal((kv * hd, hidden)).astype(np.float16)
        t[p + "self_attn.o_proj.weight"] = rng.standard_normal((hidden, heads * hd)).astype(np.float16)
        t[p + "self_attn.q_norm.weight"] = np.ones(hd, np.float32)
        t[p + "self_attn.k_norm.weight"] = np.ones(hd, np.float32)
        t[p + "mlp.gate_proj.weight"] = rng.standard_normal((inter, hidden)).astype(np.float16)
        t[p + "mlp.up_proj.weight"] = rng.standard_normal((inter, hidden)).astype(np.float16)
        t[p + "mlp.down_proj.weight"] = rng.standard_normal((hidden, inter)).astype(np.float16)
    t[f"{prefix}norm.weight"] = np.ones(hidden, np.float32)
    t["lm_head.weight"] = rng.standard_normal((vocab, hidden)).astype(np.float16)
    return t


TINY_QWEN3 = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "hidden_size": 16,
              "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
              "head_dim": 8, "vocab_size": 50, "torch_dtype": "float16", "eos_token_id": 7}


def check_against_reference(report, files, tensors):
    ref = reference_tensors(files)
    got = {t["name"]: (t["dtype"], t["shape"]) for t in report["tensors"]}
    assert got == ref
    # Each array as numpy holds it: element count and bytes.
    assert report["parameters"]["total"] == sum(int(a.size) for a in tensors.values())
    assert report["weight_bytes"] == sum(int(a.nbytes) for a in tensors.values())
    assert report["num_tensors"] == len(tensors)
    for name, a in tensors.items():
        assert got[name] == (NP_TO_ST[str(a.dtype)], list(a.shape)), name


def test_single_file_checkpoint(pagoda_bin, tmp_path):
    rng = np.random.default_rng(0)
    tensors = qwen3_tiny_tensors(rng)
    # Extra dtypes the reader accepts as data (scales, indices, masks).
    tensors["extra.i8"] = rng.integers(-5, 5, (3, 4)).astype(np.int8)
    tensors["extra.u8"] = rng.integers(0, 5, (5,)).astype(np.uint8)
    tensors["extra.i32"] = rng.integers(0, 5, (2, 2)).astype(np.int32)
    tensors["extra.i64"] = rng.integers(0, 5, (3,)).astype(np.int64)
    tensors["extra.bool"] = np.array([True, False, True])
    tensors["extra.scalar"] = np.array(3.5, np.float32)
    tensors["extra.empty"] = np.zeros((0, 4), np.float32)
    st_numpy.save_file(tensors, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    (tmp_path / "config.json").write_text(json.dumps(TINY_QWEN3))
    report = inspect(pagoda_bin, tmp_path, "--tensors")
    check_against_reference(report, [tmp_path / "model.safetensors"], tensors)
    embed = tensors["model.embed_tokens.weight"].size + tensors["lm_head.weight"].size
    assert report["parameters"]["embedding"] == embed
    extra = sum(int(a.size) for n, a in tensors.items() if n.startswith("extra."))
    assert report["parameters"]["other"] == extra
    assert report["parameters"]["text_model"] == report["parameters"]["total"] - embed - extra
    assert report["num_weight_files"] == 1
    # What the model's weights structs declare (and `serve` loads): every tensor but the extras.
    assert report["loaded_parameters"] == report["parameters"]["total"] - extra
    assert report["loaded_tensors"] == len(tensors) - sum(1 for n in tensors if n.startswith("extra."))


GOLDEN = Path(__file__).resolve().parents[3] / "tests" / "golden"


def formats_of(report):
    return [{"layers": f["layers"], "formats": f["formats"]} for f in report["layer_formats"]]


# qwen3's layer: q 128x64, k and v 64x64, o 64x128, gate and up 128x64, down 64x128: 49,152 weights.
QWEN3_LAYER = 49152
# qwen2's layer: q and o 96x96, k and v 32x96, gate and up 160x96, down 96x160: 70,656 weights.
QWEN2_LAYER = 70656


@pytest.mark.parametrize("name,layers,formats,lm_head,layer_bytes", [
    ("qwen3", "0-2", "bf16", "bf16", 2 * QWEN3_LAYER),
    ("qwen3_fp8", "0-2", "fp8-e4m3 (128x128 block scales)", "bf16", QWEN3_LAYER + 7 * 4),
    # Gated DeltaNet layers 0, 1 and 3 read other bytes than the attention layer 2: runs split where bytes differ.
    ("qwen3_5_fp8", ["0-1", "2", "3"], "fp8-e4m3 (32x32 block scales)", "tied to the embedding", None),
    # int4: half a byte a weight, an F32 scale (and zero point) per group, as pagoda holds them after repacking.
    ("qwen3_awq", "0-2", "int4 (group 32, zero points), AWQ GEMM packing", "bf16", QWEN3_LAYER // 2 + QWEN3_LAYER // 32 * 8),
    # GPTQ stores zero points even when symmetric (all 8): they are read as stored.
    ("qwen3_gptq", "0-2", "int4 (group 64, zero points), GPTQ packing", "bf16", QWEN3_LAYER // 2 + QWEN3_LAYER // 64 * 8),
    # act-order: the same, plus the input permutation (I32 [K]) each projection's gather reads: K = 64 for q/k/v and
    # gate/up, 128 for o and down.
    ("qwen3_gptq_actorder", "0-2", "int4 (group 32, zero points), GPTQ packing, act-order", "bf16",
     QWEN3_LAYER // 2 + QWEN3_LAYER // 32 * 8 + (5 * 64 + 2 * 128) * 4),
    ("qwen3_w4a16", "0-2", "int4 (group 32, symmetric), compressed-tensors pack-quantized", "bf16",
     QWEN3_LAYER // 2 + QWEN3_LAYER // 32 * 4),
    ("qwen3_w4a16_asym", "0-2", "int4 (group 32, zero points), compressed-tensors pack-quantized", "bf16",
     QWEN3_LAYER // 2 + QWEN3_LAYER // 32 * 8),
    # compressed-tensors W8A16: a byte a weight and one F32 scale per output channel (qwen2's 672 rows a layer).
    ("qwen2_w8a16", "0-1", "int8 (per-channel, symmetric), compressed-tensors pack-quantized", "bf16",
     QWEN2_LAYER + 672 * 4),
    # AutoRound: GPTQ's packing (zero points stored, symmetric or not) or AWQ's.
    ("qwen3_autoround", "0-2", "int4 (group 32, zero points), GPTQ packing", "bf16",
     QWEN3_LAYER // 2 + QWEN3_LAYER // 32 * 8),
    ("qwen2_autoround_awq", "0-1", "int4 (group 32, zero points), AWQ GEMM packing", "bf16",
     QWEN2_LAYER // 2 + QWEN2_LAYER // 32 * 8),
    # GPTQ 8-bit: a byte a weight, plus the F32 scale and zero point per group (sym: the stored zeros, all 128).
    ("qwen2_gptq_int8", "0-1", "int8 (group 32, zero points), GPTQ packing", "bf16",
     QWEN2_LAYER + QWEN2_LAYER // 32 * 8),
])
def test_layer_formats(pagoda_bin, name, layers, formats, lm_head, layer_bytes):
    d = GOLDEN / name
    if not (d / "config.json").exists():
        pytest.skip(f"no golden data in {d}")
    report = inspect(pagoda_bin, d)
    runs = layers if isinstance(layers, list) else [layers]
    assert formats_of(report) == [{"layers": run, "formats": formats} for run in runs]
    if layer_bytes is not None:
        assert report["layer_formats"][0]["bytes_per_token"] == layer_bytes
    assert report["lm_head_format"] == lm_head
    text = subprocess.run([pagoda_bin, "inspect", str(d)], capture_output=True, text=True, check=True).stdout
    assert f"layers {runs[0]}:" in text and formats in text
    quantization = json.loads((d / "config.json").read_text()).get("quantization_config")
    assert ("quantization:   none" in text) == (quantization is None), text


# qwen3_moe's layer 0: attention (24,576 weights), 8 experts of 3 x 32x64 of which a token reads k = 2 (12,288), and
# the router (8x64) that every checkpoint keeps bf16. Layer 1 is an mlp_only layer (dense MLP, kept bf16 by the
# quantized copies).
MOE_ROUTED = 24576 + 2 * 3 * 32 * 64
MOE_ROUTER_BYTES = 8 * 64 * 2


@pytest.mark.parametrize("name,formats,layer_bytes", [
    ("qwen3_moe", "bf16", 2 * MOE_ROUTED + MOE_ROUTER_BYTES),
    ("qwen3_moe_fp8", "fp8-e4m3 (32x32 block scales); bf16: mlp.gate", None),
    ("qwen3_moe_gptq", "int4 (group 32, zero points), GPTQ packing; bf16: mlp.gate",
     MOE_ROUTED // 2 + MOE_ROUTED // 32 * 8 + MOE_ROUTER_BYTES),
    ("qwen3_moe_awq", "int4 (group 16, zero points), AWQ GEMM packing; bf16: mlp.gate",
     MOE_ROUTED // 2 + MOE_ROUTED // 16 * 8 + MOE_ROUTER_BYTES),
    ("qwen3_moe_w4a16", "int4 (group 32, symmetric), compressed-tensors pack-quantized; bf16: mlp.gate",
     MOE_ROUTED // 2 + MOE_ROUTED // 32 * 4 + MOE_ROUTER_BYTES),
])
def test_moe_expert_formats(pagoda_bin, name, formats, layer_bytes):
    """Experts stored one by one are named by their first expert's format (int4 ones by their packed tensors) and a
    token's bytes count its routed experts' share of the stacks."""
    d = GOLDEN / name
    if not (d / "config.json").exists():
        pytest.skip(f"no golden data in {d}")
    report = inspect(pagoda_bin, d)
    assert formats_of(report)[0] == {"layers": "0", "formats": formats}
    if layer_bytes is not None:
        assert report["layer_formats"][0]["bytes_per_token"] == layer_bytes


FP8_KEPT = "mlp.gate mlp.shared_expert_gate"
GPTQ_EXPERTS = "int4 (group 32, zero points), GPTQ packing: mlp.experts.gate_up_proj mlp.experts.down_proj"


@pytest.mark.parametrize("name,formats", [
    # The FP8 release: routed experts one by one (the bf16 release fuses them), the shared expert quantized too; the
    # Gated DeltaNet's in_proj_a / in_proj_b, the router and the shared-expert gate bf16.
    ("qwen3_5_moe_fp8", [
        ("0-1", f"fp8-e4m3 (16x16 block scales); bf16: linear_attn.in_proj_b linear_attn.in_proj_a {FP8_KEPT}"),
        ("2", f"fp8-e4m3 (16x16 block scales); bf16: {FP8_KEPT}"),
        ("3", f"fp8-e4m3 (16x16 block scales); bf16: linear_attn.in_proj_b linear_attn.in_proj_a {FP8_KEPT}")]),
    # The GPTQ-Int4 release: attention of both kinds left bf16 by GPTQModel's "-:.*attn.*" rule; the experts int4.
    ("qwen3_5_moe_gptq", [("0-1", f"bf16; {GPTQ_EXPERTS}"), ("2", f"bf16; {GPTQ_EXPERTS}"),
                          ("3", f"bf16; {GPTQ_EXPERTS}")]),
])
def test_qwen3_5_moe_release_layouts(pagoda_bin, name, formats):
    """Qwen3.5-MoE's quantized releases store the routed experts one by one; each layer names what it left bf16."""
    d = GOLDEN / name
    if not (d / "config.json").exists():
        pytest.skip(f"no golden data in {d}")
    assert formats_of(inspect(pagoda_bin, d)) == [{"layers": layers, "formats": f} for layers, f in formats]


def test_layer_formats_name_what_a_quantized_checkpoint_left_dense(pagoda_bin, tmp_path):
    # qwen3_fp8 with layer 1's down_proj stored bf16 (dequantised): that layer says so by name.
    src = GOLDEN / "qwen3_fp8"
    if not (src / "config.json").exists():
        pytest.skip(f"no golden data in {src}")
    # Raw bytes: numpy has no bf16 or fp8 to load the file with.
    blob = (src / "model.safetensors").read_bytes()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    data = {k: blob[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]] for k, e in header.items()}
    name = "model.layers.1.mlp.down_proj.weight"
    del header[name.replace("weight", "weight_scale_inv")]
    header[name]["dtype"] = "F16"
    data[name] = bytes(2 * len(data[name]))
    offset, out = 0, {}
    for k in header:
        out[k] = {"dtype": header[k]["dtype"], "shape": header[k]["shape"],
                  "data_offsets": [offset, offset + len(data[k])]}
        offset += len(data[k])
    h = json.dumps(out).encode()
    h += b" " * (-len(h) % 8)
    (tmp_path / "model.safetensors").write_bytes(len(h).to_bytes(8, "little") + h + b"".join(data[k] for k in out))
    (tmp_path / "config.json").write_text((src / "config.json").read_text())
    report = inspect(pagoda_bin, tmp_path)
    fp8 = "fp8-e4m3 (128x128 block scales)"
    assert formats_of(report) == [{"layers": "0", "formats": fp8},
                                       {"layers": "1", "formats": fp8 + "; f16: mlp.down_proj"},
                                       {"layers": "2", "formats": fp8}]


def test_sharded_checkpoint(pagoda_bin, tmp_path):
    rng = np.random.default_rng(1)
    tensors = qwen3_tiny_tensors(rng, layers=3)
    names = sorted(tensors)
    shards = [names[0::3], names[1::3], names[2::3]]
    weight_map, files = {}, []
    for i, part in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        st_numpy.save_file({n: tensors[n] for n in part}, str(tmp_path / fname))
        files.append(tmp_path / fname)
        weight_map.update({n: fname for n in part})
    total = sum(int(a.nbytes) for a in tensors.values())
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}))
    (tmp_path / "config.json").write_text(json.dumps({**TINY_QWEN3, "num_hidden_layers": 3}))
    report = inspect(pagoda_bin, tmp_path, "--tensors")
    check_against_reference(report, files, tensors)
    assert report["num_weight_files"] == 3

    # A tensor listed in the index but absent from its shard: an error naming both.
    weight_map["model.layers.9.mlp.up_proj.weight"] = files[0].name
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    line = inspect_fails(pagoda_bin, tmp_path)
    assert "model.layers.9.mlp.up_proj.weight" in line and files[0].name in line


def test_bad_weight_files_fail_cleanly(pagoda_bin, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY_QWEN3))
    tensors = qwen3_tiny_tensors(np.random.default_rng(2))
    st_numpy.save_file(tensors, str(tmp_path / "model.safetensors"))
    data = (tmp_path / "model.safetensors").read_bytes()
    for cut in (3, 8, 20, len(data) // 2, len(data) - 1):
        (tmp_path / "model.safetensors").write_bytes(data[:cut])
        line = inspect_fails(pagoda_bin, tmp_path)
        assert "model.safetensors" in line
    # An unknown dtype, patched into a real header (same length keeps the offsets valid).
    n = int.from_bytes(data[:8], "little")
    header = data[8:8 + n].decode()
    assert '"F32"' in header
    bad = data[:8] + header.replace('"F32"', '"X32"', 1).encode() + data[8 + n:]
    (tmp_path / "model.safetensors").write_bytes(bad)
    line = inspect_fails(pagoda_bin, tmp_path)
    assert "unknown dtype 'X32'" in line and "model.safetensors" in line and "tensor '" in line


def test_missing_config_and_directory(pagoda_bin, tmp_path):
    assert "config.json" in inspect_fails(pagoda_bin, tmp_path)
    assert "no such model directory" in inspect_fails(pagoda_bin, tmp_path / "absent")
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    line = inspect_fails(pagoda_bin, tmp_path)
    assert "llama" in line and "qwen3_5_moe" in line


# ---------------------------------------------------------------------------------------------
# ModelSpec against transformers' config classes.

def qwen35_4b_text_config():
    p = SHARED / "qwen-tokenizers/qwen3.5-4b/variants/invokeai-qwen3_5_4b_text_config.json"
    return json.loads(p.read_text()) if p.is_file() else None


CONFIGS = {
    "qwen2_minimal": {"model_type": "qwen2"},
    "qwen2_0.5b": {"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
                   "num_attention_heads": 14, "num_key_value_heads": 2, "rope_theta": 1000000.0,
                   "sliding_window": 32768, "use_sliding_window": False, "max_window_layers": 21,
                   "tie_word_embeddings": True, "torch_dtype": "bfloat16", "eos_token_id": 151645,
                   "bos_token_id": 151643, "rms_norm_eps": 1e-6, "max_position_embeddings": 32768},
    "qwen2_sliding": {"model_type": "qwen2", "num_hidden_layers": 6, "use_sliding_window": True,
                      "sliding_window": 1024, "max_window_layers": 4},
    "qwen3_minimal": {"model_type": "qwen3"},
    "qwen3_yarn": {"model_type": "qwen3", "hidden_size": 2560, "num_hidden_layers": 36, "num_attention_heads": 32,
                   "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 9728, "rope_theta": 1000000,
                   "max_position_embeddings": 40960, "tie_word_embeddings": True, "eos_token_id": [151645, 151643],
                   "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}},
    "qwen3_moe_minimal": {"model_type": "qwen3_moe"},
    "qwen3_moe_30b": {"model_type": "qwen3_moe", "hidden_size": 2048, "num_hidden_layers": 48,
                      "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128,
                      "num_experts_per_tok": 8, "moe_intermediate_size": 768, "norm_topk_prob": True,
                      "decoder_sparse_step": 1, "mlp_only_layers": [], "rope_theta": 1000000.0},
    "qwen3_moe_sparse": {"model_type": "qwen3_moe", "num_hidden_layers": 8, "decoder_sparse_step": 2,
                         "mlp_only_layers": [1, 5]},
    "qwen3_next_minimal": {"model_type": "qwen3_next"},
    "qwen3_next_80b": {"model_type": "qwen3_next", "hidden_size": 2048, "num_hidden_layers": 48,
                       "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
                       "intermediate_size": 5120, "moe_intermediate_size": 512,
                       "shared_expert_intermediate_size": 512, "num_experts": 512, "num_experts_per_tok": 10,
                       "full_attention_interval": 4, "partial_rotary_factor": 0.25, "rope_theta": 10000000,
                       "max_position_embeddings": 262144, "linear_num_value_heads": 32},
    "qwen3_next_interval3": {"model_type": "qwen3_next", "num_hidden_layers": 9, "full_attention_interval": 3,
                             "rope_parameters": {"rope_type": "default", "rope_theta": 5000000,
                                                 "partial_rotary_factor": 0.5}},
    "qwen3_5_minimal": {"model_type": "qwen3_5"},
    "qwen3_5_moe_minimal": {"model_type": "qwen3_5_moe"},
    "qwen3_5_moe_35b": {"model_type": "qwen3_5_moe", "tie_word_embeddings": False, "eos_token_id": 248046,
                        "text_config": {"model_type": "qwen3_5_moe_text", "hidden_size": 2048,
                                        "num_hidden_layers": 40, "num_attention_heads": 16,
                                        "num_key_value_heads": 2, "num_experts": 256, "num_experts_per_tok": 8,
                                        "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
                                        "eos_token_id": 248044,
                                        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000,
                                                            "partial_rotary_factor": 0.25,
                                                            "mrope_section": [11, 11, 10],
                                                            "mrope_interleaved": True}}},
    "qwen3_5_text_flat": {"model_type": "qwen3_5_text", "num_hidden_layers": 8, "rope_theta": 10000000,
                          "tie_word_embeddings": True},
}
_text = qwen35_4b_text_config()
if _text is not None:
    CONFIGS["qwen3_5_4b"] = {"model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"],
                             "tie_word_embeddings": True, "text_config": _text}


def as_list(v):
    if v is None:
        return []
    return list(v) if isinstance(v, (list, tuple)) else [v]


def expected_spec(cfg):
    """What transformers makes of the config, in our spec's terms."""
    t = cfg.get_text_config()
    mt = cfg.model_type
    hybrid = mt in ("qwen3_next", "qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text")
    rp = t.rope_parameters or {}
    e = {
        "hidden_size": t.hidden_size,
        "num_hidden_layers": t.num_hidden_layers,
        "num_attention_heads": t.num_attention_heads,
        "num_key_value_heads": t.num_key_value_heads,
        # The modeling code: getattr(config, "head_dim", hidden_size // num_attention_heads).
        "head_dim": getattr(t, "head_dim", None) or t.hidden_size // t.num_attention_heads,
        "vocab_size": t.vocab_size,
        "rms_norm_eps": t.rms_norm_eps,
        "hidden_act": t.hidden_act,
        "max_position_embeddings": t.max_position_embeddings,
        # The lm_head belongs to the top-level model: its config decides the tying.
        "tie_word_embeddings": bool(cfg.tie_word_embeddings),
    }
    if hasattr(t, "intermediate_size"):
        e["intermediate_size"] = t.intermediate_size
    rope = {"rope_type": rp.get("rope_type", "default"), "rope_theta": float(rp["rope_theta"]),
            "partial_rotary_factor": float(rp.get("partial_rotary_factor", 1.0))}
    if rope["rope_type"] == "yarn":
        rope["factor"] = float(rp["factor"])
        rope["original_max_position_embeddings"] = rp["original_max_position_embeddings"]
    if mt.startswith("qwen3_5"):
        rope["mrope_section"] = list(rp.get("mrope_section", [11, 11, 10]))
    e["rope"] = rope
    if hybrid:
        e["layer_types"] = list(t.layer_types)
        for k in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
                  "linear_conv_kernel_dim"):
            e[k] = getattr(t, k)
    else:
        e["sliding_window"] = t.sliding_window
        if getattr(t, "layer_types", None) is not None:
            e["layer_types"] = list(t.layer_types)
        else:
            e["layer_types"] = ["full_attention"] * t.num_hidden_layers
    if hasattr(t, "num_experts"):
        for k in ("num_experts", "num_experts_per_tok", "moe_intermediate_size"):
            e[k] = getattr(t, k)
        if hasattr(t, "shared_expert_intermediate_size"):
            e["shared_expert_intermediate_size"] = t.shared_expert_intermediate_size
        if hasattr(t, "decoder_sparse_step"):
            e["decoder_sparse_step"] = t.decoder_sparse_step
            e["mlp_only_layers"] = list(t.mlp_only_layers)
            e["norm_topk_prob"] = t.norm_topk_prob
            # Qwen3MoeDecoderLayer / Qwen3NextDecoderLayer choose the block per layer this way.
            e["mlp_types"] = ["moe" if (i not in t.mlp_only_layers and t.num_experts > 0
                                        and (i + 1) % t.decoder_sparse_step == 0) else "dense"
                              for i in range(t.num_hidden_layers)]
        else:
            e["mlp_types"] = ["moe"] * t.num_hidden_layers  # Qwen3.5-MoE: every layer
    else:
        e["mlp_types"] = ["dense"] * t.num_hidden_layers
    # Token ids: the top level's when it has them, else the text config's.
    eos = getattr(cfg, "eos_token_id", None)
    if eos is None:
        eos = getattr(t, "eos_token_id", None)
    e["eos_token_id"] = as_list(eos)
    bos = getattr(cfg, "bos_token_id", None)
    e["bos_token_id"] = bos if bos is not None else getattr(t, "bos_token_id", None)
    return e


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_spec_matches_transformers(pagoda_bin, tmp_path, name):
    transformers = pytest.importorskip("transformers")
    config = CONFIGS[name]
    (tmp_path / "config.json").write_text(json.dumps(config))
    cfg = transformers.AutoConfig.from_pretrained(str(tmp_path))
    want = expected_spec(cfg)
    got = inspect(pagoda_bin, tmp_path)["spec"]
    rope_got = got["rope"]
    for key, value in want.items():
        if key == "rope":
            for rk, rv in value.items():
                assert rope_got[rk] == pytest.approx(rv) if isinstance(rv, float) else rope_got[rk] == rv, \
                    f"{name}: rope.{rk}: ours {rope_got[rk]!r}, transformers {rv!r}"
        elif isinstance(value, float):
            assert got[key] == pytest.approx(value), f"{name}: {key}"
        else:
            assert got[key] == value, f"{name}: {key}: ours {got[key]!r}, transformers {value!r}"
    assert got["model_type"] == cfg.model_type
    assert got["text_model_type"] == cfg.get_text_config().model_type
    assert got["weight_prefix"] == ("model.language_model." if cfg.model_type in ("qwen3_5", "qwen3_5_moe")
                                    else "model.")


def test_modules_of_their_own_bits_and_groups(pagoda_bin):
    """GPTQModel's dynamic rules (the first that matches a module from the start of its name decides) and auto-round's
    extra_config (exact names first, then expressions): each layer lists the modules stored in other bits or groups,
    as the loader reads them."""
    d = GOLDEN / "qwen3_gptq_dynamic"
    if not (d / "config.json").exists():
        pytest.skip(f"no golden data in {d}")
    report = inspect(pagoda_bin, d)
    assert report["spec"]["quantization"] == "gptq, int4, group 32, symmetric, 3 module rules"
    int4, int8 = "int4 (group 32, zero points), GPTQ packing", "int8 (group 32, zero points), GPTQ packing"
    down8 = "int8 (group 64, zero points), GPTQ packing: mlp.down_proj"
    assert formats_of(report) == [
        {"layers": "0", "formats": f"{int4}; {int8}: self_attn.v_proj"},  # layer 0's down_proj: a rule before keeps it
        {"layers": "1", "formats": f"{int4}; {int8}: self_attn.v_proj; {down8}"},
        {"layers": "2", "formats": f"{int4}; bf16: self_attn.o_proj; {int8}: self_attn.v_proj; {down8}"},
    ]
    mixed = inspect(pagoda_bin, GOLDEN / "qwen3_autoround_mixed")
    assert [f["formats"] for f in formats_of(mixed)][2] == (
        f"{int4}; bf16: self_attn.o_proj; int4 (group 64, zero points), GPTQ packing: mlp.gate_proj; "
        "int8 (group 16, zero points), GPTQ packing: mlp.up_proj")
