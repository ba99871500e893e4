"""The bad-input matrix of issue 5 against `pagoda serve` (TEST GENERATOR mode: scripted tokens, no model, so only
the HTTP and validation layers are exercised): each bad request gets its 4xx with an OpenAI error body, and the
server keeps serving everyone else."""

import json
import os
import resource
import socket
import time

import pytest

from test_openai_sdk import Server, demo_dir  # noqa: F401  (fixture)

# Every case below is bounded: sockets time out, and the server's --http-read-timeout is 1 s.


@pytest.fixture(scope="module")
def server(demo_dir):  # noqa: F811
    s = Server([str(demo_dir), "--served-model-name", "m", "--x-test-generator-text", "fine", "--max-model-len",
                "256", "--http-read-timeout", "1"])
    yield s
    assert s.stop() == 0


def raw(server, payload: bytes, timeout=10.0):
    """Sends raw bytes, returns (status, body) of the response."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(payload)
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
            head, sep, body = data.partition(b"\r\n\r\n")
            if sep:
                length = [int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:")]
                if length and len(body) >= length[0]:
                    break
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1]) if head else 0
    return status, body


def post(server, path, body: bytes):
    return raw(server, b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def error_of(body):
    e = json.loads(body)["error"]
    assert isinstance(e["message"], str) and e["message"]
    assert set(e) == {"message", "type", "param", "code"}
    return e


MSG = b'"messages":[{"role":"user","content":"hi"}]'

CASES = [
    ("malformed JSON", "/v1/chat/completions", b'{"messages": [', 400, None),
    ("not an object", "/v1/chat/completions", b'[1,2]', 400, None),
    ("wrong type", "/v1/chat/completions", b'{' + MSG + b',"temperature":"hot"}', 400, "temperature"),
    ("negative max_tokens", "/v1/chat/completions", b'{' + MSG + b',"max_tokens":-1}', 400, "max_tokens"),
    ("huge max_tokens", "/v1/completions", b'{"prompt":"x","max_tokens":1000000}', 400, None),
    ("huge n", "/v1/chat/completions", b'{' + MSG + b',"n":100000}', 400, "n"),
    ("prompt over max_model_len", "/v1/completions",
     b'{"prompt":"' + b"hello " * 400 + b'","max_tokens":1}', 400, None),
    ("unknown model", "/v1/chat/completions", b'{"model":"nope",' + MSG + b'}', 404, "model"),
    ("invalid UTF-8", "/v1/completions", b'{"prompt":"\xff\xfe"}', 400, None),
    ("image part", "/v1/chat/completions",
     b'{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}', 400,
     "messages[0].content[0]"),
]


@pytest.mark.parametrize("name,path,body,status,param", CASES, ids=[c[0] for c in CASES])
def test_bad_request(server, name, path, body, status, param):
    got, resp = post(server, path, body)
    assert got == status, resp
    e = error_of(resp)
    assert e["code"] == status
    if param:
        assert e["param"] == param


def test_malformed_http_and_huge_body(server):
    status, body = raw(server, b"GARBAGE\r\n\r\n")
    assert status == 400
    error_of(body)
    # 50 MB (over the 32 MiB default limit): refused from the Content-Length, without reading it all.
    status, body = raw(server, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 52428800\r\n\r\n")
    assert status == 413
    error_of(body)
    # 50 MB really sent, chunked (no Content-Length to refuse it by): cut off at the limit with 413.
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        piece = b"%x\r\n" % (1 << 20) + b"x" * (1 << 20) + b"\r\n"
        try:
            for _ in range(50):
                sock.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before taking it all
        data = b""
        try:
            while chunk := sock.recv(65536):
                data += chunk
        except ConnectionResetError:
            pass
    assert data.startswith(b"HTTP/1.1 413"), data[:200]
    status, _ = post(server, "/v1/completions", b'{"prompt":"x"}')
    assert status == 200


def test_slow_drip_client_is_cut_off_and_others_are_served(server):
    host, port = server.url.removeprefix("http://").split(":")
    slow = socket.create_connection((host, int(port)), timeout=10)
    slow.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")  # ... and never finishes the request
    status, body = post(server, "/v1/completions", b'{"prompt":"x"}')
    assert status == 200 and json.loads(body)["choices"][0]["text"] == "fine"
    slow.settimeout(10)
    closed = False
    try:
        closed = slow.recv(4096) == b""  # the server hangs up after --http-read-timeout 1
    except ConnectionResetError:
        closed = True
    except socket.timeout:
        pass
    slow.close()
    assert closed


def _raise_fd_limit(want):
    """Raises this process's soft fd limit towards `want` (the server started after inherits it); returns it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def test_many_idle_connections_do_not_block_requests(demo_dir):  # noqa: F811
    """10,000 idle connections (fewer when the fd limit cannot be raised that far: each side holds one fd per
    connection) are all held open while other clients are served; closing them brings the server's fds back."""
    limit = _raise_fd_limit(10_000 + 500)
    count = min(10_000, limit - 500)
    assert count >= 1000, f"fd limit {limit} is too low for this test"
    s = Server([str(demo_dir), "--served-model-name", "m", "--x-test-generator-text", "fine"])
    try:
        host, port = s.url.removeprefix("http://").split(":")
        fds_before = len(os.listdir(f"/proc/{s.proc.pid}/fd"))
        idle = []
        start = time.time()
        try:
            for _ in range(count):
                idle.append(socket.create_connection((host, int(port)), timeout=10))
            for _ in range(3):
                status, body = post(s, "/v1/completions", b'{"prompt":"x"}')
                assert status == 200 and json.loads(body)["choices"][0]["text"] == "fine"
            # The server holds them all (accepted, waiting for a request).
            deadline = time.time() + 20
            while len(os.listdir(f"/proc/{s.proc.pid}/fd")) < fds_before + count and time.time() < deadline:
                time.sleep(0.05)
            assert len(os.listdir(f"/proc/{s.proc.pid}/fd")) >= fds_before + count
        finally:
            for sock in idle:
                sock.close()
        deadline = time.time() + 20
        while len(os.listdir(f"/proc/{s.proc.pid}/fd")) > fds_before + 5 and time.time() < deadline:
            time.sleep(0.05)
        assert len(os.listdir(f"/proc/{s.proc.pid}/fd")) <= fds_before + 5
        status, _ = post(s, "/v1/completions", b'{"prompt":"x"}')
        assert status == 200
        assert time.time() - start < 60
        print(f"{count} idle connections held and released (fd limit {limit})")
    finally:
        assert s.stop() == 0
