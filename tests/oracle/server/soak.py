"""`make soak`: SOAK_SECONDS (default 1800) of mixed load against a running `pagoda serve`, then a check that the
server came back to where it started. Not part of `make test` (pytest collects only test_*.py files).

The server runs the tiny golden qwen3 checkpoint with the byte-level tokenizer (the same directories as the reload
tests) on the CPU. Load, from SOAK_CLIENTS (default 32) concurrent clients of the official openai SDK: streamed and
non-streamed completions, streams the client drops after a few chunks (a disconnect mid-stream), and bad requests
(invalid JSON, an unknown model, a negative max_tokens), plus a model reload every SOAK_RELOAD_SECONDS (default 180)
alternating between two checkpoints. SOAK_SERVE_ARGS adds flags to the server's (e.g. --async-scheduling). Every answer is checked: a good request must succeed, a bad one must get a 4xx;
a 5xx or a failed good request is counted as an error.

Baseline: the server's RSS and open file descriptors after a warm-up round, at rest; KV blocks in use and the engine's
queues from /metrics. At the end the load stops and the server is left 10 s to settle, then the bounds are:
open fds equal to the baseline, no KV block in use, nothing running or waiting, and RSS at most the baseline plus
64 MiB (glibc keeps freed pages of the models a reload dropped; a leak per request grows past that within minutes).
Prints one JSON summary; exits 1 when a bound or an answer failed."""

import asyncio
import json
import os
import random
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import openai  # noqa: E402

from reload_helpers import GOLDEN_DIR, reload, start_server  # noqa: E402
from test_multinode import served_golden_model  # noqa: E402

RSS_BOUND_BYTES = 64 << 20


class TmpDirs:
    """tmp_path_factory's one method, for the helpers shared with the pytest tests."""

    def __init__(self, root):
        self.root = Path(root)

    def mktemp(self, name):
        return Path(tempfile.mkdtemp(prefix=name, dir=self.root))


def process_usage(pid):
    """(RSS bytes, open fds) of the server process."""
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) * 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def metrics(url):
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("pagoda:"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def engine_state(url):
    """KV blocks in use (as a fraction), requests running and waiting, 5xx answers so far."""
    m = metrics(url)

    def first(prefix):
        return next((v for k, v in m.items() if k.startswith(prefix)), 0.0)

    return {"kv_usage": first("pagoda:kv_cache_usage_perc{"), "running": first("pagoda:num_requests_running{"),
            "waiting": first("pagoda:num_requests_waiting{"),
            "http_5xx": sum(v for k, v in m.items() if k.startswith("pagoda:http_responses_total") and 'code="5xx"' in k)}


def post_raw(url, body, content_type="application/json"):
    req = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code


async def client_loop(url, deadline, counts, errors, seed):
    rng = random.Random(seed)
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=120)
    while time.time() < deadline:
        kind = rng.choices(["stream", "plain", "disconnect", "bad"], weights=[4, 3, 2, 1])[0]
        prompt = f"soak {rng.randrange(1000)}: " + "ab" * rng.randrange(1, 40)
        max_tokens = rng.randrange(1, 64)
        try:
            if kind == "stream":
                stream = await client.completions.create(model="", prompt=prompt, max_tokens=max_tokens, stream=True)
                finish = None
                async for chunk in stream:
                    for c in chunk.choices:
                        finish = c.finish_reason or finish
                if finish is None:
                    errors.append("a stream ended without a finish_reason")
            elif kind == "plain":
                r = await client.completions.create(model="", prompt=prompt, max_tokens=max_tokens)
                if not r.choices[0].finish_reason:
                    errors.append("a completion without a finish_reason")
            elif kind == "disconnect":
                stream = await client.completions.create(model="", prompt=prompt, max_tokens=200, stream=True,
                                                         extra_body={"ignore_eos": True})
                n = 0
                async for _ in stream:
                    n += 1
                    if n == 3:
                        break
                await stream.close()  # the connection goes: the server cancels the request
            else:
                bad = rng.choice([(b"{not json", "application/json"),
                                  (json.dumps({"model": "no-such-model", "prompt": "x"}).encode(), "application/json"),
                                  (json.dumps({"prompt": "x", "max_tokens": -5}).encode(), "application/json")])
                status = await asyncio.to_thread(post_raw, url, *bad)
                if not 400 <= status < 500:
                    errors.append(f"a bad request got {status}")
            counts[kind] = counts.get(kind, 0) + 1
        except Exception as e:  # noqa: BLE001  (every failure is counted and reported)
            errors.append(f"{kind}: {e!r}")
    await client.close()


