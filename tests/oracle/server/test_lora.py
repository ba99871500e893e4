"""Multi-LoRA over HTTP, checked with the official `openai` SDK against peft.

The server runs the tiny golden qwen3 model (tests/golden/qwen3, with the demo model's tokenizer beside it: the
prompts are token ids) with the adapters tools/make_lora_golden.py saved with peft. A completion with echo and
logprobs returns the log-probability of every prompt token, which must equal what transformers + peft's recorded
logits give (tests/golden/lora/qwen3/logits_<adapter>.bin). Also: adapters in /v1/models, 404 for unknown names,
load and unload over HTTP, bad adapters refused with the server still serving, the endpoints absent without
--enable-lora, vLLM's lora_requests_info gauge, a model reload carrying the served adapters over.
"""

import json
import os
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

openai = pytest.importorskip("openai")

from test_openai_sdk import Server, _bin, golden_with_demo_tokenizer  # noqa: E402  (helpers shared with the SDK tests)

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "golden"
LORA = GOLDEN / "lora" / "qwen3"


def reference():
    ref = json.loads((LORA / "reference.json").read_text())
    return ref["prompt_ids"], ref["vocab"]


def peft_prompt_logprobs(adapter):
    """log p(prompt[i] | prompt[:i]) for i >= 1 from transformers + peft's logits."""
    ids, vocab = reference()
    logits = np.fromfile(LORA / f"logits_{adapter}.bin", dtype=np.float32).reshape(len(ids), vocab).astype(np.float64)
    m = logits.max(axis=1, keepdims=True)
    logp = logits - m - np.log(np.exp(logits - m).sum(axis=1, keepdims=True))
    return np.array([logp[i - 1, ids[i]] for i in range(1, len(ids))]), float(np.abs(logits).max())


def post(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def get(url, path):
    with urllib.request.urlopen(url + path, timeout=60) as r:
        return r.read().decode()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    if not (LORA / "reference.json").exists():
        pytest.skip("no LoRA golden data")
    return golden_with_demo_tokenizer(tmp_path_factory, "qwen3")


@pytest.fixture(scope="module")
def server(model_dir):
    s = Server([str(model_dir), "--served-model-name", "base", "--max-model-len", "128", "--enable-lora",
                "--lora-modules", f"attn={LORA / 'attn'}", f"mlp={LORA / 'mlp_rslora'}", "--max-loras", "2",
                "--max-lora-rank", "8"])
    yield s
    assert s.stop() == 0


def prompt_logprobs(client, model):
    ids, _ = reference()
    out = client.completions.create(model=model, prompt=ids, max_tokens=1, temperature=0, echo=True, logprobs=0)
    lps = out.choices[0].logprobs.token_logprobs
    return np.array(lps[1:len(ids)], dtype=np.float64)


def test_models_lists_the_adapters(server):
    models = {m.id: m for m in server.client().models.list().data}
    assert set(models) == {"base", "attn", "mlp"}
    for name, path in (("attn", LORA / "attn"), ("mlp", LORA / "mlp_rslora")):
        m = models[name].model_dump()
        assert m["parent"] == "base" and m["root"] == str(path)
    assert models["base"].model_dump()["parent"] is None


@pytest.mark.parametrize("name,adapter", [("attn", "attn"), ("mlp", "mlp_rslora")])
def test_adapter_prompt_logprobs_equal_peft(server, name, adapter):
    want, max_abs = peft_prompt_logprobs(adapter)
    got = prompt_logprobs(server.client(), name)
    assert np.abs(got - want).max() <= 2e-3 * max_abs, (got, want)
    # The base model answers differently: the adapter is what made the match.
    base = prompt_logprobs(server.client(), "base")
    assert np.abs(base - want).max() > 0.05


def test_two_tensor_parallel_ranks_equal_peft(model_dir):
    # -tp 2: each rank holds its cut of every adapter (B's rows of column-parallel projections, A's columns of
    # row-parallel ones); the prompt logprobs still equal peft's.
    s = Server([str(model_dir), "--served-model-name", "base", "--max-model-len", "128", "--enable-lora",
                "--lora-modules", f"attn={LORA / 'attn'}", f"mlp={LORA / 'mlp_rslora'}", "--max-loras", "2",
                "--max-lora-rank", "8", "--tensor-parallel-size", "2"])
    try:
        for name, adapter in (("attn", "attn"), ("mlp", "mlp_rslora")):
            want, max_abs = peft_prompt_logprobs(adapter)
            got = prompt_logprobs(s.client(), name)
            assert np.abs(got - want).max() <= 2e-3 * max_abs, (name, got, want)
    finally:
        assert s.stop() == 0


def test_chat_and_completion_by_adapter_name(server):
    out = server.client().completions.create(model="attn", prompt=[1, 2, 3], max_tokens=4, temperature=0)
    assert out.model == "attn" and out.usage.completion_tokens == 4


def test_unknown_model_is_404(server):
    with pytest.raises(openai.NotFoundError) as e:
        server.client().completions.create(model="no-such-adapter", prompt=[1, 2], max_tokens=1)
    assert "no-such-adapter" in str(e.value)


def test_load_and_unload_over_http(server):
    client = server.client()
    status, text = post(server.url, "/v1/load_lora_adapter", {"lora_name": "regex", "lora_path": str(LORA / "regex")})
    assert status == 200, text
    assert "regex" in {m.id for m in client.models.list().data}
    want, max_abs = peft_prompt_logprobs("regex")
    assert np.abs(prompt_logprobs(client, "regex") - want).max() <= 2e-3 * max_abs
    status, text = post(server.url, "/v1/load_lora_adapter", {"lora_name": "regex", "lora_path": str(LORA / "regex")})
    assert status == 400 and "already been loaded" in text
    status, text = post(server.url, "/v1/unload_lora_adapter", {"lora_name": "regex"})
    assert status == 200, text
    assert "regex" not in {m.id for m in client.models.list().data}
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="regex", prompt=[1, 2], max_tokens=1)
    status, text = post(server.url, "/v1/unload_lora_adapter", {"lora_name": "regex"})
    assert status == 404 and "cannot be found" in text


