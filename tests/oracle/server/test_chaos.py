"""Chaos around a running `pagoda serve` (tiny golden checkpoints, the official openai SDK): each fault is reported
clearly and nothing else breaks.
- the model directory removed during a reload: the reload answers with the error, the old model serves on;
- a keys file with a syntax error on SIGHUP: the old keys stay, the log says why;
- the access log on a full disk (/dev/full): every request is still answered, the log says so once;
- kill -9 of the server and a restart on the same port: it comes back and serves;
- an engine stuck inside a step: /health answers 503 (a liveness probe restarts the pod) until it turns again."""

import json
import shutil
import urllib.error
import urllib.request
import signal
import socket
import threading
import time

import pytest

from reload_helpers import get_json, golden_pair, reload, start_server, wait_until

openai = pytest.importorskip("openai")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return golden_pair(tmp_path_factory)


def complete(server, key="none", model="", max_tokens=8):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)
    r = client.completions.create(model=model, prompt="hello", max_tokens=max_tokens, temperature=0)
    return r.model, r.choices[0].text


@pytest.mark.parametrize("strategy", ["beside", "drain"])
def test_model_directory_removed_during_a_reload(models, tmp_path, strategy):
    doomed = tmp_path / "doomed"
    shutil.copytree(models["b"], doomed)
    # Each reload waits 1.5 s before it loads (as a large model's load takes time): the directory goes meanwhile.
    server = start_server(models["a"], tmp_path, "--reload-strategy", strategy, "--x-test-reload-delay-ms", "1500")
    try:
        before = complete(server)
        answer = {}
        t = threading.Thread(target=lambda: answer.update(r=reload(server, doomed, "b")))
        t.start()
        server.wait_for(r"model reload: loading \S*doomed (beside|after draining)")
        shutil.rmtree(doomed)
        if strategy == "beside":
            assert complete(server) == before  # the old model serves while the new one loads
        t.join(timeout=60)
        status, body = answer["r"]
        assert status == 500, body
        message = body["error"]["message"]
        assert "doomed" in message and f"still serving {models['a']}" in message, message
        server.wait_for(r"ERROR model reload of \S*doomed failed")
        # The old model serves (after drain: loaded again) and answers as before.
        assert complete(server) == before
        assert get_json(server.url + "/health")[1]["model"] == "a"
        # A directory that is already gone is a 400 naming it.
        status, body = reload(server, doomed, "b")
        assert status == 400 and "is not a directory" in body["error"]["message"], body
        assert complete(server) == before
    finally:
        assert server.stop() == 0


def test_keys_file_with_a_syntax_error_on_sighup_keeps_the_old_keys(models, tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"tenants": [{"name": "ops", "keys": ["sk-ops"], "admin": True},
                                            {"name": "app", "keys": ["sk-app"]}]}))
    server = start_server(models["a"], tmp_path, "--api-keys-file", str(keys))
    try:
        assert complete(server, "sk-app")[0] == "a"
        # Reloading the model is for admins only.
        assert reload(server, models["b"], "b", key="sk-app")[0] == 403
        assert reload(server, models["b"], "b")[0] == 401
        status, body = reload(server, models["b"], "b", key="sk-ops")
        assert status == 200, body
        keys.write_text('{"tenants": [{"name": "app", "keys": ["sk-new"],}')  # a trailing comma, cut short
        server.signal(signal.SIGHUP)
        server.wait_for(r"keeping the tenants loaded before")
        assert "sk-app" not in server.log() and "sk-ops" not in server.log()  # keys are never logged
        assert complete(server, "sk-app")[0] == "b"
        with pytest.raises(openai.AuthenticationError):
            complete(server, "sk-new")
    finally:
        assert server.stop() == 0


def test_access_log_on_a_full_disk(models, tmp_path):
    server = start_server(models["a"], tmp_path, "--access-log", "/dev/full")
    try:
        for _ in range(5):
            assert complete(server)[0] == "a"
            time.sleep(0.05)  # separate batches of the log writer: each one fails
        server.wait_for(r"access log: writing /dev/full failed \(No space left on device\)")
        assert server.log().count("access log: writing /dev/full failed") == 1
        assert get_json(server.url + "/health")[0] == 200
    finally:
        assert server.stop() == 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_kill_9_and_restart_on_the_same_port(models, tmp_path):
    port = str(free_port())
    server = start_server(models["a"], tmp_path, port=port)
    before = complete(server)
    # A connection open at the kill leaves the server's side of it in TIME_WAIT: the restart must bind regardless.
    host, _, _ = server.url.rpartition(":")
    conn = socket.create_connection((host.split("//")[1], int(port)))
    conn.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # unfinished
    server.signal(signal.SIGKILL)
    assert server.proc.wait(timeout=10) == -signal.SIGKILL
    server.stop()
    conn.close()
    again = start_server(models["a"], tmp_path, port=port)
    try:
        assert again.url.endswith(":" + port)
        wait_until(lambda: get_json(again.url + "/health")[0] == 200, what="/health 200 after the restart")
        assert complete(again) == before
    finally:
        assert again.stop() == 0


def health(server):
    """GET /health: (status, JSON body)."""
    try:
        with urllib.request.urlopen(server.url + "/health", timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_an_engine_stuck_in_a_step_fails_health_until_it_turns_again(models, tmp_path):
    # Every engine step lasts 4 s longer (the hidden --x-test-step-delay-ms sleeps on the engine thread after the
    # step): with --engine-stall-timeout 1 the one step of a 1-token request is an engine stuck for 4 s.
    server = start_server(models["a"], tmp_path, "--engine-stall-timeout", "1", "--x-test-step-delay-ms", "4000")
    try:
        time.sleep(1.5)  # longer than the timeout: an idle engine still answers, so /health stays 200
        assert health(server)[0] == 200
        t = threading.Thread(target=complete, args=(server,), kwargs={"max_tokens": 1})
        t.start()
        wait_until(lambda: health(server)[0] == 503, timeout=10, what="/health 503 while the engine is stuck")
        status, body = health(server)
        assert status == 503 and "engine has not finished a step" in body["error"]["message"], body
        t.join(timeout=60)
        wait_until(lambda: health(server)[0] == 200, timeout=10, what="/health 200 once the engine turns again")
        assert health(server)[1]["status"] == "ok"
    finally:
        assert server.stop() == 0
