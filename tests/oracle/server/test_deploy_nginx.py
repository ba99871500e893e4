"""deploy/nginx/pagoda.conf run by Debian's nginx (as this user, in a temporary prefix, on a free loopback port) in
front of a running `pagoda serve` on the demo model: streams pass through token by token, basic auth and the
allow/deny rules hold.

The site file is included as shipped; only the listen port, the upstream address and the htpasswd path are
substituted (each must occur exactly once, so a renamed line fails here rather than going untested)."""

import base64
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from test_openai_sdk import Server, demo_dir  # noqa: F401  (fixture)
from test_serving_ops import scrape

openai = pytest.importorskip("openai")

ROOT = Path(__file__).resolve().parents[3]
SITE = ROOT / "deploy" / "nginx" / "pagoda.conf"
USER, PASSWORD = "alice", "correct horse battery staple"
MAX_TOKENS = 400  # the demo model on 2 busy cores takes about half a second for these: far longer than one scrape


@pytest.fixture(scope="module")
def nginx_exe():
    exe = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").is_file() else None)
    if exe is None:
        pytest.skip("nginx is not installed (Debian package nginx; scripts/install-deps installs it)")
    return exe


@pytest.fixture(scope="module")
def pagoda(demo_dir):  # noqa: F811
    s = Server([str(demo_dir), "--served-model-name", "demo", "--max-model-len", "1024"])
    yield s
    assert s.stop() == 0


