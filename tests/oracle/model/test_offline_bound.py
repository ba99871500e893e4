"""bench/gpu/offline_bound.py against the arithmetic done by hand in docs/benchmarks.md (session 36: Qwen3-8B's shape on
an H100, 512 x (1,000 / 1,000) with the bf16 and the fp8 KV cache), and its reading of a hybrid model's config."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TOOL = ROOT / "bench" / "gpu" / "offline_bound.py"

QWEN3_8B = {"num_hidden_layers": 36, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 128}
# pagoda_cuda_bench's line from that run (the fields the bound reads, among others).
BENCH = {"copy_gbps": 2843, "gemm_tflops": 802, "weight_mb_per_token": 15136.2, "prefill_tokens": 2048,
         "prefill_ms": 77.6, "prefill_tflops": 382.5, "decode_tok_s": 125.0}


def bound(tmp_path, config, run, steps, kv_dtype):
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "bench.log").write_text("some log line\n" + json.dumps(BENCH) + "\n")
    (tmp_path / "run.log").write_text(json.dumps(run) + "\n")
    out = subprocess.run([sys.executable, str(TOOL), "--config", str(tmp_path / "config.json"), "--bench",
                          str(tmp_path / "bench.log"), "--run", str(tmp_path / "run.log"), "--steps", str(steps),
                          "--kv-dtype", kv_dtype], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_session_36_offline_runs(tmp_path):
    run = {"requests": 512, "input": 1000, "output": 1000, "seconds": 94.6, "output_tok_s": 5410.4}
    b = bound(tmp_path, QWEN3_8B, run, 3017, "bf16")
    # 512 x 1,498,500 rows x 147,456 bytes at 2,843 GB/s; 3,017 x 15.14 GB; 512,000 x 14.5 GFLOP at 802 TFLOP/s.
    assert abs(b["kv_s"] - 39.79) < 0.02 and abs(b["weights_s"] - 16.06) < 0.02 and abs(b["prefill_s"] - 9.25) < 0.02
    assert abs(b["bound_s"] - 65.1) < 0.05 and abs(b["fraction"] - 0.688) < 0.002
    run = dict(run, seconds=82.0)
    b = bound(tmp_path, QWEN3_8B, run, 2017, "fp8")  # e4m3: one byte a value
    assert abs(b["kv_s"] - 19.9) < 0.02 and abs(b["weights_s"] - 10.74) < 0.02
    assert abs(b["fraction"] - 0.486) < 0.002


def test_hybrid_layers_and_nested_text_config(tmp_path):
    # Qwen3.5 nests its settings in text_config; only full-attention layers keep KV rows (1 in 4 here).
    types = ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 8
    config = {"text_config": dict(QWEN3_8B, num_hidden_layers=32, layer_types=types, num_key_value_heads=4,
                                  head_dim=256)}
    run = {"requests": 1000, "input": 100000, "output": 2, "seconds": 1.0}
    b = bound(tmp_path, config, run, 0, "bf16")
    # The second output token reads the prompt's rows and the first output token's: (2-1)*IN + (2-1)*2/2 a request.
    rows = 1000 * (100000 + 1)
    expected = rows * 2 * 8 * 4 * 256 * 2 / 2843e9  # K and V, 8 attention layers, 4 KV heads, head_dim 256, bf16
    assert abs(b["kv_s"] - expected) <= 0.01, (b, expected)
    assert b["weights_s"] == 0
