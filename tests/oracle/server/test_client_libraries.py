"""The client libraries people point at an OpenAI-compatible server, against `pagoda serve`: langchain-openai,
litellm, instructor and the openai-agents SDK (pinned in tools/requirements-test.txt). Each is used as its own
documentation shows it used against vLLM; where a client sends something the server must understand (null content
on the turn after a call, tool_choice forms, response_format json_schema, stream_options) the library is the judge.

Two kinds of server:
- the demo model (random weights, the real Qwen tokenizer): its free text is noise, so everything with a structure
  (forced tool calls, structured output) is valid only because the grammar made it so, and is checked as such;
- the hidden TEST GENERATOR (scripted tokens, no weights) where content must mean something: a tool call, then an
  answer once the tool answered, so that each library's tool loop runs to its end.
Everything runs offline: litellm reads its bundled cost map, the agents SDK's tracing is off.
"""

import asyncio
import json
import os
import typing

import pytest

from test_openai_sdk import Server, demo_dir  # noqa: F401  (fixture)
from test_responses_api import script_server  # noqa: F401  (fixture: the scripted call turn, then the answer)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm fetches its cost map at import otherwise

openai = pytest.importorskip("openai")
pydantic = pytest.importorskip("pydantic")
jsonschema = pytest.importorskip("jsonschema")

PERSON_JSON = '{"name": "Ada", "age": 36}'

# A tool whose arguments a random-weight model can finish quickly under the grammar (no free strings).
FORECAST_PARAMS = {
    "type": "object",
    "properties": {"city": {"type": "string", "enum": ["Paris", "Tokyo"]},
                   "days": {"type": "integer", "minimum": 1, "maximum": 7},
                   "windy": {"type": "boolean"}},
    "required": ["city", "days", "windy"],
}
FORECAST_TOOL = {"type": "function", "function": {"name": "forecast", "description": "A weather forecast.",
                                                  "parameters": FORECAST_PARAMS}}
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
MESSAGES = [{"role": "user", "content": "The forecast for Paris, please."}]


class Forecast(pydantic.BaseModel):
    city: typing.Literal["Paris", "Tokyo"]
    days: int = pydantic.Field(ge=1, le=7)
    windy: bool


class Person(pydantic.BaseModel):
    name: str
    age: int


@pytest.fixture(scope="module")
def demo(demo_dir):  # noqa: F811
    s = Server([str(demo_dir), "--served-model-name", "demo", "--max-model-len", "4096", "--enable-auto-tool-choice",
                "--tool-call-parser", "hermes"])
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def scripted(script_server):  # noqa: F811
    return script_server  # a hermes call, then "It is sunny in Paris." once the tool answered


@pytest.fixture(scope="module")
def scripted_json(demo_dir):  # noqa: F811
    s = Server([str(demo_dir), "--served-model-name", "scripted", "--x-test-generator-text", PERSON_JSON])
    yield s
    assert s.stop() == 0


def get_weather_impl(city):
    return f"22 degrees and sunny in {city}"


# --- langchain-openai -------------------------------------------------------------------------------------------

def _chat_openai(server, model, **kw):
    lc = pytest.importorskip("langchain_openai")
    return lc.ChatOpenAI(model=model, base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=300, **kw)


def test_langchain_invoke_and_stream(demo):
    # stream_usage: langchain asks for stream_options.include_usage only for OpenAI's own URL unless told.
    llm = _chat_openai(demo, "demo", max_tokens=12, temperature=0, stream_usage=True)
    msg = llm.invoke("Hello there")
    assert isinstance(msg.content, str) and msg.content
    assert msg.usage_metadata["output_tokens"] == 12 and msg.usage_metadata["input_tokens"] > 0
    assert msg.response_metadata["finish_reason"] == "length"
    chunks = list(llm.stream("Hello there"))
    assert len(chunks) > 1
    whole = chunks[0]
    for c in chunks[1:]:
        whole = whole + c
    assert whole.content == msg.content  # greedy: the same tokens streamed or not
    assert whole.usage_metadata["output_tokens"] == 12


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
def test_langchain_with_structured_output(demo, method):
    # json_schema sends response_format; function_calling sends the schema as a tool with a named tool_choice.
    # Either way the grammar makes the random-weight model's answer a valid Forecast.
    llm = _chat_openai(demo, "demo", max_tokens=200, seed=4)
    result = llm.with_structured_output(Forecast, method=method, include_raw=True).invoke(MESSAGES)
    assert result["parsing_error"] is None, result["raw"]
    assert isinstance(result["parsed"], Forecast)


