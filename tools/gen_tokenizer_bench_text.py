#!/usr/bin/env python3
"""Writes bench/tokenizer_bench_text.txt, the mixed text both tokenizer benchmarks encode
(bench/tokenizer_bench.cpp and tools/bench_tokenizer_hf.py): prose, code, several scripts, emoji,
numbers, whitespace runs, chat markup, and a seeded share of random mixtures."""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "oracle" / "tokenizer"))
from tokenizer_corpus import HAND, mixed, random_unicode  # noqa: E402

PROSE = """The tokenizer turns text into the integers a language model reads. It has to be exact: one id of
difference changes what the model sees, and a server that answers thousands of requests a second
cannot spend its CPU time splitting words. We measure encode throughput on one thread, in megabytes
of UTF-8 per second, on a mixture of English prose, source code, other scripts and emoji.

Serving engines such as vLLM and SGLang tokenize on the request path; llama.cpp tokenizes before the
first decode step. In both cases a slow tokenizer adds latency to every request, and long prompts
(retrieval-augmented generation, long documents, agents with large tool schemas) make it worse.
"""
CODE = '''def merge(pairs, ranks):
    """Merge the lowest-ranked pair first, leftmost on ties."""
    while True:
        best = min(((ranks.get(p, 1 << 30), i) for i, p in enumerate(pairs)), default=None)
        if best is None or best[0] == 1 << 30:
            return pairs
        rank, i = best
        pairs[i:i + 2] = [pairs[i] + pairs[i + 1]]

for (int i = 0; i < n; ++i) {
    if (table[i] != kEmpty && table[i] == key) return values[i];
}
{"model": "qwen3", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 128}
'''
OTHER = """机器学习模型需要把文本转换成数字。分词器的速度和准确性都很重要，尤其是在高并发的服务中。
Токенизатор превращает текст в последовательность чисел, которую читает модель.
トークナイザーはテキストをモデルが読む整数の列に変換します。
토크나이저는 텍스트를 모델이 읽는 정수로 바꿉니다. مرحبا بكم في عالم النماذج اللغوية.
Emoji: 😀 👍🏽 👨‍👩‍👧‍👦 🇯🇵 — numbers: 3.14159, 2,048, 1e-6, 0xFF.
<|im_start|>user
What is 12 * 34?<|im_end|>
<|im_start|>assistant
<think>
12 * 34 = 408.
</think>

408<|im_end|>
"""


def main():
    parts = [PROSE, CODE, OTHER] * 20 + HAND + mixed(5, 400) + random_unicode(6, 100)
    text = "\n".join(parts)
    out = ROOT / "bench" / "tokenizer_bench_text.txt"
    out.write_text(text, encoding="utf-8")
    print(f"{out}: {len(text.encode('utf-8'))} bytes")


if __name__ == "__main__":
    main()
