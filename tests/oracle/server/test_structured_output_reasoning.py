"""Reasoning-aware structured output: with a reasoning parser and thinking on, the grammar applies only after the
model's </think> (as vLLM's reasoning-aware structured output does); the thought is free text.

The demo model (random weights, Qwen3's chat template, whose generation prompt leaves the model to open its own
<think>) gets a logit bias of +100 on </think>. The JSON grammar never allows </think> where an answer starts, so
the bias shows who decides: with the grammar waiting for the reasoning to end, </think> is the first token and the
constrained answer follows; with thinking off (or no reasoning parser) the grammar holds from the first token and
the answer starts with "{" regardless of the bias.
"""

import json

import pytest

from test_openai_sdk import Server, demo_dir  # noqa: F401  (fixture)

openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")

SCHEMA = {"type": "object", "properties": {"city": {"enum": ["Paris", "Tokyo"]},
                                           "days": {"type": "integer", "minimum": 1, "maximum": 7}},
          "required": ["city", "days"], "additionalProperties": False}
TOOL = {"type": "function", "function": {"name": "forecast", "parameters": SCHEMA}}
MESSAGES = [{"role": "user", "content": "The forecast, in JSON."}]


@pytest.fixture(scope="module")
def server(demo_dir):  # noqa: F811
    s = Server([str(demo_dir), "--served-model-name", "demo", "--max-model-len", "2048", "--reasoning-parser", "qwen3",
                "--tool-call-parser", "hermes", "--enable-auto-tool-choice"])
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def think_end_bias(client, server):
    import urllib.request
    req = urllib.request.Request(server.url + "/tokenize", data=json.dumps({"model": "demo", "prompt": "</think>"})
                                 .encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        tokens = json.loads(resp.read())["tokens"]
    assert len(tokens) == 1  # an added token in Qwen's vocabulary
    return {str(tokens[0]): 100}


def create(client, bias, **kw):
    return client.chat.completions.create(model="demo", messages=MESSAGES, max_tokens=100, seed=1, logit_bias=bias,
                                          **kw)


def test_the_grammar_starts_after_the_reasoning(client, think_end_bias):
    r = create(client, think_end_bias, response_format={"type": "json_schema",
                                                        "json_schema": {"name": "f", "schema": SCHEMA}})
    c = r.choices[0]
    assert c.finish_reason == "stop"
    # </think> came first (free), then the answer under the grammar: the parser puts the answer in content.
    assert not (getattr(c.message, "reasoning_content", None) or "").strip()
    jsonschema.validate(json.loads(c.message.content), SCHEMA)
    streamed = create(client, think_end_bias, stream=True,
                      response_format={"type": "json_schema", "json_schema": {"name": "f", "schema": SCHEMA}})
    text = "".join(ch.choices[0].delta.content or "" for ch in streamed if ch.choices)
    jsonschema.validate(json.loads(text), SCHEMA)


def test_with_thinking_off_the_grammar_holds_from_the_first_token(client, think_end_bias):
    for extra in ({"chat_template_kwargs": {"enable_thinking": False}}, {"guided_json": SCHEMA}):
        kw = {"extra_body": extra}
        if "guided_json" not in extra:
            kw["response_format"] = {"type": "json_schema", "json_schema": {"name": "f", "schema": SCHEMA}}
        else:
            kw["extra_body"] = {**extra, "chat_template_kwargs": {"enable_thinking": False}}
        c = create(client, think_end_bias, **kw).choices[0]
        assert c.message.content.startswith("{") and "</think>" not in c.message.content
        jsonschema.validate(json.loads(c.message.content), SCHEMA)


def test_completions_have_no_reasoning_and_constrain_from_the_start(client, think_end_bias):
    r = client.completions.create(model="demo", prompt="JSON:", max_tokens=100, seed=1, logit_bias=think_end_bias,
                                  extra_body={"guided_json": SCHEMA})
    assert r.choices[0].text.startswith("{")
    jsonschema.validate(json.loads(r.choices[0].text), SCHEMA)


def test_a_forced_tool_call_after_the_reasoning(client, think_end_bias):
    c = create(client, think_end_bias, tools=[TOOL], tool_choice="required", parallel_tool_calls=False).choices[0]
    assert c.finish_reason == "tool_calls"
    assert [t.function.name for t in c.message.tool_calls] == ["forecast"]
    jsonschema.validate(json.loads(c.message.tool_calls[0].function.arguments), SCHEMA)