def basic(user=USER, password=PASSWORD):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def get(url, authorization=None):
    """(status, body) of a GET, with an Authorization header if given."""
    req = urllib.request.Request(url, headers={"Authorization": authorization} if authorization else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    """nginx with the shipped site, its temp files, pid and logs under `prefix`; stopped by pid."""

    def __init__(self, exe, prefix, upstream, edits=()):
        prefix.mkdir(parents=True, exist_ok=True)
        # {SHA} is one of the htpasswd formats nginx reads (ngx_crypt), and needs no apache2-utils.
        digest = base64.b64encode(hashlib.sha1(PASSWORD.encode()).digest()).decode()
        (prefix / "htpasswd").write_text(f"{USER}:{{SHA}}{digest}\n")
        self.port = free_port()
        site = SITE.read_text()
        for old, new in [("listen 80;", f"listen 127.0.0.1:{self.port};"),
                         ("server 127.0.0.1:8000;", f"server {upstream};"),
                         ("/etc/nginx/pagoda.htpasswd", str(prefix / "htpasswd")), *edits]:
            assert site.count(old) == 1, f"{old!r} occurs {site.count(old)} times in {SITE}"
            site = site.replace(old, new)
        (prefix / "pagoda.conf").write_text(site)
        temp = "\n".join(f"    {k}_temp_path {prefix}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi",
                                                                         "scgi"))
        # Started by root, nginx runs its worker as nobody, who cannot read pytest's private temp dir.
        user = "user root;\n" if os.geteuid() == 0 else ""
        (prefix / "nginx.conf").write_text(f"{user}worker_processes 1;\nevents {{ worker_connections 64; }}\nhttp {{\n"
                                           f"    access_log off;\n{temp}\n    include {prefix}/pagoda.conf;\n}}\n")
        self.cmd = [exe, "-p", str(prefix), "-e", "stderr", "-c", str(prefix / "nginx.conf"), "-g",
                    f"daemon off; pid {prefix}/nginx.pid; error_log stderr;"]
        self.prefix, self.url = prefix, f"http://127.0.0.1:{self.port}"

    def check(self):
        return subprocess.run([*self.cmd, "-t"], capture_output=True, text=True, timeout=30)

    def __enter__(self):
        self.log = open(self.prefix / "stderr.log", "w+")
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError("nginx exited:\n" + self.log.read())
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.__exit__()
        raise RuntimeError("nginx did not listen")

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGQUIT)  # graceful: finishes open requests, then exits 0
        try:
            self.proc.wait(timeout=10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.log.close()

    def client(self):
        return openai.OpenAI(base_url=self.url + "/v1", api_key="none", max_retries=0, timeout=60,
                             default_headers={"Authorization": basic()})


def upstream(pagoda):
    return pagoda.url.removeprefix("http://")


def first_chunk_while_running(proxy, pagoda):
    """Streams MAX_TOKENS tokens through the proxy; when the first text chunk arrives, asks pagoda directly (not
    through nginx) whether the request is still running. A buffering proxy hands over nothing until the last token
    is produced, so it answers no: a causal check, not a timing one."""
    stream = proxy.client().completions.create(model="demo", prompt="Once upon a time", max_tokens=MAX_TOKENS,
                                               temperature=0, stream=True, extra_body={"ignore_eos": True})
    running_at_first, texts = None, []
    for chunk in stream:
        if chunk.choices and chunk.choices[0].text:
            if running_at_first is None:
                running_at_first = scrape(pagoda.url).value("num_requests_running")
            texts.append(chunk.choices[0].text)
    return running_at_first, texts


def test_nginx_accepts_the_site_without_warnings(nginx_exe, pagoda, tmp_path):
    r = Nginx(nginx_exe, tmp_path, upstream(pagoda)).check()
    assert r.returncode == 0, r.stderr
    assert "[warn]" not in r.stderr and "[emerg]" not in r.stderr, r.stderr


def test_a_stream_arrives_token_by_token(nginx_exe, pagoda, tmp_path):
    with Nginx(nginx_exe, tmp_path, upstream(pagoda)) as proxy:
        running_at_first, texts = first_chunk_while_running(proxy, pagoda)
        r = proxy.client().completions.with_raw_response.create(model="demo", prompt="Once upon a time",
                                                                max_tokens=MAX_TOKENS, temperature=0,
                                                                extra_body={"ignore_eos": True})
        assert r.headers["X-Accel-Buffering"] == "no"
    assert running_at_first == 1
    assert len(texts) > 1
    # Nothing lost or merged on the way: the streamed text is what pagoda answers directly, unstreamed.
    direct = pagoda.client().completions.create(model="demo", prompt="Once upon a time", max_tokens=MAX_TOKENS,
                                                temperature=0, extra_body={"ignore_eos": True})
    assert "".join(texts) == direct.choices[0].text == r.parse().choices[0].text


def test_the_check_above_sees_a_buffering_proxy(nginx_exe, pagoda, tmp_path):
    # The same site with a common mistake: buffering on (pagoda's X-Accel-Buffering ignored) and gzip on event
    # streams. nginx then holds the whole stream until pagoda has finished, and the check says so.
    # (Buffering alone does not delay it: nginx sends on what it reads while the client keeps up.)
    edits = [("proxy_buffering off;", "proxy_buffering on; proxy_ignore_headers X-Accel-Buffering;"),
             ("gzip off;", "gzip on; gzip_types text/event-stream; gzip_min_length 1; gzip_buffers 16 256k;")]
    with Nginx(nginx_exe, tmp_path, upstream(pagoda), edits) as proxy:
        running_at_first, texts = first_chunk_while_running(proxy, pagoda)
    assert running_at_first == 0
    assert len(texts) > 1  # the SDK still splits the events: counting chunks alone proves nothing


def test_basic_auth(nginx_exe, pagoda, tmp_path):
    with Nginx(nginx_exe, tmp_path, upstream(pagoda)) as proxy:
        assert get(proxy.url + "/v1/models")[0] == 401
        assert get(proxy.url + "/v1/models", basic(password="wrong"))[0] == 401
        status, body = get(proxy.url + "/v1/models", basic())
        assert status == 200 and json.loads(body)["data"][0]["id"] == "demo"
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=proxy.url + "/v1", api_key="none", max_retries=0).models.list()
        assert get(proxy.url + "/health")[0] == 200  # open for load balancers


def test_allow_deny(nginx_exe, pagoda, tmp_path):
    with Nginx(nginx_exe, tmp_path / "shipped", upstream(pagoda)) as proxy:
        # /metrics is for the Prometheus host only, password or not; pagoda itself serves it.
        assert get(proxy.url + "/metrics", basic())[0] == 403
        assert get(pagoda.url + "/metrics")[0] == 200
    # Loopback taken off the server's allow list: every location refuses this client before asking for a password.
    with Nginx(nginx_exe, tmp_path / "no-loopback", upstream(pagoda), [("allow 127.0.0.0/8;\n", "")]) as proxy:
        assert get(proxy.url + "/v1/models", basic())[0] == 403
        assert get(proxy.url + "/v1/models")[0] == 403
