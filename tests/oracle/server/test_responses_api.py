"""POST /v1/responses (OpenAI's Responses API) against `pagoda serve`, driven by the official `openai` SDK's
`client.responses` (its typed parsing and its `responses.stream()` accumulator are the contract) and by the
openai-agents SDK's default model.

Two servers:
- the demo model (random weights, real Qwen tokenizer) on the CPU engine: a response must equal the chat completion
  of the same conversation (the same template path renders both), streamed or not, chained or not.
- the hidden TEST GENERATOR (scripted tokens, no model) for known text: reasoning, a hermes tool call, and a second
  answer once the tool answered (the scripted generator's next turn), for the tool round trip and the agent.
"""

import asyncio
import json
import urllib.error
import urllib.request

import pytest

from test_openai_sdk import Server, demo_dir  # noqa: F401  (fixture)

openai = pytest.importorskip("openai")

CALL_TURN = ('<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n'
             '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>')
ANSWER_TURN = "<think>\nThe tool answered.\n</think>\n\nIt is sunny in Paris."
TOOL = {"type": "function", "name": "get_weather", "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
CHAT_TOOL = {"type": "function", "function": {k: v for k, v in TOOL.items() if k != "type"}}


@pytest.fixture(scope="module")
def engine_server(demo_dir):  # noqa: F811
    s = Server([str(demo_dir), "--served-model-name", "demo", "--max-model-len", "512"])
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def script_server(demo_dir):  # noqa: F811
    s = Server([str(demo_dir), "--served-model-name", "scripted", "--x-test-generator-text", CALL_TURN,
                "--x-test-generator-text", ANSWER_TURN, "--reasoning-parser", "qwen3", "--enable-auto-tool-choice",
                "--tool-call-parser", "hermes"])
    yield s
    assert s.stop() == 0


def post_raw(server, path, body, method="POST"):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(server.url + path, data=data if method == "POST" else None, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def chat_text(client, messages, **kw):
    r = client.chat.completions.create(model="demo", messages=messages, temperature=0, **kw)
    return r.choices[0].message.content, r.usage


# --- the real engine on the demo model ----------------------------------------------------------------------

def test_text_response_equals_the_chat_completion(engine_server):
    c = engine_server.client()
    r = c.responses.create(model="demo", input="Tell me a story.", instructions="Be brief.", max_output_tokens=12,
                           temperature=0, metadata={"k": "v"}, user="u1")
    text, usage = chat_text(c, [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "Tell me a story."}], max_tokens=12)
    assert r.object == "response" and r.id.startswith("resp_") and r.model == "demo"
    assert r.output_text == text
    assert r.status == ("incomplete" if usage.completion_tokens == 12 else "completed")
    if r.status == "incomplete":
        assert r.incomplete_details.reason == "max_output_tokens"
    assert [o.type for o in r.output] == ["message"]
    msg = r.output[0]
    assert msg.role == "assistant" and msg.id.startswith("msg_") and msg.content[0].type == "output_text"
    assert r.usage.input_tokens == usage.prompt_tokens
    assert r.usage.output_tokens == usage.completion_tokens
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.instructions == "Be brief." and r.metadata == {"k": "v"} and r.user == "u1"
    assert r.max_output_tokens == 12 and r.temperature == 0 and r.store is True


def test_message_items_with_parts_and_developer_role(engine_server):
    c = engine_server.client()
    r = c.responses.create(model="demo", max_output_tokens=6, temperature=0, input=[
        {"role": "developer", "content": "Answer in French."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hello"},
                                                        {"type": "input_text", "text": "there"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Bonjour",
                                                              "annotations": []}]},
        {"role": "user", "content": "Again"}])
    text, usage = chat_text(c, [{"role": "system", "content": "Answer in French."},
                                {"role": "user", "content": "Hello\nthere"},
                                {"role": "assistant", "content": "Bonjour"},
                                {"role": "user", "content": "Again"}], max_tokens=6)
    assert r.output_text == text and r.usage.input_tokens == usage.prompt_tokens


