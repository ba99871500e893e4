"""`pagoda serve` driven by the official `openai` Python SDK, the client most users have.

Two servers on free loopback ports:
- the demo model (random weights, real Qwen tokenizer) on the CPU engine. Its words are random, so outputs are
  checked against references that do not depend on them: `pagoda generate` (a separate, engine-free code path)
  for greedy completions, streaming == non-streaming, greedy token == top-1 logprob.
- the hidden TEST GENERATOR (--x-test-generator-text: a test double that "generates" the tokens of a given text,
  no model) for what needs known text: stop strings, tool calls, reasoning. Labelled as such in each test.
"""

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

openai = pytest.importorskip("openai")


def _bin():
    path = os.environ.get("PAGODA_BIN")
    if not path or not Path(path).is_file():
        pytest.skip("PAGODA_BIN is not set to the built `pagoda` executable")
    return path


class Server:
    def __init__(self, args, env=None):
        full_env = dict(os.environ)
        for k in ("PAGODA_API_KEY", "VLLM_API_KEY"):
            full_env.pop(k, None)
        full_env.update(env or {})
        self.proc = subprocess.Popen([_bin(), "serve", *args, "--port", "0"], stderr=subprocess.PIPE, text=True,
                                     env=full_env)
        self.log = []
        deadline = time.time() + 120
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r" on (http://127\.0\.0\.1:\d+)", line)
            if m:
                self.url = m.group(1)
                return
        self.proc.kill()
        raise RuntimeError("pagoda serve did not start:\n" + "".join(self.log))

    def wait_ready(self):
        """Reads the log up to the line that says the model is loaded (the server answers 503 before it) and
        returns the lines read; they are in self.log too."""
        lines = []
        while not any("ready" in line for line in lines):
            lines.append(self.proc.stderr.readline())
            assert lines[-1], "".join(self.log + lines)
        self.log += lines
        return lines

    def client(self, api_key="none"):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=api_key, max_retries=0, timeout=60)

    def stop(self):
        self.proc.terminate()  # SIGTERM: graceful shutdown, exit 0
        try:
            rc = self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        return rc


