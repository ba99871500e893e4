"""bench/gpu/stages.sh with a stand-in for run_cuda_bench.sh that records what each stage gave it: every stage's own
settings (an empty one included) reach its run and no other, the marks resume a plan where a call stopped, a stage
that would pass the limit stops the call with the summary written, and a malformed plan line is refused. Session 35
lost a device call to a plan whose stages never ran (`env X=Y f` with f a shell function); this runs the real plans
too, so a plan that cannot reach run_cuda_bench.sh fails here, not on the GPU machine. A stage whose run exits 3 (not
run: missing binaries) gets no mark and stops the call.
"""

import os
import signal
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TOOL = ROOT / "bench" / "gpu" / "stages.sh"

# Records its argument (the parts) and the settings it sees, and appends a summary line as run_cuda_bench.sh does.
STAND_IN = """#!/usr/bin/env bash
printf '%s|%s|%s|%s\\n' "$1" "${SERVE_SIZES-unset}" "${SERVE_EXTRA-unset}" "${THROUGHPUT_N-unset}" >> "$RECORD"
echo "ran $1" >> "$OUT/summary.txt"
exit "${STAND_IN_RC:-0}"
"""


def run(tmp_path, plan_text, limit=570, plan=None, **settings):
    stand_in = tmp_path / "stand_in.sh"
    stand_in.write_text(STAND_IN)
    if plan is None:
        plan = tmp_path / "test.plan"
        plan.write_text(plan_text)
    env = dict(os.environ, OUT=str(tmp_path / "out"), DONE=str(tmp_path / "done"), LIMIT=str(limit),
               RUN=f"bash {stand_in}", RECORD=str(tmp_path / "record.txt"), **settings)
    result = subprocess.run(["bash", str(TOOL), str(plan)], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=60)
    record = (tmp_path / "record.txt").read_text().splitlines() if (tmp_path / "record.txt").exists() else []
    summary = (tmp_path / "out" / "summary.txt").read_text()
    return result, record, summary


PLAN = """# a comment line
tests 10 tests
offline 20 SERVE_SIZES= SERVE_EXTRA=--kv-cache-dtype=fp8 THROUGHPUT_N=512 throughput   # a trailing comment
two 5 model,bench
"""


def test_each_stage_gets_its_own_settings(tmp_path):
    result, record, summary = run(tmp_path, PLAN)
    assert result.returncode == 0, result.stderr
    assert record == [
        "tests|unset|unset|unset",
        "throughput||--kv-cache-dtype=fp8|512",  # SERVE_SIZES= is set and empty, as run_cuda_bench.sh reads it
        "model,bench|unset|unset|unset",
    ]
    assert "[offline] ran throughput" in summary
    assert "every stage done" in summary
    assert (tmp_path / "out" / "stages.tgz").exists()


def test_marks_resume_where_the_limit_stopped_a_call(tmp_path):
    # The limit counts the seconds gone (here ~0) and the next stage's: tests (10) fits 15, offline (20) does not.
    result, record, summary = run(tmp_path, PLAN, limit=15)
    assert result.returncode == 0, result.stderr
    assert record == ["tests|unset|unset|unset"]
    assert "stopped before offline" in summary
    result, record, summary = run(tmp_path, PLAN, limit=570)
    assert result.returncode == 0, result.stderr
    assert [r.split("|")[0] for r in record] == ["tests", "throughput", "model,bench"]  # tests ran once
    assert "stages done before it: tests" in summary


def test_skipped_stages_do_not_run(tmp_path):
    result, record, summary = run(tmp_path, PLAN, SKIP="tests two")
    assert result.returncode == 0, result.stderr
    assert [r.split("|")[0] for r in record] == ["throughput"]


def test_a_failed_stage_is_reported_and_not_run_again(tmp_path):
    result, record, summary = run(tmp_path, "one 1 tests\n", STAND_IN_RC="1")
    assert result.returncode == 0
    assert "[one: rc 1" in summary
    result, record, summary = run(tmp_path, "one 1 tests\n")
    assert len(record) == 1