def test_stream_events_parse_and_match_the_non_streamed_response(engine_server):
    c = engine_server.client()
    kw = dict(model="demo", input="Write a poem.", max_output_tokens=10, temperature=0)
    full = c.responses.create(**kw)
    events = list(c.responses.create(stream=True, **kw))
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] in ("response.completed", "response.incomplete")
    assert types[2:5] == ["response.output_item.added", "response.content_part.added", "response.output_text.delta"]
    assert types[-4:-1] == ["response.output_text.done", "response.content_part.done", "response.output_item.done"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == full.output_text
    final = events[-1].response
    assert final.output_text == full.output_text and final.status == full.status
    assert final.output[0].id == events[2].item.id == events[-2].item.id
    assert final.usage.output_tokens == full.usage.output_tokens
    # A response cut at max_output_tokens ends with response.incomplete, as OpenAI's does (the SDK's stream() helper
    # then has no final response; the scripted tests below run it on completed ones).
    assert types[-1] == ("response.incomplete" if full.status == "incomplete" else "response.completed")


def test_previous_response_id_chains_the_conversation(engine_server):
    c = engine_server.client()
    r1 = c.responses.create(model="demo", input="My name is Ada.", instructions="Be kind.", max_output_tokens=6,
                            temperature=0)
    r2 = c.responses.create(model="demo", input="What is my name?", previous_response_id=r1.id,
                            instructions="Be brief.", max_output_tokens=6, temperature=0)
    # Instructions are not carried over (OpenAI's rule); the input and output are.
    text, usage = chat_text(c, [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "My name is Ada."},
                                {"role": "assistant", "content": r1.output_text},
                                {"role": "user", "content": "What is my name?"}], max_tokens=6)
    assert r2.previous_response_id == r1.id
    assert r2.usage.input_tokens == usage.prompt_tokens and r2.output_text == text
    # Stored: retrieve gives the same object; delete drops it.
    got = c.responses.retrieve(r1.id)
    assert got.id == r1.id and got.output_text == r1.output_text and got.usage == r1.usage
    c.responses.delete(r1.id)
    with pytest.raises(openai.NotFoundError):
        c.responses.retrieve(r1.id)
    with pytest.raises(openai.NotFoundError):
        c.responses.create(model="demo", input="x", previous_response_id=r1.id, max_output_tokens=2)


def test_store_false_is_not_kept(engine_server):
    c = engine_server.client()
    r = c.responses.create(model="demo", input="Hi", max_output_tokens=2, store=False)
    assert r.store is False
    with pytest.raises(openai.NotFoundError):
        c.responses.retrieve(r.id)
    status, body = post_raw(engine_server, "/v1/responses",
                            {"model": "demo", "input": "x", "previous_response_id": r.id})
    assert status == 404
    assert body["error"]["param"] == "previous_response_id" and r.id in body["error"]["message"]
    assert set(body["error"]) == {"message", "type", "param", "code"}


