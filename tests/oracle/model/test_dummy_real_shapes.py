"""`--load-format dummy` at real size: the configs transformers writes for the Qwen3-30B-A3B and Qwen3.5-35B-A3B
shapes (bench/gpu/hf_qwen3_8b.py --config-only, the shapes the GPU benchmarks measure) load from config.json alone,
in about 1 GB of host memory whatever the model, and the CPU runs them to finite logits over the whole vocabulary."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("shape, layers, experts, vocab", [
    ("qwen3-30b-a3b", 48, 128, 151936),
    ("qwen3.5-35b-a3b", 40, 256, 248320),
])
def test_real_shape_runs_from_its_config_alone(pagoda_bin, tmp_path, shape, layers, experts, vocab):
    r = subprocess.run([sys.executable, str(ROOT / "bench/gpu/hf_qwen3_8b.py"), str(tmp_path), "--shape", shape,
                        "--config-only"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["num_hidden_layers"] == layers
    assert config.get("num_experts", config.get("num_local_experts")) == experts
    assert not list(tmp_path.glob("*.safetensors"))
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with open(out, "w") as o, open(err, "w") as e:
        p = subprocess.Popen([str(pagoda_bin), "logits", "--model", str(tmp_path), "--ids", "1 2 3", "--last", "1",
                              "--json", "--load-format", "dummy"], stdout=o, stderr=e)
        _, status, usage = os.wait4(p.pid, 0)  # this process's own peak memory
    stderr = err.read_text()
    assert os.waitstatus_to_exitcode(status) == 0, stderr
    logits = json.loads(out.read_text())["logits"]
    assert len(logits) == 1 and len(logits[0]) == vocab
    assert all(math.isfinite(x) for x in logits[0])
    assert len(set(logits[0])) > vocab // 2  # random weights, not a constant row
    line = next(x for x in stderr.splitlines() if "--load-format dummy: random bf16 weights" in x)
    assert int(line.split(" MiB")[0].rsplit(", ", 1)[1]) > 50_000, line  # tens of GB of weights ...
    assert usage.ru_maxrss < 3_000_000, f"{usage.ru_maxrss} KB"  # ... in under 3 GB of host memory