@pytest.mark.parametrize("strategy", ["beside", "drain"])
def test_reload_carries_the_served_adapters_over(model_dir, tmp_path_factory, strategy):
    s = Server([str(model_dir), "--served-model-name", "base", "--max-model-len", "128", "--enable-lora",
                "--lora-modules", f"attn={LORA / 'attn'}", f"mlp={LORA / 'mlp_rslora'}", "--max-loras", "2",
                "--max-lora-rank", "8", "--x-test-reload-delay-ms", "1000", "--reload-strategy", strategy])
    try:
        client = s.client()
        assert post(s.url, "/v1/load_lora_adapter", {"lora_name": "regex", "lora_path": str(LORA / "regex")})[0] == 200
        assert post(s.url, "/v1/unload_lora_adapter", {"lora_name": "mlp"})[0] == 200
        before = {name: prompt_logprobs(client, name) for name in ("base", "attn", "regex")}
        with ThreadPoolExecutor(1) as pool:
            reload = pool.submit(post, s.url, "/v1/models/reload", {"model": str(model_dir)})
            time.sleep(0.3)  # inside the reload (the test hook holds each load for a second)
            status, text = post(s.url, "/v1/load_lora_adapter", {"lora_name": "late", "lora_path": str(LORA / "regex")})
            assert status == 409 and "reload is in progress" in text, text
            assert post(s.url, "/v1/unload_lora_adapter", {"lora_name": "attn"})[0] == 409
            status, text = reload.result()
        assert status == 200, text
        # What was served before the reload (attn from --lora-modules, regex loaded over HTTP; not the unloaded mlp).
        models = {m.id: m.model_dump() for m in client.models.list().data}
        assert set(models) == {"base", "attn", "regex"}
        assert models["regex"]["parent"] == "base" and models["regex"]["root"] == str(LORA / "regex")
        for name, logprobs in before.items():
            assert np.array_equal(prompt_logprobs(client, name), logprobs), name
        # A model the adapters do not fit: the reload fails naming the adapter; the old model and adapters serve on
        # (after a drain: loaded again).
        other = golden_with_demo_tokenizer(tmp_path_factory, "qwen3_5")
        status, text = post(s.url, "/v1/models/reload", {"model": str(other)})
        assert status == 500 and "attn=" in text and "LoRA adapters the old model serves" in text, text
        assert {m.id for m in client.models.list().data} == {"base", "attn", "regex"}
        assert np.array_equal(prompt_logprobs(client, "regex"), before["regex"])
        # Refused before anything is unloaded (400): a new served name that an adapter has, an adapter gone.
        status, text = post(s.url, "/v1/models/reload", {"model": str(model_dir), "served_model_name": "attn"})
        assert status == 400 and "'attn' is the name of a served LoRA adapter" in text, text
        gone = tmp_path_factory.mktemp("gone") / "regex2"
        shutil.copytree(LORA / "regex", gone)
        assert post(s.url, "/v1/load_lora_adapter", {"lora_name": "gone", "lora_path": str(gone)})[0] == 200
        shutil.rmtree(gone)
        status, text = post(s.url, "/v1/models/reload", {"model": str(model_dir)})
        assert status == 400 and "LoRA adapter 'gone'" in text and "unload it first" in text, text
        assert np.array_equal(prompt_logprobs(client, "attn"), before["attn"])
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("body,what", [
    ({"lora_name": "x", "lora_path": "/nonexistent/adapter"}, "no adapter_config.json"),
    ({"lora_name": "x", "lora_path": str(GOLDEN / "lora" / "qwen3_next" / "mixed")}, "not a projection"),
    ({"lora_name": "x", "lora_path": str(GOLDEN / "lora" / "qwen3_next" / "experts")}, "target_parameters"),
    ({"lora_name": "base", "lora_path": str(LORA / "regex")}, "base model"),
    ({"lora_path": str(LORA / "regex")}, "lora_name"),
    ({"lora_name": "x"}, "lora_path"),
])
def test_bad_adapter_refused_and_server_still_serves(server, body, what):
    status, text = post(server.url, "/v1/load_lora_adapter", body)
    assert status == 400, text
    assert what in json.loads(text)["error"]["message"]
    out = server.client().completions.create(model="base", prompt=[1, 2, 3], max_tokens=2, temperature=0)
    assert out.usage.completion_tokens == 2


