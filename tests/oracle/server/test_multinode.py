"""`pagoda serve --nnodes 2`: tensor parallelism across two processes on this machine (CPU, one rank per node),
driven by the official `openai` SDK against node 0 (docs/deployment-multinode.md).

The model is the tiny golden qwen3 checkpoint (tests/golden/qwen3, 1024-token vocabulary) with the byte-level demo
tokenizer, whose vocabulary is extended here with one named token per remaining id, so that every generated id shows
in the text; the hybrid and MoE families' tiny checkpoints (Gated DeltaNet heads and experts split over the nodes, the
linear-attention states kept per node) are checked the same way. Their weights are random; the references are a
single-process server's completions.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from test_openai_sdk import Server, _bin

openai = pytest.importorskip("openai")

GOLDEN_DIR = Path(__file__).resolve().parents[2] / "golden"
GOLDEN = GOLDEN_DIR / "qwen3"
PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return served_golden_model(GOLDEN, tmp_path_factory)


def served_golden_model(golden, tmp_path_factory):
    """A copy of a golden checkpoint with the byte-level tokenizer, every id of its vocabulary named."""
    if not (golden / "config.json").exists():
        pytest.skip(f"no golden model in {golden}")
    d = tmp_path_factory.mktemp("tp_model")
    for f in golden.iterdir():
        if f.name == "config.json" or f.name == "generation_config.json" or "safetensors" in f.name:
            shutil.copy(f, d / f.name)
    tok = tmp_path_factory.mktemp("byte_tokenizer")
    r = subprocess.run([_bin(), "demo-model", "--byte-level", str(tok)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    shutil.copy(tok / "tokenizer_config.json", d / "tokenizer_config.json")
    tokenizer = json.loads((tok / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    config = json.loads((golden / "config.json").read_text())
    vocab_size = config.get("text_config", config)["vocab_size"]
    used = set(vocab.values()) | {t["id"] for t in tokenizer["added_tokens"]}
    for i in range(vocab_size):
        if i not in used:
            vocab[f"<t{i}>"] = i
    (d / "tokenizer.json").write_text(json.dumps(tokenizer))
    return d


def free_port():
    """A port that was free a moment ago. Node 0 must be told its port on the command line, and the worker starts
    connecting before node 0 listens, to a port in the ephemeral range: that can connect the worker's socket to
    itself, which pagoda refuses (and retries). What is left is another process taking the port meanwhile, which
    makes node 0 fail to listen, loudly."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(server, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(server.url + "/health", timeout=5) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError):
            pass
        if server.proc.poll() is not None:
            raise RuntimeError("node 0 exited while loading:\n" + "".join(server.log) + server.proc.stderr.read())
        time.sleep(0.1)
    raise RuntimeError("node 0 did not become healthy")


class TwoNodes:
    """Node 1 (a worker, no HTTP) and node 0 (the server) on a free port; the worker's stderr goes to a file."""

    def __init__(self, model_dir, log_dir, extra=()):
        address = f"127.0.0.1:{free_port()}"
        common = [str(model_dir), "--tensor-parallel-size", "2", "--nnodes", "2", "--dist-init-addr", address,
                  "--threads", "1", "--dist-timeout", "60", *extra]
        self.worker_log = Path(log_dir) / "worker.log"
        with open(self.worker_log, "w") as log:
            self.worker = subprocess.Popen([_bin(), "serve", *common, "--node-rank", "1"], stderr=log)
        self.node0 = Server([*common, "--max-model-len", "256"])
        wait_healthy(self.node0)

    def worker_text(self):
        return self.worker_log.read_text()

    def kill(self):
        for p in (self.node0.proc, self.worker):
            if p.poll() is None:
                p.kill()
                p.wait()


def complete(server):
    return server.client().completions.create(model=server.client().models.list().data[0].id, prompt=PROMPT,
                                              max_tokens=12, temperature=0, logprobs=1)


@pytest.fixture(scope="module")
def reference(model_dir):
    single = Server([str(model_dir), "--max-model-len", "256", "--threads", "1"])
    try:
        return complete(single)
    finally:
        assert single.stop() == 0