def test_langchain_forced_tool_call_on_random_weights(demo):
    llm = _chat_openai(demo, "demo", max_tokens=200, seed=2).bind_tools([FORECAST_TOOL], tool_choice="forecast",
                                                                     parallel_tool_calls=False)
    msg = llm.invoke(MESSAGES)
    assert [c["name"] for c in msg.tool_calls] == ["forecast"]
    jsonschema.validate(msg.tool_calls[0]["args"], FORECAST_PARAMS)


def test_langchain_tool_round_trip(scripted):
    core = pytest.importorskip("langchain_core.messages")
    tools = pytest.importorskip("langchain_core.tools")

    @tools.tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return get_weather_impl(city)

    llm = _chat_openai(scripted, "scripted").bind_tools([get_weather])
    history = [core.HumanMessage("What is the weather in Paris?")]
    ai = llm.invoke(history)
    assert ai.tool_calls and ai.tool_calls[0]["name"] == "get_weather" and ai.tool_calls[0]["args"] == {"city": "Paris"}
    assert ai.additional_kwargs.get("reasoning_content") is None or "weather" in ai.additional_kwargs["reasoning_content"]
    history += [ai, get_weather.invoke(ai.tool_calls[0])]  # a ToolMessage with the call's id
    answer = llm.invoke(history)  # the AIMessage goes back with content "" or null and its tool_calls
    assert answer.content.strip() == "It is sunny in Paris." and not answer.tool_calls
    # Streamed, the call arrives in tool_call_chunks that add up to the same call.
    chunks = list(llm.stream(history[:1]))
    whole = chunks[0]
    for c in chunks[1:]:
        whole = whole + c
    assert [(c["name"], c["args"]) for c in whole.tool_calls] == [("get_weather", {"city": "Paris"})]


def test_langchain_over_the_responses_api(scripted, demo):
    # use_responses_api: langchain's own Responses client (items, reasoning, function_call_output) on the same loop.
    core = pytest.importorskip("langchain_core.messages")
    llm = _chat_openai(scripted, "scripted", use_responses_api=True).bind_tools([WEATHER_TOOL])
    history = [core.HumanMessage("What is the weather in Paris?")]
    ai = llm.invoke(history)
    assert [(c["name"], c["args"]) for c in ai.tool_calls] == [("get_weather", {"city": "Paris"})]
    history += [ai, core.ToolMessage(get_weather_impl("Paris"), tool_call_id=ai.tool_calls[0]["id"])]
    answer = llm.invoke(history)
    assert answer.text.strip() == "It is sunny in Paris." and not answer.tool_calls
    structured = _chat_openai(demo, "demo", use_responses_api=True, max_tokens=200, extra_body={"seed": 8})
    assert isinstance(structured.with_structured_output(Forecast).invoke(MESSAGES), Forecast)


# --- litellm ----------------------------------------------------------------------------------------------------

def _litellm():
    litellm = pytest.importorskip("litellm")
    litellm.telemetry = False
    return litellm


def _litellm_args(server, model):
    # The openai/ provider is litellm's way to any OpenAI-compatible server (its docs' recipe for vLLM).
    return dict(model="openai/" + model, api_base=server.url + "/v1", api_key="none", num_retries=0, timeout=300)


def test_litellm_completion_and_streaming(demo):
    litellm = _litellm()
    r = litellm.completion(messages=MESSAGES, max_tokens=10, temperature=0, **_litellm_args(demo, "demo"))
    text = r.choices[0].message.content
    assert isinstance(text, str) and text and r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 10
    chunks = list(litellm.completion(messages=MESSAGES, max_tokens=10, temperature=0, stream=True,
                                     **_litellm_args(demo, "demo")))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text
    rebuilt = litellm.stream_chunk_builder(chunks, messages=MESSAGES)
    assert rebuilt.choices[0].message.content == text


def test_litellm_forced_tool_call_on_random_weights(demo):
    litellm = _litellm()
    r = litellm.completion(messages=MESSAGES, tools=[FORECAST_TOOL], tool_choice="required", max_tokens=200, seed=3,
                           parallel_tool_calls=False, **_litellm_args(demo, "demo"))
    calls = r.choices[0].message.tool_calls
    assert len(calls) == 1 and calls[0].function.name == "forecast"
    jsonschema.validate(json.loads(calls[0].function.arguments), FORECAST_PARAMS)


def test_litellm_response_format_pydantic(demo):
    # litellm turns a pydantic class into response_format json_schema.
    litellm = _litellm()
    r = litellm.completion(messages=MESSAGES, response_format=Forecast, max_tokens=200, seed=9,
                           **_litellm_args(demo, "demo"))
    Forecast.model_validate_json(r.choices[0].message.content)


