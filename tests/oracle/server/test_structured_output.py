"""Structured output against `pagoda serve` of the demo model, through the official `openai` SDK.

The demo model has random weights: left alone its output is noise, so every structured answer below is valid only
because the grammar forced it. Each answer is checked with an independent oracle: Python's `json` and the
`jsonschema` package for schemas, `re.fullmatch` for regexes, membership for choices, pydantic for
`chat.completions.parse`.
"""

import json
import re
import urllib.request

import pytest

from test_openai_sdk import Server, demo_dir  # noqa: F401  (fixture)

openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")
pydantic = pytest.importorskip("pydantic")

MESSAGES = [{"role": "user", "content": "Answer in JSON."}]

# Real-world shapes: nested objects, arrays, enums, $ref/$defs (also recursive), formats, bounds, nullable.
SCHEMAS = {
    "person": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "role": {"enum": ["admin", "user", "guest"]},
            "active": {"type": "boolean"},
        },
        "required": ["name", "age", "role", "active"],
        "additionalProperties": False,
    },
    "order": {
        "$defs": {
            "item": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
                    "qty": {"type": "integer", "minimum": 1, "maximum": 99},
                },
                "required": ["sku", "qty"],
            },
        },
        "type": "object",
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "date": {"type": "string", "format": "date"},
            "items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "minItems": 1, "maxItems": 3},
            "status": {"type": "string", "enum": ["new", "paid", "shipped"]},
            "note": {"type": ["string", "null"], "maxLength": 5},
        },
        "required": ["id", "date", "items", "status", "note"],
    },
    "tree": {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "v": {"type": "integer", "minimum": -9, "maximum": 9},
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2},
                },
                "required": ["v", "kids"],
            }
        },
        "$ref": "#/$defs/node",
    },
    "event": {
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date-time"},
            "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 4},
            "where": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {
                "lat": {"type": "number"}, "lon": {"type": "number"}}, "required": ["lat", "lon"]}]},
            "pair": {"type": "array", "prefixItems": [{"type": "boolean"}, {"const": "x"}], "items": False,
                     "minItems": 2},
        },
        "required": ["when", "tags", "where", "pair"],
    },
}


@pytest.fixture(scope="module", params=["sync", "async-scheduling"])
def server(demo_dir, request):  # noqa: F811
    """Once as the server starts by default, once with --async-scheduling (the grammar's masks then wait in the
    runner for the token of the step before)."""
    extra = ["--async-scheduling"] if request.param == "async-scheduling" else []
    s = Server([str(demo_dir), "--served-model-name", "demo", "--max-model-len", "4096", *extra])
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def client(server):
    # The CPU demo model on a busy test machine is slow per token; answers here run to a few hundred tokens.
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=600)


def _response_format(name, schema):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_json_schema_answers_validate(client, name):
    schema = SCHEMAS[name]
    r = client.chat.completions.create(model="demo", messages=MESSAGES, n=2, seed=7, max_tokens=1500,
                                       response_format=_response_format(name, schema))
    assert len(r.choices) == 2
    for c in r.choices:
        assert c.finish_reason == "stop", c.message.content
        value = json.loads(c.message.content)
        jsonschema.validate(value, schema)
        # Compact JSON, as documented: no whitespace outside strings.
        assert not re.search(r"\s", re.sub(r'"(?:[^"\\]|\\.)*"', '""', c.message.content)), c.message.content


def test_json_schema_greedy_and_streamed(client):
    schema = SCHEMAS["order"]
    kwargs = dict(model="demo", messages=MESSAGES, max_tokens=1500, temperature=0,
                  response_format=_response_format("order", schema))
    whole = client.chat.completions.create(**kwargs).choices[0].message.content
    jsonschema.validate(json.loads(whole), schema)
    streamed = "".join(chunk.choices[0].delta.content or ""
                       for chunk in client.chat.completions.create(stream=True, **kwargs) if chunk.choices)
    assert streamed == whole  # greedy: the same tokens either way


