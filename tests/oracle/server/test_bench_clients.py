"""The serving benchmarks' own tools against a real `pagoda serve` (tiny golden qwen3 model, CPU), so that a GPU call
never finds them broken: bench/gpu/offline_throughput.py (whole replies and --stream, which reports TTFT / TPOT, and
--model spread over several names) and bench/gpu/make_lora_adapters.py (random PEFT adapters the server must load, and
which must change its outputs; an adapter whose weights file is a link to another's gives that one's outputs).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

openai = pytest.importorskip("openai")

from test_openai_sdk import Server, golden_with_demo_tokenizer  # noqa: E402  (helpers shared with the SDK tests)

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "bench" / "gpu"
PROMPT = [3, 14, 15, 92, 65, 35, 89, 79, 323, 84, 626, 43]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    model = golden_with_demo_tokenizer(tmp_path_factory, "qwen3")
    adapters = tmp_path_factory.mktemp("adapters")
    made = subprocess.run([sys.executable, str(BENCH / "make_lora_adapters.py"), str(model), str(adapters), "--count",
                           "4", "--distinct", "2", "--rank", "8"], capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout.splitlines()[-1])["adapters"] == 4
    # a02 and a03 hold links to a00's and a01's weights: 2 files on disk for 4 adapters.
    assert (adapters / "a02" / "adapter_model.safetensors").is_symlink()
    modules = (adapters / "modules.txt").read_text().split()
    server = Server([str(model), "--enable-lora", "--max-loras", "2", "--max-lora-rank", "8", "--lora-modules",
                     *modules])
    yield server, str(model)
    server.stop()


def load(url, *args):
    r = subprocess.run([sys.executable, str(BENCH / "offline_throughput.py"), "--url", url, "--vocab", "1000", *args],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


def test_offline_throughput_counts_every_token(served):
    server, model = served
    whole = load(server.url, "--model", model, "-n", "6", "--input", "20", "--output", "8")
    assert (whole["finished"], whole["output_tokens"], whole["partial"]) == (6, 48, False)
    assert "ttft_ms_median" not in whole


def test_streamed_load_reports_latencies_over_several_names(served):
    server, model = served
    streamed = load(server.url, "--model", f"{model},a00,a01", "-n", "6", "--input", "20", "--output", "8", "--stream")
    assert (streamed["finished"], streamed["output_tokens"]) == (6, 48)
    for key in ("ttft_ms_median", "ttft_ms_p90", "tpot_ms_median", "tpot_ms_p90", "gap_ms_max"):
        assert streamed[key] is not None and streamed[key] >= 0, key
    assert streamed["ttft_ms_p90"] >= streamed["ttft_ms_median"]
    # The longest wait between two tokens is at least a request's mean one (TPOT: its 7 gaps' mean).
    assert streamed["gap_ms_max"] >= streamed["tpot_ms_median"]


def prompt_logprobs(server, name):
    r = server.client().completions.create(model=name, prompt=PROMPT, max_tokens=1, temperature=0, echo=True,
                                           logprobs=0)
    return r.choices[0].logprobs.token_logprobs[1:len(PROMPT)]


def test_generated_adapters_load_and_move_the_outputs(served):
    server, model = served
    base, a00, a01, a02 = (prompt_logprobs(server, n) for n in (model, "a00", "a01", "a02"))
    assert a00 != base and a01 != base and a00 != a01
    assert a02 == a00  # the same weights file, another adapter
