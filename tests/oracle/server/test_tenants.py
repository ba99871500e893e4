"""--api-keys-file: tenants with their own keys, models, request and token rate limits, checked with the openai SDK
(401 unknown key, 403 model not allowed, 429 with Retry-After over a limit), their usage in /metrics read with
prometheus_client's parser, --api-key alongside, and SIGHUP re-reading the file (a broken file keeps the old table).
The TEST GENERATOR answers (scripted tokens, no model), so the token counts are known."""

import json
import signal
import urllib.error
import urllib.request

import pytest

from ops_server import OpsServer
from test_openai_sdk import demo_dir  # noqa: F401  (fixture)

openai = pytest.importorskip("openai")
prometheus_parser = pytest.importorskip("prometheus_client.parser")

TEXT = "one two three four five six seven eight nine ten"
TENANTS = {"tenants": [
    {"name": "alice", "keys": ["sk-alice-1", "sk-alice-2"], "models": ["scripted"], "requests_per_minute": 3},
    {"name": "bob", "keys": ["sk-bob"], "tokens_per_minute": 15},
    {"name": "carol", "keys": ["sk-carol"], "admin": True},
]}


@pytest.fixture()
def tenant_server(demo_dir, tmp_path):  # noqa: F811
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(TENANTS))
    s = OpsServer([str(demo_dir), "--served-model-name", "scripted", "--served-model-name", "other",
                   "--x-test-generator-text", TEXT, "--api-keys-file", str(keys), "--api-key", "sk-plain"], tmp_path)
    s.keys = keys
    yield s
    assert s.stop() == 0


def client(server, key):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)


def chat(server, key, model="scripted", **kw):
    return client(server, key).chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}], **kw)


