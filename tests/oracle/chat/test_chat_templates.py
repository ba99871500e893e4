"""`pagoda render` against transformers' own chat-template rendering (render_jinja_template: Jinja2's
ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks, loopcontrols, transformers' tojson,
raise_exception and strftime_now), byte for byte, over the real Qwen templates and hand-written ones."""

import copy
import json
import os
import pathlib
import subprocess

import pytest

HERE = pathlib.Path(__file__).parent
FIXTURES = HERE / "fixtures"
SHARED = pathlib.Path(os.environ.get("PAGODA_SHARED_DIR", "/work/shared"))
TOKENIZERS = SHARED / "qwen-tokenizers"

jinja2 = pytest.importorskip("jinja2", reason="jinja2 is needed for the chat template oracle")
chat_utils = pytest.importorskip(
    "transformers.utils.chat_template_utils", reason="transformers is needed for the chat template oracle"
)

# (id, tokenizer_config.json path) for the real templates.
MODELS = [
    ("qwen2.5", TOKENIZERS / "qwen2.5-1.5b-instruct" / "tokenizer_config.json"),
    ("qwen3", TOKENIZERS / "qwen3-4b" / "tokenizer_config.json"),
    ("qwen3-invokeai", TOKENIZERS / "qwen3-4b" / "variants" / "invokeai-tokenizer_config.json"),
    ("qwen3.5", TOKENIZERS / "qwen3.5-4b" / "tokenizer_config.json"),
    ("qwen3.5-comfyui", TOKENIZERS / "qwen3.5-4b" / "variants" / "comfyui-tokenizer_config.json"),
]
SPECIAL_TOKENS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]

CONVERSATIONS = json.loads((FIXTURES / "conversations.json").read_text(encoding="utf-8"))
TOOLS = json.loads((FIXTURES / "tools.json").read_text(encoding="utf-8"))
TEMPLATES = sorted((FIXTURES / "templates").glob("*.jinja"))
THINKING = {"absent": None, "thinking_on": True, "thinking_off": False}


def pagoda_bin():
    path = os.environ.get("PAGODA_BIN")
    if not path or not os.path.exists(path):
        pytest.skip("PAGODA_BIN is not set to the built `pagoda` executable")
    return path


def special_tokens(config):
    """tokenizer.special_tokens_map as transformers 5 builds it: the named tokens plus a mapping of extra ones."""
    names = list(SPECIAL_TOKENS)
    extra = config.get("extra_special_tokens")
    sources = dict(config)
    if isinstance(extra, dict):
        names += list(extra)
        sources.update(extra)
    out = {}
    for name in names:
        value = sources.get(name)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            out[name] = value
    return out


def vllm_postprocess_messages(messages):
    """vLLM's _postprocess_messages (entrypoints/chat_utils.py), applied before transformers sees the messages:
    call arguments become objects (an object kept, a JSON string parsed; anything else, invalid JSON or JSON that is
    not an object included, {}), and an empty tool_calls list is dropped."""
    for message in messages:
        calls = message.get("tool_calls")
        if message["role"] != "assistant" or not isinstance(calls, list):
            continue
        if not calls:
            message.pop("tool_calls")
            continue
        for item in calls:
            args = item["function"].get("arguments")
            if isinstance(args, str) and args:
                try:
                    args = json.loads(args)
                except json.JSONDecodeError:
                    args = {}
            item["function"]["arguments"] = args if isinstance(args, dict) else {}


def oracle(template, messages, tools, add_generation_prompt, kwargs, config):
    """What transformers' apply_chat_template(tokenize=False) renders, after vLLM's tool-argument parsing."""
    messages = copy.deepcopy(messages)
    vllm_postprocess_messages(messages)
    conversation = chat_utils._normalize_chat_messages(messages)
    template_kwargs = {**special_tokens(config), **kwargs}
    rendered, _ = chat_utils.render_jinja_template(
        conversations=[conversation],
        tools=tools,
        chat_template=template,
        add_generation_prompt=add_generation_prompt,
        **template_kwargs,
    )
    return rendered[0]


def run_pagoda(tmp_path, model_dir, messages, tools, add_generation_prompt, kwargs, template_file=None):
    messages_file = tmp_path / "messages.json"
    messages_file.write_text(json.dumps(messages, ensure_ascii=False), encoding="utf-8")
    cmd = [pagoda_bin(), "render", "--model", str(model_dir), "--messages", str(messages_file)]
    if tools is not None:
        tools_file = tmp_path / "tools.json"
        tools_file.write_text(json.dumps(tools, ensure_ascii=False), encoding="utf-8")
        cmd += ["--tools", str(tools_file)]
    for key, value in kwargs.items():
        cmd += ["--kw", f"{key}={json.dumps(value)}"]
    if not add_generation_prompt:
        cmd.append("--no-generation-prompt")
    if template_file is not None:
        cmd += ["--chat-template", str(template_file)]
    return subprocess.run(cmd, capture_output=True, timeout=60)


