"""Where a request's end comes from when a checkpoint's files disagree about EOS, against `pagoda serve` of the demo
model through the official `openai` SDK.

- No file names an EOS token (checkpoints made by transformers from a config alone): a structured answer ends where
  its grammar ends ("stop"), and the server stays up. Before 2026-12-04 a finished grammar left no token to draw: the
  CPU server aborted and a CUDA step failed for every sequence in it (found with bench/gpu/structured_decode.py).
- Only tokenizer_config.json names one (a fine-tune that set eos_token there): it ends a request, as in vLLM, which
  stops at the tokenizer's EOS whatever config.json and generation_config.json say.
"""

import json
import shutil
import urllib.request

import pytest

from test_openai_sdk import Server, demo_dir  # noqa: F401  (fixture)

openai = pytest.importorskip("openai")

IM_END = 151645  # <|im_end|> in the demo model's (real Qwen3) tokenizer


def _without_eos(demo, tmp_path, keep_tokenizer_eos):
    d = tmp_path / "model"
    shutil.copytree(demo, d)
    config = json.loads((d / "config.json").read_text())
    config.pop("eos_token_id", None)
    config.get("text_config", {}).pop("eos_token_id", None)
    (d / "config.json").write_text(json.dumps(config))
    generation = d / "generation_config.json"
    if generation.exists():
        g = json.loads(generation.read_text())
        g.pop("eos_token_id", None)
        generation.write_text(json.dumps(g))
    tokenizer = json.loads((d / "tokenizer_config.json").read_text())
    assert tokenizer.get("eos_token") == "<|im_end|>"
    if not keep_tokenizer_eos:
        tokenizer["eos_token"] = None
    (d / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    return d


def _serve(model_dir):
    return Server([str(model_dir), "--served-model-name", "m", "--max-model-len", "1024"])


def test_a_finished_grammar_stops_when_no_file_names_eos(demo_dir, tmp_path):  # noqa: F811
    s = _serve(_without_eos(demo_dir, tmp_path, keep_tokenizer_eos=False))
    try:
        client = s.client()
        schema = {"enum": ["yes", "no"]}
        for seed in range(3):
            r = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "Yes or no?"}], max_tokens=32, n=4,
                temperature=1.0, seed=seed,
                response_format={"type": "json_schema", "json_schema": {"name": "yn", "schema": schema}},
                extra_body={"ignore_eos": True})
            for c in r.choices:
                assert c.finish_reason == "stop", c
                assert json.loads(c.message.content) in ("yes", "no"), c.message.content
        # Unconstrained requests still run to max_tokens: nothing ends them.
        r = client.completions.create(model="m", prompt="Hello", max_tokens=6, temperature=1.0, seed=1)
        assert r.choices[0].finish_reason == "length"
        assert urllib.request.urlopen(s.url + "/health", timeout=5).status == 200
    finally:
        s.stop()


def test_the_tokenizers_eos_token_ends_a_request(demo_dir, tmp_path):  # noqa: F811
    s = _serve(_without_eos(demo_dir, tmp_path, keep_tokenizer_eos=True))
    try:
        # The bias makes <|im_end|> the first draw: it ends the request there, and is not in the text.
        r = s.client().completions.create(model="m", prompt="Hello", max_tokens=6, temperature=0.0,
                                          logit_bias={str(IM_END): 100})
        assert r.choices[0].finish_reason == "stop"
        assert r.usage.completion_tokens == 1
        assert r.choices[0].text == ""
    finally:
        s.stop()