def tenant_counters(server):
    with urllib.request.urlopen(server.url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out = {}
    for family in prometheus_parser.text_string_to_metric_families(text):
        for s in family.samples:
            if "tenant" in s.labels:
                out[(s.name.split(":", 1)[1], s.labels["tenant"])] = s.value
    return out


def test_unknown_key_is_401_and_the_model_list_is_403_for_a_model_not_allowed(tenant_server):
    with pytest.raises(openai.AuthenticationError):
        chat(tenant_server, "sk-nobody")
    with pytest.raises(openai.AuthenticationError):
        chat(tenant_server, "sk-alice-")  # a prefix of a real key
    with pytest.raises(openai.PermissionDeniedError) as e:
        chat(tenant_server, "sk-alice-1", model="other")
    assert "alice may not use the model `other`" in str(e.value)
    assert chat(tenant_server, "sk-alice-2").choices[0].message.content == TEXT  # either of its keys
    assert chat(tenant_server, "sk-bob", model="other").choices[0].message.content == TEXT  # absent = all models
    assert chat(tenant_server, "sk-plain").choices[0].message.content == TEXT  # --api-key keeps working


def test_request_rate_limit_answers_429_with_retry_after(tenant_server):
    for _ in range(3):
        chat(tenant_server, "sk-alice-1")
    with pytest.raises(openai.RateLimitError) as e:
        chat(tenant_server, "sk-alice-2")  # the limit is the tenant's, over all its keys
    retry_after = int(e.value.response.headers["retry-after"])
    assert 1 <= retry_after <= 20  # one request's worth of a 3-per-minute bucket
    assert "requests_per_minute" in str(e.value)
    assert chat(tenant_server, "sk-carol").choices[0].message.content == TEXT  # other tenants are not held up
    counters = tenant_counters(tenant_server)
    assert counters[("tenant_requests_total", "alice")] == 3
    assert counters[("tenant_rate_limited_total", "alice")] == 1


def test_token_rate_limit_counts_prompt_and_generated_tokens(tenant_server):
    # bob may use 15 tokens a minute: the first request's prompt fits, its generated tokens put the bucket in debt,
    # and the next one (the same prompt) waits until the bucket holds its prompt again.
    r = chat(tenant_server, "sk-bob")
    used = r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.usage.prompt_tokens <= 15 < used
    with pytest.raises(openai.RateLimitError) as e:
        chat(tenant_server, "sk-bob")
    # The bucket is at 15 - used; it needs prompt_tokens, at 15 a minute (4 s a token), rounded up.
    wait = (r.usage.prompt_tokens - (15 - used)) * 4
    assert int(e.value.response.headers["retry-after"]) == pytest.approx(wait, abs=2)
    assert "tokens_per_minute" in str(e.value)
    counters = tenant_counters(tenant_server)
    assert counters[("tenant_prompt_tokens_total", "bob")] == r.usage.prompt_tokens
    assert counters[("tenant_generation_tokens_total", "bob")] == r.usage.completion_tokens
    assert counters[("tenant_requests_total", "bob")] == 2  # the refused one was admitted past the request limit


def test_streamed_tokens_are_charged_as_they_stream(tenant_server):
    chunks = list(client(tenant_server, "sk-carol").completions.create(
        model="scripted", prompt="count", stream=True, stream_options={"include_usage": True}))
    counters = tenant_counters(tenant_server)
    assert counters[("tenant_generation_tokens_total", "carol")] == chunks[-1].usage.completion_tokens
    assert counters[("tenant_prompt_tokens_total", "carol")] == chunks[-1].usage.prompt_tokens


def test_sighup_rereads_the_file_and_a_broken_file_keeps_the_old_one(tenant_server):
    with pytest.raises(openai.AuthenticationError):
        chat(tenant_server, "sk-dave")
    chat(tenant_server, "sk-alice-1")
    new = json.loads(json.dumps(TENANTS))
    new["tenants"].append({"name": "dave", "keys": ["sk-dave"]})
    new["tenants"][0]["keys"] = ["sk-alice-3"]  # alice's keys rotated
    tenant_server.keys.write_text(json.dumps(new))
    tenant_server.signal(signal.SIGHUP)
    tenant_server.wait_for("4 tenant\\(s\\) loaded")
    assert chat(tenant_server, "sk-dave").choices[0].message.content == TEXT
    with pytest.raises(openai.AuthenticationError):
        chat(tenant_server, "sk-alice-1")
    chat(tenant_server, "sk-alice-3")
    # alice's usage carried over the reload (one request before, one after).
    assert tenant_counters(tenant_server)[("tenant_requests_total", "alice")] == 2

    tenant_server.keys.write_text('{"tenants": [{"name": "eve", "keys": ["sk-eve"], "requests_per_minut": 5}]}')
    tenant_server.signal(signal.SIGHUP)
    tenant_server.wait_for("keeping the tenants loaded before")
    assert "requests_per_minut: unknown field" in tenant_server.log()
    assert chat(tenant_server, "sk-dave").choices[0].message.content == TEXT
    with pytest.raises(openai.AuthenticationError):
        chat(tenant_server, "sk-eve")
    # Keys are never logged.
    assert "sk-" not in tenant_server.log()


def test_health_metrics_and_tokenize_stay_open(tenant_server):
    for path in ("/health", "/metrics"):
        with urllib.request.urlopen(tenant_server.url + path, timeout=5) as resp:
            assert resp.status == 200


@pytest.mark.parametrize("content, message", [
    ("not json", "--api-keys-file"),
    ('{"tenants": [{"name": "a"}]}', "has no \"keys\""),
    ('{"tenants": [{"name": "a", "keys": ["k"]}, {"name": "a", "keys": ["j"]}]}', "the name a is taken"),
    ('{"tenants": [{"name": "a", "keys": ["k"]}, {"name": "b", "keys": ["k"]}]}', "a key is listed twice"),
    ('{"tenants": [{"name": "a", "keys": ["k"], "tokens_per_minute": -1}]}', "non-negative integer"),
    ('{"tenants": [{"name": "a", "keys": [""]}]}', "non-empty strings"),
    ('[]', "{\"tenants\": [...]}"),
])
def test_bad_key_files_are_refused_at_start(demo_dir, tmp_path, content, message):  # noqa: F811
    keys = tmp_path / "keys.json"
    keys.write_text(content)
    s = OpsServer([str(demo_dir), "--x-test-generator-text", "x", "--api-keys-file", str(keys)], tmp_path,
                  wait_for_banner=False)
    assert s.exit_code() != 0
    assert message in s.log()


def test_admin_endpoint_is_for_admin_tenants_only(tenant_server):
    chat(tenant_server, "sk-bob")

    def get(key):
        req = urllib.request.Request(tenant_server.url + "/v1/admin/tenants", headers={"Authorization": "Bearer " + key})
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    code, body = get("sk-carol")
    assert code == 200
    usage = {t["tenant"]: t for t in body["data"]}
    assert set(usage) == {"alice", "bob", "carol", "default"}
    assert usage["bob"]["requests"] == 1 and usage["bob"]["generation_tokens"] > 0
    assert get("sk-plain")[0] == 200  # --api-key's tenant "default" is an admin
    code, body = get("sk-bob")
    assert code == 403 and "bob is not an admin" in body["error"]["message"]
    assert get("sk-nobody")[0] == 401
