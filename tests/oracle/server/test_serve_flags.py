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
    return Server([str(demo_dir), "--served-model-name", "demo", "--max-model-len", "256", *flags])


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
