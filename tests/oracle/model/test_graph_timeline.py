"""bench/gpu/graph_timeline.py against reports made here in Nsight Systems' SQLite layout (the tables and columns it
reads) and in kernel_trace.cpp's tab-separated one: eager kernels and graph replays, whose nodes share their launch's
correlation id, with known starts and ends, so that the replays found, the warm-up skipped, the medians, gaps,
overlaps and own times it prints are checked, not just run.
"""

import sqlite3
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[3] / "bench" / "gpu" / "graph_timeline.py"


NAMES = {"rms_norm_kernel": 1, "gemv_vec_kernel": 2, "decode_attention_kernel": 3, "eager_only": 4}
# What kernel_trace.cpp writes for each: the demangled name, which the tool shortens.
DEMANGLED = {
    "rms_norm_kernel": "pagoda::kernels::cuda::(anonymous namespace)::rms_norm_kernel(pagoda::kernels::cuda::RmsNormArgs)",
    "gemv_vec_kernel": "void pagoda::kernels::cuda::(anonymous namespace)::gemv_vec_kernel<__nv_bfloat16, 4, false, "
                       "false>(pagoda::kernels::cuda::GemvArgs)",
    "decode_attention_kernel": "void pagoda::kernels::cuda::decode_attention_kernel<128, 4, 2, false>"
                               "(pagoda::kernels::cuda::PagedAttentionArgs, pagoda::kernels::cuda::SeqFilter, bool)",
    "eager_only": "eager_only(int*)",
}


def make_rows(replay_count=5, warm_up_slow=True):
    """(start, end, correlation id, name) of every kernel."""
    rows = []
    t = 0
    for corr in range(100, 110):  # eager kernels: one launch each
        rows.append((t, t + 5000, corr, "eager_only"))
        t += 6000
    # A replay: norm 2 us, gemv 10 us starting 1 us before the norm ends (PDL overlap), attention 4 us after a 3 us
    # gap; twice (a "layer" each), so 6 nodes. The first replay (warm-up) is slower everywhere.
    for r in range(replay_count):
        scale = 3 if (r == 0 and warm_up_slow) else 1
        corr = 1000 + r
        for _ in range(2):
            rows.append((t, t + 2000 * scale, corr, "rms_norm_kernel"))
            t += 2000 * scale
            rows.append((t - 1000, t - 1000 + 10000 * scale, corr, "gemv_vec_kernel"))
            t += -1000 + 10000 * scale
            t += 3000
            rows.append((t, t + 4000 * scale, corr, "decode_attention_kernel"))
            t += 4000 * scale
        t += 50000
    return rows


def make_report(path, replay_count=5, warm_up_slow=True):
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT NOT NULL, end INT NOT NULL, "
               "correlationId INT NOT NULL, shortName INT NOT NULL, demangledName INT NOT NULL)")
    db.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, n) for n, i in NAMES.items()])
    rows = [(s, e, c, NAMES[n], NAMES[n]) for s, e, c, n in make_rows(replay_count, warm_up_slow)]
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, ?, ?)", rows)
    db.commit()
    db.close()


def make_trace(path, replay_count=5):
    """kernel_trace.cpp's layout, rows out of start order as CUPTI's buffers may hand them over."""
    rows = make_rows(replay_count)
    with open(path, "w") as f:
        for s, e, c, n in reversed(rows):
            f.write(f"{s}\t{e}\t{c}\t{7 if c >= 1000 else 0}\t{s % 97}\t{DEMANGLED[n]}\n")


def run(*args):
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=60)


def check_replay_table(out):
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    # 4 replays kept; a replay: 2 x (2 + 10 - 1 + 3 + 4) = 36 us of wall, 2 x 16 = 32 us of node time, 6 us of gaps,
    # 2 us of overlap.
    assert lines[0] == ("4 replays of 6 nodes: wall 36.0 us, node durations 32.0 us, gaps 6.0 us, overlap 2.0 us "
                        "(medians over replays)")
    # Own times: the gemv's 10 us less the 1 us it overlaps the norm, the attention's 4 us after its gap; they add up
    # with the gaps to the wall time (2 x (2 + 9 + 4) + 6 = 36). Sorted by own time.
    table = {line.split()[0]: line.split()[1:] for line in lines[2:5]}
    assert [line.split()[0] for line in lines[2:5]] == ["gemv_vec_kernel", "decode_attention_kernel",
                                                        "rms_norm_kernel"]
    assert table["gemv_vec_kernel"][:4] == ["2", "18.0", "60.0%", "20.0"]
    assert table["decode_attention_kernel"][:4] == ["2", "8.0", "26.7%", "8.0"]
    assert table["rms_norm_kernel"][:4] == ["2", "4.0", "13.3%", "4.0"]
    assert float(table["gemv_vec_kernel"][4]) == -1.0  # each gemv starts 1 us before the norm ends
    assert float(table["decode_attention_kernel"][4]) == 3.0
    assert "eager_only" not in out.stdout
    nodes = [line.split() for line in lines[6:12]]
    assert [n[1] for n in nodes[:3]] == ["rms_norm_kernel", "gemv_vec_kernel", "decode_attention_kernel"]
    assert [[float(v) for v in n[2:5]] for n in nodes[:3]] == [[2.0, 2.0, 0.0], [9.0, 10.0, -1.0], [4.0, 4.0, 3.0]]


def test_replays_medians_gaps_and_overlap(tmp_path):
    report = tmp_path / "decode.sqlite"
    make_report(report)
    check_replay_table(run(report, "--min-nodes", 4, "--skip", 1, "--nodes", 6))


def test_a_kernel_trace_gives_the_same_table(tmp_path):
    trace = tmp_path / "decode.tsv"
    make_trace(trace)
    check_replay_table(run(trace, "--min-nodes", 4, "--skip", 1, "--nodes", 6))


def test_the_warm_up_replay_is_skipped(tmp_path):
    report = tmp_path / "decode.sqlite"
    make_report(report, replay_count=3)
    kept_all = run(report, "--min-nodes", 4, "--skip", 0).stdout.splitlines()[0]
    assert kept_all.startswith("3 replays of 6 nodes: wall 36.0 us")  # the median ignores one slow replay
    skipped = run(report, "--min-nodes", 4, "--skip", 1).stdout.splitlines()[0]
    assert skipped.startswith("2 replays of 6 nodes: wall 36.0 us")


def test_no_replays_is_an_error_that_says_why(tmp_path):
    report = tmp_path / "eager.sqlite"
    make_report(report, replay_count=0)
    out = run(report)
    assert out.returncode != 0
    assert "--cuda-graph-trace=node" in out.stderr


def test_by_predecessor_tells_a_kernels_nodes_apart_by_the_kernel_before(tmp_path):
    report = tmp_path / "decode.sqlite"
    make_report(report)
    out = run(report, "--min-nodes", 4, "--skip", 1, "--by-predecessor")
    assert out.returncode == 0, out.stderr
    table = {line.split()[0]: line.split()[1:] for line in out.stdout.splitlines()[2:6]}
    # The first norm opens the replay, the second follows an attention; each gemv follows a norm.
    assert table["gemv_vec_kernel<rms_norm_kernel"][:2] == ["2", "18.0"]
    assert table["decode_attention_kernel<gemv_vec_kernel"][:2] == ["2", "8.0"]
    assert table["rms_norm_kernel<start"][:2] == ["1", "2.0"]
    assert table["rms_norm_kernel<decode_attention_kernel"][:2] == ["1", "2.0"]
