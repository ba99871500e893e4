"""TLS in the server (--ssl-certfile, --ssl-keyfile, --ssl-ca-certs, --ssl-cert-reqs) and --allowed-ips, against
real clients: the openai SDK over https trusting a CA made here, curl with and without a client certificate, and
Python's ssl module for what must fail. Certificates are made in the test with the `openssl` command (Debian's
openssl package). The TEST GENERATOR answers (scripted tokens, no model)."""

import json
import shutil
import socket
import ssl
import subprocess
import urllib.request

import pytest

from ops_server import OpsServer
from test_openai_sdk import demo_dir  # noqa: F401  (fixture)

openai = pytest.importorskip("openai")

TEXT = "Secure hello."


def run_openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d, name):
    run_openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem",
                "-days", "2", "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)


def make_leaf(d, name, ca, ext):
    run_openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj",
                f"/CN={name}", cwd=d)
    (d / f"{name}.ext").write_text(ext)
    run_openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
                "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext", cwd=d)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed (Debian package openssl)")
    d = tmp_path_factory.mktemp("pki")
    make_ca(d, "ca")
    make_ca(d, "rogue-ca")
    make_leaf(d, "server", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    make_leaf(d, "client", "ca", "extendedKeyUsage=clientAuth\n")
    make_leaf(d, "rogue-client", "rogue-ca", "extendedKeyUsage=clientAuth\n")
    return d


def tls_args(pki, *extra):
    return ["--ssl-certfile", str(pki / "server.pem"), "--ssl-keyfile", str(pki / "server.key"), *extra]


@pytest.fixture(scope="module")
def https_server(demo_dir, pki, tmp_path_factory):  # noqa: F811
    s = OpsServer([str(demo_dir), "--served-model-name", "scripted", "--x-test-generator-text", TEXT,
                   *tls_args(pki)], tmp_path_factory.mktemp("https"))
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def mtls_server(demo_dir, pki, tmp_path_factory):  # noqa: F811
    s = OpsServer([str(demo_dir), "--served-model-name", "scripted", "--x-test-generator-text", TEXT,
                   *tls_args(pki, "--ssl-ca-certs", str(pki / "ca.pem"), "--ssl-cert-reqs", "2")],
                  tmp_path_factory.mktemp("mtls"))
    yield s
    assert s.stop() == 0


def curl(url, *args):
    r = subprocess.run(["curl", "-sS", "--max-time", "10", "-o", "-", "-w", "\n%{http_code}", *args, url],
                       capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def test_openai_sdk_over_https_trusting_our_ca(https_server, pki):
    assert https_server.url.startswith("https://127.0.0.1:")
    trust = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    with openai.DefaultHttpxClient(verify=trust) as http_client:
        c = openai.OpenAI(base_url=https_server.url + "/v1", api_key="none", http_client=http_client, max_retries=0)
        r = c.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "hi"}])
        assert r.choices[0].message.content == TEXT
        text = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
            model="scripted", messages=[{"role": "user", "content": "hi"}], stream=True) if ch.choices)
        assert text == TEXT
        # Keep-alive over TLS: several requests on the client's pooled connection.
        for _ in range(3):
            assert [m.id for m in c.models.list()] == ["scripted"]


def test_a_client_that_does_not_trust_the_certificate_fails(https_server):
    with pytest.raises(openai.APIConnectionError):
        openai.OpenAI(base_url=https_server.url + "/v1", api_key="none", max_retries=0).models.list()


def test_plain_http_on_the_tls_port_gets_no_answer(https_server):
    plain = https_server.url.replace("https://", "http://")
    with pytest.raises(Exception):
        urllib.request.urlopen(plain + "/health", timeout=5)
    # ... and the server keeps serving TLS clients.
    rc, out, _ = curl(https_server.url + "/health", "--cacert", str(pki_dir(https_server)))
    assert rc == 0 and out.endswith("200")


def pki_dir(server):
    return next(a for a in server.proc.args if a.endswith("server.pem")).replace("server.pem", "ca.pem")


