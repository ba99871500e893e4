"""Flags of `pagoda serve` that decide what a request gets, on the demo model.

`--generation-config auto|vllm|DIR`: which defaults a request's unset sampling fields take. The demo model's
generation_config.json says temperature 0.8, top_p 0.95. Seeded sampling gives the same tokens for the same
parameters, so a request that leaves the fields unset must equal one that spells out the defaults the flag names.

`--max-model-len`: refused above the model's context, as vLLM refuses it."""

import json
import subprocess

import pytest

from test_openai_sdk import Server, demo_dir  # noqa: F401  (fixture)

pytest.importorskip("openai")

PROMPT = "Once upon a time"


def completion(server, **params):
    r = server.client().completions.create(model="demo", prompt=PROMPT, max_tokens=12, seed=7, **params)
    return r.choices[0].text


def serve(demo_dir, *flags):  # noqa: F811
    """The server once its model is loaded (its log up to then in .log)."""
    s = Server([str(demo_dir), "--served-model-name", "demo", "--max-model-len", "256", *flags])
    s.wait_ready()
    return s


def test_auto_takes_the_models_file(demo_dir):  # noqa: F811
    s = serve(demo_dir)
    try:
        assert completion(s) == completion(s, temperature=0.8, top_p=0.95)
    finally:
        assert s.stop() == 0


def test_vllm_takes_openais_defaults(demo_dir):  # noqa: F811
    s = serve(demo_dir, "--generation-config", "vllm")
    try:
        assert completion(s) == completion(s, temperature=1.0, top_p=1.0, extra_body={"top_k": 0, "min_p": 0.0})
    finally:
        assert s.stop() == 0


def test_dir_takes_that_directorys_file(demo_dir, tmp_path):  # noqa: F811
    s = serve(demo_dir)
    try:
        sampled = completion(s, temperature=0.8, top_p=0.95)
    finally:
        assert s.stop() == 0
    (tmp_path / "generation_config.json").write_text(json.dumps({"temperature": 0.0, "top_k": 1}))
    s = serve(demo_dir, "--generation-config", str(tmp_path))
    try:
        assert completion(s) == completion(s, temperature=0.0)
        # A request's own values still win over the defaults.
        assert completion(s, temperature=0.8, top_p=0.95, extra_body={"top_k": 0}) == sampled
    finally:
        assert s.stop() == 0


def test_a_directory_without_the_file_is_refused(demo_dir, tmp_path, pagoda_bin):  # noqa: F811
    r = subprocess.run([str(pagoda_bin), "serve", str(demo_dir), "--generation-config", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "--generation-config" in r.stderr and "generation_config.json" in r.stderr


def test_max_model_len_beyond_the_models_context_is_refused(demo_dir, pagoda_bin):  # noqa: F811
    # The demo model's config.json says max_position_embeddings 32768.
    r = subprocess.run([str(pagoda_bin), "serve", str(demo_dir), "--max-model-len", "32769"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1
    assert "--max-model-len 32769" in r.stderr and "32768" in r.stderr


# `--kv-cache-dtype fp8` (e4m3 K/V with per-layer scales) and `--calculate-kv-scales`, vLLM's flags: the server
# answers through the openai SDK, a seeded request gives the same text twice (the second time from the prefix cache,
# whose blocks hold the e4m3 values the first one wrote), and the start-up log names the pool's dtype.
def test_fp8_kv_cache_serves_and_says_so(demo_dir):  # noqa: F811
    s = serve(demo_dir, "--kv-cache-dtype", "fp8", "--calculate-kv-scales")
    try:
        first = completion(s, temperature=0.8)
        assert first
        assert completion(s, temperature=0.8) == first
        assert any("KV pool" in line and "fp8_e4m3" in line for line in s.log), "".join(s.log)
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("flags, message", [
    (["--kv-cache-dtype", "fp8_e5m2"], "fp8_e5m2 is not supported"),
    (["--kv-cache-dtype", "int8"], "not one of auto, bfloat16, fp8, fp8_e4m3"),
    (["--calculate-kv-scales"], "add --kv-cache-dtype fp8"),
    (["--kv-cache-dtype", "bfloat16"], "needs a GPU"),
])
def test_kv_cache_flags_that_cannot_be_honoured_are_refused(demo_dir, pagoda_bin, flags, message):  # noqa: F811
    r = subprocess.run([str(pagoda_bin), "serve", str(demo_dir), "--device", "cpu", *flags], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert message in r.stderr, r.stderr


# `--load-format dummy` (vLLM's flag): random weights for config.json alone. The demo model's directory without its
# safetensors serves through the openai SDK, says so in one start-up line, and is refused without the flag.
def test_dummy_load_format_serves_a_config_alone(demo_dir, tmp_path, pagoda_bin):  # noqa: F811
    for f in demo_dir.iterdir():
        if f.is_file() and not f.name.endswith(".safetensors"):
            (tmp_path / f.name).write_bytes(f.read_bytes())
    r = subprocess.run([str(pagoda_bin), "serve", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "safetensors" in r.stderr, r.stderr
    s = serve(tmp_path, "--load-format", "dummy")
    try:
        assert any("--load-format dummy: random bf16 weights" in line for line in s.log), "".join(s.log)
        r = s.client().completions.create(model="demo", prompt=PROMPT, max_tokens=8, temperature=0.0)
        assert r.usage.completion_tokens > 0
    finally:
        assert s.stop() == 0
    r = subprocess.run([str(pagoda_bin), "serve", str(tmp_path), "--load-format", "pt"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1 and "auto, safetensors or dummy" in r.stderr, r.stderr