def test_two_nodes_give_the_single_process_greedy_completion(model_dir, reference, tmp_path):
    nodes = TwoNodes(model_dir, tmp_path)
    try:
        r = complete(nodes.node0)
        assert r.choices[0].text == reference.choices[0].text
        assert r.usage.completion_tokens == reference.usage.completion_tokens == 12
        assert r.choices[0].logprobs.tokens == reference.choices[0].logprobs.tokens
        # fp32 sums split over two ranks round differently from one; the tokens above must not.
        for got, want in zip(r.choices[0].logprobs.token_logprobs, reference.choices[0].logprobs.token_logprobs):
            assert got == pytest.approx(want, abs=1e-3)
        chunks = nodes.node0.client().completions.create(model=r.model, prompt=PROMPT, max_tokens=12, temperature=0,
                                                         stream=True)
        assert "".join(c.choices[0].text for c in chunks if c.choices) == reference.choices[0].text
        # SIGTERM on node 0: it stops, and tells node 1, which exits 0.
        assert nodes.node0.stop() == 0
        assert nodes.worker.wait(timeout=30) == 0
        text = nodes.worker_text()
        assert "a worker of node 0 at 127.0.0.1:" in text and "node 0 shut the group down" in text, text
    finally:
        nodes.kill()


@pytest.mark.parametrize("family", ["qwen3_5", "qwen3_next", "qwen3_5_moe"])
def test_two_nodes_split_the_hybrid_and_moe_families_like_one_process(family, tmp_path_factory, tmp_path):
    model = served_golden_model(GOLDEN_DIR / family, tmp_path_factory)
    single = Server([str(model), "--max-model-len", "256", "--threads", "1"])
    try:
        want = complete(single)
    finally:
        assert single.stop() == 0
    nodes = TwoNodes(model, tmp_path)
    try:
        r = complete(nodes.node0)
        assert r.choices[0].logprobs.tokens == want.choices[0].logprobs.tokens
        assert r.usage.completion_tokens == 12
        for got, ref in zip(r.choices[0].logprobs.token_logprobs, want.choices[0].logprobs.token_logprobs):
            assert got == pytest.approx(ref, abs=1e-3)
        assert nodes.node0.stop() == 0
        assert nodes.worker.wait(timeout=30) == 0
    finally:
        nodes.kill()


def test_two_nodes_take_the_quantization_and_kv_cache_flags_of_one_process(model_dir, tmp_path):
    # The reference is two ranks in one process with the same flags: each rank calculates its KV scales from its own
    # heads, so one rank's (one scale over all heads) would store other bytes; two nodes compute the same bits.
    flags = ["--quantization", "fp8", "--kv-cache-dtype", "fp8", "--calculate-kv-scales"]
    single = Server([str(model_dir), "--max-model-len", "256", "--threads", "1", "-tp", "2", *flags])
    try:
        want = complete(single)
    finally:
        assert single.stop() == 0
    nodes = TwoNodes(model_dir, tmp_path, flags)
    try:
        r = complete(nodes.node0)
        assert r.choices[0].logprobs.tokens == want.choices[0].logprobs.tokens
        assert r.choices[0].logprobs.token_logprobs == want.choices[0].logprobs.token_logprobs
        assert nodes.node0.stop() == 0
        assert nodes.worker.wait(timeout=30) == 0
    finally:
        nodes.kill()
    # A node started without them is refused, saying which flag differs.
    address = f"127.0.0.1:{free_port()}"
    common = [str(model_dir), "-tp", "2", "--nnodes", "2", "--dist-init-addr", address, "--threads", "1",
              "--dist-timeout", "20"]
    worker = subprocess.Popen([_bin(), "serve", *common, "--node-rank", "1"], stderr=subprocess.PIPE, text=True)
    node0 = subprocess.run([_bin(), "serve", *common, "--kv-cache-dtype", "fp8"], capture_output=True, text=True,
                           timeout=60)
    _, worker_err = worker.communicate(timeout=60)
    assert node0.returncode != 0 and worker.returncode != 0
    assert "--kv-cache-dtype auto (node 0: fp8_e4m3)" in node0.stderr, node0.stderr
    assert "refused this node" in worker_err, worker_err