def test_json_object(client, server):
    # Random words make long strings, so most choices hit max_tokens: those must still be an object's beginning.
    r = client.chat.completions.create(model="demo", messages=MESSAGES, n=4, seed=0, max_tokens=60,
                                       response_format={"type": "json_object"})
    for c in r.choices:
        if c.finish_reason == "stop":
            assert isinstance(json.loads(c.message.content), dict)
        else:
            assert c.message.content.startswith("{")
    # With "}" pushed up by logit_bias, the grammar still puts "{" first, and then the shortest object ends it.
    brace = urllib_json(server.url + "/tokenize", {"model": "demo", "prompt": "}"})["tokens"]
    assert len(brace) == 1
    r = client.chat.completions.create(model="demo", messages=MESSAGES, max_tokens=20, seed=1,
                                       logit_bias={str(brace[0]): 100}, response_format={"type": "json_object"})
    assert r.choices[0].message.content == "{}"
    assert r.choices[0].finish_reason == "stop"


def urllib_json(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def test_pydantic_parse(client):
    class Address(pydantic.BaseModel):
        zip: str = pydantic.Field(pattern=r"^[0-9]{5}$")
        country: str = pydantic.Field(max_length=3)

    class Person(pydantic.BaseModel):
        name: str = pydantic.Field(max_length=10)
        age: int = pydantic.Field(ge=0, le=150)
        address: Address
        kind: str = pydantic.Field(json_schema_extra={"enum": ["a", "b"]})

    r = client.beta.chat.completions.parse(model="demo", messages=MESSAGES, response_format=Person, max_tokens=1000,
                                           seed=3)
    parsed = r.choices[0].message.parsed
    assert isinstance(parsed, Person)
    assert 0 <= parsed.age <= 150 and re.fullmatch(r"[0-9]{5}", parsed.address.zip)


def test_regex_choice_and_grammar(client):
    for extra, check in [
        ({"guided_regex": r"[a-z]{2,5}-\d{3}(\.[A-F]+)?"},
         lambda s: re.fullmatch(r"[a-z]{2,5}-\d{3}(\.[A-F]+)?", s)),
        ({"structured_outputs": {"regex": r"(yes|no)!{1,3}"}}, lambda s: re.fullmatch(r"(yes|no)!{1,3}", s)),
        ({"guided_choice": ["alpha", "beta", "gamma delta"]}, lambda s: s in ("alpha", "beta", "gamma delta")),
        ({"structured_outputs": {"choice": ["x", "xy"]}}, lambda s: s in ("x", "xy")),
        ({"guided_grammar": 'root ::= "(" num ("+" num)* ")"\nnum ::= [1-9] [0-9]{0,2}'},
         lambda s: re.fullmatch(r"\([1-9][0-9]{0,2}(\+[1-9][0-9]{0,2})*\)", s)),
        ({"structured_outputs": {"grammar": 'root ::= ("ab" | "c")+ "."'}}, lambda s: re.fullmatch(r"(ab|c)+\.", s)),
    ]:
        r = client.chat.completions.create(model="demo", messages=MESSAGES, n=4, seed=11, max_tokens=400,
                                           extra_body=extra)
        for c in r.choices:
            assert c.finish_reason == "stop", (extra, c.message.content)
            assert check(c.message.content), (extra, c.message.content)


def test_completions_endpoint(client):
    schema = SCHEMAS["person"]
    r = client.completions.create(model="demo", prompt="A person:", max_tokens=800, n=2, seed=5,
                                  extra_body={"guided_json": schema})
    for c in r.choices:
        assert c.finish_reason == "stop"
        jsonschema.validate(json.loads(c.text), schema)
    r = client.completions.create(model="demo", prompt="Pick:", max_tokens=50,
                                  extra_body={"structured_outputs": {"choice": ["up", "down"]}})
    assert r.choices[0].text in ("up", "down")


def test_logprobs_are_of_the_masked_distribution(client):
    r = client.chat.completions.create(model="demo", messages=MESSAGES, max_tokens=20, logprobs=True, top_logprobs=5,
                                       extra_body={"guided_choice": ["yes", "no"]})
    content = r.choices[0].logprobs.content
    assert content
    first = content[0]
    # Only the choices' first tokens are possible: the top list holds nothing else, and their mass is ~1.
    assert all(t.token in ("yes", "no", "y", "n", "ye") or "yes".startswith(t.token) or "no".startswith(t.token)
               for t in first.top_logprobs), first.top_logprobs
    assert sum(2.718281828 ** t.logprob for t in first.top_logprobs) == pytest.approx(1.0, abs=1e-3)


def test_responses_api_text_format(server):
    schema = SCHEMAS["person"]
    r = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=600).responses.create(model="demo", input="Answer in JSON.", max_output_tokens=800,
                                         text={"format": {"type": "json_schema", "name": "person", "schema": schema,
                                                          "strict": True}})
    jsonschema.validate(json.loads(r.output_text), schema)


