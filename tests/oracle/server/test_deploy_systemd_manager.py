"""deploy/systemd/pagoda.service run by a real systemd: a user service manager (`systemd --user`, Debian 12's systemd)
that this test starts and stops itself. The container was not booted with systemd, and systemd starts a user
manager only where /run/systemd/system exists, so the manager runs in a private mount namespace with an empty folder
bind-mounted there (for it alone; the rest of the machine does not see it).

The unit is the shipped file with ExecStart pointed at the built binary and EnvironmentFile at the test's, minus
the lines a user manager in this sandbox cannot apply: User= and Group= (a user manager runs services as its own
user) and ProtectHome= and ProtectKernelTunables= (the sandbox refuses their mounts: status 226/NAMESPACE). Every
other line runs as shipped, the rest of the hardening included. The runtime folder (with $NOTIFY_SOCKET) and the
model live in the build folder, since PrivateTmp=yes hides /tmp from the service.

Checked: `systemctl start` returns once pagoda sent READY=1 (/health is 200 at that moment) and STATUS= shows;
kill -9 of the main process ends in Result=signal and Restart= starts it again after RestartSec; `systemctl
reload` (SIGHUP) keeps the process; a process that stops answering (SIGSTOP: no WATCHDOG=1) ends in Result=watchdog
and is restarted (with a drop-in shortening WatchdogSec for the test); `systemctl stop` drains and exits 0.
Not covered: the system manager (PID 1) and User=pagoda, the two dropped options, DeviceAllow with a GPU, journald
(the manager here has none)."""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
UNIT = ROOT / "deploy" / "systemd" / "pagoda.service"
SYSTEMD = Path("/lib/systemd/systemd")
DROPPED = ("User", "Group", "ProtectHome", "ProtectKernelTunables")
UNIT_NAME = "pagoda.service"


def unit_value(text, key):
    values = re.findall(rf"^{key}=(.*)$", text, re.M)
    assert len(values) == 1, (key, values)
    return values[0]