def test_litellm_tool_round_trip_and_streamed_call(scripted):
    litellm = _litellm()
    args = _litellm_args(scripted, "scripted")
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    r = litellm.completion(messages=messages, tools=[WEATHER_TOOL], **args)
    msg = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls"
    call = msg.tool_calls[0]
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
    messages.append(msg)  # litellm's Message object, as its docs' tool loop sends it back
    messages.append({"role": "tool", "tool_call_id": call.id, "content": get_weather_impl("Paris")})
    r2 = litellm.completion(messages=messages, tools=[WEATHER_TOOL], **args)
    assert r2.choices[0].message.content.strip() == "It is sunny in Paris."
    chunks = list(litellm.completion(messages=messages[:1], tools=[WEATHER_TOOL], stream=True, **args))
    rebuilt = litellm.stream_chunk_builder(chunks, messages=messages[:1])
    calls = rebuilt.choices[0].message.tool_calls
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [("get_weather", {"city": "Paris"})]


# --- instructor -------------------------------------------------------------------------------------------------

def _instructor(server, mode):
    instructor = pytest.importorskip("instructor")
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=300)
    return instructor.from_openai(client, mode=getattr(instructor.Mode, mode))


@pytest.mark.parametrize("mode", ["TOOLS", "JSON_SCHEMA"])
def test_instructor_modes_that_constrain_on_random_weights(demo, mode):
    # TOOLS: the model's schema as a tool with a named tool_choice; JSON_SCHEMA: response_format json_schema.
    client = _instructor(demo, mode)
    forecast = client.chat.completions.create(model="demo", response_model=Forecast, messages=MESSAGES,
                                              max_tokens=200, seed=5, max_retries=0)
    assert isinstance(forecast, Forecast)


def test_instructor_streams_partial_objects(demo):
    # create_partial streams a forced tool call: the arguments grow as deltas and the last object is complete.
    client = _instructor(demo, "TOOLS")
    partials = list(client.chat.completions.create_partial(model="demo", response_model=Forecast, messages=MESSAGES,
                                                           max_tokens=200, seed=10, max_retries=0))
    assert len(partials) > 1
    Forecast.model_validate(partials[-1].model_dump())


def test_instructor_json_mode(scripted_json):
    # JSON mode is response_format json_object plus the schema in the system prompt: the model must follow the
    # prompt, so a scripted answer stands in for a model that does.
    client = _instructor(scripted_json, "JSON")
    person = client.chat.completions.create(model="scripted", response_model=Person, max_retries=0,
                                            messages=[{"role": "user", "content": "Ada, 36."}])
    assert isinstance(person, Person) and person.model_dump() == {"name": "Ada", "age": 36}


# --- openai-agents ----------------------------------------------------------------------------------------------

def _agents():
    agents = pytest.importorskip("agents", reason="openai-agents is not installed (tools/requirements-test.txt)")
    agents.set_tracing_disabled(True)  # offline: no trace export
    return agents


def test_openai_agents_default_model_runs_a_tool_loop(scripted):
    """The SDK's default model: a model name, the default client (set_default_openai_client) and its default API,
    the Responses API. test_responses_api.py runs the same loop with an explicit OpenAIResponsesModel."""
    agents = _agents()
    calls = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return get_weather_impl(city)

    async def run():
        client = openai.AsyncOpenAI(base_url=scripted.url + "/v1", api_key="none", max_retries=0)
        agents.set_default_openai_client(client, use_for_tracing=False)
        agent = agents.Agent(name="weather", instructions="You answer weather questions.", tools=[get_weather],
                             model="scripted")
        return await agents.Runner.run(agent, "What is the weather in Paris?")

    result = asyncio.run(run())
    assert calls == ["Paris"]
    assert result.final_output.strip() == "It is sunny in Paris."
    kinds = [item.type for item in result.new_items]
    assert kinds.index("tool_call_item") < kinds.index("tool_call_output_item") < kinds.index("message_output_item")


def test_openai_agents_structured_output_type(demo):
    """An agent with an output_type: the SDK sends text.format json_schema on /v1/responses, the grammar makes the
    random-weight model's answer a valid Forecast, the SDK parses it."""
    agents = _agents()

    async def run():
        client = openai.AsyncOpenAI(base_url=demo.url + "/v1", api_key="none", max_retries=0, timeout=300)
        agent = agents.Agent(name="forecaster", instructions="Answer with a forecast.", output_type=Forecast,
                             model=agents.OpenAIResponsesModel(model="demo", openai_client=client),
                             model_settings=agents.ModelSettings(max_tokens=200, extra_body={"seed": 6}))
        return await agents.Runner.run(agent, "The forecast for Paris?")

    result = asyncio.run(run())
    assert isinstance(result.final_output, Forecast)
