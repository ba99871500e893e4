"""What the model-reload tests share: two tiny golden checkpoints with the same byte-level tokenizer (different
weights, so their greedy completions differ), a server started on one of them, and the reload request."""

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

from ops_server import OpsServer
from test_multinode import served_golden_model

GOLDEN_DIR = Path(__file__).resolve().parents[2] / "golden"


def golden_pair(tmp_path_factory):
    """{"a": qwen3, "b": qwen3_moe}: model directories sharing one tokenizer."""
    return {"a": served_golden_model(GOLDEN_DIR / "qwen3", tmp_path_factory),
            "b": served_golden_model(GOLDEN_DIR / "qwen3_moe", tmp_path_factory)}


def start_server(model_dir, tmp_path, *args, name="a", port="0"):
    """`pagoda serve` on `model_dir` served as `name`, returned once the model is loaded."""
    s = OpsServer([str(model_dir), "--served-model-name", name, *args], tmp_path, port=port)
    s.wait_for(r"model loaded; ready")
    return s


def reload(server, model_dir, name=None, key=None, timeout=120):
    """POST /v1/models/reload: (status, JSON body)."""
    body = {"model": str(model_dir)}
    if name:
        body["served_model_name"] = name
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(server.url + "/v1/models/reload", data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def get_json(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.status, json.loads(resp.read())


def metric(server, name):
    """The value of pagoda:NAME in /metrics (the first sample)."""
    with urllib.request.urlopen(server.url + "/metrics", timeout=10) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(f"pagoda:{name}{{") or line.startswith(f"pagoda:{name} "):
                return float(line.rsplit(" ", 1)[1])
    raise KeyError(name)


def wait_until(predicate, timeout=30, what="a condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise TimeoutError(f"timed out waiting for {what}")