def test_restart_policy_covers_kill_and_watchdog():
    # Restart= values that restart after an unclean signal (kill -9) and after a watchdog timeout (systemd.service(5)).
    text = UNIT.read_text()
    assert unit_value(text, "Restart") in ("on-failure", "on-abnormal", "always")
    assert not re.search(r"^(RestartPreventExitStatus|SuccessExitStatus)=.*(KILL|ABRT)", text, re.M)
    assert int(unit_value(text, "StartLimitBurst")) >= 3
    # The watchdog's SIGABRT is systemd's default; a changed WatchdogSignal would need this test changed.
    assert not re.search(r"^WatchdogSignal=", text, re.M)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class UserManager:
    """`systemd --user` in its own mount namespace, with its runtime folder under `base`."""

    def __init__(self, base):
        self.base = base
        self.runtime = base / "xdg"
        self.units = self.runtime / "systemd" / "user"
        self.units.mkdir(parents=True)
        self.runtime.chmod(0o700)
        marker = base / "run-systemd"
        (marker / "system").mkdir(parents=True)
        env = {"XDG_RUNTIME_DIR": str(self.runtime), "XDG_CONFIG_HOME": str(base / "config")}
        script = f"mount --bind {marker} /run/systemd && exec {SYSTEMD} --user"
        self.log = open(base / "manager.log", "w")
        self.proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                                     env={**os.environ, **env}, stdout=self.log, stderr=subprocess.STDOUT)
        self.env = {**os.environ, "XDG_RUNTIME_DIR": str(self.runtime)}
        self.main_pids = set()
        deadline = time.time() + 30
        while time.time() < deadline and self.proc.poll() is None:
            # Answers once the manager listens on $XDG_RUNTIME_DIR/systemd/private (no D-Bus here).
            if self.systemctl("show", "-pVersion", "--value").stdout.strip():
                return
            time.sleep(0.1)
        self.close()
        pytest.skip(f"systemd --user did not start here: {(base / 'manager.log').read_text()[-2000:]}")

    def systemctl(self, *args, timeout=120):
        return subprocess.run(["systemctl", "--user", *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def show(self, *props):
        out = self.systemctl("show", UNIT_NAME, *(f"-p{p}" for p in props)).stdout
        values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        if values.get("MainPID", "0") != "0":
            self.main_pids.add(int(values["MainPID"]))
        return values

    def wait(self, timeout, **want):
        """Polls the unit until every property has its wanted value; returns every state seen on the way."""
        seen, deadline = [], time.time() + timeout
        while time.time() < deadline:
            state = self.show("ActiveState", "SubState", "Result", "MainPID", "NRestarts", "StatusText")
            seen.append(state)
            if all(state.get(k) == v for k, v in want.items()):
                return seen
            time.sleep(0.05)
        raise AssertionError(f"{want} not reached; last states: {seen[-5:]}")

    def running(self):
        """The unit active, started again if an earlier test left it stopped or failed; its state."""
        state = self.show("ActiveState")
        if state["ActiveState"] != "active":
            self.systemctl("reset-failed", UNIT_NAME)
            r = self.systemctl("start", UNIT_NAME)
            assert r.returncode == 0, r.stderr
        return self.wait(60, ActiveState="active", SubState="running")[-1]

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()  # a user manager stops its units and exits on SIGTERM
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pid in self.main_pids:  # a pagoda the manager left behind, if it was killed
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.log.close()


@pytest.fixture(scope="module")
def manager(pagoda_bin):
    for need in ("unshare", "systemctl", "mount"):
        if shutil.which(need) is None:
            pytest.skip(f"{need} is not installed")
    if not SYSTEMD.exists() or not Path("/run/systemd").is_dir():
        pytest.skip("no systemd here (Debian package systemd), or no /run/systemd to stand in for")
    if os.geteuid() != 0:
        pytest.skip("a private mount namespace needs root here")
    build = Path(os.environ.get("PAGODA_BUILD_DIR", ROOT / "build"))
    base = Path(tempfile.mkdtemp(prefix="systemd-", dir=build))
    try:
        m = UserManager(base)
        try:
            model = base / "model"
            r = subprocess.run([str(pagoda_bin), "demo-model", str(model)], capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            m.port = free_port()
            env_file = base / "pagoda.env"
            env_file.write_text(f"PAGODA_MODEL_DIR={model}\n"
                                f"PAGODA_FLAGS=--host 127.0.0.1 --port {m.port} --served-model-name demo\n")
            text = UNIT.read_text()
            for old, new in [("/usr/local/bin/pagoda", str(pagoda_bin)), ("/etc/pagoda/pagoda.env", str(env_file))]:
                assert text.count(old) == 1, old
                text = text.replace(old, new)
            kept = [line for line in text.splitlines() if line.split("=", 1)[0] not in DROPPED]
            assert len(text.splitlines()) - len(kept) == len(DROPPED)
            (m.units / UNIT_NAME).write_text("\n".join(kept) + "\n")
            assert m.systemctl("daemon-reload").returncode == 0
            yield m
        finally:
            m.systemctl("stop", UNIT_NAME)
            m.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def health(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def test_start_returns_once_pagoda_is_ready(manager):
    r = manager.systemctl("start", UNIT_NAME)
    assert r.returncode == 0, r.stderr
    # Type=notify: start returned after READY=1, which pagoda sends only once /health answers 200.
    assert health(manager.port) == 200
    state = manager.show("ActiveState", "SubState", "StatusText", "NotifyAccess", "WatchdogUSec")
    assert state["ActiveState"] == "active" and state["SubState"] == "running", state
    assert state["StatusText"] == "serving" and state["NotifyAccess"] == "main", state
    assert state["WatchdogUSec"] == "1min", state


def test_kill_9_is_restarted(manager):
    before = manager.running()
    os.kill(int(before["MainPID"]), signal.SIGKILL)
    seen = manager.wait(60, ActiveState="active", SubState="running", NRestarts=str(int(before["NRestarts"]) + 1))
    assert any(s["Result"] == "signal" and s["SubState"] == "auto-restart" for s in seen), seen[:5]
    assert seen[-1]["MainPID"] != before["MainPID"]
    assert health(manager.port) == 200


def test_reload_keeps_the_process(manager):
    before = manager.running()
    r = manager.systemctl("reload", UNIT_NAME)
    assert r.returncode == 0, r.stderr
    after = manager.wait(10, ActiveState="active", SubState="running")[-1]
    assert after["MainPID"] == before["MainPID"]
    assert health(manager.port) == 200


def test_a_silent_engine_is_aborted_by_the_watchdog_and_restarted(manager):
    # Shorter timings for the test only; WatchdogSec=60 and RestartSec=5 as shipped are checked above.
    dropin = manager.units / f"{UNIT_NAME}.d"
    dropin.mkdir(exist_ok=True)
    (dropin / "watchdog-test.conf").write_text("[Service]\nWatchdogSec=2\nRestartSec=1\nTimeoutAbortSec=3\n"
                                               "LimitCORE=0\n")
    try:
        assert manager.systemctl("daemon-reload").returncode == 0
        assert manager.systemctl("restart", UNIT_NAME).returncode == 0
        before = manager.wait(10, ActiveState="active", SubState="running")[-1]
        # A stopped process sends no WATCHDOG=1, as an engine wedged on a hung GPU would not.
        os.kill(int(before["MainPID"]), signal.SIGSTOP)
        seen = manager.wait(60, ActiveState="active", SubState="running",
                            NRestarts=str(int(before["NRestarts"]) + 1))
        assert any(s["Result"] == "watchdog" for s in seen), seen[:5]
        assert seen[-1]["MainPID"] != before["MainPID"]
        assert health(manager.port) == 200
    finally:
        (dropin / "watchdog-test.conf").unlink()
        manager.systemctl("daemon-reload")


def test_stop_drains_and_exits_zero(manager):
    manager.running()
    r = manager.systemctl("stop", UNIT_NAME)
    assert r.returncode == 0, r.stderr
    state = manager.show("ActiveState", "Result", "ExecMainStatus")
    assert state == {"ActiveState": "inactive", "Result": "success", "ExecMainStatus": "0"}, state
    assert health(manager.port) is None
