"""deploy/systemd/pagoda.service checked by systemd itself: `systemd-analyze verify` must load it without one
warning, and its stop timeout must leave room for pagoda's graceful drain.

verify checks that ExecStart's binary exists, so the test points it at the built `pagoda` in a copy of the unit."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
UNIT = ROOT / "deploy" / "systemd" / "pagoda.service"


@pytest.fixture(scope="module")
def analyze():
    exe = shutil.which("systemd-analyze")
    if exe is None:
        pytest.skip("systemd-analyze is not installed (Debian package systemd)")
    return exe


def verify(analyze, tmp_path, text, name="pagoda.service"):
    unit = tmp_path / name
    unit.write_text(text)
    r = subprocess.run([analyze, "verify", "--man=no", str(unit)], capture_output=True, text=True, timeout=60)
    # verify also reports on units it pulls in (network-online.target...); only this unit's lines count.
    ours = [line for line in (r.stdout + r.stderr).splitlines() if name in line]
    return r.returncode, ours


def test_the_unit_verifies_without_warnings(analyze, tmp_path, pagoda_bin):
    text = UNIT.read_text()
    assert "ExecStart=/usr/local/bin/pagoda serve " in text
    rc, ours = verify(analyze, tmp_path, text.replace("/usr/local/bin/pagoda", str(pagoda_bin)))
    assert rc == 0 and ours == [], "\n".join(ours)


def test_verify_catches_what_this_test_guards_against(analyze, tmp_path, pagoda_bin):
    # The check above is only worth something if verify reports a mistyped key and a missing binary.
    text = UNIT.read_text().replace("/usr/local/bin/pagoda", str(pagoda_bin))
    _, ours = verify(analyze, tmp_path, text.replace("NoNewPrivileges=", "NoNewPrivilege="))
    assert any("NoNewPrivilege" in line for line in ours), ours
    rc, ours = verify(analyze, tmp_path, UNIT.read_text().replace("/usr/local/bin/pagoda", "/nonexistent/pagoda"))
    assert rc != 0 or ours, "a missing ExecStart binary went unreported"


def test_stop_timeout_is_above_the_drain_timeout(pagoda_bin):
    help_text = subprocess.run([str(pagoda_bin), "serve", "--help"], capture_output=True, text=True).stdout
    drain = int(re.search(r"--shutdown-timeout SECONDS\s+.*?\(default (\d+)\)", help_text, re.S).group(1))
    text = UNIT.read_text()
    assert int(re.search(r"^TimeoutStopSec=(\d+)$", text, re.M).group(1)) > drain
    assert re.search(r"^KillSignal=SIGTERM$", text, re.M)
    env = (ROOT / "deploy" / "systemd" / "pagoda.env").read_text()
    m = re.search(r"--shutdown-timeout (\d+)", env)
    assert m is None or int(m.group(1)) < int(re.search(r"^TimeoutStopSec=(\d+)$", text, re.M).group(1))


def test_the_unit_waits_for_readiness_and_watches_the_engine():
    # pagoda sends READY=1, STOPPING=1 and WATCHDOG=1 itself (test_systemd_notify.py checks the protocol).
    text = UNIT.read_text()
    assert re.search(r"^Type=notify$", text, re.M)
    assert re.search(r"^NotifyAccess=main$", text, re.M)
    assert int(re.search(r"^WatchdogSec=(\d+)$", text, re.M).group(1)) >= 10
    assert re.search(r"^ExecReload=/bin/kill -HUP \$MAINPID$", text, re.M)
