"""Fixtures for the tokenizer oracle tests: tokenizer folders built from the real Qwen files (and
variants of them), each paired with the Hugging Face `tokenizers` object that is its oracle."""
import copy
import gzip
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

tokenizers = pytest.importorskip("tokenizers", reason="HF tokenizers (the oracle) is not installed in this Python")

# Added tokens with every flag HF honours, for the "flags" variant (ids after Qwen3's last one).
FLAG_TOKENS = [
    {"content": "<mask>", "lstrip": True, "rstrip": False, "single_word": False, "normalized": False, "special": True},
    {"content": "[END]", "lstrip": False, "rstrip": True, "single_word": False, "normalized": False, "special": True},
    {"content": "wordy", "lstrip": False, "rstrip": False, "single_word": True, "normalized": False, "special": False},
    {"content": "cafe\u0301!", "lstrip": False, "rstrip": False, "single_word": False, "normalized": True,
     "special": False},
    {"content": "<both>", "lstrip": True, "rstrip": True, "single_word": False, "normalized": True, "special": False},
    {"content": " spaced ", "lstrip": False, "rstrip": False, "single_word": False, "normalized": False,
     "special": False},
    {"content": "\u0120hello", "lstrip": False, "rstrip": False, "single_word": False, "normalized": False,
     "special": True},
]


class Variant:
    def __init__(self, name, model_dir, oracle_json):
        self.name = name
        self.model_dir = model_dir
        self.oracle_json = oracle_json
        self._oracle = None

    @property
    def oracle(self):
        if self._oracle is None:
            self._oracle = tokenizers.Tokenizer.from_file(str(self.oracle_json))
        return self._oracle


def _qwen35_tokenizer_json(shared, cache_dir):
    """The real Qwen3.5 tokenizer.json when one can be had: $PAGODA_QWEN35_TOKENIZER, shared data, or a
    copy cached in the build folder. None otherwise (the tests that need it skip, saying why)."""
    candidates = [os.environ.get("PAGODA_QWEN35_TOKENIZER", ""),
                  str(shared / "qwen-tokenizers" / "qwen3.5-4b" / "tokenizer.json.gz"),
                  str(shared / "qwen-tokenizers" / "qwen3.5-4b" / "tokenizer.json"),
                  str(cache_dir / "qwen3_5-tokenizer.json.gz")]
    for c in candidates:
        if c and os.path.exists(c):
            return pathlib.Path(c)
    return None


def _write_json(path, data):
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


@pytest.fixture(scope="session")
def variants(tmp_path_factory, shared_dir):
    src = shared_dir / "qwen-tokenizers"
    if not (src / "qwen3-4b" / "tokenizer.json.gz").exists():
        pytest.skip(f"Qwen tokenizer files not found under {src} (set PAGODA_SHARED_DIR)")
    root = tmp_path_factory.mktemp("tokenizers")
    out = {}
    for name, folder in [("qwen2.5", "qwen2.5-1.5b-instruct"), ("qwen3", "qwen3-4b")]:
        json_dir = root / f"{name}-json"
        json_dir.mkdir()
        with gzip.open(src / folder / "tokenizer.json.gz", "rb") as f:
            (json_dir / "tokenizer.json").write_bytes(f.read())
        out[f"{name}-json"] = Variant(f"{name}-json", json_dir, json_dir / "tokenizer.json")
        files_dir = root / f"{name}-files"
        files_dir.mkdir()
        for f in ("vocab.json", "merges.txt", "tokenizer_config.json"):
            shutil.copy(src / folder / f, files_dir / f)
        out[f"{name}-files"] = Variant(f"{name}-files", files_dir, json_dir / "tokenizer.json")

    base = json.loads((root / "qwen3-json" / "tokenizer.json").read_text(encoding="utf-8"))

    # Merges written as "a b" strings instead of pairs.
    d = copy.deepcopy(base)
    d["model"]["merges"] = [" ".join(m) for m in d["model"]["merges"]]
    (root / "qwen3-merge-strings").mkdir()
    _write_json(root / "qwen3-merge-strings" / "tokenizer.json", d)
    out["qwen3-merge-strings"] = Variant("qwen3-merge-strings", root / "qwen3-merge-strings",
                                         root / "qwen3-merge-strings" / "tokenizer.json")

    # BPE with ignore_merges (a word that is itself a token skips the merges), as some newer files set.
    d = copy.deepcopy(base)
    d["model"]["ignore_merges"] = True
    (root / "qwen3-ignore-merges").mkdir()
    _write_json(root / "qwen3-ignore-merges" / "tokenizer.json", d)
    out["qwen3-ignore-merges"] = Variant("qwen3-ignore-merges", root / "qwen3-ignore-merges",
                                         root / "qwen3-ignore-merges" / "tokenizer.json")

    # The Qwen3.5 pre-tokenizer (\p{M} with letters) on the Qwen3 vocabulary.
    cfg35 = json.loads((src / "qwen3.5-4b" / "tokenizer_config.json").read_text(encoding="utf-8"))
    d = copy.deepcopy(base)
    d["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = cfg35["pretokenize_regex"]
    (root / "qwen35-pattern").mkdir()
    _write_json(root / "qwen35-pattern" / "tokenizer.json", d)
    out["qwen35-pattern"] = Variant("qwen35-pattern", root / "qwen35-pattern", root / "qwen35-pattern" / "tokenizer.json")

    # Added tokens with lstrip / rstrip / single_word / normalized flags.
    d = copy.deepcopy(base)
    next_id = max(t["id"] for t in d["added_tokens"]) + 1
    for i, t in enumerate(FLAG_TOKENS):
        d["added_tokens"].append(dict(t, id=next_id + i))
    (root / "flags").mkdir()
    _write_json(root / "flags" / "tokenizer.json", d)
    out["flags"] = Variant("flags", root / "flags", root / "flags" / "tokenizer.json")

    cache = pathlib.Path(os.environ.get("PAGODA_BUILD_DIR", str(root)))
    q35 = _qwen35_tokenizer_json(shared_dir, cache)
    if q35 is not None:
        (root / "qwen3.5-json").mkdir()
        data = gzip.open(q35, "rb").read() if q35.suffix == ".gz" else q35.read_bytes()
        (root / "qwen3.5-json" / "tokenizer.json").write_bytes(data)
        out["qwen3.5-json"] = Variant("qwen3.5-json", root / "qwen3.5-json", root / "qwen3.5-json" / "tokenizer.json")
    return out


def run_jsonl(pagoda_bin, command, model_dir, lines, extra=()):
    """Runs `pagoda <command> --jsonl -` once over all `lines` (JSON values) and returns the parsed output lines."""
    payload = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines).encode("utf-8")
    proc = subprocess.run([str(pagoda_bin), command, "--model", str(model_dir), "--jsonl", "-", *extra],
                          input=payload, capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")
    out = [json.loads(l) for l in proc.stdout.decode("utf-8").split("\n") if l]
    assert len(out) == len(lines)
    return out
