"""Text corpora for the tokenizer oracle tests: hand-picked hard cases, seeded random mixtures and
random Unicode, and a sweep over every code point. Deterministic for a given seed."""
import random

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
            "<|fim_prefix|>", "<|vision_start|>", "<tool_response>"]

HAND = [
    "", " ", "  ", "\n", "\r\n", "\t", "Hello world", "Hello, world!", "hello   world   ", "  leading spaces",
    "trailing spaces   ", "tabs\tand\t\ttabs", "line1\nline2\r\nline3\rline4", "\n\n\n", " \n \n ", "a\n\n\nb",
    "x \r\n\r\n  y", "multiple   \n\t  mixed \u3000 spaces\u00a0here", "\u2028line sep\u2029para sep\u0085nel",
    "DON'T STOP I'M HERE WE'LL SEE THEY'RE YOU'VE HE'D IT'S", "don't i'm we'll they're you've he'd it's",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D 'x 'Ll 'lL '\u017f", "rock'n'roll o'clock ''quoted''",
    "123 4567 89012345 3.14159 1e10 -42 1,000,000 0x1F 2024-01-02", "١٢٣ ٤٥٦ ५६७ 一二三 ⅫⅣ ½ ²³",
    "Привет, мир! Как дела?", "Γειά σου Κόσμε", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก",
    "你好，世界！这是一个测试。", "こんにちは世界、カタカナとひらがな", "안녕하세요 세계", "Tiếng Việt có dấu",
    "ქართული ენა", "Հայերեն", "ትግርኛ", "ᐃᓄᒃᑎᑐᑦ", "𝕳𝖊𝖑𝖑𝖔 𝒲ℴ𝓇𝓁𝒹", "ﬁﬂ ligatures ﬀ", "Ångström Å Å",
    "e\u0301 vs \u00e9, n\u0303, a\u0308\u0304, \u1e9b\u0323, \u0041\u030a\u0301", "\u0301\u0302 leading marks",
    "ค\u0e31\u0e49 Thai marks", "क\u094d\u0937 conjunct", "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334 zalgo",
    "emoji 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇫🇷🇯🇵 ❤️ 🧑🏿‍💻", "👩‍❤️‍💋‍👨 and 🫠 and 🏴󠁧󠁢󠁳󠁣󠁴󠁿",
    "def foo(x):\n    return x ** 2  # square\n", "int main() {\n\tprintf(\"%d\\n\", 42);\n}\n",
    "{\"key\": [1, 2, {\"nested\": null}], \"s\": \"a\\u00e9\"}", "<div class=\"a\">&nbsp;</div>",
    "if (a <= b && c != d) { x += 1; } // comment", "$ ls -la | grep foo > /dev/null 2>&1",
    "SELECT * FROM t WHERE id = 1;", "https://example.com/path?q=1&r=2#frag", "user@example.com",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
    "<think>\nreasoning\n</think>\n\nanswer", "text<|endoftext|>more", "<|im_st", "<<|im_end|>>", "<|im_end|<|im_end|>",
    "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", " <|im_start|> spaced <|im_end|> ",
    "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>", "\x00\x01\x1b[31mcontrol\x7f", "\ufeffBOM", "\ufffd",
    "a" * 300, " " * 200, "\n" * 50, "!" * 100, "1" * 64, "ab" * 500, "😀" * 40, "\t \t \t\n\n \r\r\n",
    "word" + " " * 10 + "\n", "?!.,;:-_()[]{}<>", "...", "---", "!!!\n\n", " !!!\r\n\r\n", "a.b,c;d", " 'tis",
]

POOLS = [
    ["the", "The", "THE", "quick", "brown", "fox", "don't", "I'M", "naïve", "café", "Straße", "résumé", "über"],
    [" ", "  ", "\t", "\n", "\r\n", "   \n", " \u00a0", "\u3000", "\u2009", "\r", "\n\n"],
    ["0", "7", "42", "2024", "3.14", "1e-9", "١٢", "۴۵", "五"],
    [",", ".", "!", "?", "...", "'", "\"", "(", ")", "{", "}", "->", "::", "#", "@", "$", "%", "^", "&&", "||"],
    ["привет", "мир", "Γειά", "مرحبا", "שלום", "नमस्ते", "สวัสดี", "你好", "世界", "こんにちは", "안녕", "ສະບາຍ"],
    ["😀", "👍🏽", "👨‍👩‍👧", "🏳️‍🌈", "🇺🇸", "❤️", "✨", "🤖", "👩🏻‍🔬"],
    ["\u0301", "\u0308", "\u0323", "\u0345", "\u093f", "\u0e31", "\u05b0", "\u064b", "\u20dd", "\ufe0f", "\u200d"],
    SPECIALS,
    ["'s", "'T", "'re", "'VE", "'m", "'LL", "'d", "'\u017f"],
]


def _random_codepoint(rng):
    # Biased towards ranges with assigned characters, but anything but surrogates can come.
    r = rng.random()
    if r < 0.3:
        cp = rng.randint(0x20, 0x2FF)
    elif r < 0.6:
        cp = rng.randint(0x300, 0xFFFF)
    elif r < 0.8:
        cp = rng.randint(0x10000, 0x3FFFF)
    elif r < 0.9:
        cp = rng.randint(0, 0x10FFFF)
    else:
        cp = rng.choice([0x20, 0x0A, 0x0D, 0x09, 0x27, 0x3000, 0x0301, 0x200D, 0x1F600])
    if 0xD800 <= cp <= 0xDFFF:
        cp = 0xFFFD
    return chr(cp)


def mixed(seed, count):
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 30)):
            if rng.random() < 0.15:
                parts.append("".join(_random_codepoint(rng) for _ in range(rng.randint(1, 5))))
            else:
                parts.append(rng.choice(rng.choice(POOLS)))
        out.append("".join(parts))
    return out


def random_unicode(seed, count):
    rng = random.Random(seed)
    return ["".join(_random_codepoint(rng) for _ in range(rng.randint(1, 60))) for _ in range(count)]


def codepoint_sweep(block=256):
    """Every code point of planes 0-3 and 14 (no surrogates), and every 64th of the unassigned planes 4-13
    and the private-use planes 15-16, in the contexts the pre-tokenizer distinguishes."""
    lines = []
    for base in range(0, 0x110000, block):
        parts = []
        for cp in range(base, base + block):
            if 0xD800 <= cp <= 0xDFFF:
                continue
            if (0x40000 <= cp < 0xE0000 or cp >= 0xF0000) and cp % 64:
                continue
            c = chr(cp)
            parts.append(f"{c}a{c} {c}1'{c}\n{c}{c}")
        if parts:
            lines.append(" ".join(parts))
    return lines


def all_corpora(seed=1234):
    return {
        "hand": HAND,
        "mixed": mixed(seed, 3000),
        "random_unicode": random_unicode(seed + 1, 3000),
        "sweep": codepoint_sweep(),
    }
