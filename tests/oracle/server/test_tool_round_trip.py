"""The second turn of every tool-using agent, against `pagoda serve` with the official `openai` SDK and the real Qwen
chat templates (Qwen2.5 and Qwen3: hermes calls; Qwen3.5: XML calls).

Turn one answers with a call; the client sends the assistant message back as the SDK returned it ("content": null),
then the tool's answer. Turn two must be served (it was refused with 400 before), and the prompt the server renders
for it must equal transformers' rendering of the same conversation after vLLM's message preprocessing: a null
content becomes "", call arguments are parsed into objects, and arguments that are not JSON become {}.

The model is the hidden TEST GENERATOR (scripted tokens, no weights) over the demo model's Qwen tokenizer, so turn
one always ends in a call in the template's format.
"""

import copy
import json
import os
import urllib.request
from pathlib import Path

import pytest

from test_openai_sdk import Server, demo_dir  # noqa: F401  (fixture)

openai = pytest.importorskip("openai")
chat_utils = pytest.importorskip("transformers.utils.chat_template_utils",
                                 reason="transformers renders the reference prompt")

TOKENIZERS = Path(os.environ.get("PAGODA_SHARED_DIR", "/work/shared")) / "qwen-tokenizers"

HERMES_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>'
XML_CALL = ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=unit>\ncelsius\n"
            "</parameter>\n</function>\n</tool_call>")
# (id, tokenizer_config.json, --tool-call-parser, the scripted output)
TEMPLATES = [
    ("qwen2.5", TOKENIZERS / "qwen2.5-1.5b-instruct" / "tokenizer_config.json", "hermes", HERMES_CALL),
    ("qwen3", TOKENIZERS / "qwen3-4b" / "tokenizer_config.json", "hermes", HERMES_CALL),
    ("qwen3.5", TOKENIZERS / "qwen3.5-4b" / "tokenizer_config.json", "qwen3_coder", XML_CALL),
]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                   "required": ["city"]}}}]


@pytest.fixture(scope="module", params=TEMPLATES, ids=[t[0] for t in TEMPLATES])
def tool_server(request, demo_dir, tmp_path_factory):  # noqa: F811
    name, config_path, parser, script = request.param
    if not config_path.exists():
        pytest.skip(f"no {config_path}")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    template = tmp_path_factory.mktemp(name) / "template.jinja"
    template.write_text(config["chat_template"], encoding="utf-8")
    s = Server([str(demo_dir), "--served-model-name", "m", "--x-test-generator-text", script, "--chat-template",
                str(template), "--enable-auto-tool-choice", "--tool-call-parser", parser])
    s.config = config
    yield s
    assert s.stop() == 0


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def served_prompt(server, messages):
    """The prompt the server renders for `messages` (vLLM's /tokenize with messages, then /detokenize)."""
    tokens = post(server.url + "/tokenize", {"model": "m", "messages": messages, "tools": TOOLS})["tokens"]
    return post(server.url + "/detokenize", {"model": "m", "tokens": tokens})["prompt"]


def reference_prompt(config, messages):
    """transformers' apply_chat_template(tokenize=False) after vLLM's preprocessing of the messages."""
    messages = copy.deepcopy(messages)
    for m in messages:
        if m.get("content") is None:
            m["content"] = ""  # vLLM's parse_chat_messages: a null content is an empty text
        for call in m.get("tool_calls") or []:  # vLLM's _postprocess_messages
            args = call["function"].get("arguments")
            if isinstance(args, str) and args:
                try:
                    args = json.loads(args)
                except json.JSONDecodeError:
                    args = {}
            call["function"]["arguments"] = args if isinstance(args, dict) else {}
    specials = {k: (v["content"] if isinstance(v, dict) else v) for k, v in config.items()
                if k.endswith("_token") and isinstance(v, (str, dict))}
    rendered, _ = chat_utils.render_jinja_template(conversations=[chat_utils._normalize_chat_messages(messages)],
                                                   tools=TOOLS, chat_template=config["chat_template"],
                                                   add_generation_prompt=True, **specials)
    return rendered[0]


def as_sent(message):
    """A message as the SDK serialises it into the next request (pydantic: the fields the response set)."""
    return message.model_dump(exclude_unset=True, mode="json")


def first_turn(client):
    messages = [{"role": "system", "content": "You are a weather bot."},
                {"role": "user", "content": "What is the weather in Paris?"}]
    r = client.chat.completions.create(model="m", messages=messages, tools=TOOLS)
    msg = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls"
    assert msg.content is None
    assert [(c.function.name, json.loads(c.function.arguments)) for c in msg.tool_calls] == \
        [("get_weather", {"city": "Paris", "unit": "celsius"})]
    return messages, msg


def test_second_turn_with_the_sdk_message(tool_server):
    client = tool_server.client()
    messages, msg = first_turn(client)
    call = msg.tool_calls[0]
    # What agents do: the SDK's own message object goes back into the list ("content": null in the JSON).
    sent = messages + [msg, {"role": "tool", "tool_call_id": call.id, "content": "22 degrees, sunny"}]
    r = client.chat.completions.create(model="m", messages=sent, tools=TOOLS)
    assert r.choices[0].message.tool_calls  # the scripted call again: served, parsed
    history = messages + [as_sent(msg), sent[-1]]
    assert history[2]["content"] is None
    assert served_prompt(tool_server, history) == reference_prompt(tool_server.config, history)


def test_second_turn_streaming_with_content_left_out(tool_server):
    client = tool_server.client()
    messages, msg = first_turn(client)
    assistant = {k: v for k, v in as_sent(msg).items() if k != "content"}  # LangChain-style: no content key
    sent = messages + [assistant, {"role": "tool", "tool_call_id": msg.tool_calls[0].id, "content": "sunny"}]
    chunks = list(client.chat.completions.create(model="m", messages=sent, tools=TOOLS, stream=True))
    names = [tc.function.name for ch in chunks for tc in (ch.choices[0].delta.tool_calls or [])
             if ch.choices and tc.function and tc.function.name]
    assert names == ["get_weather"]
    assert served_prompt(tool_server, sent) == reference_prompt(tool_server.config, sent)


def test_history_call_with_invalid_json_arguments(tool_server):
    client = tool_server.client()
    messages, msg = first_turn(client)
    assistant = as_sent(msg)
    assistant["tool_calls"][0]["function"]["arguments"] = '{"city": "Par'  # a model's cut-off call, kept verbatim
    sent = messages + [assistant, {"role": "tool", "tool_call_id": msg.tool_calls[0].id, "content": "?"}]
    r = client.chat.completions.create(model="m", messages=sent, tools=TOOLS)
    assert r.choices[0].message.tool_calls
    assert served_prompt(tool_server, sent) == reference_prompt(tool_server.config, sent)