def test_a_stage_not_run_for_missing_binaries_stops_the_call_and_runs_next_time(tmp_path):
    # Exit 3 is run_cuda_bench.sh's "not run: missing ..." (session 36: a chained call's BIN lacked pagoda).
    plan = "one 1 tests\ntwo 1 bench\n"
    result, record, summary = run(tmp_path, plan, STAND_IN_RC="3")
    assert result.returncode == 3
    assert [r.split("|")[0] for r in record] == ["tests"]  # two did not run
    assert "[one: not run, ran tests; the call stops here]" in summary
    result, record, summary = run(tmp_path, plan)
    assert result.returncode == 0, result.stderr
    assert [r.split("|")[0] for r in record] == ["tests", "tests", "bench"]  # one ran again: it had no mark
    assert summary.count("[one] ran tests") == 1  # the stage's summary is its last run's, not both runs'


def test_bin_parts_join_bin_at_every_call(tmp_path):
    # Each device call's carries replace the folders the call before left: BIN_PARTS copies them into BIN every time.
    for part, name in (("serve", "pagoda.xz"), ("tests", "backend_ops_test.xz")):
        (tmp_path / part).mkdir()
        (tmp_path / part / name).write_text(name)
    (tmp_path / "bin").mkdir()
    parts = f"{tmp_path / 'serve'} {tmp_path / 'tests'}"
    result, record, summary = run(tmp_path, "one 1 tests\n", BIN=str(tmp_path / "bin"), BIN_PARTS=parts)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "bin").iterdir()) == ["backend_ops_test.xz", "pagoda.xz"]


def test_a_call_killed_mid_stage_returns_the_stage_lines_so_far(tmp_path):
    # The device kills a call at its limit; OUT must already hold what the running stage has measured.
    slow = tmp_path / "slow.sh"
    slow.write_text('echo "measured 1" >> "$OUT/summary.txt"; sleep 30\n')
    (tmp_path / "test.plan").write_text("done_one 1 tests\nslow 1 tests\n")
    (tmp_path / "done" / "done_one").mkdir(parents=True)
    (tmp_path / "done" / "done_one" / ".done").touch()
    (tmp_path / "done" / "summary.txt").write_text("[done_one] an earlier call's line\n")
    env = dict(os.environ, OUT=str(tmp_path / "out"), DONE=str(tmp_path / "done"), RUN=f"bash {slow}",
               WATCH_SECONDS="0.5")
    proc = subprocess.Popen(["bash", str(TOOL), str(tmp_path / "test.plan")], cwd=ROOT, env=env,
                            start_new_session=True)
    try:
        summary_file = tmp_path / "out" / "summary.txt"
        deadline = time.time() + 20
        while time.time() < deadline and "so far" not in (summary_file.read_text() if summary_file.exists() else ""):
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    summary = summary_file.read_text()
    assert "[slow, so far] measured 1" in summary
    assert "[done_one] an earlier call's line" in summary


def test_a_malformed_line_is_refused(tmp_path):
    for line in ["tests ten tests\n", "tests 10\n", "tests 10 two parts\n", "a/b 10 tests\n"]:
        result, record, summary = run(tmp_path, line)
        assert result.returncode == 2, line
        assert "is not NAME SECONDS" in summary
        assert record == []


def test_the_plans_in_the_tree_reach_run_cuda_bench(tmp_path):
    for plan in sorted((ROOT / "bench" / "gpu" / "plans").glob("*.plan")):
        case = tmp_path / plan.stem
        case.mkdir()
        result, record, summary = run(case, None, plan=plan)
        assert result.returncode == 0, (plan, summary)
        assert "every stage done" in summary, plan
        stages = [line.split()[0] for line in plan.read_text().splitlines() if line.strip() and line[0] != "#"]
        assert len(record) == len(stages), (plan, record)
        # Every part named is one run_cuda_bench.sh has.
        parts = (ROOT / "bench" / "gpu" / "run_cuda_bench.sh").read_text()
        for r in record:
            for part in r.split("|")[0].split(","):
                assert f"want {part}" in parts, (plan, part)
