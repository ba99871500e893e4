"""Forced tool calls in Qwen3.5's XML format (`--tool-call-parser qwen3_coder`) under the grammar: the random-weight
demo model's answer always holds a call whose arguments, as the parser reads them back, validate against the
function's parameters schema (checked by `jsonschema`), streamed or not.
"""

import json

import pytest

from test_openai_sdk import Server, demo_dir  # noqa: F401  (fixture)

openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")

# Every parameter kind the grammar writes differently: an enum and a pattern as raw text, integers, booleans, an
# array and an object as JSON, a bare $ref (read as text, constrained by its target).
PARAMS = {
    "type": "object",
    "$defs": {"unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "properties": {
        "city": {"type": "string", "enum": ["Paris", "Tokyo", "Lima"]},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
        "hours": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 23}, "maxItems": 3},
        "detail": {"type": "object", "properties": {"wind": {"type": "boolean"}}, "required": ["wind"],
                   "additionalProperties": False},
        "unit": {"$ref": "#/$defs/unit"},
    },
    "required": ["city", "code", "days", "hours", "detail", "unit"],
}
TOOLS = [{"type": "function", "function": {"name": "forecast", "parameters": PARAMS}},
         {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}]
MESSAGES = [{"role": "user", "content": "The forecast, please."}]


@pytest.fixture(scope="module")
def client(demo_dir):  # noqa: F811
    s = Server([str(demo_dir), "--served-model-name", "demo", "--max-model-len", "4096", "--tool-call-parser",
                "qwen3_coder", "--enable-auto-tool-choice"])
    yield openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0, timeout=300)
    assert s.stop() == 0


def check(call):
    args = json.loads(call.function.arguments)
    if call.function.name == "forecast":
        jsonschema.validate(args, PARAMS)
    else:
        assert call.function.name == "now" and args == {}


def test_named_and_required_choices_give_valid_calls(client):
    r = client.chat.completions.create(model="demo", messages=MESSAGES, tools=TOOLS, n=2, seed=3, max_tokens=300,
                                       parallel_tool_calls=False,
                                       tool_choice={"type": "function", "function": {"name": "forecast"}})
    for c in r.choices:
        assert c.finish_reason == "tool_calls", c.message
        assert [t.function.name for t in c.message.tool_calls] == ["forecast"]
        check(c.message.tool_calls[0])
    r = client.chat.completions.create(model="demo", messages=MESSAGES, tools=TOOLS, n=3, seed=4, max_tokens=300,
                                       tool_choice="required", parallel_tool_calls=False)
    for c in r.choices:
        assert len(c.message.tool_calls) == 1
        check(c.message.tool_calls[0])


def test_streamed_call_adds_up_to_a_valid_one(client):
    chunks = client.chat.completions.create(model="demo", messages=MESSAGES, tools=TOOLS, seed=5, max_tokens=300,
                                            stream=True, parallel_tool_calls=False,
                                            tool_choice={"type": "function", "function": {"name": "forecast"}})
    name, arguments, finish = "", "", None
    for ch in chunks:
        if not ch.choices:
            continue
        for t in ch.choices[0].delta.tool_calls or []:
            name += t.function.name or ""
            arguments += t.function.arguments or ""
        finish = ch.choices[0].finish_reason or finish
    assert name == "forecast" and finish == "tool_calls"
    jsonschema.validate(json.loads(arguments), PARAMS)
