#!/usr/bin/env python3
"""The bound issue 17 holds an offline run to: what N requests of IN prompt tokens and OUT output tokens must move at
least, at the copy bandwidth and GEMM peak pagoda_cuda_bench measured on the same GPU, against the seconds the run took.

  python3 bench/gpu/offline_bound.py --config MODEL/config.json --bench pagoda_bench.log --run throughput.log \
      --steps STEPS [--kv-dtype bf16|fp8]

--bench is pagoda_cuda_bench's JSON line (copy_gbps, gemm_tflops, weight_mb_per_token, prefill_tokens, prefill_ms,
prefill_tflops), --run offline_throughput.py's (requests, input, output, seconds), --steps the server's
pagoda:engine_steps_total after the run. The run must move at least:
  - the KV cache: every output token after the first (the prefill makes the first) reads its context's K and V rows,
    (OUT - 1) * IN + (OUT - 1) * OUT / 2 rows a request, 2 * attention layers * KV heads * head_dim values a row;
  - the weights, once a step (a step's sequences share them);
  - the prompts' FLOPs, pagoda_cuda_bench's prefill FLOPs per token times N * IN, at the GEMM peak.
Hybrid models' linear-attention layers hold a fixed state instead of KV rows; it is left out (the bound is then lower
than what the run must move). Standard library only, so it runs on the GPU machine as it is.
"""
import argparse
import json


def last_json(path):
    with open(path) as f:
        lines = [line for line in f.read().splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit(f"{path}: no JSON line")
    return json.loads(lines[-1])


def kv_bytes_per_token(config, kv_dtype):
    text = config.get("text_config", config)  # Qwen3.5 nests the language model's settings
    layers = text["num_hidden_layers"]
    types = text.get("layer_types")
    attention_layers = sum(1 for t in types if t == "full_attention") if types else layers
    head_dim = text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"]
    kv_heads = text.get("num_key_value_heads", text["num_attention_heads"])
    return 2 * attention_layers * kv_heads * head_dim * (1 if kv_dtype == "fp8" else 2)


def bound(config, bench, run, steps, kv_dtype):
    n, prompt, output = run["requests"], run["input"], run["output"]
    bandwidth = bench["copy_gbps"] * 1e9  # bytes/s
    rows = n * ((output - 1) * prompt + (output - 1) * output / 2)
    kv_s = rows * kv_bytes_per_token(config, kv_dtype) / bandwidth
    weights_s = steps * bench["weight_mb_per_token"] * 1e6 / bandwidth
    flops_per_token = bench["prefill_tflops"] * 1e12 * bench["prefill_ms"] * 1e-3 / bench["prefill_tokens"]
    prefill_s = n * prompt * flops_per_token / (bench["gemm_tflops"] * 1e12)
    total = kv_s + weights_s + prefill_s
    return {"kv_s": round(kv_s, 2), "weights_s": round(weights_s, 2), "prefill_s": round(prefill_s, 2),
            "bound_s": round(total, 2), "bound_output_tok_s": round(n * output / total, 1),
            "seconds": run["seconds"], "fraction": round(total / run["seconds"], 3)}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True)
    p.add_argument("--bench", required=True)
    p.add_argument("--run", required=True)
    p.add_argument("--steps", type=float, required=True)
    p.add_argument("--kv-dtype", choices=["bf16", "fp8"], default="bf16")
    a = p.parse_args()
    with open(a.config) as f:
        config = json.load(f)
    print(json.dumps(bound(config, last_json(a.bench), last_json(a.run), a.steps, a.kv_dtype)))


if __name__ == "__main__":
    main()
