"""`pagoda logits`, `pagoda generate` and `pagoda demo-model` against the transformers references in tests/golden/.

The references (logits.bin, reference.json) were recorded by tools/make_tiny_models.py with transformers in fp32 (the
*_fp8 ones by tools/make_fp8_golden.py, transformers dequantising the fp8 checkpoint; the int4 ones by
tools/make_int4_golden.py, from each format's own dequantisation of the packed checkpoint; the AutoRound ones by
tools/make_autoround_golden.py, from auto-round's own kernels).
"""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "golden"
NAMES = ["qwen2", "qwen2_tied", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_5", "qwen3_5_moe", "qwen3_yarn",
         "qwen3_5_yarn", "qwen2_fp8", "qwen3_fp8", "qwen3_5_fp8", "qwen3_moe_fp8", "qwen3_5_moe_fp8", "qwen3_next_fp8",
         "qwen3_awq", "qwen3_gptq", "qwen2_gptq", "qwen3_w4a16", "qwen3_moe_gptq", "qwen3_moe_awq", "qwen3_moe_w4a16",
         "qwen3_5_moe_gptq", "qwen2_gptq_int8", "qwen2_gptq_int8_asym", "qwen3_gptq_actorder",
         "qwen3_w4a16_asym", "qwen2_w8a16", "qwen3_autoround", "qwen3_autoround_asym", "qwen2_autoround_awq",
         "qwen3_5_moe_autoround", "qwen3_autoround_mixed",
         "qwen3_gptq_dynamic"]


def pagoda_bin():
    path = os.environ.get("PAGODA_BIN")
    if not path or not os.path.exists(path):
        pytest.skip("PAGODA_BIN does not name the built pagoda executable")
    return path


def reference(name):
    d = GOLDEN / name
    if not (d / "reference.json").exists():
        pytest.skip(f"no golden data in {d}")
    ref = json.loads((d / "reference.json").read_text())
    logits = np.fromfile(d / "logits.bin", dtype=np.float32).reshape(ref["logits_shape"])
    return d, ref, logits


def run(*args, check=True):
    p = subprocess.run([pagoda_bin(), *args], capture_output=True, text=True, timeout=300)
    if check and p.returncode != 0:
        raise AssertionError(f"pagoda {' '.join(args[:3])} failed ({p.returncode}): {p.stderr}")
    return p


@pytest.mark.parametrize("name", NAMES)
def test_logits_json_matches_transformers(name):
    d, ref, want = reference(name)
    ids = ref["ids"][:40]
    out = run("logits", "--model", str(d), "--ids", " ".join(map(str, ids)), "--json")
    got = np.array(json.loads(out.stdout)["logits"], dtype=np.float32)
    assert got.shape == (len(ids), want.shape[1])
    tol = 1e-3 * float(np.abs(want).max())
    assert float(np.abs(got - want[: len(ids)]).max()) <= tol


# --hidden: each layer's residual stream, what finds the layer where a device parts from the reference. transformers'
# hidden states (hidden.bin: the embeddings, then each layer; its last entry after the final norm, ours before it).
@pytest.mark.parametrize("name", ["qwen3", "qwen3_moe", "qwen3_next", "qwen3_5", "qwen3_5_moe"])
def test_logits_hidden_matches_transformers(name):
    d, ref, _ = reference(name)
    hidden = np.fromfile(d / "hidden.bin", dtype=np.float32).reshape(ref["hidden_shape"])
    ids = ref["ids"][:40]
    out = run("logits", "--model", str(d), "--ids", " ".join(map(str, ids)), "--json", "--hidden", "--last", "8")
    got = np.array(json.loads(out.stdout)["hidden"], dtype=np.float32)
    layers = hidden.shape[0] - 1
    assert got.shape == (layers + 1, 8, hidden.shape[2])
    want = hidden[:layers, len(ids) - 8 : len(ids)]
    for layer in range(layers):
        err = float(np.abs(got[layer] - want[layer]).max() / np.abs(want[layer]).max())
        assert err <= 1e-4, f"layer {layer}: {err}"