def test_bad_json_body_is_400(server):
    req = urllib.request.Request(server.url + "/v1/load_lora_adapter", data=b"{not json", method="POST",
                                 headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=30)
    assert e.value.code == 400


def test_metrics_have_lora_requests_info(server):
    server.client().completions.create(model="attn", prompt=[1, 2, 3], max_tokens=1)
    text = get(server.url, "/metrics")
    line = next(x for x in text.splitlines() if x.startswith("pagoda:lora_requests_info{"))
    assert 'max_lora="2"' in line and 'running_lora_adapters=""' in line and 'waiting_lora_adapters=""' in line
    # The whole exposition still parses (Prometheus' own parser), the gauge with its three labels.
    parser = pytest.importorskip("prometheus_client.parser")
    family = next(f for f in parser.text_string_to_metric_families(text) if f.name == "pagoda:lora_requests_info")
    assert family.type == "gauge"
    assert set(family.samples[0].labels) == {"max_lora", "running_lora_adapters", "waiting_lora_adapters"}


def test_endpoints_absent_without_enable_lora(model_dir):
    s = Server([str(model_dir), "--served-model-name", "base", "--max-model-len", "128"])
    try:
        status, _ = post(s.url, "/v1/load_lora_adapter", {"lora_name": "a", "lora_path": str(LORA / "attn")})
        assert status == 404
        ids = {m.id for m in s.client().models.list().data}
        assert ids == {"base"}
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("flags,what", [
    (["--lora-modules", "a=/x"], "--lora-modules needs --enable-lora"),
    (["--enable-lora", "--max-lora-rank", "1000"], "--max-lora-rank"),
    (["--enable-lora", "--lora-modules", "base=/x"], "given twice"),
    (["--enable-lora", "--max-loras", "4", "--max-cpu-loras", "2"], "--max-cpu-loras"),
])
def test_lora_flags_refused(model_dir, flags, what):
    r = subprocess.run([_bin(), "serve", str(model_dir), "--served-model-name", "base", *flags, "--port", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and what in r.stderr, r.stderr


def test_bad_lora_module_at_start_fails_with_its_name(model_dir):
    r = subprocess.run([_bin(), "serve", str(model_dir), "--enable-lora", "--lora-modules",
                        f"bad={GOLDEN / 'lora' / 'qwen3_next' / 'mixed'}", "--port", "0"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "--lora-modules bad=" in r.stderr, r.stderr
