"""What operators rely on, against `pagoda serve`: /metrics read with the Prometheus client library's own parser and
checked against the requests sent, a hung-up client cancelled in the engine, graceful SIGTERM, prompt logprobs,
and 1,000 concurrent streams on the real engine with memory and file descriptors back to baseline afterwards.

The engine tests use the demo model (random weights: outputs are checked against other paths of the same server,
never against fixed text); the lifecycle tests use the hidden TEST GENERATOR (scripted tokens at a fixed pace)."""

import json
import os
import signal
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from sse_load import run_many
from test_openai_sdk import Server, demo_dir  # noqa: F401  (fixture)

prometheus_parser = pytest.importorskip("prometheus_client.parser")

# vLLM's bucket boundaries (vllm/v1/metrics/loggers.py).
TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0, 160.0, 640.0, 2560.0]
ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
               80.0]
REQUEST_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
                   480.0, 960.0, 1920.0, 7680.0]
# vllm build_1_2_5_buckets(max_model_len) for the token counts (the engine server runs with --max-model-len 512).
TOKEN_BUCKETS_512 = [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0]
HISTOGRAMS = {"time_to_first_token_seconds": TTFT_BUCKETS, "inter_token_latency_seconds": ITL_BUCKETS,
              "time_per_output_token_seconds": ITL_BUCKETS, "request_time_per_output_token_seconds": ITL_BUCKETS,
              "e2e_request_latency_seconds": REQUEST_BUCKETS, "request_queue_time_seconds": REQUEST_BUCKETS,
              "request_prefill_time_seconds": REQUEST_BUCKETS, "request_decode_time_seconds": REQUEST_BUCKETS,
              "request_prompt_tokens": TOKEN_BUCKETS_512, "request_generation_tokens": TOKEN_BUCKETS_512,
              "request_params_max_tokens": TOKEN_BUCKETS_512, "request_max_num_generation_tokens": TOKEN_BUCKETS_512,
              "request_params_n": [1.0, 2.0, 5.0, 10.0, 20.0]}


class Scrape:
    """One /metrics page parsed by prometheus_client: values by sample name and labels (engine and model_name
    checked and left out)."""

    def __init__(self, url, prefix="pagoda"):
        with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
            assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = resp.read().decode()
        self.samples, self.model_names = {}, set()
        for family in prometheus_parser.text_string_to_metric_families(text):
            assert family.name.startswith(prefix + ":"), family.name
            for s in family.samples:
                labels = dict(s.labels)
                assert labels.pop("engine") == "0"
                self.model_names.add(labels.pop("model_name"))
                name = s.name.split(":", 1)[1]
                self.samples.setdefault(name, {})[frozenset(labels.items())] = s.value

    def value(self, name, **labels):
        return self.samples[name][frozenset(labels.items())]

    def label_values(self, name, label):
        return [dict(k)[label] for k in self.samples[name]]

    def finished(self):
        return {dict(k)["finished_reason"]: v for k, v in self.samples["request_success_total"].items()}


def scrape(url, prefix="pagoda"):
    return Scrape(url, prefix)


