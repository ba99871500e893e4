"""Issue 20's structured-output cost: N concurrent chat completions of TOKENS tokens against a running
`pagoda serve`, without and with a JSON-schema response_format, alternated after a warm-up. Prints wall time,
tokens/s and the finish reasons of each round, and one constrained answer.

    python3 bench/gpu/structured_decode.py PORT [N=64] [TOKENS=128] [ROUNDS=2]

The schema is a string of lowercase words: a random-weight model draws among the tens of thousands of such tokens and
seldom closes the string, so nearly every step is constrained. ({"type": "string"} closes within a few tokens: most
tokens may follow an opening quote and many end in one. Random checkpoints made by transformers name no EOS token, and
before the fix of 2026-12-04 such a finished grammar left no token to draw: the CPU server aborted, the CUDA step failed
for every sequence in it.)
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
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 2
SCHEMA = {"type": "string", "pattern": "^[a-z ]*$"}


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
for _ in range(ROUNDS):
    run(False)
    answers = run(True)
print("a constrained answer:", json.dumps(answers[0])[:600])
