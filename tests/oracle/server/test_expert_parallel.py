"""--enable-expert-parallel through `pagoda serve`, checked with the official `openai` SDK.

The tiny golden qwen3_moe (8 experts; the demo model's tokenizer beside it: the prompts are token ids) served on two
CPU ranks that each hold 4 whole experts must give the prompt logprobs of the same model on one rank; the start-up
log says where the experts went.
"""

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("openai")

from test_openai_sdk import Server, _bin  # noqa: E402  (the server helper shared with the SDK tests)

GOLDEN = Path(__file__).resolve().parents[3] / "tests" / "golden"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    if not (GOLDEN / "qwen3_moe" / "config.json").exists():
        pytest.skip("no golden data")
    demo = tmp_path_factory.mktemp("demo")
    r = subprocess.run([_bin(), "demo-model", str(demo)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    d = tmp_path_factory.mktemp("qwen3_moe")
    for f in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copy(GOLDEN / "qwen3_moe" / f, d / f)
    for f in ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"):
        if (demo / f).exists():
            shutil.copy(demo / f, d / f)
    return d


def prompt_logprobs(server):
    ids = json.loads((GOLDEN / "qwen3_moe" / "reference.json").read_text())["ids"][:40]
    out = server.client().completions.create(model="moe", prompt=ids, max_tokens=4, temperature=0, echo=True,
                                             logprobs=0)
    return np.array(out.choices[0].logprobs.token_logprobs[1:], dtype=np.float64), out.choices[0].text


def test_expert_parallel_ranks_give_the_one_rank_output(model_dir):
    outputs = []
    for flags in ([], ["-tp", "2", "--enable-expert-parallel"]):
        s = Server([str(model_dir), "--served-model-name", "moe", "--max-model-len", "128", *flags])
        try:
            outputs.append(prompt_logprobs(s))
        finally:
            assert s.stop() == 0
        if flags:  # the line that says where the experts went (logged after "serving"): the flag reached the ranks
            log = "".join(s.log) + s.proc.stderr.read()
            assert "experts: expert parallel, each of 2 ranks holds 4 of the 8 routed experts whole" in log, log
    (one, one_text), (two, two_text) = outputs
    assert np.abs(one - two).max() <= 1e-4 * max(1.0, np.abs(one).max()), (one, two)
    assert one_text == two_text
