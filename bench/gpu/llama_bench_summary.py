#!/usr/bin/env python3
"""One line from llama-bench's JSON output: prefill (pp) and decode (tg) tokens per second, and the prefill's ms."""
import json
import sys

parts = []
for r in json.load(open(sys.argv[1])):
    if r["n_prompt"]:
        parts.append(f"pp{r['n_prompt']}: {r['avg_ts']:.1f} tok/s ({r['n_prompt'] / r['avg_ts'] * 1e3:.1f} ms)")
    else:
        parts.append(f"tg{r['n_gen']}: {r['avg_ts']:.1f} tok/s")
print("; ".join(parts))