def main():
    seconds = float(os.environ.get("SOAK_SECONDS", "1800"))
    clients = int(os.environ.get("SOAK_CLIENTS", "32"))
    reload_every = float(os.environ.get("SOAK_RELOAD_SECONDS", "180"))
    with tempfile.TemporaryDirectory(prefix="pagoda-soak-") as root:
        tmp = TmpDirs(root)
        models = [served_golden_model(GOLDEN_DIR / "qwen3", tmp), served_golden_model(GOLDEN_DIR / "qwen3_moe", tmp)]
        # SOAK_SERVE_ARGS: more flags for the server (e.g. --async-scheduling).
        extra = os.environ.get("SOAK_SERVE_ARGS", "").split()
        server = start_server(models[0], Path(root), "--max-num-seqs", "32", *extra, name="soak")
        pid = server.proc.pid
        try:
            # Warm-up: one round of every kind, then rest.
            counts, errors = {}, []
            asyncio.run(client_loop(server.url, time.time() + 5, counts, errors, seed=0))
            time.sleep(5)
            base_rss, base_fds = process_usage(pid)
            base = engine_state(server.url)

            reloads = []
            done = threading.Event()

            def reloader():
                k = 1
                while not done.wait(reload_every):
                    status, body = reload(server, models[k % 2], "soak")
                    reloads.append(status)
                    if status != 200:
                        errors.append(f"reload: {status} {body}")
                    k += 1

            t = threading.Thread(target=reloader)
            t.start()
            start = time.time()
            deadline = start + seconds

            async def load():
                await asyncio.gather(*(client_loop(server.url, deadline, counts, errors, seed=i + 1)
                                       for i in range(clients)))

            peak = [base_rss]
            series = []  # (seconds into the load, RSS MiB) every 30 s: a plateau or a slope

            def sample():
                while not done.wait(1.0):
                    rss = process_usage(pid)[0]
                    peak[0] = max(peak[0], rss)
                    elapsed = time.time() - start
                    if not series or elapsed - series[-1][0] >= 30:
                        series.append((round(elapsed), round(rss / 2**20, 1)))

            sampler = threading.Thread(target=sample)
            sampler.start()
            asyncio.run(load())
            done.set()
            t.join()
            sampler.join()
            time.sleep(10)  # let cancelled requests and the last reload's drain settle
            end_rss, end_fds = process_usage(pid)
            end = engine_state(server.url)
        finally:
            rc = server.stop()

    checks = {
        "open fds back to the baseline": end_fds == base_fds,
        "no KV block in use": end["kv_usage"] == 0.0,
        "nothing running or waiting": end["running"] == 0 and end["waiting"] == 0,
        "RSS within baseline + 64 MiB": end_rss <= base_rss + RSS_BOUND_BYTES,
        "no 5xx answer": end["http_5xx"] == base["http_5xx"],
        "every answer as expected": not errors,
        "clean exit": rc == 0,
    }
    summary = {
        "seconds": seconds, "clients": clients, "requests": counts, "reloads": reloads,
        "rss_mib": {"baseline": round(base_rss / 2**20, 1), "peak": round(peak[0] / 2**20, 1),
                    "end": round(end_rss / 2**20, 1), "during_load": series},
        "fds": {"baseline": base_fds, "end": end_fds},
        "engine_at_end": end, "errors": errors[:20], "error_count": len(errors), "checks": checks,
    }
    print(json.dumps(summary, indent=2))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