def test_client_certificate_required(mtls_server, pki):
    ca = str(pki / "ca.pem")
    rc, out, _ = curl(mtls_server.url + "/v1/models", "--cacert", ca, "--cert", str(pki / "client.pem"), "--key",
                      str(pki / "client.key"))
    assert rc == 0 and out.endswith("200")
    assert json.loads(out.rsplit("\n", 1)[0])["data"][0]["id"] == "scripted"
    # Without a certificate, and with one from another CA: the handshake fails, no HTTP answer at all.
    rc, out, err = curl(mtls_server.url + "/v1/models", "--cacert", ca)
    assert rc != 0 and not out.endswith("200"), (rc, out, err)
    rc, out, err = curl(mtls_server.url + "/v1/models", "--cacert", ca, "--cert", str(pki / "rogue-client.pem"),
                        "--key", str(pki / "rogue-client.key"))
    assert rc != 0 and not out.endswith("200"), (rc, out, err)


def test_python_ssl_handshake_without_a_client_certificate_is_refused(mtls_server, pki):
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    port = int(mtls_server.url.rsplit(":", 1)[1])
    with pytest.raises((ssl.SSLError, ConnectionError)):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                # TLS 1.3 reports the refusal on the first read after the handshake.
                tls.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                if not tls.recv(100):
                    raise ConnectionError("closed")


@pytest.mark.parametrize("flags, message", [
    (["--ssl-certfile", "/nonexistent.pem", "--ssl-keyfile", "/nonexistent.key"], "--ssl-certfile /nonexistent.pem"),
    (["--ssl-keyfile", "x.key"], "need --ssl-certfile"),
    (["--ssl-cert-reqs", "3"], "need --ssl-certfile"),
])
def test_bad_tls_flags_are_refused_at_start(demo_dir, tmp_path, flags, message):  # noqa: F811
    s = OpsServer([str(demo_dir), "--x-test-generator-text", "x", *flags], tmp_path, wait_for_banner=False)
    assert s.exit_code() != 0
    assert message in s.log()


def test_a_key_that_does_not_match_the_certificate_is_refused(demo_dir, pki, tmp_path):  # noqa: F811
    s = OpsServer([str(demo_dir), "--x-test-generator-text", "x", "--ssl-certfile", str(pki / "server.pem"),
                   "--ssl-keyfile", str(pki / "client.key")], tmp_path, wait_for_banner=False)
    assert s.exit_code() != 0
    assert "--ssl-keyfile " + str(pki / "client.key") in s.log() and "mismatch" in s.log()


def test_cert_reqs_without_a_ca_is_refused(demo_dir, pki, tmp_path):  # noqa: F811
    s = OpsServer([str(demo_dir), "--x-test-generator-text", "x", *tls_args(pki, "--ssl-cert-reqs", "2")], tmp_path,
                  wait_for_banner=False)
    assert s.exit_code() != 0
    assert "needs --ssl-ca-certs" in s.log()


# --- --allowed-ips ---------------------------------------------------------------------------------------------

def status_of(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.mark.parametrize("allowed, expected", [("10.0.0.0/8", 403), ("10.0.0.0/8,127.0.0.0/8", 200),
                                               ('["127.0.0.1/32"]', 200), ("::1/128", 403)])
def test_allowed_ips_v4(demo_dir, tmp_path, allowed, expected):  # noqa: F811
    s = OpsServer([str(demo_dir), "--x-test-generator-text", "x", "--allowed-ips", allowed], tmp_path)
    try:
        for path in ("/health", "/metrics", "/v1/models"):
            code, body = status_of(s.url + path)
            assert code == expected, (path, code, body)
        if expected == 403:
            assert "not in --allowed-ips" in json.loads(body)["error"]["message"]
    finally:
        assert s.stop() == 0


def ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.parametrize("allowed, expected", [("::1", 200), ("fd00::/8", 403), ("::/0", 200), ("127.0.0.0/8", 403)])
def test_allowed_ips_v6(demo_dir, tmp_path, allowed, expected):  # noqa: F811
    if not ipv6_loopback():
        pytest.skip("no IPv6 loopback here")
    s = OpsServer([str(demo_dir), "--x-test-generator-text", "x", "--host", "::1", "--allowed-ips", allowed], tmp_path)
    try:
        port = s.url.rsplit(":", 1)[1]
        code, _ = status_of(f"http://[::1]:{port}/health")
        assert code == expected
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("allowed", ["10.0.0.0/33", "not-an-ip", "::1/129", "10.0.0.0/"])
def test_bad_allowed_ips_are_refused_at_start(demo_dir, tmp_path, allowed):  # noqa: F811
    s = OpsServer([str(demo_dir), "--x-test-generator-text", "x", "--allowed-ips", allowed], tmp_path,
                  wait_for_banner=False)
    assert s.exit_code() != 0
    assert "--allowed-ips" in s.log() and allowed.split(",")[0] in s.log()
