#!/usr/bin/env python3
"""Per-kernel GPU time from an ncu CSV (gpu__time_duration.sum): median, count and total per kernel and grid.

ncu serialises kernels (no overlap between neighbours, no programmatic dependent launch), so the times are each
kernel alone: what it costs, not what a replayed step loses to its boundaries.
    ncu --graph-profiling node --metrics gpu__time_duration.sum --csv ... > ncu.csv
    kernel_times.py ncu.csv [--steps N]   (N: divide the totals by the number of decode steps profiled)
"""
import collections
import csv
import statistics
import sys


def main() -> None:
    path = sys.argv[1]
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 1
    with open(path, encoding="utf-8", errors="replace") as f:
        rows = [line for line in f if line.startswith('"')]
    times = collections.defaultdict(list)
    for r in csv.DictReader(rows):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = r["Kernel Name"].split("(")[0][:70]
        unit = r.get("Metric Unit", "nsecond")
        value = float(r["Metric Value"].replace(",", ""))
        us = value / 1000.0 if unit.startswith("n") else value * 1000.0 if unit.startswith("m") else value
        times[(name, r.get("Grid Size", ""), r.get("Block Size", ""))].append(us)
    total = sum(sum(v) for v in times.values())
    print(f"{'kernel':70} {'grid':>16} {'block':>12} {'n':>6} {'median us':>10} {'us/step':>10} {'share':>6}")
    for key, v in sorted(times.items(), key=lambda kv: -sum(kv[1])):
        s = sum(v)
        print(f"{key[0]:70} {key[1]:>16} {key[2]:>12} {len(v):>6} {statistics.median(v):>10.2f} "
              f"{s / steps:>10.2f} {100 * s / total:>5.1f}%")
    print(f"total {total / steps:.1f} us per step over {sum(len(v) for v in times.values())} kernels")


if __name__ == "__main__":
    main()