def test_two_nodes_serve_lora_adapters_as_peft_does(model_dir, tmp_path):
    # Node 0 names each adapter's directory to node 1 before the first step that uses it; one loaded over HTTP after
    # the start reaches node 1 the same way. Each node's rank cuts its share of the adapter as a rank of -tp 2 does.
    from test_lora import LORA, peft_prompt_logprobs, post, prompt_logprobs
    if not (LORA / "reference.json").exists():
        pytest.skip("no LoRA golden data")
    lora = ["--enable-lora", "--lora-modules", f"attn={LORA / 'attn'}", "--max-loras", "2", "--max-lora-rank", "8"]
    nodes = TwoNodes(model_dir, tmp_path, lora)
    try:
        client = nodes.node0.client()
        status, text = post(nodes.node0.url, "/v1/load_lora_adapter",
                            {"lora_name": "mlp", "lora_path": str(LORA / "mlp_rslora")})
        assert status == 200, text
        base = next(m.id for m in client.models.list().data if m.model_dump().get("parent") is None)
        for name, adapter in (("attn", "attn"), ("mlp", "mlp_rslora")):
            want, max_abs = peft_prompt_logprobs(adapter)
            got = prompt_logprobs(client, name)
            assert np.abs(got - want).max() <= 2e-3 * max_abs, (name, got, want)
            assert np.abs(prompt_logprobs(client, base) - want).max() > 0.05  # the adapter made the match
        assert nodes.node0.stop() == 0
        assert nodes.worker.wait(timeout=30) == 0
    finally:
        nodes.kill()


def test_killing_the_worker_fails_the_next_request_and_stops_node0(model_dir, tmp_path):
    nodes = TwoNodes(model_dir, tmp_path)
    try:
        assert complete(nodes.node0).choices[0].finish_reason == "length"
        nodes.worker.send_signal(signal.SIGKILL)
        nodes.worker.wait(timeout=30)
        try:
            r = complete(nodes.node0)
            # The step fails on node 0 (its collective finds node 1's connection closed): the request is aborted.
            assert r.choices[0].finish_reason == "abort" and r.usage.completion_tokens == 0
        except (openai.APIConnectionError, openai.APIStatusError):
            pass  # or node 0 was already stopping
        # Node 0 stops serving and exits 1, saying why (a launcher then restarts the whole group).
        assert nodes.node0.proc.wait(timeout=60) == 1
        err = nodes.node0.proc.stderr.read()
        assert "node 1" in err and "closed the connection" in err and "restart every node" in err, err
    finally:
        nodes.kill()


def test_killing_node0_makes_the_worker_exit_with_an_error(model_dir, tmp_path):
    nodes = TwoNodes(model_dir, tmp_path)
    try:
        nodes.node0.proc.send_signal(signal.SIGKILL)
        assert nodes.worker.wait(timeout=30) == 1
        text = nodes.worker_text()
        assert "waiting for the next step" in text and "node 0" in text and "closed the connection" in text, text
    finally:
        nodes.kill()


def test_node_flags_are_checked(model_dir):
    def fails(args, env=None, timeout=60):
        r = subprocess.run([_bin(), "serve", str(model_dir), *args], capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, **(env or {})})
        assert r.returncode != 0, r.stderr
        return r.stderr

    assert "needs --dist-init-addr" in fails(["-tp", "2", "--nnodes", "2"])
    assert "outside 0..1" in fails(["-tp", "2", "--nnodes", "2", "--node-rank", "2", "--dist-init-addr", "h:1"])
    assert "HOST:PORT" in fails(["-tp", "2", "--nnodes", "2", "--dist-init-addr", "no-port"])
    assert "must equal --nnodes" in fails(["-tp", "4", "--nnodes", "2", "--dist-init-addr", "127.0.0.1:1"])
    # The node rank comes from mpirun's variable when --node-rank is not given; with no node 0 to reach, node 1
    # gives up after --dist-timeout, naming the address.
    address = f"127.0.0.1:{free_port()}"
    err = fails(["-tp", "2", "--nnodes", "2", "--dist-init-addr", address, "--dist-timeout", "1"],
                env={"OMPI_COMM_WORLD_RANK": "1"})
    assert "node 1 of 2 reaching node 0" in err and address in err, err