@pytest.mark.parametrize("name", NAMES)
def test_greedy_generate_matches_transformers(name):
    d, ref, want = reference(name)
    prompt = ref["prompt_ids"]
    out = run("generate", "--model", str(d), "--ids", " ".join(map(str, prompt)), "-n", str(len(ref["greedy_ids"])),
              "--temperature", "0", "--ignore-eos", "--json")
    got = json.loads(out.stdout)["ids"]
    assert len(got) == len(ref["greedy_ids"])
    tol = 1e-3 * float(np.abs(want).max())
    # Compare up to the first step where the reference's top-2 margin is within the tolerance (a near-tie may
    # legitimately go either way, and everything after it then differs).
    for step, (g, r, margin) in enumerate(zip(got, ref["greedy_ids"], ref["greedy_top2_margin"])):
        if margin <= 2 * tol:
            break
        assert g == r, f"step {step}: {g} != {r} (margin {margin})"


def test_quantization_fp8_at_load_matches_the_per_channel_checkpoint():
    # --quantization fp8 on the bf16 qwen3 quantizes as tools/make_fp8_golden.py did for qwen3_fp8_channel.
    bf16, _, _ = reference("qwen3")
    _, ref, want = reference("qwen3_fp8_channel")
    ids = ref["ids"][:40]
    out = run("logits", "--model", str(bf16), "--quantization", "fp8", "--ids", " ".join(map(str, ids)), "--json")
    got = np.array(json.loads(out.stdout)["logits"], dtype=np.float32)
    assert float(np.abs(got - want[: len(ids)]).max()) <= 1e-3 * float(np.abs(want).max())


def test_quantization_flag_is_checked_against_the_checkpoint():
    fp8, ref, _ = reference("qwen3_fp8")
    ids = " ".join(map(str, ref["ids"][:4]))
    assert run("logits", "--model", str(fp8), "--quantization", "fp8", "--ids", ids).returncode == 0
    p = run("logits", "--model", str(fp8), "--quantization", "awq", "--ids", ids, check=False)
    assert p.returncode != 0 and p.stdout == ""
    assert "--quantization awq does not match" in p.stderr and "fp8, 128x128 block scales" in p.stderr, p.stderr
    p = run("generate", "--model", str(fp8), "--quantization", "gptq", "--ids", ids, "-n", "1", check=False)
    assert p.returncode != 0 and "--quantization gptq does not match" in p.stderr, p.stderr


def test_int4_checkpoints_take_their_method_and_refuse_another():
    for name, method in (("qwen3_awq", "awq"), ("qwen3_gptq", "gptq"), ("qwen3_w4a16", "compressed-tensors"),
                         ("qwen3_moe_gptq", "gptq"), ("qwen3_moe_awq", "awq")):
        d, ref, _ = reference(name)
        ids = " ".join(map(str, ref["ids"][:4]))
        assert run("logits", "--model", str(d), "--quantization", method, "--ids", ids).returncode == 0
        if method in ("awq", "gptq"):  # vLLM's Marlin spellings of the same method
            assert run("logits", "--model", str(d), "--quantization", method + "_marlin", "--ids", ids).returncode == 0
        p = run("logits", "--model", str(d), "--quantization", "fp8", "--ids", ids, check=False)
        assert p.returncode != 0 and "--quantization fp8 does not match" in p.stderr, p.stderr
        assert method in p.stderr, p.stderr


def test_unserved_int4_variant_exits_nonzero_naming_it(tmp_path):
    # qwen3_gptq declared 3-bit: refused by name before anything runs.
    d, ref, _ = reference("qwen3_gptq")
    for f in d.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    config = json.loads((d / "config.json").read_text())
    config["quantization_config"]["bits"] = 3
    (tmp_path / "config.json").write_text(json.dumps(config))
    p = run("logits", "--model", str(tmp_path), "--ids", " ".join(map(str, ref["ids"][:4])), check=False)
    assert p.returncode != 0 and p.stdout == ""
    assert "3-bit GPTQ" in p.stderr and "not served" in p.stderr, p.stderr


def test_logits_rejects_bad_ids():
    d, _, _ = reference("qwen3")
    p = run("logits", "--model", str(d), "--ids", "1 two 3", check=False)
    assert p.returncode != 0 and p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1 and "two" in p.stderr
    p = run("logits", "--model", str(d), "--ids", "1 99999", check=False)
    assert p.returncode != 0 and "99999" in p.stderr


