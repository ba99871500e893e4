#!/usr/bin/env python3
"""Compares two greedy runs of the same prompts saved by offline_throughput.py --save (e.g. prefix cache on and off).

  python3 bench/gpu/compare_completions.py A.json B.json

Two bf16 runs that compute the same thing in a different order (a prefix hit's short prefill against a miss's long
one) round differently, so greedy completions may part where the top two tokens are nearly tied. Prints one JSON
line: how many completions are identical; the largest |logprob difference| of the tokens both runs chose before
parting (the rounding noise between the runs); for the completions that part, the margin (top-1 minus top-2
logprob, in B) at the parting token, and where the median of those margins falls among the margins of all of B's
positions (a parting unrelated to ties would fall anywhere). "ok" when every parting margin is below twice the
rounding noise (each of the two logprobs may move by that much), i.e. rounding explains every parting, and that
noise is below the median margin (a broken cache would move logprobs by more than an ordinary choice's margin).
"""
import argparse
import bisect
import json
import statistics


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    args = ap.parse_args()
    a, b = (json.load(open(f)) for f in (args.a, args.b))
    if len(a) != len(b):
        raise SystemExit(f"different numbers of completions: {len(a)} and {len(b)}")
    identical, part_margins, part_positions, max_delta = 0, [], [], 0.0
    all_margins = [t[0] - t[1] for c in b for t in c["top"] if len(t) >= 2]
    for x, y in zip(a, b):
        n = min(len(x["tokens"]), len(y["tokens"]))
        i = next((k for k in range(n) if x["tokens"][k] != y["tokens"][k]), None)
        end = n if i is None else i
        for k in range(end):
            max_delta = max(max_delta, abs(x["logprobs"][k] - y["logprobs"][k]))
        if i is None and len(x["tokens"]) == len(y["tokens"]):
            identical += 1
            continue
        if i is None:  # one is a prefix of the other: not a rounding difference
            part_margins.append(float("inf"))
            part_positions.append(n)
            continue
        top = y["top"][i]
        part_margins.append(top[0] - top[1] if len(top) >= 2 else float("inf"))
        part_positions.append(i)
    worst = max(part_margins, default=0.0)
    all_margins.sort()
    median_part = statistics.median(part_margins) if part_margins else None
    print(json.dumps({
        "completions": len(a), "identical": identical,
        "parted_at_token_median": statistics.median(part_positions) if part_positions else None,
        "max_logprob_delta_before_parting": round(max_delta, 4),
        "margin_where_parted_max": round(worst, 4),
        "margin_where_parted_median": None if median_part is None else round(median_part, 4),
        "share_of_all_positions_below_that_median": None if median_part is None or not all_margins else
        round(bisect.bisect(all_margins, median_part) / len(all_margins), 3),
        "margin_all_positions_median": round(statistics.median(all_margins), 4) if all_margins else None,
        "ok": (worst < 2 * max_delta or not part_margins) and
        (not all_margins or max_delta < statistics.median(all_margins))}))

if __name__ == "__main__":
    main()
