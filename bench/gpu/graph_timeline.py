#!/usr/bin/env python3
"""Where a replayed decode step's time goes, kernel by kernel, inside the CUDA graph: from an Nsight Systems report
exported to SQLite. ncu times each kernel alone (kernel_times.py); this reads what the GPU did during replays, where
programmatic dependent launch overlaps a kernel's start with its predecessor's tail, so each node's time here is its
share of the step, and the gap before it (negative: overlap) is what its boundary costs.

    nsys profile -t cuda --cuda-graph-trace=node -o decode pagoda_cuda_bench --model M --prefill 16 --context 512 \\
        --decode 64
    nsys export --type sqlite -o decode.sqlite decode.nsys-rep
    graph_timeline.py decode.sqlite [--skip N] [--nodes K]

A graph replay's kernels share the correlation id of its launch, so every group of at least --min-nodes kernels with
one id is a replay (eager kernels have one each). The replays of the most common node count are kept, the first
--skip (2) of them dropped (warm-up). Printed: the replays' median wall time (first node's start to last node's
end), the median sum of node durations and of the gaps; per kernel name its nodes a replay, its median time a replay
and the median gap before its nodes; then the first --nodes (30) nodes in order, each with its median duration and
gap. Durations are each node's end minus start: with overlap, the sum of durations exceeds the wall time.
"""
import argparse
import collections
import sqlite3
import statistics
import sys


def kernel_rows(db):
    """(start, end, correlation id, name) of every kernel, in start order."""
    cols = {row[1] for row in db.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")}
    if not cols:
        sys.exit("no CUPTI_ACTIVITY_KIND_KERNEL table: was the report taken with -t cuda?")
    name_col = "shortName" if "shortName" in cols else "demangledName"
    query = (f"SELECT k.start, k.end, k.correlationId, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL AS k "
             f"JOIN StringIds AS s ON s.id = k.{name_col} ORDER BY k.start")
    return db.execute(query).fetchall()


def replays(rows, min_nodes):
    """The graph replays: lists of (start, end, name), each in start order, in the order they ran."""
    groups = collections.defaultdict(list)
    for start, end, corr, name in rows:
        groups[corr].append((start, end, name))
    launches = [sorted(g) for g in groups.values() if len(g) >= min_nodes]
    launches.sort(key=lambda g: g[0][0])
    if not launches:
        return []
    common = collections.Counter(len(g) for g in launches).most_common(1)[0][0]
    return [g for g in launches if len(g) == common]


def node_times(replay):
    """Per node: (name, duration, gap before it), the gap from the latest end among the nodes before it."""
    out, last_end = [], None
    for start, end, name in replay:
        gap = 0 if last_end is None else start - last_end
        out.append((name, end - start, gap))
        last_end = end if last_end is None else max(last_end, end)
    return out


def summarize(kept, nodes_to_show):
    lines = []
    per_replay = [node_times(r) for r in kept]
    walls = [r[-1][1] - r[0][0] for r in kept]
    durs = [sum(d for _, d, _ in n) for n in per_replay]
    gaps = [sum(g for _, _, g in n if g > 0) for n in per_replay]
    overlaps = [sum(-g for _, _, g in n if g < 0) for n in per_replay]
    us = 1e-3
    lines.append(f"{len(kept)} replays of {len(kept[0])} nodes: wall {statistics.median(walls) * us:.1f} us, "
                 f"node durations {statistics.median(durs) * us:.1f} us, gaps {statistics.median(gaps) * us:.1f} us, "
                 f"overlap {statistics.median(overlaps) * us:.1f} us (medians over replays)")
    # Node i is the same kernel in every replay of one graph: its median over replays, then summed by name.
    count = len(kept[0])
    med_dur = [statistics.median(n[i][1] for n in per_replay) for i in range(count)]
    med_gap = [statistics.median(n[i][2] for n in per_replay) for i in range(count)]
    names = [per_replay[0][i][0] for i in range(count)]
    by_name = collections.defaultdict(lambda: [0, 0.0, []])
    for name, d, g in zip(names, med_dur, med_gap):
        entry = by_name[name]
        entry[0] += 1
        entry[1] += d
        entry[2].append(g)
    total = sum(med_dur) or 1
    lines.append(f"{'kernel':70} {'nodes':>6} {'us/replay':>10} {'share':>6} {'gap us':>7}")
    for name, (n, d, g) in sorted(by_name.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"{name[:70]:70} {n:>6} {d * us:>10.1f} {100 * d / total:>5.1f}% {statistics.mean(g) * us:>7.2f}")
    lines.append(f"the first {min(nodes_to_show, count)} nodes (median duration, gap before):")
    for i in range(min(nodes_to_show, count)):
        lines.append(f"  {i:4} {names[i][:64]:64} {med_dur[i] * us:8.2f} {med_gap[i] * us:8.2f}")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sqlite")
    ap.add_argument("--skip", type=int, default=2, help="replays dropped first (warm-up)")
    ap.add_argument("--nodes", type=int, default=30, help="nodes listed in order")
    ap.add_argument("--min-nodes", type=int, default=8, help="kernels of one launch that make it a graph replay")
    args = ap.parse_args()
    with sqlite3.connect(args.sqlite) as db:
        found = replays(kernel_rows(db), args.min_nodes)
    kept = found[args.skip:]
    if not kept:
        sys.exit(f"no graph replays left ({len(found)} found, --skip {args.skip}): was it taken with "
                 "--cuda-graph-trace=node?")
    print("\n".join(summarize(kept, args.nodes)))


if __name__ == "__main__":
    main()