@pytest.mark.parametrize("extra,field,says", [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "object", "patternProperties": {"^a": {}}}}}}, "response_format.json_schema.schema",
     "patternProperties"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}, "response_format.json_schema.schema",
     "required"),
    ({"response_format": {"type": "yaml"}}, "response_format.type", "yaml"),
    ({"guided_json": {"$ref": "#/$defs/none"}}, "guided_json", "points to nothing"),
    ({"guided_json": "{not json"}, "guided_json", "not valid JSON"),
    ({"guided_regex": "(a)\\1"}, "guided_regex", "backreferences"),
    ({"guided_grammar": "item ::= \"a\""}, "guided_grammar", "root"),
    ({"guided_grammar": "root ::= missing"}, "guided_grammar", "missing"),
    ({"guided_choice": []}, "guided_choice", "non-empty"),
    ({"structured_outputs": {"regex": "a", "choice": ["b"]}}, "structured_outputs", "only one"),
    ({"guided_regex": "a", "response_format": {"type": "json_object"}}, None, "only one"),
    ({"guided_regex": "a", "min_tokens": 2}, "min_tokens", "min_tokens"),
    ({"guided_json": {"type": "string", "maxLength": 10**9}}, "guided_json", "maxLength"),
])
def test_bad_requests_are_clear_400s(client, extra, field, says):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="demo", messages=MESSAGES, max_tokens=5, extra_body=extra)
    err = e.value.body
    assert says in err["message"], err
    if field:
        assert err["param"] == field, err


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 8}, "unit": {"enum": ["c", "f"]}},
        "required": ["city", "unit"]}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {
        "$defs": {"zone": {"type": "string", "pattern": "^[A-Z]{3}$"}},
        "type": "object", "properties": {"tz": {"$ref": "#/$defs/zone"}}, "required": ["tz"]}}},
]
SCHEMA_OF = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


@pytest.fixture(scope="module")
def tool_client(demo_dir):  # noqa: F811
    s = Server([str(demo_dir), "--served-model-name", "demo", "--max-model-len", "4096", "--tool-call-parser",
                "hermes"])
    yield openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0, timeout=600)
    assert s.stop() == 0


def _check_calls(calls, names):
    assert calls, "a forced tool choice must produce a call"
    for call in calls:
        assert call.function.name in names
        jsonschema.validate(json.loads(call.function.arguments), SCHEMA_OF[call.function.name])


def test_forced_tool_choice_required(tool_client):
    r = tool_client.chat.completions.create(model="demo", messages=[{"role": "user", "content": "Weather?"}],
                                            tools=TOOLS, tool_choice="required", n=3, seed=4, max_tokens=600)
    for c in r.choices:
        assert c.finish_reason == "tool_calls"
        _check_calls(c.message.tool_calls, set(SCHEMA_OF))


def test_forced_named_tool_one_call_streamed(tool_client):
    kwargs = dict(model="demo", messages=[{"role": "user", "content": "Time?"}], tools=TOOLS, seed=9,
                  tool_choice={"type": "function", "function": {"name": "get_time"}}, parallel_tool_calls=False,
                  max_tokens=600)
    r = tool_client.chat.completions.create(**kwargs)
    calls = r.choices[0].message.tool_calls
    assert len(calls) == 1
    _check_calls(calls, {"get_time"})
    # Streamed: the call arrives in deltas that join to a valid call.
    name, args = None, ""
    for chunk in tool_client.chat.completions.create(stream=True, **kwargs):
        for d in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            name = d.function.name or name
            args += d.function.arguments or ""
    assert name == "get_time"
    jsonschema.validate(json.loads(args), SCHEMA_OF["get_time"])


def test_forced_tool_choice_with_response_format_is_a_400(tool_client):
    with pytest.raises(openai.BadRequestError) as e:
        tool_client.chat.completions.create(model="demo", messages=MESSAGES, tools=TOOLS, tool_choice="required",
                                            response_format={"type": "json_object"}, max_tokens=5)
    assert e.value.body["param"] == "tool_choice"