def get_status(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code


def post_status(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code


@pytest.fixture(scope="module")
def engine_server(demo_dir):  # noqa: F811
    s = Server([str(demo_dir), "--served-model-name", "demo", "--max-model-len", "512", "--max-num-seqs", "32"])
    deadline = time.time() + 60
    while get_status(s.url + "/health") != 200 and time.time() < deadline:
        time.sleep(0.05)
    yield s
    assert s.stop() == 0


# --- /metrics --------------------------------------------------------------------------------------------------

def test_metrics_parse_and_counters_add_up(engine_server):
    c = engine_server.client()
    before = scrape(engine_server.url)
    assert set(before.finished()) == {"stop", "length", "abort"}
    for name, buckets in HISTOGRAMS.items():
        les = before.label_values(name + "_bucket", "le")
        assert [float(x) for x in les] == buckets + [float("inf")], name
    assert before.model_names == {"demo"}

    prompt = completion = 0
    reasons = {"stop": 0, "length": 0}
    sent = 0
    several_tokens = 0  # requests with two tokens or more: they have a time per output token
    for i in range(3):  # non-streaming chat, streaming completions with usage, and n=1 completions with stop=[]
        r = c.chat.completions.create(model="demo", messages=[{"role": "user", "content": f"hi {i}"}], max_tokens=5)
        prompt += r.usage.prompt_tokens
        completion += r.usage.completion_tokens
        several_tokens += r.usage.completion_tokens >= 2
        reasons["length" if r.choices[0].finish_reason == "length" else "stop"] += 1
        sent += 1
        chunks = list(c.completions.create(model="demo", prompt=f"count {i}", max_tokens=4, stream=True,
                                           stream_options={"include_usage": True}))
        prompt += chunks[-1].usage.prompt_tokens
        completion += chunks[-1].usage.completion_tokens
        several_tokens += chunks[-1].usage.completion_tokens >= 2
        fin = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
        reasons["length" if fin == ["length"] else "stop"] += 1
        sent += 1

    after = scrape(engine_server.url)

    def delta(name):
        return after.value(name) - before.value(name)

    assert delta("prompt_tokens_total") == prompt
    assert delta("generation_tokens_total") == completion
    fin_before, fin_after = before.finished(), after.finished()
    assert {k: fin_after[k] - fin_before[k] for k in fin_after} == {**reasons, "abort": 0}
    for name in ("time_to_first_token_seconds", "e2e_request_latency_seconds", "request_queue_time_seconds",
                 "request_prefill_time_seconds", "request_decode_time_seconds"):
        assert delta(name + "_count") == sent, name
        assert after.value(name + "_bucket", le="+Inf") == after.value(name + "_count")
    # One gap per token after the first of each request, under both of vLLM's names.
    assert delta("inter_token_latency_seconds_count") == completion - sent
    assert delta("time_per_output_token_seconds_count") == completion - sent
    assert delta("time_per_output_token_seconds_sum") == pytest.approx(delta("inter_token_latency_seconds_sum"))
    # vLLM's per-request histograms (its Grafana dashboard's length and TPOT panels): one observation per request.
    assert delta("request_prompt_tokens_count") == sent
    assert delta("request_prompt_tokens_sum") == prompt
    assert delta("request_generation_tokens_count") == sent
    assert delta("request_generation_tokens_sum") == completion
    assert delta("request_params_max_tokens_sum") == 3 * 5 + 3 * 4
    assert delta("request_params_n_count") == sent
    assert delta("request_params_n_sum") == sent
    assert delta("request_max_num_generation_tokens_sum") == completion  # n = 1: the one choice's tokens
    assert delta("request_time_per_output_token_seconds_count") == several_tokens
    for name in ("request_prompt_tokens", "request_generation_tokens", "request_time_per_output_token_seconds"):
        assert after.value(name + "_bucket", le="+Inf") == after.value(name + "_count"), name
    assert delta("e2e_request_latency_seconds_sum") > 0
    assert after.value("num_requests_running") == 0
    assert after.value("num_requests_waiting") == 0
    assert 0.0 <= after.value("kv_cache_usage_perc") <= 1.0
    assert after.value("gpu_cache_usage_perc") == after.value("kv_cache_usage_perc")
    # The same prompt again: the prefix cache is queried and hit.
    for _ in range(2):
        c.completions.create(model="demo", prompt="a shared prefix " * 8, max_tokens=1)
    again = scrape(engine_server.url)
    assert again.value("prefix_cache_queries_total") > after.value("prefix_cache_queries_total")
    assert again.value("prefix_cache_hits_total") > after.value("prefix_cache_hits_total"), (again.samples, after.samples)


# Every series a panel of vLLM's Grafana dashboard queries (examples/online_serving/prometheus_grafana/grafana.json).
GRAFANA_SERIES = ["e2e_request_latency_seconds_bucket", "e2e_request_latency_seconds_sum", "prompt_tokens_total",
                  "generation_tokens_total", "time_per_output_token_seconds_bucket", "num_requests_running",
                  "num_requests_waiting", "time_to_first_token_seconds_bucket", "gpu_cache_usage_perc",
                  "request_prompt_tokens_bucket", "request_generation_tokens_bucket", "request_success_total",
                  "request_queue_time_seconds_sum", "request_prefill_time_seconds_sum",
                  "request_decode_time_seconds_sum", "request_max_num_generation_tokens_sum"]


def test_metrics_prefix_vllm(demo_dir):  # noqa: F811
    s = Server([str(demo_dir), "--served-model-name", "m", "--x-test-generator-text", "a b c", "--metrics-prefix",
                "vllm"])
    try:
        s.client().completions.create(model="m", prompt="x")
        m = scrape(s.url, prefix="vllm")
        assert m.finished()["stop"] == 1
        assert m.value("generation_tokens_total") > 0
        # The series vLLM's Grafana dashboard charts (prompt/generation length, time per output token).
        assert m.value("request_prompt_tokens_count") == 1
        assert m.value("request_generation_tokens_sum") == m.value("generation_tokens_total")
        assert m.value("time_per_output_token_seconds_count") == m.value("generation_tokens_total") - 1
        assert m.value("request_time_per_output_token_seconds_count") == 1
        assert [name for name in GRAFANA_SERIES if name not in m.samples] == []
    finally:
        assert s.stop() == 0


# --- a client that hangs up -----------------------------------------------------------------------------------

def test_disconnect_cancels_the_engine_request(engine_server):
    before = scrape(engine_server.url)
    host, port = engine_server.url.removeprefix("http://").split(":")
    body = json.dumps({"model": "demo", "prompt": "Go on and on", "max_tokens": 400, "stream": True,
                       "ignore_eos": True}).encode()
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                 + str(len(body)).encode() + b"\r\n\r\n" + body)
    got = b""
    while got.count(b"data: ") < 3:
        got += sock.recv(65536)
    sock.close()
    deadline = time.time() + 20
    while time.time() < deadline:
        m = scrape(engine_server.url)
        if m.finished()["abort"] > before.finished()["abort"]:
            break
        time.sleep(0.05)
    assert m.finished()["abort"] == before.finished()["abort"] + 1
    assert m.value("num_requests_running") == 0
    generated = m.value("generation_tokens_total") - before.value("generation_tokens_total")
    assert 3 <= generated < 400, generated  # cancelled long before max_tokens


# --- prompt logprobs ------------------------------------------------------------------------------------------

def test_prompt_logprobs_match_the_sampling_path(engine_server):
    """Prompt logprobs come from prompt rows of the batch; completion logprobs from sampling rows. For the same
    prefix both must give the same top tokens and values."""
    c = engine_server.client()
    req = urllib.request.Request(engine_server.url + "/tokenize", data=json.dumps({"prompt": "One two three four"})
                                 .encode(), headers={"Content-Type": "application/json"})
    ids = json.loads(urllib.request.urlopen(req).read())["tokens"]
    r = c.completions.create(model="demo", prompt=ids, max_tokens=1, extra_body={"prompt_logprobs": 3})
    plp = r.choices[0].model_extra["prompt_logprobs"]
    assert len(plp) == len(ids) and plp[0] is None
    for i in range(1, len(ids)):
        entry = plp[i]
        assert str(ids[i]) in entry
        ref = c.completions.create(model="demo", prompt=ids[:i], max_tokens=1, temperature=0, logprobs=3)
        top = ref.choices[0].logprobs.top_logprobs[0]
        ranked = {v["decoded_token"]: v["logprob"] for v in entry.values() if v["rank"] <= 3}
        assert set(ranked) == set(top), (i, ranked, top)
        for tok, lp in top.items():
            assert ranked[tok] == pytest.approx(lp, abs=1e-4)
        mine = entry[str(ids[i])]
        assert mine["rank"] >= 1 and mine["logprob"] <= 0
        # echo + logprobs: the legacy lists start with the prompt (its first token has no logprob).
        if i == len(ids) - 1:
            e = c.completions.create(model="demo", prompt=ids, max_tokens=2, echo=True, logprobs=2, temperature=0)
            lp = e.choices[0].logprobs
            assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
            assert len(lp.tokens) == len(ids) + 2
            assert lp.token_logprobs[i] == pytest.approx(mine["logprob"], abs=1e-4)
    with pytest.raises(Exception) as err:
        c.completions.create(model="demo", prompt="x", stream=True, extra_body={"prompt_logprobs": 1})
    assert "prompt_logprobs" in str(err.value)


# --- SIGTERM --------------------------------------------------------------------------------------------------

def _stream_in_thread(server, out):
    def run():
        try:
            stream = server.client().chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}], stream=True)
            for ch in stream:
                out["chunks"].append(ch)
            out["ok"] = True
        except Exception as e:  # noqa: BLE001  (recorded for the assertion)
            out["error"] = e
    out.update(chunks=[], ok=False, error=None)
    t = threading.Thread(target=run)
    t.start()
    return t