def compare(tmp_path, template, config, model_dir, messages, tools, add_generation_prompt, kwargs, template_file=None):
    try:
        expected = oracle(template, messages, tools, add_generation_prompt, kwargs, config)
        expected_error = None
    except Exception as e:  # the oracle's failure is the expected outcome
        expected, expected_error = None, e
    result = run_pagoda(tmp_path, model_dir, messages, tools, add_generation_prompt, kwargs, template_file)
    stderr = result.stderr.decode("utf-8", "replace")
    if expected_error is not None:
        assert result.returncode != 0, f"expected an error ({expected_error!r}), got output {result.stdout!r}"
        assert stderr.count("\n") <= 1, f"error must be one line: {stderr!r}"
        if type(expected_error) is jinja2.exceptions.TemplateError:  # raise_exception(msg)
            assert str(expected_error) in stderr
        return
    assert result.returncode == 0, f"pagoda failed: {stderr}"
    got = result.stdout.decode("utf-8")
    assert got == expected


def model_cases():
    for model_id, config_path in MODELS:
        for conv_id in CONVERSATIONS:
            for think_id in THINKING:
                for gen in (True, False):
                    yield pytest.param(
                        model_id, config_path, conv_id, think_id, gen, id=f"{model_id}-{conv_id}-{think_id}-gen{int(gen)}"
                    )


@pytest.mark.parametrize("model_id,config_path,conv_id,think_id,gen", list(model_cases()))
def test_real_template(tmp_path, model_id, config_path, conv_id, think_id, gen):
    if not config_path.exists():
        pytest.skip(f"{config_path} is absent")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    template = config["chat_template"]
    case = CONVERSATIONS[conv_id]
    tools = TOOLS[case["tools"]] if "tools" in case else None
    kwargs = {} if THINKING[think_id] is None else {"enable_thinking": THINKING[think_id]}
    # A model directory holding just this tokenizer_config.json (the variants live under other names).
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
    compare(tmp_path, template, config, model_dir, case["messages"], tools, gen, kwargs)


@pytest.mark.parametrize("template_file", TEMPLATES, ids=[t.stem for t in TEMPLATES])
def test_handwritten_template(tmp_path, template_file):
    template = template_file.read_text(encoding="utf-8")
    config = {"eos_token": "<|im_end|>", "bos_token": "<s>", "unk_token": None,
              "pad_token": {"content": "<|endoftext|>", "special": True},
              "extra_special_tokens": {"image_token": "<|image_pad|>"}}
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    messages = CONVERSATIONS["multi_turn"]["messages"]
    compare(tmp_path, template, config, model_dir, messages, None, True, {"flag": True, "num": 3},
            template_file=template_file)


def test_cli_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[{\"role\": ", encoding="utf-8")
    model_dir = TOKENIZERS / "qwen3-4b"
    result = subprocess.run([pagoda_bin(), "render", "--model", str(model_dir), "--messages", str(bad)],
                            capture_output=True, timeout=60)
    assert result.returncode != 0
    assert result.stderr.decode().count("\n") == 1
    broken = tmp_path / "broken.jinja"
    broken.write_text("{% for x in %}", encoding="utf-8")
    good = tmp_path / "m.json"
    good.write_text('[{"role": "user", "content": "hi"}]', encoding="utf-8")
    result = subprocess.run([pagoda_bin(), "render", "--chat-template", str(broken), "--messages", str(good)],
                            capture_output=True, timeout=60)
    assert result.returncode != 0
    err = result.stderr.decode()
    assert err.count("\n") == 1 and "1:13" in err


def long_conversation(turns=120):
    """Many turns with reasoning, parallel tool calls and tool results, built deterministically."""
    messages = [{"role": "system", "content": "You are helpful. " * 10}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"Question {i}: " + "lorem ipsum ü 你好 " * (i % 7 + 1)})
        if i % 3 == 0:
            messages.append({"role": "assistant", "content": "" if i % 2 else "Checking.",
                             "reasoning_content": f"step {i}\n" * 3,
                             "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                             "arguments": json.dumps({"city": f"C{i}", "days": [i, i + 1.5]})}},
                                            {"type": "function", "function": {"name": "get_time", "arguments": "{}"}}]})
            messages.append({"role": "tool", "content": f"{{\"t\": {i}}}"})
            messages.append({"role": "tool", "content": "noon"})
        messages.append({"role": "assistant", "content": f"<think>\nthought {i}\n</think>\n\nAnswer {i}."})
    messages.append({"role": "user", "content": "Final question"})
    return messages


@pytest.mark.parametrize("model_id,config_path", [pytest.param(m, p, id=m) for m, p in MODELS])
def test_long_conversation(tmp_path, model_id, config_path):
    if not config_path.exists():
        pytest.skip(f"{config_path} is absent")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
    compare(tmp_path, config["chat_template"], config, model_dir, long_conversation(), TOOLS["weather"], True, {})
