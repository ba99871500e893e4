"""/v1/embeddings, /v1/score and /v1/rerank of `pagoda serve` on the CPU engine, against references that
sentence-transformers and transformers computed for the same tiny random Qwen3 checkpoint (tests/golden/qwen3_pooling,
made by tools/make_pooling_golden.py). Embeddings through the official `openai` SDK (float, base64, dimensions, token
inputs); the score endpoints over plain HTTP with vLLM's and Jina's/Cohere's bodies.

The checkpoint ships sentence-transformers' modules.json with last-token pooling, as Qwen3-Embedding does, so it is
served as an embedding model without flags; `--task score` serves the same weights as a Qwen3-Reranker-style scorer.
"""

import base64
import concurrent.futures
import json
import shutil
import time
import struct
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ops_server import OpsServer

openai = pytest.importorskip("openai")

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "qwen3_pooling"
REF = json.loads((GOLDEN / "reference.json").read_text())
TOL = 1e-4  # fp32 here and in transformers, summed in other orders (as the C++ pooling_engine_test)


def _start(tmp_path_factory, *args):
    s = OpsServer([str(GOLDEN), "--served-model-name", "tiny", *args], tmp_path_factory.mktemp("serve"))
    s.wait_for("model loaded; ready")
    return s


@pytest.fixture(scope="module")
def embed_server(tmp_path_factory):
    s = _start(tmp_path_factory)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def score_server(tmp_path_factory):
    s = _start(tmp_path_factory, "--task", "score")
    yield s
    s.stop()


def _client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=60)


