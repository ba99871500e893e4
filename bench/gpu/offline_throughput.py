#!/usr/bin/env python3
"""Offline throughput through `pagoda serve`: N requests of IN random prompt tokens and OUT generated tokens each
(ignore_eos, greedy), all submitted at once; prints output tokens per second. Standard library only, so it runs on
the GPU machine as it is.

  python3 bench/gpu/offline_throughput.py --url http://127.0.0.1:8011 --model NAME [-n 256 --input 1000 --output 1000]
      [--deadline SECONDS] [--shared-prefix N] [--save FILE]

With --deadline it reports what finished by then (marked "partial") instead of waiting for every request.
--model takes a comma-separated list too: request i names the (i mod n)-th (LoRA adapters spread over a load).
--stream asks for server-sent events and adds each request's time to first token (TTFT) and time per output token
after the first (TPOT: (last token - first token) / (tokens - 1)), medians and 90th percentiles over the finished
requests, in ms: the serving figures vLLM's benchmark reports; and the longest gap between two tokens of any request. Any OpenAI-compatible server that takes a prompt of
token ids and `ignore_eos` works (pagoda serve, llama-server).
--shared-prefix N starts every prompt with the same N tokens (prefix-cache hits); --seed S draws other prompts (0 by
default); --save FILE asks for logprobs and
writes each completion's tokens, their logprobs and the top-2 logprobs of each position, in request order, as a JSON
list (compare_completions.py compares two runs of the same prompts).
"""
import argparse
import json
import os
import random
import statistics
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed, TimeoutError as FuturesTimeout


def post(url, request):
    req = urllib.request.Request(url + "/v1/completions", json.dumps(request).encode(),
                                 {"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=3600)


def one(url, model, prompt, output, logprobs):
    request = {"model": model, "prompt": prompt, "max_tokens": output, "temperature": 0, "ignore_eos": True}
    if logprobs:
        request["logprobs"] = 2  # the chosen token's logprob and the runner-up's: the margin of each greedy choice
    with post(url, request) as r:
        reply = json.loads(r.read())
        return reply["usage"]["completion_tokens"], reply["choices"][0]


def one_streamed(url, model, prompt, output):
    """(completion tokens, TTFT s, TPOT s or None, longest gap between two text events s or None) of one streamed
    request. Tokens are the usage the last event reports when the server sends it (stream_options.include_usage), else
    the events that carry text."""
    request = {"model": model, "prompt": prompt, "max_tokens": output, "temperature": 0, "ignore_eos": True,
               "stream": True, "stream_options": {"include_usage": True}}
    start = time.time()
    first = last = gap = None
    events = usage = 0
    with post(url, request) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            event = json.loads(line[5:])
            if event.get("usage"):
                usage = event["usage"].get("completion_tokens", 0)
            if any(c.get("text") for c in event.get("choices") or []):
                now = time.time()
                if last is not None:
                    gap = max(gap or 0.0, now - last)
                last = now
                first = first or last
                events += 1
    tokens = usage or events
    if first is None:
        return tokens, None, None, None
    return tokens, first - start, (last - first) / (tokens - 1) if tokens > 1 else None, gap


def percentiles(values):
    """Median and 90th percentile of `values` in ms (None when empty)."""
    values = sorted(v * 1e3 for v in values if v is not None)
    if not values:
        return None, None
    return round(statistics.median(values), 1), round(values[min(len(values) - 1, int(0.9 * len(values)))], 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--model", required=True)
    ap.add_argument("-n", type=int, default=256)
    ap.add_argument("--input", type=int, default=1000)
    ap.add_argument("--output", type=int, default=1000)
    ap.add_argument("--vocab", type=int, default=151643)
    ap.add_argument("--deadline", type=float, default=None)
    ap.add_argument("--shared-prefix", type=int, default=0)
    ap.add_argument("--save", default=None)
    ap.add_argument("--stream", action="store_true")
    ap.add_argument("--seed", type=int, default=0, help="the prompts' random seed (a warm-up run takes another: no "
                    "prefix-cache hits for the measured one)")
    a = ap.parse_args()
    if a.stream and a.save:
        ap.error("--save takes logprobs from whole replies: not with --stream")
    rng = random.Random(a.seed)
    prefix = [rng.randrange(a.vocab) for _ in range(min(a.shared_prefix, a.input))]
    prompts = [prefix + [rng.randrange(a.vocab) for _ in range(a.input - len(prefix))] for _ in range(a.n)]
    t = time.time()
    pool = ThreadPoolExecutor(a.n)
    models = a.model.split(",")
    if a.stream:
        futures = [pool.submit(one_streamed, a.url, models[i % len(models)], p, a.output)
                   for i, p in enumerate(prompts)]
    else:
        futures = [pool.submit(one, a.url, models[i % len(models)], p, a.output, a.save is not None)
                   for i, p in enumerate(prompts)]
    tokens, done, partial = 0, 0, False
    ttft, tpot, gaps = [], [], []
    try:
        for f in as_completed(futures, timeout=a.deadline):
            result = f.result()
            tokens += result[0]
            done += 1
            if a.stream:
                ttft.append(result[1])
                tpot.append(result[2])
                gaps.append(result[3])
    except FuturesTimeout:
        partial = True
    if a.save and not partial:
        with open(a.save, "w") as out:
            json.dump([{"tokens": c["logprobs"]["tokens"], "logprobs": c["logprobs"]["token_logprobs"],
                        "top": [sorted(t.values(), reverse=True) for t in c["logprobs"]["top_logprobs"]]}
                       for c in (f.result()[1] for f in futures)], out)
    dt = time.time() - t
    report = {"requests": a.n, "finished": done, "partial": partial, "input": a.input, "output": a.output,
              "output_tokens": tokens, "seconds": round(dt, 1), "output_tok_s": round(tokens / dt, 1),
              "total_tok_s": round((tokens + done * a.input) / dt, 1)}
    if a.stream:
        report["ttft_ms_median"], report["ttft_ms_p90"] = percentiles(ttft)
        report["tpot_ms_median"], report["tpot_ms_p90"] = percentiles(tpot)
        # The longest wait between two tokens of any request: what a step that stopped for something else costs.
        longest = [g for g in gaps if g is not None]
        report["gap_ms_max"] = round(max(longest) * 1e3, 1) if longest else None
    print(json.dumps(report), flush=True)
    if partial:
        os._exit(0)  # the unfinished requests' threads would keep the process alive

if __name__ == "__main__":
    main()