def test_demo_model_is_deterministic_and_generates(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    run("demo-model", str(a), "--byte-level")
    run("demo-model", str(b), "--byte-level")
    for f in ("config.json", "model.safetensors", "tokenizer.json", "README.md"):
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
    assert "random" in (a / "README.md").read_text()
    out1 = json.loads(run("generate", "--model", str(a), "--prompt", "Hello", "-n", "8", "--seed", "5",
                          "--ignore-eos", "--json").stdout)
    out2 = json.loads(run("generate", "--model", str(b), "--prompt", "Hello", "-n", "8", "--seed", "5",
                          "--ignore-eos", "--json").stdout)
    assert out1 == out2 and len(out1["ids"]) == 8
    assert out1["prompt_ids"] == list(b"Hello")  # byte-level tokenizer: one id per byte


def test_demo_model_with_qwen_tokenizer_loads_in_transformers_tokenizer(tmp_path):
    shared = pathlib.Path(os.environ.get("PAGODA_SHARED_DIR", "/work/shared")) / "qwen-tokenizers" / "qwen3-4b"
    if not (shared / "vocab.json").exists():
        pytest.skip("no Qwen tokenizer in PAGODA_SHARED_DIR")
    d = tmp_path / "demo"
    run("demo-model", str(d), "--tokenizer", str(shared))
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.BPE.from_file(str(d / "vocab.json"), str(d / "merges.txt")))
    del tok  # loadable by the reference library
    out = json.loads(run("generate", "--model", str(d), "--prompt", "Hello world", "-n", "4", "--seed", "1",
                         "--ignore-eos", "--json").stdout)
    assert len(out["ids"]) == 4
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["model_type"] == "qwen3_5" and cfg["text_config"]["vocab_size"] > max(out["prompt_ids"])


ROUND_TRIP = ["Hello world", "héllo wörld 你好 🙂", "<|im_start|>user\nHi<|im_end|>\n", "<think>\nx\n</think>",
              "<tool_call>\n{\"name\": \"f\"}\n</tool_call>", "  spaces\n\n\tand tabs 12345"]


@pytest.mark.parametrize("kind", ["qwen", "byte-level"])
def test_demo_model_tokenizer_loads_in_auto_tokenizer(tmp_path, kind):
    """transformers' AutoTokenizer (what guidellm, vllm bench and other HF-tokenizer clients load) reads the demo
    model's tokenizer as the real one: from transformers 5 it picks Qwen3_5Tokenizer from config.json, which is built
    from tokenizer.json alone (without one it loaded as a 26-token tokenizer whose encode() was empty)."""
    transformers = pytest.importorskip("transformers")
    shared = pathlib.Path(os.environ.get("PAGODA_SHARED_DIR", "/work/shared")) / "qwen-tokenizers" / "qwen3-4b"
    d = tmp_path / "demo"
    if kind == "qwen":
        if not (shared / "vocab.json").exists():
            pytest.skip("no Qwen tokenizer in PAGODA_SHARED_DIR")
        run("demo-model", str(d), "--tokenizer", str(shared))
    else:
        run("demo-model", str(d), "--byte-level")
    tok = transformers.AutoTokenizer.from_pretrained(str(d))
    assert len(tok) == (151669 if kind == "qwen" else 259)
    for text in ROUND_TRIP:
        ids = tok.encode(text, add_special_tokens=False)
        assert ids and tok.decode(ids) == text
        pagoda_ids = json.loads(run("tokenize", "--model", str(d), "--json", "--text", text).stdout)["ids"]
        assert ids == pagoda_ids, text
    if kind == "qwen" and (shared / "tokenizer.json.gz").exists():
        import gzip
        tokenizers = pytest.importorskip("tokenizers")
        real = tokenizers.Tokenizer.from_str(gzip.decompress((shared / "tokenizer.json.gz").read_bytes()).decode())
        for text in ROUND_TRIP:
            assert tok.encode(text, add_special_tokens=False) == real.encode(text, add_special_tokens=False).ids
