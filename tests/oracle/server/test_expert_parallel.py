"""--enable-expert-parallel through `pagoda serve`, checked with the official `openai` SDK.

The tiny golden qwen3_moe (8 experts; the demo model's tokenizer beside it: the prompts are token ids) served on two
CPU ranks that each hold 4 whole experts must give the prompt logprobs of the same model on one rank; the start-up
log says where the experts went.
"""

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("openai")

from test_openai_sdk import Server, golden_with_demo_tokenizer  # noqa: E402  (helpers shared with the SDK tests)

GOLDEN = Path(__file__).resolve().parents[3] / "tests" / "golden"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    if not (GOLDEN / "qwen3_moe" / "config.json").exists():
        pytest.skip("no golden data")
    return golden_with_demo_tokenizer(tmp_path_factory, "qwen3_moe")


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
