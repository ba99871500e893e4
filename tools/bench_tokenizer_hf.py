#!/usr/bin/env python3
"""HF tokenizers' single-thread encode throughput (MB/s) on the text bench/tokenizer_bench.cpp uses.
Run by tokenizer_bench at its end; alone: TOKENIZERS_PARALLELISM=false .venv/bin/python tools/bench_tokenizer_hf.py"""
import argparse
import gzip
import os
import pathlib
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"  # before the import: no thread pool

import tokenizers  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(ROOT.parent / "shared" / "qwen-tokenizers" / "qwen3-4b"))
    ap.add_argument("--text", default=str(ROOT / "bench" / "tokenizer_bench_text.txt"))
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    model = pathlib.Path(args.model)
    if (model / "tokenizer.json").exists():
        tok = tokenizers.Tokenizer.from_file(str(model / "tokenizer.json"))
    else:
        tok = tokenizers.Tokenizer.from_str(gzip.open(model / "tokenizer.json.gz", "rt", encoding="utf-8").read())
    text = pathlib.Path(args.text).read_bytes().decode("utf-8")  # keep \r\n as is
    nbytes = len(text.encode("utf-8"))
    lines = text.splitlines(keepends=True)
    for label, run in [("whole text", lambda: tok.encode(text)),
                       ("per line", lambda: [tok.encode(line) for line in lines])]:
        run()  # warm the BPE cache, as the C++ benchmark's first iterations do
        # CPU time of this process, as Google Benchmark reports it: a busy machine does not skew it.
        n, start = 0, time.process_time()
        while time.process_time() - start < args.seconds:
            run()
            n += 1
        elapsed = time.process_time() - start
        print(f"HF tokenizers {tokenizers.__version__} encode ({label}, 1 thread): "
              f"{n * nbytes / elapsed / 2**20:.2f} MiB/s (CPU time) ({len(tok.encode(text).ids)} tokens)")


if __name__ == "__main__":
    main()