def _post(server, path, body):
    req = urllib.request.Request(server.url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _assert_close(got, want, what):
    assert len(got) == len(want), what
    worst = max(abs(a - b) for a, b in zip(got, want))
    assert worst < TOL, f"{what}: max |diff| {worst}"


# --- /v1/embeddings ---------------------------------------------------------------------------------------------

def test_embeddings_float_match_sentence_transformers(embed_server):
    inputs = REF["embed"]["inputs"]
    r = _client(embed_server).embeddings.create(model="tiny", input=inputs, encoding_format="float")
    assert r.model == "tiny" and r.object == "list"
    assert [d.index for d in r.data] == list(range(len(inputs)))
    for d, want in zip(r.data, REF["embed"]["embeddings"]):
        _assert_close(d.embedding, want, inputs[d.index])
        assert abs(sum(x * x for x in d.embedding) - 1.0) < 1e-5  # normalised
    # The tokenizer appends <|endoftext|> to each text, as Qwen3-Embedding's post-processor does.
    assert r.usage.prompt_tokens == sum(len(i) for i in REF["embed"]["ids"]) == r.usage.total_tokens


def test_embeddings_sdk_default_is_base64_decoded(embed_server):
    # Without encoding_format the SDK asks for base64 and decodes it itself.
    r = _client(embed_server).embeddings.create(model="tiny", input=REF["embed"]["inputs"][1])
    _assert_close(r.data[0].embedding, REF["embed"]["embeddings"][1], "base64 via the SDK")


def test_embeddings_explicit_base64_is_little_endian_float32(embed_server):
    r = _client(embed_server).embeddings.create(model="tiny", input=REF["embed"]["inputs"][2],
                                                encoding_format="base64")
    raw = base64.b64decode(r.data[0].embedding)
    values = struct.unpack(f"<{len(raw) // 4}f", raw)
    _assert_close(values, REF["embed"]["embeddings"][2], "explicit base64")


def test_embeddings_dimensions_cut_then_renormalised(embed_server):
    dims = REF["embed"]["dimensions"]
    r = _client(embed_server).embeddings.create(model="tiny", input=REF["embed"]["inputs"], dimensions=dims,
                                                encoding_format="float")
    for d, want in zip(r.data, REF["embed"]["embeddings_cut"]):
        assert len(d.embedding) == dims
        _assert_close(d.embedding, want, f"dimensions={dims}")


def test_embeddings_token_inputs(embed_server):
    ids = REF["embed"]["ids"]  # token inputs are taken as given (no special tokens added), as vLLM does
    c = _client(embed_server)
    one = c.embeddings.create(model="tiny", input=ids[0], encoding_format="float")
    _assert_close(one.data[0].embedding, REF["embed"]["embeddings"][0], "list of ids")
    many = c.embeddings.create(model="tiny", input=ids, encoding_format="float")
    for d, want in zip(many.data, REF["embed"]["embeddings"]):
        _assert_close(d.embedding, want, f"list of lists, item {d.index}")
    assert many.usage.prompt_tokens == sum(len(i) for i in ids)


@pytest.mark.parametrize("body, words", [
    ({"input": "x", "dimensions": 65}, "dimensions"),
    ({"input": "x", "dimensions": 0}, "dimensions"),
    ({"input": "x", "encoding_format": "int8"}, "encoding_format"),
    ({"input": []}, "input"),
    ({"input": [[]]}, "input[0]"),
    ({"input": [1, -2]}, "input[1]"),
    ({"input": [100000]}, "outside the vocabulary"),
    ({"input": "x" * 3000}, "maximum context length"),
    ({"input": "x", "model": "other"}, "does not exist"),
    ({}, "input"),
])
def test_embeddings_bad_requests_are_4xx(embed_server, body, words):
    status, answer = _post(embed_server, "/v1/embeddings", body)
    assert 400 <= status < 500, answer
    assert words in answer["error"]["message"] + str(answer["error"]["param"])


def test_embeddings_truncate_prompt_tokens_keeps_the_end(embed_server):
    ids = REF["embed"]["ids"][1]
    status, answer = _post(embed_server, "/v1/embeddings",
                           {"input": [7, 7, 7] + ids, "truncate_prompt_tokens": len(ids)})
    assert status == 200, answer
    _assert_close(answer["data"][0]["embedding"], REF["embed"]["embeddings"][1], "truncated")
    assert answer["usage"]["prompt_tokens"] == len(ids)


def test_embedding_model_refuses_generation_and_scores(embed_server):
    c = _client(embed_server)
    with pytest.raises(openai.BadRequestError, match="served for embeddings"):
        c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    with pytest.raises(openai.BadRequestError, match="served for embeddings"):
        c.completions.create(model="tiny", prompt="hi", max_tokens=2)
    status, answer = _post(embed_server, "/v1/rerank", {"query": "a", "documents": ["b"]})
    assert status == 400 and "--task score" in answer["error"]["message"]


# --- /v1/score and /v1/rerank -------------------------------------------------------------------------------------

def test_rerank_scores_match_transformers_best_first(score_server):
    rr = REF["rerank"]
    status, answer = _post(score_server, "/v1/rerank", {"model": "tiny", "query": rr["query"],
                                                        "documents": rr["documents"]})
    assert status == 200, answer
    results = answer["results"]
    assert [r["index"] for r in results] == sorted(range(len(rr["scores"])), key=lambda i: -rr["scores"][i])
    for r in results:
        assert abs(r["relevance_score"] - rr["scores"][r["index"]]) < TOL
        assert r["document"]["text"] == rr["documents"][r["index"]]
    assert answer["usage"]["total_tokens"] == sum(rr["pair_lengths"])


def test_rerank_top_n_return_documents_and_object_documents(score_server):
    rr = REF["rerank"]
    for path in ("/rerank", "/v2/rerank"):
        status, answer = _post(score_server, path, {
            "query": rr["query"], "documents": [{"text": d} for d in rr["documents"]], "top_n": 2,
            "return_documents": False})
        assert status == 200, answer
        assert len(answer["results"]) == 2 and "document" not in answer["results"][0]
        best = max(range(len(rr["scores"])), key=lambda i: rr["scores"][i])
        assert answer["results"][0]["index"] == best


def test_score_one_to_many_and_pairwise(score_server):
    rr = REF["rerank"]
    status, answer = _post(score_server, "/v1/score", {"model": "tiny", "text_1": rr["query"],
                                                       "text_2": rr["documents"]})
    assert status == 200, answer
    assert [d["index"] for d in answer["data"]] == list(range(len(rr["documents"])))
    for d in answer["data"]:
        assert d["object"] == "score" and abs(d["score"] - rr["scores"][d["index"]]) < TOL
    status, pairwise = _post(score_server, "/score", {"text_1": [rr["query"]] * 2, "text_2": rr["documents"][:2]})
    assert status == 200, pairwise
    assert [round(d["score"], 6) for d in pairwise["data"]] == [round(d["score"], 6) for d in answer["data"][:2]]


@pytest.mark.parametrize("path, body, words", [
    ("/v1/score", {"text_1": ["a", "b"], "text_2": ["c", "d", "e"]}, "text_1"),
    ("/v1/score", {"text_1": "a"}, "text_2"),
    ("/v1/rerank", {"query": ["a"], "documents": ["b"]}, "query"),
    ("/v1/rerank", {"query": "a", "documents": []}, "documents"),
    ("/v1/rerank", {"query": "a", "documents": [3]}, "documents"),
    ("/v1/rerank", {"query": "a", "documents": ["b"], "top_n": -1}, "top_n"),
    ("/v1/rerank", {"query": "x" * 300, "documents": ["y" * 300]}, "maximum context length"),
])
def test_score_bad_requests_are_4xx(score_server, path, body, words):
    status, answer = _post(score_server, path, body)
    assert 400 <= status < 500, answer
    assert words in answer["error"]["message"] + str(answer["error"]["param"])


def test_score_model_refuses_embeddings_and_generation(score_server):
    with pytest.raises(openai.BadRequestError, match="--task embed"):
        _client(score_server).embeddings.create(model="tiny", input="x")
    with pytest.raises(openai.BadRequestError, match="served for scores"):
        _client(score_server).completions.create(model="tiny", prompt="x", max_tokens=1)


# --- the task flags -----------------------------------------------------------------------------------------------

def test_task_generate_serves_the_same_directory_for_generation(tmp_path_factory):
    s = _start(tmp_path_factory, "--task", "generate")
    try:
        r = _client(s).completions.create(model="tiny", prompt="yes", max_tokens=2, temperature=0)
        assert r.usage.completion_tokens >= 1
        with pytest.raises(openai.BadRequestError, match="--task embed"):
            _client(s).embeddings.create(model="tiny", input="x")
    finally:
        s.stop()


@pytest.mark.parametrize("args, words", [
    (["--task", "classify"], "--task classify"),
    (["--runner", "pooling", "--task", "generate"], "--runner pooling"),
])
def test_bad_task_flags_refuse_to_start(tmp_path, args, words):
    s = OpsServer([str(GOLDEN), *args], tmp_path, wait_for_banner=False)
    assert s.exit_code() != 0
    assert words in s.log()


# --- model reload (last in this file: they swap the module's servers' models) -------------------------------------

def _reload(server, model_dir):
    return _post(server, "/v1/models/reload", {"model": str(model_dir)})


def test_reload_of_an_embedding_model_reads_the_new_models_settings(embed_server, tmp_path_factory):
    # qwen2 (hidden size 96, not 64): its embeddings are 96 wide and bound `dimensions` by 96.
    from test_openai_sdk import golden_with_demo_tokenizer
    other = golden_with_demo_tokenizer(tmp_path_factory, "qwen2")
    status, answer = _reload(embed_server, other)
    assert status == 200, answer
    client = _client(embed_server)
    out = client.embeddings.create(model="tiny", input=[[1, 2, 3]], encoding_format="float")
    assert len(out.data[0].embedding) == 96
    status, answer = _post(embed_server, "/v1/embeddings", {"model": "tiny", "input": [[1, 2]], "dimensions": 97})
    assert status == 400 and "have 96" in answer["error"]["message"], answer
    # Back to the pooling checkpoint: sentence-transformers' embeddings again.
    status, answer = _reload(embed_server, GOLDEN)
    assert status == 200, answer
    got = client.embeddings.create(model="tiny", input=REF["embed"]["inputs"], encoding_format="float")
    for d, want in zip(got.data, REF["embed"]["embeddings"]):
        _assert_close(d.embedding, want, f"embedding {d.index} after the reloads")


def test_reload_of_a_scorer_keeps_scoring(score_server, tmp_path_factory):
    copy = tmp_path_factory.mktemp("reranker")
    for f in GOLDEN.iterdir():
        (shutil.copytree if f.is_dir() else shutil.copy)(f, copy / f.name)
    status, answer = _reload(score_server, copy)
    assert status == 200 and answer["path"] == str(copy), answer
    rr = REF["rerank"]
    status, answer = _post(score_server, "/v1/rerank", {"model": "tiny", "query": rr["query"],
                                                        "documents": rr["documents"]})
    assert status == 200, answer
    for r in answer["results"]:
        assert abs(r["relevance_score"] - rr["scores"][r["index"]]) < TOL


def test_reload_after_drain_parks_pooling_requests_and_checks_the_pooling(tmp_path_factory):
    s = _start(tmp_path_factory, "--reload-strategy", "drain", "--x-test-reload-delay-ms", "1500")
    try:
        client = _client(s)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            reload = pool.submit(_reload, s, GOLDEN)
            time.sleep(0.5)  # the old model is gone, the new one still loading: the request waits for it
            got = client.embeddings.create(model="tiny", input=REF["embed"]["inputs"], encoding_format="float")
            assert reload.result()[0] == 200
        for d, want in zip(got.data, REF["embed"]["embeddings"]):
            _assert_close(d.embedding, want, f"embedding {d.index} asked during the reload")
        # A directory whose sentence-transformers pooling is not last-token is refused before anything is unloaded.
        mean = tmp_path_factory.mktemp("mean-pooling")
        for f in GOLDEN.iterdir():
            (shutil.copytree if f.is_dir() else shutil.copy)(f, mean / f.name)
        cfg = json.loads((mean / "1_Pooling" / "config.json").read_text())
        cfg["pooling_mode_lasttoken"], cfg["pooling_mode_mean_tokens"] = False, True
        (mean / "1_Pooling" / "config.json").write_text(json.dumps(cfg))
        status, answer = _reload(s, mean)
        assert status == 400 and "last-token pooling" in answer["error"]["message"], answer
        assert client.embeddings.create(model="tiny", input=[[1, 2]]).data
    finally:
        s.stop()
