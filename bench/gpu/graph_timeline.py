#!/usr/bin/env python3
"""Where a replayed decode step's time goes, kernel by kernel, inside the CUDA graph: from a kernel trace of
kernel_trace.cpp (a CUPTI injection library) or an Nsight Systems report exported to SQLite. ncu times each kernel
alone (kernel_times.py); this reads what the GPU did during replays, where programmatic dependent launch overlaps a
kernel's start with its predecessor's tail, so each node's time here is its share of the step, and the gap before it
(negative: overlap) is what its boundary costs.

    CUDA_INJECTION64_PATH=libpagoda_kernel_trace.so PAGODA_KERNEL_TRACE=decode.tsv pagoda_cuda_bench --model M \
        --prefill 16 --context 512 --decode 64
    graph_timeline.py decode.tsv [--skip N] [--nodes K]
or
    nsys profile -t cuda --cuda-graph-trace=node -o decode pagoda_cuda_bench ...
    nsys export --type sqlite -o decode.sqlite decode.nsys-rep
    graph_timeline.py decode.sqlite

A graph replay's kernels share the correlation id of its launch, so every group of at least --min-nodes kernels with
one id is a replay (eager kernels have one each). The replays of the most common node count are kept, the first
--skip (2) of them dropped (warm-up). Printed: the replays' median wall time (first node's start to last node's
end), the median sum of node durations and of the gaps; per kernel name its nodes a replay, their own time a replay (the
part of each node after every node before it has ended: how far it moves the step; own times and gaps add up to the
wall time), its share of the own times, their durations and the median gap before them (--by-predecessor: per kernel
and the kernel before it); then the first --nodes (30)
nodes in order, each with its median own time, duration and gap. Durations are each node's end minus start: with
overlap (a node started early waits for its predecessor), the sum of durations exceeds the wall time.
"""
import argparse
import collections
import sqlite3
import statistics
import sys


def short_name(demangled):
    """A demangled kernel name without its return type, namespaces, template arguments and parameters, as nsys's
    shortName: 'void ns::(anonymous namespace)::gemv<4, bf16>(Args)' -> 'gemv'."""
    depth, cut = 0, len(demangled)
    for i, ch in enumerate(demangled):  # the first '(' or '<' outside brackets ends the qualified name
        if ch in "(<" and depth == 0 and not demangled.startswith("(anonymous namespace)", i):
            cut = i
            break
        depth += ch in "(<"
        depth -= ch in ")>"
    name = demangled[:cut].split(" ")[-1]
    return name.split("::")[-1] or demangled


def trace_rows(path):
    """The rows of a kernel_trace.cpp trace (tab-separated start, end, correlation id, graph id, node id, name)."""
    rows = []
    with open(path) as f:
        for line in f:
            start, end, corr, _graph, _node, name = line.rstrip("\n").split("\t", 5)
            rows.append((int(start), int(end), int(corr), short_name(name)))
    return sorted(rows)


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
    """Per node: (name, duration, gap before it, its own time), the gap from the latest end among the nodes before it
    (negative: overlap), its own time the part of it after that end (end - max(start, latest end)): how far it moves
    the step on. Own times plus positive gaps make the wall time."""
    out, last_end = [], None
    for start, end, name in replay:
        gap = 0 if last_end is None else start - last_end
        own = end - start if last_end is None else max(0, end - max(start, last_end))
        out.append((name, end - start, gap, own))
        last_end = end if last_end is None else max(last_end, end)
    return out


def summarize(kept, nodes_to_show, by_predecessor=False):
    lines = []
    per_replay = [node_times(r) for r in kept]
    walls = [r[-1][1] - r[0][0] for r in kept]
    durs = [sum(n[1] for n in nodes) for nodes in per_replay]
    gaps = [sum(n[2] for n in nodes if n[2] > 0) for nodes in per_replay]
    overlaps = [sum(-n[2] for n in nodes if n[2] < 0) for nodes in per_replay]
    us = 1e-3
    lines.append(f"{len(kept)} replays of {len(kept[0])} nodes: wall {statistics.median(walls) * us:.1f} us, "
                 f"node durations {statistics.median(durs) * us:.1f} us, gaps {statistics.median(gaps) * us:.1f} us, "
                 f"overlap {statistics.median(overlaps) * us:.1f} us (medians over replays)")
    # Node i is the same kernel in every replay of one graph: its median over replays, then summed by name.
    count = len(kept[0])
    med = [[statistics.median(nodes[i][f] for nodes in per_replay) for f in (1, 2, 3)] for i in range(count)]
    names = [per_replay[0][i][0] for i in range(count)]
    # With by_predecessor a kernel's nodes are told apart by the kernel before them (a GEMV after the attention
    # overlaps something else than a GEMV after a norm).
    keys = [f"{n}<{names[i - 1] if i else 'start'}" if by_predecessor else n for i, n in enumerate(names)]
    by_name = collections.defaultdict(lambda: [0, 0.0, [], 0.0])
    for name, (d, g, own) in zip(keys, med):
        entry = by_name[name]
        entry[0] += 1
        entry[1] += d
        entry[2].append(g)
        entry[3] += own
    total = sum(m[2] for m in med) or 1
    lines.append(f"{'kernel':60} {'nodes':>6} {'own us':>8} {'share':>6} {'dur us':>8} {'gap us':>7}")
    for name, (n, d, g, own) in sorted(by_name.items(), key=lambda kv: -kv[1][3]):
        lines.append(f"{name[:60]:60} {n:>6} {own * us:>8.1f} {100 * own / total:>5.1f}% {d * us:>8.1f} "
                     f"{statistics.mean(g) * us:>7.2f}")
    lines.append(f"the first {min(nodes_to_show, count)} nodes (median own time, duration, gap before):")
    for i in range(min(nodes_to_show, count)):
        lines.append(f"  {i:4} {names[i][:56]:56} {med[i][2] * us:8.2f} {med[i][0] * us:8.2f} {med[i][1] * us:8.2f}")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", help="an nsys report exported to SQLite, or a kernel_trace.cpp trace (.tsv)")
    ap.add_argument("--skip", type=int, default=2, help="replays dropped first (warm-up)")
    ap.add_argument("--nodes", type=int, default=30, help="nodes listed in order")
    ap.add_argument("--min-nodes", type=int, default=8, help="kernels of one launch that make it a graph replay")
    ap.add_argument("--by-predecessor", action="store_true",
                    help="one table row per kernel and the kernel before it ('gemv<rms_norm')")
    args = ap.parse_args()
    if args.trace.endswith(".tsv"):
        rows = trace_rows(args.trace)
    else:
        with sqlite3.connect(args.trace) as db:
            rows = kernel_rows(db)
    found = replays(rows, args.min_nodes)
    kept = found[args.skip:]
    if not kept:
        sys.exit(f"no graph replays left ({len(found)} found, --skip {args.skip}): was it taken with "
                 "--cuda-graph-trace=node?")
    print("\n".join(summarize(kept, args.nodes, args.by_predecessor)))


if __name__ == "__main__":
    main()
