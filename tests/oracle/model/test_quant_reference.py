"""bench/gpu/quant_reference.py and bench/gpu/compare_quantized.py (issue 18's real-shape check of quantized models on
the GPU machine) on the tiny golden qwen3, on the CPU: pagoda's logits of an AWQ copy (make_awq_checkpoint.py) and of
`--quantization fp8` (also with `--fp8-activations`: W8A8) must pass against transformers' run of the same quantized
weights, with the same KL cost against the bf16 model as transformers', and must fail against another variant's
reference (the check can fail).
"""
import json
import pathlib
import shutil
import subprocess
import sys

import pytest

np = pytest.importorskip("numpy")
# torch is not in the test environment (as test_make_awq_checkpoint.py says): this runs where torch is; CI skips it.
torch = pytest.importorskip("torch", reason="torch is not installed")
transformers = pytest.importorskip("transformers")

ROOT = pathlib.Path(__file__).resolve().parents[3]
GPU = ROOT / "bench" / "gpu"
GOLDEN = ROOT / "tests" / "golden"


def run(*args):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.stderr[-500:]


@pytest.fixture(scope="module")
def model(tmp_path_factory, pagoda_bin):
    """qwen3 with what hf_qwen3_8b.py leaves beside a checkpoint: reference_ids.txt, the fp32 and bf16 logits of the
    last 8 positions."""
    src = GOLDEN / "qwen3"
    if not (src / "model.safetensors").exists():
        pytest.skip("no golden qwen3")
    d = tmp_path_factory.mktemp("quant") / "qwen3"
    shutil.copytree(src, d)
    ids = json.loads((d / "reference.json").read_text())["ids"]
    (d / "reference_ids.txt").write_text(" ".join(map(str, ids)))
    for dtype, name in ((torch.float32, "reference_logits.npy"), (torch.bfloat16, "reference_logits_bf16.npy")):
        m = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=dtype).eval()
        with torch.no_grad():
            logits = m(torch.tensor([ids]), use_cache=False, logits_to_keep=8).logits[0].float().numpy()
        np.save(d / name, logits)
    return d


def pagoda_logits(pagoda_bin, model_dir, ids, out, *extra):
    p = subprocess.run([str(pagoda_bin), "logits", "--model", str(model_dir), "--json", "--last", "8", "--ids", ids,
                        "--threads", "2", *extra], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out.write_text(p.stdout)
    return out


def test_awq_and_fp8_pass_against_their_own_reference_only(model, pagoda_bin, tmp_path):
    awq = tmp_path / "qwen3-awq"
    code, line = run(sys.executable, GPU / "make_awq_checkpoint.py", model, awq, "--group", "32", "--device", "cpu")
    assert code == 0, line
    refs = {}
    for variant, args in (("awq", ["--awq", awq]), ("fp8", ["--fp8-channel"]),
                          ("w8a8", ["--fp8-channel", "--fp8-activations"])):
        refs[variant] = tmp_path / f"{variant}_ref.npy"
        code, line = run(sys.executable, GPU / "quant_reference.py", model, refs[variant], *args, "--device", "cpu")
        assert code == 0, line
        assert json.loads(line)["replaced"] == 21  # 3 layers x 7 projections
    ids = (model / "reference_ids.txt").read_text()
    got = {"awq": pagoda_logits(pagoda_bin, awq, ids, tmp_path / "awq.json"),
           "fp8": pagoda_logits(pagoda_bin, model, ids, tmp_path / "fp8.json", "--quantization", "fp8"),
           "w8a8": pagoda_logits(pagoda_bin, model, ids, tmp_path / "w8a8.json", "--quantization", "fp8",
                                 "--fp8-activations")}
    # Each against its own reference passes and against another's fails (W8A8 against weight-only fp8 too: rounding
    # the inputs moves the logits past the limit).
    for variant, other in (("awq", "fp8"), ("fp8", "awq"), ("w8a8", "fp8")):
        code, line = run(sys.executable, GPU / "compare_quantized.py", model / "reference_logits.npy", refs[variant],
                         got[variant], model / "reference_logits_bf16.npy")
        result = json.loads(line)
        assert code == 0 and result["ok"], line
        assert result["vs_quantized_reference"]["max_rel_err"] < 1e-4, line  # CPU f32 against torch f32
        ours, theirs = result["cost_vs_bf16"]["pagoda"], result["cost_vs_bf16"]["transformers"]
        assert ours["kl_mean"] > 0 and ours["kl_mean"] == pytest.approx(theirs["kl_mean"], rel=1e-3), line
        code, line = run(sys.executable, GPU / "compare_quantized.py", model / "reference_logits.npy", refs[other],
                         got[variant])
        assert code == 1 and not json.loads(line)["ok"], line


def test_the_quantized_models_own_bf16_run_sets_the_bound(model, pagoda_bin, tmp_path):
    """quant_reference.py --dtype bf16 (transformers' bf16 run of the quantized model) given to compare_quantized.py
    sets the bound from its own deviation, not from the bf16 model's: W8A8's input rounding moves bf16 logits by more."""
    ref, ref_bf16 = tmp_path / "w8a8_ref.npy", tmp_path / "w8a8_ref_bf16.npy"
    for out, dtype in ((ref, "fp32"), (ref_bf16, "bf16")):
        code, line = run(sys.executable, GPU / "quant_reference.py", model, out, "--fp8-channel", "--fp8-activations",
                         "--dtype", dtype, "--device", "cpu")
        assert code == 0 and json.loads(line)["dtype"] == dtype, line
    want, bf16 = np.load(ref), np.load(ref_bf16)
    deviation = float((np.abs(bf16 - want).max(axis=1) / np.abs(want).max(axis=1)).max())
    assert deviation > 0  # the bf16 run is a different computation
    ids = (model / "reference_ids.txt").read_text()
    got = pagoda_logits(pagoda_bin, model, ids, tmp_path / "w8a8.json", "--quantization", "fp8", "--fp8-activations")
    code, line = run(sys.executable, GPU / "compare_quantized.py", model / "reference_logits.npy", ref, got,
                     model / "reference_logits_bf16.npy", ref_bf16)
    result = json.loads(line)
    exact = result["vs_quantized_reference"]
    assert code == 0 and result["ok"], line
    assert exact["hf_bf16_max_rel_err"] == pytest.approx(deviation, rel=1e-5), line
    assert exact["limit"] == pytest.approx(max(2e-2, 1.5 * deviation), rel=1e-5), line
