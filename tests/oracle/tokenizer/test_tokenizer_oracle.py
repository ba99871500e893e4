"""Our tokenizer against Hugging Face `tokenizers` on the real Qwen vocabularies: ids must be identical
for every text of every corpus, and decoding (whole and streamed) must give HF's text."""
import random

import pytest

from conftest import FLAG_TOKENS, run_jsonl
from tokenizer_corpus import all_corpora, mixed

CORPORA = all_corpora()
ENCODE_VARIANTS = ["qwen3-json", "qwen3-files", "qwen2.5-json", "qwen2.5-files", "qwen3-merge-strings",
                   "qwen35-pattern", "qwen3-ignore-merges", "qwen3.5-json"]
SWEEP_VARIANTS = {"qwen3-json", "qwen35-pattern", "qwen3.5-json"}


def _variant(variants, name):
    if name not in variants:
        pytest.skip(f"{name}: the Qwen3.5 tokenizer.json is not available (no registry copy found; set "
                    "PAGODA_QWEN35_TOKENIZER to a tokenizer.json[.gz]); the \\p{M} pattern is covered by qwen35-pattern")
    return variants[name]


def _compare(texts, ours, theirs, label):
    bad = [(t, o, h) for t, o, h in zip(texts, ours, theirs) if o != h]
    msg = "\n".join(f"  text={t!r}\n   ours={o[:40]}\n     hf={h[:40]}" for t, o, h in bad[:5])
    assert not bad, f"{label}: {len(bad)} of {len(texts)} differ\n{msg}"


@pytest.mark.parametrize("corpus", sorted(CORPORA))
@pytest.mark.parametrize("name", ENCODE_VARIANTS)
def test_encode_matches_hf(pagoda_bin, variants, name, corpus):
    if corpus == "sweep" and name not in SWEEP_VARIANTS:
        pytest.skip("the code point sweep runs on one tokenizer per pre-tokenizer pattern")
    v = _variant(variants, name)
    texts = CORPORA[corpus]
    theirs = [e.ids for e in v.oracle.encode_batch(texts, add_special_tokens=True)]
    ours = run_jsonl(pagoda_bin, "tokenize", v.model_dir, texts)
    _compare(texts, ours, theirs, f"{name}/{corpus}")


@pytest.mark.parametrize("name", ["qwen3-json", "qwen3-files", "flags"])
def test_encode_special_tokens_as_text_matches_hf(pagoda_bin, variants, name):
    v = variants[name]
    texts = CORPORA["hand"] + CORPORA["mixed"][:1000]
    oracle = v.oracle
    oracle.encode_special_tokens = True
    try:
        theirs = [e.ids for e in oracle.encode_batch(texts, add_special_tokens=True)]
    finally:
        oracle.encode_special_tokens = False
    ours = run_jsonl(pagoda_bin, "tokenize", v.model_dir, texts, ["--no-special"])
    _compare(texts, ours, theirs, f"{name}/no-special")


def _flag_corpus(seed=99, count=3000):
    rng = random.Random(seed)
    pieces = [t["content"] for t in FLAG_TOKENS] + ["caf\u00e9!", " ", "  ", "\t", "\n", " \u3000", "a", "x", "1",
                                                    "_", "\u00e9", "\u0301", "wordy", "wordy1", "awordy", "\u200d",
                                                    "<|im_end|>", "<think>", "hello", "!"]
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))) for _ in range(count)] + CORPORA["hand"]


def test_added_token_flags_match_hf(pagoda_bin, variants):
    v = variants["flags"]
    texts = _flag_corpus()
    theirs = [e.ids for e in v.oracle.encode_batch(texts, add_special_tokens=True)]
    ours = run_jsonl(pagoda_bin, "tokenize", v.model_dir, texts)
    _compare(texts, ours, theirs, "flags")


def _id_lists(variant):
    """Ids of real text plus random id sequences (these cut UTF-8 sequences anywhere)."""
    oracle = variant.oracle
    lists = [e.ids for e in oracle.encode_batch(CORPORA["hand"] + CORPORA["mixed"][:500] + _flag_corpus(count=200))]
    n = oracle.get_vocab_size(with_added_tokens=True)
    rng = random.Random(7)
    lists += [[rng.randrange(n) for _ in range(rng.randint(1, 40))] for _ in range(2000)]
    byte_tokens = [i for i in range(n) if oracle.id_to_token(i) is not None and len(oracle.id_to_token(i)) == 1]
    lists += [[rng.choice(byte_tokens) for _ in range(rng.randint(1, 12))] for _ in range(1000)]
    return lists


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("skip_special", [False, True], ids=["keep-special", "skip-special"])
@pytest.mark.parametrize("name", ["qwen3-json", "qwen2.5-files", "flags"])
def test_decode_matches_hf(pagoda_bin, variants, name, skip_special, stream):
    v = variants[name]
    lists = _id_lists(v)
    theirs = v.oracle.decode_batch(lists, skip_special_tokens=skip_special)
    extra = (["--skip-special-tokens"] if skip_special else []) + (["--stream"] if stream else [])
    ours = run_jsonl(pagoda_bin, "detokenize", v.model_dir, lists, extra)
    _compare(lists, ours, theirs, f"{name}/decode")


def test_round_trip_equals_hf_decode(pagoda_bin, variants):
    v = variants["qwen3-json"]
    texts = CORPORA["hand"] + CORPORA["mixed"][:500] + CORPORA["random_unicode"][:500]
    ids = run_jsonl(pagoda_bin, "tokenize", v.model_dir, texts)
    ours = run_jsonl(pagoda_bin, "detokenize", v.model_dir, ids)
    theirs = v.oracle.decode_batch(ids, skip_special_tokens=False)
    _compare(texts, ours, theirs, "round trip")
