"""systemd's notification protocol as pagoda speaks it, with a real datagram socket standing in for systemd
($NOTIFY_SOCKET): READY=1 only once /health answers 200 (the real engine on the demo model, whose load takes a
moment), WATCHDOG=1 every WATCHDOG_USEC/2 from then on, STOPPING=1 when SIGTERM starts the drain; none of it
without the variable, and no keep-alives when WATCHDOG_PID names another process.

`systemd-run --user` would run the real unit type, but it needs a user service manager (a systemd --user instance
and its D-Bus), which a container started without systemd as PID 1 does not have: that test skips, saying so."""

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from ops_server import OpsServer
from test_openai_sdk import demo_dir  # noqa: F401  (fixture)


class FakeSystemd:
    """The manager's end: a unix datagram socket; messages are collected with the time they arrived."""

    def __init__(self, path):
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.05)
        self.messages = []

    def poll(self, until, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                data = self.sock.recv(4096).decode()
                self.messages.append((time.monotonic(), data))
                if until(data):
                    return data
            except socket.timeout:
                pass
        raise TimeoutError(f"no such message; got {[m for _, m in self.messages]}")

    def close(self):
        self.sock.close()


def health(url):
    try:
        with urllib.request.urlopen(url + "/health", timeout=5) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code


def test_ready_watchdog_and_stopping_with_the_real_engine(demo_dir, tmp_path):  # noqa: F811
    manager = FakeSystemd(tmp_path / "notify.sock")
    s = OpsServer([str(demo_dir), "--served-model-name", "demo", "--max-model-len", "256"], tmp_path,
                  env={"NOTIFY_SOCKET": manager.path, "WATCHDOG_USEC": "400000"})
    try:
        status = manager.poll(lambda m: m.startswith("STATUS="))
        assert status.startswith("STATUS=loading ")
        ready = manager.poll(lambda m: "READY=1" in m)
        assert "STATUS=serving" in ready
        # READY=1 is sent right after /health turned 200: it answers 200 now.
        assert health(s.url) == 200
        # Keep-alives every 0.2 s (WATCHDOG_USEC / 2): five arrive within two seconds, a second apart at most.
        for _ in range(5):
            manager.poll(lambda m: m == "WATCHDOG=1", timeout=2)
        times = [t for t, m in manager.messages if m == "WATCHDOG=1"]
        assert max(b - a for a, b in zip(times, times[1:])) < 1.0
        s.signal(signal.SIGTERM)
        assert "STOPPING=1" in manager.poll(lambda m: "STOPPING=1" in m)
        assert s.proc.wait(timeout=30) == 0  # no second signal: that one would cut the drain short
    finally:
        s.stop()
        manager.close()


def test_an_abstract_socket_name_works_too(demo_dir, tmp_path):  # noqa: F811
    name = f"pagoda-test-{os.getpid()}-{time.monotonic_ns()}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(30)
    s = OpsServer([str(demo_dir), "--x-test-generator-text", "x"], tmp_path, env={"NOTIFY_SOCKET": "@" + name})
    try:
        assert "READY=1" in sock.recv(4096).decode()
    finally:
        assert s.stop() == 0
        sock.close()


def test_no_keepalives_for_another_process(demo_dir, tmp_path):  # noqa: F811
    manager = FakeSystemd(tmp_path / "notify.sock")
    s = OpsServer([str(demo_dir), "--x-test-generator-text", "x"], tmp_path,
                  env={"NOTIFY_SOCKET": manager.path, "WATCHDOG_USEC": "200000", "WATCHDOG_PID": "1"})
    try:
        manager.poll(lambda m: "READY=1" in m)
        with pytest.raises(TimeoutError):
            manager.poll(lambda m: m == "WATCHDOG=1", timeout=1)
    finally:
        assert s.stop() == 0
        manager.close()


def test_nothing_is_sent_without_notify_socket(demo_dir, tmp_path):  # noqa: F811
    # The server starts and serves as before; a socket nobody named gets nothing.
    manager = FakeSystemd(tmp_path / "notify.sock")
    s = OpsServer([str(demo_dir), "--x-test-generator-text", "x"], tmp_path)
    try:
        assert health(s.url) == 200
        with pytest.raises(TimeoutError):
            manager.poll(lambda m: True, timeout=0.5)
    finally:
        assert s.stop() == 0
        manager.close()


def test_under_systemd_run_user(pagoda_bin, demo_dir, tmp_path):  # noqa: F811
    exe = shutil.which("systemd-run")
    if exe is None:
        pytest.skip("systemd-run is not installed")
    probe = subprocess.run([exe, "--user", "--wait", "--quiet", "true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip("systemd-run --user does not work here (no user service manager): " + probe.stderr.strip())
    unit = f"pagoda-test-{os.getpid()}"
    r = subprocess.run([exe, "--user", "--unit", unit, "-p", "Type=notify", "-p", "WatchdogSec=10", str(pagoda_bin),
                        "serve", str(demo_dir), "--x-test-generator-text", "x", "--port", "0"],
                       capture_output=True, text=True, timeout=120)
    try:
        # systemd-run returns once the unit is started, which for Type=notify means READY=1 arrived.
        assert r.returncode == 0, r.stderr
        state = subprocess.run(["systemctl", "--user", "show", "-p", "ActiveState", unit], capture_output=True,
                               text=True).stdout.strip()
        assert state == "ActiveState=active"
    finally:
        subprocess.run(["systemctl", "--user", "stop", unit], capture_output=True)