def test_reasoning_effort_none_turns_thinking_off(engine_server):
    c = engine_server.client()
    r = c.responses.create(model="demo", input="Hi", max_output_tokens=4, temperature=0,
                           reasoning={"effort": "none"})
    text, usage = chat_text(c, [{"role": "user", "content": "Hi"}], max_tokens=4,
                            extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert r.usage.input_tokens == usage.prompt_tokens and r.output_text == text
    assert r.reasoning.effort == "none"


def test_required_tool_choice_without_a_call(engine_server):
    """Four tokens cannot hold a whole call (the call grammar applies only with the hermes parser, and even then the
    output is cut): a forced tool choice without a call is a 422, and in a stream an error event and
    response.failed, never response.completed."""
    c = engine_server.client()
    kw = dict(model="demo", input="Weather?", tools=[TOOL], tool_choice="required", max_output_tokens=4,
              temperature=0)
    with pytest.raises(openai.UnprocessableEntityError):
        c.responses.create(**kw)
    events = list(c.responses.create(stream=True, **kw))
    assert [e.type for e in events[-2:]] == ["error", "response.failed"]
    assert events[-2].code == "422" and "tool_choice" in events[-2].message
    assert events[-1].response.status == "failed"


@pytest.mark.parametrize("body, param, words", [
    ({"model": "demo"}, "input", "required"),
    ({"model": "demo", "input": []}, "input", "empty"),
    ({"model": "demo", "input": 5}, "input", "string or an array"),
    ({"model": "demo", "input": [{"type": "web_search_call", "id": "x"}]}, "input[0].type", "not supported"),
    ({"model": "demo", "input": [{"role": "robot", "content": "x"}]}, "input[0].role", "must be one of"),
    ({"model": "demo", "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
     "input[0].content[0]", "not supported"),
    ({"model": "demo", "input": [{"type": "function_call", "name": "f", "arguments": "{}"}]},
     "input[0].call_id", "required"),
    ({"model": "demo", "input": [{"type": "function_call_output", "call_id": "c"}]}, "input[0].output", "required"),
    ({"model": "demo", "input": [{"type": "function_call_output", "call_id": "c",
                                  "output": [{"type": "input_file", "file_id": "f"}]}]},
     "input[0].output[0]", "not supported"),
    ({"model": "demo", "input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type", "only function tools"),
    ({"model": "demo", "input": "x", "tools": [{"type": "function"}]}, "tools[0].name", "required"),
    ({"model": "demo", "input": "x", "text": {"format": {"type": "xml"}}}, "text.format.type", "json_schema"),
    ({"model": "demo", "input": "x", "text": {"format": {"type": "json_schema", "name": "s", "schema": {"not": {}}}}},
     "text.format.schema", "'not'"),
    ({"model": "demo", "input": "x", "max_output_tokens": 0}, "max_output_tokens", "in [1,"),
    ({"model": "demo", "input": "x", "temperature": -1}, "temperature", ">= 0"),
    ({"model": "demo", "input": "x", "reasoning": {"effort": "huge"}}, "reasoning.effort", "one of"),
    ({"model": "demo", "input": "x", "background": True}, "background", "not supported"),
    ({"model": "demo", "input": "x", "tool_choice": {"type": "file_search"}}, "tool_choice", "not supported"),
    ({"model": "demo", "input": "x", "metadata": {"a": 1}}, "metadata.a", "string"),
])
def test_bad_input_is_a_400_naming_the_field(engine_server, body, param, words):
    status, out = post_raw(engine_server, "/v1/responses", body)
    assert status == 400, out
    assert out["error"]["param"] == param and words in out["error"]["message"], out
    assert set(out["error"]) == {"message", "type", "param", "code"}


def test_bad_bodies_and_unknown_ids(engine_server):
    assert post_raw(engine_server, "/v1/responses", b"[1, 2]")[0] == 400
    assert post_raw(engine_server, "/v1/responses", b"{not json")[0] == 400
    assert post_raw(engine_server, "/v1/responses", {"model": "nope", "input": "x"})[0] == 404
    assert post_raw(engine_server, "/v1/responses/resp_unknown", None, method="GET")[0] == 404
    assert post_raw(engine_server, "/v1/responses/resp_unknown", None, method="DELETE")[0] == 404
    assert post_raw(engine_server, "/v1/responses/resp_x/input_items", None, method="GET")[0] == 404
    # The server is still serving.
    assert engine_server.client().responses.create(model="demo", input="ok", max_output_tokens=1).status


# --- the scripted generator: reasoning, tool calls, the turn after, an agent ------------------------------------

def test_reasoning_and_function_call_items(script_server):
    c = script_server.client()
    r = c.responses.create(model="scripted", input="Weather in Paris?", tools=[TOOL])
    assert [o.type for o in r.output] == ["reasoning", "function_call"]
    reasoning, call = r.output
    assert reasoning.id.startswith("rs_") and reasoning.summary == []
    assert reasoning.content[0].type == "reasoning_text" and "wants the weather" in reasoning.content[0].text
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    assert call.call_id.startswith("call_") and call.id.startswith("fc_")
    assert r.usage.output_tokens_details.reasoning_tokens > 0
    assert r.tools[0].name == "get_weather" and r.tool_choice == "auto"


def test_tool_round_trip_renders_like_the_chat_conversation(script_server):
    c = script_server.client()
    r1 = c.responses.create(model="scripted", input="Weather in Paris?", tools=[TOOL])
    call = r1.output[-1]
    # What the SDK user (and openai-agents) sends back: the output items as they came, then the tool's output.
    items = [{"role": "user", "content": "Weather in Paris?"}] + [o.model_dump(exclude_none=True) for o in r1.output]
    items.append({"type": "function_call_output", "call_id": call.call_id, "output": "22 degrees, sunny"})
    r2 = c.responses.create(model="scripted", input=items, tools=[TOOL])
    # As the chat endpoint (and vLLM's qwen3 parser) gives it: the text after </think>, its blank line included.
    assert r2.output_text == "\n\nIt is sunny in Paris."
    # The prompt is the chat conversation's: the call as tool_calls (with the turn's reasoning), the output as a
    # tool message (/tokenize renders messages as the chat endpoint does).
    messages = [{"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": "", "reasoning_content": r1.output[0].content[0].text,
                 "tool_calls": [{"id": call.call_id, "type": "function",
                                 "function": {"name": call.name, "arguments": call.arguments}}]},
                {"role": "tool", "tool_call_id": call.call_id, "content": "22 degrees, sunny"}]
    status, tok = post_raw(script_server, "/tokenize", {"model": "scripted", "messages": messages,
                                                        "tools": [CHAT_TOOL]})
    assert status == 200 and r2.usage.input_tokens == tok["count"]
    # The same turn through previous_response_id: only the tool's output is new.
    r3 = c.responses.create(model="scripted", previous_response_id=r1.id, tools=[TOOL], input=[
        {"type": "function_call_output", "call_id": call.call_id, "output": "22 degrees, sunny"}])
    assert r3.output_text == r2.output_text and r3.usage.input_tokens == tok["count"]


def test_streamed_function_call_events(script_server):
    c = script_server.client()
    events = list(c.responses.create(model="scripted", input="Weather?", tools=[TOOL], stream=True))
    types = [e.type for e in events]
    assert "response.reasoning_text.delta" in types and "response.output_text.delta" not in types
    assert types.index("response.reasoning_text.done") < types.index("response.function_call_arguments.delta")
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert json.loads(args) == json.loads(done.arguments) == {"city": "Paris"}
    final = events[-1]
    assert final.type == "response.completed"
    assert [o.type for o in final.response.output] == ["reasoning", "function_call"]
    added = [e.item.id for e in events if e.type == "response.output_item.added"]
    assert added == [o.id for o in final.response.output]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    with c.responses.stream(model="scripted", input="Weather?", tools=[TOOL]) as stream:
        for _ in stream:
            pass
        assert stream.get_final_response().output[-1].name == "get_weather"


def test_forced_tool_choice_names_the_function(script_server):
    c = script_server.client()
    r = c.responses.create(model="scripted", input="Weather?", tools=[TOOL],
                           tool_choice={"type": "function", "name": "get_weather"})
    assert r.output[-1].type == "function_call" and r.tool_choice.name == "get_weather"
    status, out = post_raw(script_server, "/v1/responses", {"model": "scripted", "input": "x", "tools": [TOOL],
                                                            "tool_choice": {"type": "function", "name": "nope"}})
    assert status == 400 and out["error"]["param"] == "tool_choice"


def test_openai_agents_runs_a_tool_using_agent(script_server):
    """The openai-agents SDK's default model (OpenAIResponsesModel) against pagoda: turn one calls the tool, the
    agent runs it and sends its output back, turn two answers."""
    agents = pytest.importorskip("agents", reason="openai-agents is not installed (tools/requirements-test.txt)")
    calls = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return f"22 degrees and sunny in {city}"

    def agent():  # a client per event loop: httpx's async pool belongs to the loop that opened it
        client = openai.AsyncOpenAI(base_url=script_server.url + "/v1", api_key="none", max_retries=0)
        return agents.Agent(name="weather", instructions="You answer weather questions.", tools=[get_weather],
                            model=agents.OpenAIResponsesModel(model="scripted", openai_client=client))

    agents.set_tracing_disabled(True)
    result = agents.Runner.run_sync(agent(), "What is the weather in Paris?")
    assert calls == ["Paris"]
    assert result.final_output.strip() == "It is sunny in Paris."

    async def streamed():
        run = agents.Runner.run_streamed(agent(), "What is the weather in Paris?")
        kinds = [e.type async for e in run.stream_events()]
        return run, kinds

    run, kinds = asyncio.run(streamed())
    assert "raw_response_event" in kinds
    assert calls == ["Paris", "Paris"] and run.final_output.strip() == "It is sunny in Paris."
