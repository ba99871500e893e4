"""--access-log: one JSON line per request, checked against what the official openai SDK saw — streamed and not,
both APIs, and refusals (401, 404, 400). The TEST GENERATOR answers (scripted tokens, no model): the token counts of
each line must equal the usage the client got."""

import json
import time

import pytest

from ops_server import OpsServer
from test_openai_sdk import demo_dir  # noqa: F401  (fixture)

openai = pytest.importorskip("openai")

KEY = "sk-access-log-secret-4711"
TEXT = "The quick brown fox jumps over the lazy dog."


def read_lines(path, n, timeout=10):
    """The log is written by a thread of its own: wait until `n` lines are there."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= n:
            return [json.loads(line) for line in lines]
        time.sleep(0.02)
    raise AssertionError(f"expected {n} lines, have:\n{path.read_text() if path.exists() else '(no file)'}")


@pytest.fixture()
def logged_server(demo_dir, tmp_path):  # noqa: F811
    log = tmp_path / "access.jsonl"
    s = OpsServer([str(demo_dir), "--served-model-name", "scripted", "--x-test-generator-text", TEXT,
                   "--x-test-token-interval-us", "2000", "--api-key", KEY, "--access-log", str(log)], tmp_path)
    yield s, log
    assert s.stop() == 0


def test_one_line_per_request_with_the_clients_numbers(logged_server):
    s, log = logged_server
    c = openai.OpenAI(base_url=s.url + "/v1", api_key=KEY, max_retries=0)
    raw = c.chat.completions.with_raw_response.create(
        model="scripted", messages=[{"role": "user", "content": "hi"}], extra_headers={"X-Request-Id": "req-chat-1"})
    chat = raw.parse()
    chunks = list(c.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "hello there"}],
                                            stream=True, stream_options={"include_usage": True},
                                            extra_headers={"X-Request-Id": "req-stream-2"}))
    comp = c.completions.create(model="scripted", prompt="one two three", max_tokens=3,
                                extra_headers={"X-Request-Id": "req-comp-3"})
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=s.url + "/v1", api_key="wrong-key", max_retries=0).models.list(
            extra_headers={"X-Request-Id": "req-401"})
    with pytest.raises(openai.NotFoundError):
        c.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}],
                                  extra_headers={"X-Request-Id": "req-404"})
    with pytest.raises(openai.BadRequestError):
        c.chat.completions.create(model="scripted", messages=[{"role": "nobody", "content": "x"}],
                                  extra_headers={"X-Request-Id": "req-400"})

    lines = {line["request_id"]: line for line in read_lines(log, 6)}
    assert set(lines) == {"req-chat-1", "req-stream-2", "req-comp-3", "req-401", "req-404", "req-400"}
    for line in lines.values():
        assert line["time"].endswith("Z") and line["client"] == "127.0.0.1"
        assert line["duration_s"] >= 0

    a = lines["req-chat-1"]
    assert (a["method"], a["path"], a["status"], a["stream"]) == ("POST", "/v1/chat/completions", 200, False)
    assert (a["tenant"], a["model"]) == ("default", "scripted")
    assert a["prompt_tokens"] == chat.usage.prompt_tokens
    assert a["completion_tokens"] == chat.usage.completion_tokens
    assert 0 <= a["ttft_s"] <= a["duration_s"]

    b = lines["req-stream-2"]
    assert (b["status"], b["stream"]) == (200, True)
    assert b["prompt_tokens"] == chunks[-1].usage.prompt_tokens
    assert b["completion_tokens"] == chunks[-1].usage.completion_tokens
    assert 0 <= b["ttft_s"] <= b["duration_s"]

    d = lines["req-comp-3"]
    assert (d["path"], d["completion_tokens"]) == ("/v1/completions", comp.usage.completion_tokens == 3 and 3)

    assert lines["req-401"]["status"] == 401 and "tenant" not in lines["req-401"]
    assert lines["req-404"]["status"] == 404 and "model" not in lines["req-404"]
    assert lines["req-400"]["status"] == 400
    # The key is never written, in any form the client sent it.
    assert KEY not in log.read_text() and "wrong-key" not in log.read_text()


def test_a_client_that_hangs_up_mid_stream_is_logged_incomplete(logged_server):
    s, log = logged_server
    c = openai.OpenAI(base_url=s.url + "/v1", api_key=KEY, max_retries=0)
    stream = c.completions.create(model="scripted", prompt="x", max_tokens=2000, stream=True,
                                  extra_body={"ignore_eos": True}, extra_headers={"X-Request-Id": "req-gone"})
    next(iter(stream))
    stream.close()
    line = read_lines(log, 1)[0]
    assert line["request_id"] == "req-gone" and line["stream"] is True
    assert line["complete"] is False and line["completion_tokens"] < 2000


def test_sighup_reopens_the_file_after_logrotate_moved_it(logged_server):
    s, log = logged_server
    c = openai.OpenAI(base_url=s.url + "/v1", api_key=KEY, max_retries=0)
    c.models.list()
    read_lines(log, 1)
    rotated = log.with_suffix(".1")
    log.rename(rotated)
    import signal
    s.signal(signal.SIGHUP)
    s.wait_for("SIGHUP: reloading")
    c.models.list(extra_headers={"X-Request-Id": "after-rotate"})
    assert read_lines(log, 1)[0]["request_id"] == "after-rotate"
    assert len(rotated.read_text().splitlines()) == 1


def test_a_log_path_that_cannot_be_opened_is_refused_at_start(demo_dir, tmp_path):  # noqa: F811
    s = OpsServer([str(demo_dir), "--x-test-generator-text", "x", "--access-log", str(tmp_path / "no" / "dir.log")],
                  tmp_path, wait_for_banner=False)
    assert s.exit_code() != 0
    assert "--access-log: cannot open" in s.log()