def test_sigterm_drains_then_exits_zero(demo_dir):  # noqa: F811
    text = " ".join(f"w{i}" for i in range(40))
    s = Server([str(demo_dir), "--served-model-name", "m", "--x-test-generator-text", text,
                "--x-test-token-interval-us", "25000"])
    out = {}
    t = _stream_in_thread(s, out)
    deadline = time.time() + 10
    while len(out["chunks"]) < 3 and time.time() < deadline:
        time.sleep(0.01)
    assert len(out["chunks"]) >= 3
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    assert get_status(s.url + "/health") == 503
    assert post_status(s.url + "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]}) == 503
    t.join(30)
    assert out["ok"], out["error"]
    content = "".join(ch.choices[0].delta.content or "" for ch in out["chunks"] if ch.choices)
    assert content == text
    assert out["chunks"][-1].choices[0].finish_reason == "stop"
    assert s.proc.wait(timeout=20) == 0


def test_sigterm_gives_up_after_the_shutdown_timeout(demo_dir):  # noqa: F811
    text = " ".join(f"w{i}" for i in range(400))  # about 20 s at 50 ms a token
    s = Server([str(demo_dir), "--served-model-name", "m", "--x-test-generator-text", text,
                "--x-test-token-interval-us", "50000", "--shutdown-timeout", "1"])
    out = {}
    t = _stream_in_thread(s, out)
    deadline = time.time() + 10
    while not out["chunks"] and time.time() < deadline:
        time.sleep(0.01)
    start = time.time()
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(timeout=15) == 0
    assert time.time() - start < 8
    t.join(15)
    assert not out["ok"] or len(out["chunks"]) < 400  # cut off, not finished


# --- load -----------------------------------------------------------------------------------------------------

def _rss_kb_and_fds(pid):
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def test_1000_concurrent_streams_on_the_engine(engine_server):
    """1,000 streaming requests at once through the real engine (4 prompts, greedy): every stream is complete and
    equals the same prompt's answer served alone; afterwards RSS and open fds return to the level after an
    identical warm-up round (allocator pools and the prefix cache are warm by then)."""
    prompts = [f"Load test prompt {k}" for k in range(4)]
    c = engine_server.client()
    alone = [c.completions.create(model="demo", prompt=p, max_tokens=4, temperature=0,
                                  extra_body={"ignore_eos": True}).choices[0].text for p in prompts]
    bodies = [{"model": "demo", "prompt": prompts[i % 4], "max_tokens": 4, "temperature": 0, "stream": True,
               "ignore_eos": True, "stream_options": {"include_usage": True}} for i in range(1000)]
    pid = engine_server.proc.pid
    baseline = None
    for round_ in range(2):
        results = run_many(engine_server.url, "/v1/completions", bodies)
        for i, (status, events, done) in enumerate(results):
            assert status == 200 and done, (i, status)
            text = "".join(e["choices"][0]["text"] for e in events if e["choices"])
            assert text == alone[i % 4], i
            assert events[-1]["usage"]["completion_tokens"] == 4
        time.sleep(0.5)  # connections close, the engine settles
        sample = _rss_kb_and_fds(pid)
        if round_ == 0:
            baseline = sample
    rss, fds = sample
    assert fds <= baseline[1] + 2, (baseline, sample)
    assert rss <= baseline[0] * 1.15 + 16 * 1024, (baseline, sample)  # KiB
    assert scrape(engine_server.url).value("num_requests_running") == 0


# --- --chat-template gets the model's special tokens ------------------------------------------------------------

def test_chat_template_flag_sees_tokenizer_config_special_tokens(demo_dir, tmp_path):  # noqa: F811
    """A --chat-template (and a request's chat_template) renders eos_token from the model's tokenizer_config.json,
    as the model's own template does."""
    eos = json.loads((demo_dir / "tokenizer_config.json").read_text())["eos_token"]
    template = "{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}"
    (tmp_path / "t.jinja").write_text(template)
    s = Server([str(demo_dir), "--served-model-name", "m", "--x-test-generator-text", "ok", "--chat-template",
                str(tmp_path / "t.jinja")])
    try:
        def tokenize(body):
            req = urllib.request.Request(s.url + "/tokenize", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            return json.loads(urllib.request.urlopen(req, timeout=10).read())["tokens"]

        rendered = tokenize({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": False})
        assert rendered == tokenize({"prompt": "hi" + eos})
        # A request's own template gets them too: its prompt is "hi<eos>", whose token count shows in usage.
        r = s.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                               extra_body={"chat_template": template})
        assert r.usage.prompt_tokens == len(rendered)
    finally:
        assert s.stop() == 0
