"""deploy/prometheus/ checked by Prometheus's own tools: `promtool check config` and `check rules`, the alert rules'
unit tests (`promtool test rules`, which must also catch a broken rule), and a real Prometheus (Debian package
prometheus) scraping a running `pagoda serve` and evaluating every rule against it without an error. The Grafana
dashboard's queries must name only series that /metrics exports."""

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from ops_server import OpsServer
from test_openai_sdk import demo_dir  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy" / "prometheus"
RULES = DEPLOY / "pagoda-alerts.yml"


def tool(name):
    exe = shutil.which(name)
    if exe is None:
        pytest.skip(f"{name} is not installed (Debian package prometheus)")
    return exe


def run(*args, cwd=None):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=120, cwd=cwd)


def config_with(tmp_path, rules, target=None, interval=None):
    """deploy/prometheus/prometheus.yml with its rule file (and target, intervals) pointed at this test's."""
    text = (DEPLOY / "prometheus.yml").read_text().replace("/etc/prometheus/pagoda-alerts.yml", str(rules))
    if target:
        text = text.replace('"127.0.0.1:8000"', f'"{target}"')
    if interval:
        text = text.replace("scrape_interval: 15s", f"scrape_interval: {interval}")
        text = text.replace("evaluation_interval: 15s", f"evaluation_interval: {interval}")
    path = tmp_path / "prometheus.yml"
    path.write_text(text)
    return path


def test_promtool_checks_the_config_and_the_rules(tmp_path):
    promtool = tool("promtool")
    r = run(promtool, "check", "config", str(config_with(tmp_path, RULES)))
    assert r.returncode == 0, r.stdout + r.stderr
    r = run(promtool, "check", "rules", str(RULES))
    assert r.returncode == 0 and "6 rules found" in r.stdout, r.stdout + r.stderr


def test_the_alert_rules_unit_tests_pass_and_catch_a_broken_rule(tmp_path):
    promtool = tool("promtool")
    r = run(promtool, "test", "rules", "pagoda-alerts.test.yml", cwd=DEPLOY)
    assert r.returncode == 0, r.stdout + r.stderr
    # The same tests against a rule that waits for 99 % instead of 95 %: they must fail.
    shutil.copy(DEPLOY / "pagoda-alerts.test.yml", tmp_path)
    (tmp_path / "pagoda-alerts.yml").write_text(RULES.read_text().replace("> 0.95", "> 0.99"))
    r = run(promtool, "test", "rules", "pagoda-alerts.test.yml", cwd=tmp_path)
    assert r.returncode != 0 and "PagodaKVCacheNearlyFull" in r.stdout + r.stderr


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query(base, promql):
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())["data"]["result"]


def test_a_real_prometheus_scrapes_pagoda_and_evaluates_every_rule(demo_dir, tmp_path):  # noqa: F811
    prometheus = tool("prometheus")
    s = OpsServer([str(demo_dir), "--served-model-name", "scripted", "--x-test-generator-text", "hello"], tmp_path)
    port = free_port()
    proc = subprocess.Popen([prometheus, f"--config.file={config_with(tmp_path, RULES, s.url.split('//')[1], '1s')}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "w"))
    base = f"http://127.0.0.1:{port}"
    try:
        # Some traffic first, so that counters and histograms have samples.
        for _ in range(3):
            req = urllib.request.Request(s.url + "/v1/completions", data=json.dumps(
                {"model": "scripted", "prompt": "x", "max_tokens": 2}).encode(), headers={"Content-Type": "application/json"})
            urllib.request.urlopen(req, timeout=10).read()
        deadline = time.time() + 60
        up = []
        while time.time() < deadline:
            try:
                up = query(base, 'up{job="pagoda"}')
                if up and up[0]["value"][1] == "1" and query(base, 'pagoda:http_responses_total{code="2xx"} > 0'):
                    break
            except OSError:
                pass
            time.sleep(0.5)
        assert up and up[0]["value"][1] == "1", (tmp_path / "prometheus.log").read_text()
        running = query(base, "pagoda:num_requests_running")
        assert running[0]["metric"]["model_name"] == "scripted" and running[0]["metric"]["engine"] == "0"
        assert float(query(base, 'pagoda:http_responses_total{code="2xx"}')[0]["value"][1]) >= 3
        assert float(query(base, "pagoda:engine_steps_total")[0]["value"][1]) >= 0
        # Every rule evaluated against the real series without an error (a typo in a metric name would not error:
        # the dashboard test below checks the names).
        deadline = time.time() + 30
        while time.time() < deadline:
            with urllib.request.urlopen(base + "/api/v1/rules", timeout=5) as resp:
                rules = [r for g in json.loads(resp.read())["data"]["groups"] for r in g["rules"]]
            if len(rules) == 6 and all(r.get("lastEvaluation", "").startswith("20") and
                                       not r["lastEvaluation"].startswith("0001") for r in rules):
                break
            time.sleep(0.5)
        assert {r["name"] for r in rules} == {"PagodaKVCacheNearlyFull", "PagodaQueueGrowing",
                                              "PagodaTimeToFirstTokenP99High", "PagodaEngineStuck",
                                              "PagodaHigh5xxRate", "PagodaDown"}
        assert all(r["health"] == "ok" for r in rules), rules
        assert all(r["state"] == "inactive" for r in rules), rules  # a healthy, idle server fires nothing
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        assert s.stop() == 0


def exported_names(demo_dir, tmp_path):  # noqa: F811
    # With a key, so that the per-tenant series are there too.
    s = OpsServer([str(demo_dir), "--x-test-generator-text", "x", "--api-key", "k"], tmp_path)
    try:
        with urllib.request.urlopen(s.url + "/metrics", timeout=10) as resp:
            text = resp.read().decode()
    finally:
        assert s.stop() == 0
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}


def test_rules_and_dashboard_name_only_exported_series(demo_dir, tmp_path):  # noqa: F811
    names = exported_names(demo_dir, tmp_path)
    used = set(re.findall(r"pagoda:[a-z0-9_]+", RULES.read_text()))
    dashboard = DEPLOY / "grafana-dashboard.json"
    if dashboard.exists():
        panels = json.loads(dashboard.read_text())["panels"]
        exprs = [t["expr"] for p in panels for t in p.get("targets", [])]
        assert exprs
        used |= {n for e in exprs for n in re.findall(r"pagoda:[a-z0-9_]+", e)}
    assert used and used <= names, sorted(used - names)
