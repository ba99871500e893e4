"""Issue 20's structured-output cost: N concurrent chat completions of TOKENS tokens against a running
`pagoda serve`, without and with a JSON-schema response_format ({"type": "string"}: a random-weight model seldom
closes it, so nearly every step is constrained), alternated after a warm-up. Prints wall time, tokens/s and the
finish reasons of each round, and one constrained answer.

    python3 bench/gpu/structured_decode.py PORT [N=64] [TOKENS=128]

On an H200 (2026-12-04, random Qwen3-8B with Qwen3-4B's tokenizer and template) the constrained rounds ended after
less than one token per request on average (44 and 549 tokens for 64 requests) while unconstrained ones ran to 128;
the same kind of request on the CPU runs to max_tokens. The finish reasons printed here are for finding out why.
"""
import collections
import json
import sys
import threading
import time
import urllib.request

PORT = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 64
TOKENS = int(sys.argv[3]) if len(sys.argv) > 3 else 128
SCHEMA = {"type": "string"}


def one(constrained, out, i):
    body = {"model": "m", "messages": [{"role": "user", "content": f"Say something, number {i}."}],
            "max_tokens": TOKENS, "temperature": 1.0, "seed": i, "ignore_eos": True}
    if constrained:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "s", "schema": SCHEMA}}
    req = urllib.request.Request(f"http://127.0.0.1:{PORT}/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        out[i] = json.load(urllib.request.urlopen(req, timeout=300))
    except Exception as e:  # noqa: BLE001 - reported, not raised: one failure must not hide the others
        out[i] = {"error": repr(e)[:200]}


def run(constrained):
    out = [None] * N
    threads = [threading.Thread(target=one, args=(constrained, out, i)) for i in range(N)]
    t = time.time()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    dt = time.time() - t
    tokens = sum(o.get("usage", {}).get("completion_tokens", 0) for o in out)
    reasons = collections.Counter(o["choices"][0]["finish_reason"] if "choices" in o else "error" for o in out)
    print(f"constrained={constrained}: {dt:.2f} s, {tokens} tokens, {tokens / dt:.0f} tok/s, {dict(reasons)}",
          flush=True)
    return out


run(False)  # warm-up
for _ in range(2):
    run(False)
    answers = run(True)
print("a constrained answer:", json.dumps(answers[0])[:600])