def golden_with_demo_tokenizer(tmp_path_factory, name):
    """tests/golden/NAME's checkpoint with the demo model's tokenizer beside it (tests then prompt with token ids)."""
    golden = Path(__file__).resolve().parents[3] / "tests" / "golden" / name
    demo = tmp_path_factory.mktemp("demo")
    r = subprocess.run([_bin(), "demo-model", str(demo)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    d = tmp_path_factory.mktemp(name)
    for f in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copy(golden / f, d / f)
    for f in ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"):
        if (demo / f).exists():
            shutil.copy(demo / f, d / f)
    return d


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("demo")
    r = subprocess.run([_bin(), "demo-model", str(d)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    if not (d / "vocab.json").exists() and not (d / "tokenizer.json").exists():
        pytest.skip("demo model has no tokenizer")
    return d


@pytest.fixture(scope="module", params=["sync", "async-scheduling"])
def engine_server(demo_dir, request):
    """The engine server, once as it starts by default and once with --async-scheduling (the engine launches step
    n+1 before it reads step n): every test on it must hold both ways."""
    extra = ["--async-scheduling"] if request.param == "async-scheduling" else []
    s = Server([str(demo_dir), "--served-model-name", "demo", "--served-model-name", "demo-alias", "--max-model-len",
                "512", *extra])
    yield s
    import urllib.request

    metrics = urllib.request.urlopen(s.url + "/metrics", timeout=10).read().decode()
    ahead = [float(line.split()[-1]) for line in metrics.splitlines()
             if line.startswith("pagoda:engine_steps_launched_ahead_total")]
    assert ahead and (ahead[0] > 0) == bool(extra), ahead
    assert s.stop() == 0
    log = "".join(s.log) + s.proc.stderr.read()
    assert ("async scheduling:" in log) == bool(extra), log


@pytest.fixture(scope="module")
def script_server(demo_dir):
    text = ("<think>\nThe user wants weather.\n</think>\n\nSure. STOP here\n<tool_call>\n"
            '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>')
    s = Server([str(demo_dir), "--served-model-name", "scripted", "--x-test-generator-text", text,
                "--reasoning-parser", "qwen3", "--enable-auto-tool-choice", "--tool-call-parser", "hermes"])
    yield s
    assert s.stop() == 0


def pagoda_generate(demo_dir, prompt, n):
    r = subprocess.run([_bin(), "generate", "--model", str(demo_dir), "--prompt", prompt, "-n", str(n),
                        "--temperature", "0", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


# --- the real engine on the demo model ----------------------------------------------------------------------

def test_models_list(engine_server):
    ids = [m.id for m in engine_server.client().models.list()]
    assert ids == ["demo", "demo-alias"]


def test_greedy_completion_matches_pagoda_generate(engine_server, demo_dir):
    ref = pagoda_generate(demo_dir, "The capital of France is", 12)
    r = engine_server.client().completions.create(model="demo", prompt="The capital of France is", max_tokens=12,
                                                  temperature=0)
    assert r.object == "text_completion"
    assert r.choices[0].text == ref["text"]
    assert r.usage.prompt_tokens == len(ref["prompt_ids"])
    assert r.usage.completion_tokens == len(ref["ids"])
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.choices[0].finish_reason in ("length", "stop")


def test_completion_token_prompt_and_echo(engine_server, demo_dir):
    ref = pagoda_generate(demo_dir, "Hello there", 5)
    c = engine_server.client()
    r = c.completions.create(model="demo", prompt=ref["prompt_ids"], max_tokens=5, temperature=0)
    assert r.choices[0].text == ref["text"]
    r = c.completions.create(model="demo", prompt="Hello there", max_tokens=5, temperature=0, echo=True)
    assert r.choices[0].text == "Hello there" + ref["text"]


def test_chat_stream_equals_non_stream(engine_server):
    c = engine_server.client()
    msgs = [{"role": "user", "content": "Tell me a story."}]
    full = c.chat.completions.create(model="demo", messages=msgs, max_tokens=16, temperature=0)
    assert full.object == "chat.completion"
    assert full.choices[0].message.role == "assistant"
    assert full.usage.completion_tokens == 16 or full.choices[0].finish_reason == "stop"

    chunks = list(c.chat.completions.create(model="demo", messages=msgs, max_tokens=16, temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    finish = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert text == (full.choices[0].message.content or "")
    assert finish == [full.choices[0].finish_reason]
    assert chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens == full.usage.completion_tokens
    assert chunks[-1].usage.prompt_tokens == full.usage.prompt_tokens


def test_greedy_token_is_top1_logprob(engine_server):
    r = engine_server.client().chat.completions.create(
        model="demo", messages=[{"role": "user", "content": "Hi"}], max_tokens=6, temperature=0, logprobs=True,
        top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) >= 1
    for entry in content:
        assert entry.logprob <= 0.0
        assert len(entry.top_logprobs) == 3
        assert entry.top_logprobs[0].logprob == pytest.approx(entry.logprob, abs=1e-5)


@pytest.mark.parametrize("echo", [False, True])
@pytest.mark.parametrize("prompt", ["Hello world", "héllo 世界😀"])
def test_completion_logprobs_text_offset(engine_server, echo, prompt):
    # The legacy logprobs' text_offset (as vLLM gives it): where each listed token starts in the choice's text, in
    # characters (code points) of the listed tokens, the prompt's tokens first with echo; streamed, each chunk's
    # offsets go on from the text sent before, each of the n choices on its own.
    c = engine_server.client()
    kw = dict(model="demo", prompt=prompt, max_tokens=8, temperature=1.0, seed=7, n=2, logprobs=1, echo=echo)
    r = c.completions.create(**kw)
    for choice in r.choices:
        lp = choice.logprobs
        assert len(lp.text_offset) == len(lp.tokens) == len(lp.token_logprobs)
        assert lp.text_offset[0] == 0
        for i in range(1, len(lp.tokens)):
            assert lp.text_offset[i] == lp.text_offset[i - 1] + len(lp.tokens[i - 1])
    if echo and prompt.isascii():  # the byte-level demo tokenizer spells an ASCII prompt token by token
        lp = r.choices[0].logprobs
        assert r.choices[0].text.startswith(prompt)
        assert "".join(lp.tokens[:r.usage.prompt_tokens]) == prompt
        assert lp.text_offset[r.usage.prompt_tokens] == len(prompt)
    sent, offsets, tokens = ["", ""], [[], []], [[], []]
    for chunk in c.completions.create(stream=True, **kw):
        for ch in chunk.choices:
            i = ch.index
            if ch.logprobs is not None and ch.logprobs.tokens:
                assert ch.logprobs.text_offset[0] == len(sent[i]), (ch.logprobs.text_offset, sent[i])
                offsets[i] += ch.logprobs.text_offset
                tokens[i] += ch.logprobs.tokens
            sent[i] += ch.text
    for i, choice in enumerate(r.choices):
        assert tokens[i] == choice.logprobs.tokens
        assert sent[i] == choice.text
        # Where the text is the tokens' spelling, the streamed offsets are the non-streamed ones.
        if "".join(tokens[i]) == sent[i]:
            assert offsets[i] == choice.logprobs.text_offset


def test_n_and_seed(engine_server):
    c = engine_server.client()
    kw = dict(model="demo", prompt="Once upon a time", max_tokens=8, temperature=1.0, seed=1234)
    a = c.completions.create(n=2, **kw)
    assert [ch.index for ch in a.choices] == [0, 1]
    b = c.completions.create(n=2, **kw)
    assert [ch.text for ch in a.choices] == [ch.text for ch in b.choices]  # same seed, same text


def test_bad_request_names_the_field(engine_server):
    c = engine_server.client()
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="demo", messages=[{"role": "user", "content": "x"}], temperature=-1)
    assert e.value.status_code == 400
    assert e.value.body["param"] == "temperature"
    with pytest.raises(openai.BadRequestError) as e:
        c.completions.create(model="demo", prompt="x", max_tokens=100000)
    assert "context length" in e.value.body["message"]
    with pytest.raises(openai.NotFoundError):
        c.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}])


def test_tokenize_detokenize_health(engine_server):
    import urllib.request

    def post(path, body):
        req = urllib.request.Request(engine_server.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req) as resp:
            return json.loads(resp.read())

    t = post("/tokenize", {"prompt": "Hello world"})
    assert t["count"] == len(t["tokens"])
    assert post("/detokenize", {"tokens": t["tokens"]})["prompt"] == "Hello world"
    with urllib.request.urlopen(engine_server.url + "/health") as resp:
        assert resp.status == 200
    with urllib.request.urlopen(engine_server.url + "/version") as resp:
        assert "version" in json.loads(resp.read())


# --- auth ------------------------------------------------------------------------------------------------

def test_api_key(demo_dir):
    s = Server([str(demo_dir), "--x-test-generator-text", "ok"], env={"VLLM_API_KEY": "sekrit"})
    try:
        with pytest.raises(openai.AuthenticationError) as e:
            s.client("wrong").models.list()
        assert e.value.status_code == 401
        assert [m.id for m in s.client("sekrit").models.list()] == [str(demo_dir)]
    finally:
        assert s.stop() == 0


# --- TEST GENERATOR (scripted tokens, no model): parsers and stop strings through the SDK ---------------------

def test_scripted_reasoning_and_tool_call(script_server):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]
    c = script_server.client()
    r = c.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "weather?"}], tools=tools)
    msg = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls"
    assert msg.tool_calls[0].function.name == "get_weather"
    assert json.loads(msg.tool_calls[0].function.arguments) == {"city": "Paris"}
    assert msg.model_extra.get("reasoning_content") == "\nThe user wants weather.\n"
    assert "Sure. STOP here" in msg.content

    chunks = list(c.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "weather?"}],
                                            tools=tools, stream=True))
    reasoning = "".join((ch.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for ch in chunks)
    args = "".join(tc.function.arguments or "" for ch in chunks for tc in (ch.choices[0].delta.tool_calls or []))
    names = [tc.function.name for ch in chunks for tc in (ch.choices[0].delta.tool_calls or []) if tc.function.name]
    assert reasoning == "\nThe user wants weather.\n"
    assert names == ["get_weather"]
    assert json.loads(args) == {"city": "Paris"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_scripted_stop_string(script_server):
    c = script_server.client()
    for stream in (False, True):
        kw = dict(model="scripted", messages=[{"role": "user", "content": "x"}], stop=["STOP"],
                  extra_body={"chat_template_kwargs": {"enable_thinking": False}})
        if stream:
            chunks = list(c.chat.completions.create(stream=True, **kw))
            text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
            finish = chunks[-1].choices[0].finish_reason
        else:
            r = c.chat.completions.create(**kw)
            text, finish = r.choices[0].message.content, r.choices[0].finish_reason
        assert text.endswith("Sure. "), text
        assert "STOP" not in text
        assert finish == "stop"


# --- command line ----------------------------------------------------------------------------------------

def test_vllm_flags_harmless_warn_harmful_refuse(demo_dir):
    r = subprocess.run([_bin(), "serve", str(demo_dir), "--quantization", "awq"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--quantization awq" in lines[0] and "not quantized" in lines[0], r.stderr
    # W8A8 needs fp8 weights (the demo model is bf16): said in one line, naming the flag.
    r = subprocess.run([_bin(), "serve", str(demo_dir), "--fp8-activations"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0 and "--fp8-activations" in r.stderr, r.stderr
    # The demo model (4 attention heads) splits over 2 ranks, not 3.
    r = subprocess.run([_bin(), "serve", str(demo_dir), "--tensor-parallel-size", "3"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0 and "not divisible by the tensor-parallel size 3" in r.stderr, r.stderr
    assert "sizes that work for this model: 1, 2" in r.stderr, r.stderr
    r = subprocess.run([_bin(), "serve", str(demo_dir), "--no-such-flag"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--no-such-flag" in r.stderr
    # Harmless vLLM flags (and -tp 1) are accepted with a warning; the server starts.
    s = Server([str(demo_dir), "--x-test-generator-text", "ok", "--trust-remote-code", "--disable-log-requests",
                "--uvicorn-log-level", "info", "-tp", "1", "--enable-prefix-caching"])
    try:
        assert any("ignoring vLLM flag --trust-remote-code" in line for line in s.log)
        assert s.client().completions.create(model=str(demo_dir), prompt="x").choices[0].text == "ok"
    finally:
        assert s.stop() == 0


def test_health_503_while_loading_then_200(demo_dir):
    import urllib.error
    import urllib.request

    s = Server([str(demo_dir), "--served-model-name", "demo"])
    try:
        statuses = set()
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(s.url + "/health") as resp:
                    statuses.add(resp.status)
                    break
            except urllib.error.HTTPError as e:
                statuses.add(e.code)  # 503 while the model loads (may already be over on a fast machine)
                time.sleep(0.05)
        assert 200 in statuses and statuses <= {200, 503}
    finally:
        assert s.stop() == 0


def test_concurrent_streams_all_complete(engine_server):
    """32 streaming requests at once through the engine's batching: every stream is well formed and its usage
    matches what it delivered; the server keeps serving afterwards."""
    from concurrent.futures import ThreadPoolExecutor

    c = engine_server.client()

    def one(i):
        chunks = list(c.completions.create(model="demo", prompt=f"Request number {i}:", max_tokens=10,
                                           temperature=0.8, seed=i, stream=True,
                                           stream_options={"include_usage": True}))
        finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
        return finishes, chunks[-1].usage

    with ThreadPoolExecutor(max_workers=32) as pool:
        results = list(pool.map(one, range(32)))
    for finishes, usage in results:
        assert len(finishes) == 1 and finishes[0] in ("length", "stop")
        assert 1 <= usage.completion_tokens <= 10
        assert finishes[0] == "stop" or usage.completion_tokens == 10
    assert [m.id for m in c.models.list()] == ["demo", "demo-alias"]


def test_client_disconnect_mid_stream_keeps_server_healthy(engine_server):
    c = engine_server.client()
    stream = c.completions.create(model="demo", prompt="Go on and on", max_tokens=400, stream=True,
                                  extra_body={"ignore_eos": True})
    for i, _ in enumerate(stream):
        if i == 2:
            break
    stream.close()  # hang up: the server cancels the request in the engine
    r = c.completions.create(model="demo", prompt="still there?", max_tokens=3, temperature=0)
    assert r.usage.completion_tokens >= 1


def test_config_file(demo_dir, tmp_path):
    cfg = tmp_path / "serve.json"
    cfg.write_text(json.dumps({"served-model-name": ["from-config", "second"], "x_test_generator_text": "cfg",
                               "trust-remote-code": True, "max_model_len": 128}))
    s = Server(["--config", str(cfg), str(demo_dir), "--served-model-name", "from-cli"])
    try:
        # The command line's repeatable flag adds to the file's; scalars given on both take the command line's.
        ids = [m.id for m in s.client().models.list()]
        assert ids == ["from-config", "second", "from-cli"]
        assert s.client().completions.create(model="second", prompt="x").choices[0].text == "cfg"
    finally:
        assert s.stop() == 0
