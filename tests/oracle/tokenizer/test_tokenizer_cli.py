"""`pagoda tokenize` / `pagoda detokenize`: output shapes against HF tokenizers, and bad input giving
exit status != 0 with one line on stderr."""
import json
import subprocess


def _run(pagoda_bin, *args, stdin=b""):
    return subprocess.run([str(pagoda_bin), *args], input=stdin, capture_output=True, timeout=120)


TEXT = "Hello, world! <|im_start|>user\n你好 😀 don't\n"


def test_tokenize_json_and_plain_match_hf(pagoda_bin, variants):
    v = variants["qwen3-json"]
    want = v.oracle.encode(TEXT).ids
    r = _run(pagoda_bin, "tokenize", "--model", str(v.model_dir), "--text", TEXT, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"ids": want}
    r = _run(pagoda_bin, "tokenize", "--model", str(v.model_dir), stdin=TEXT.encode())
    assert r.returncode == 0, r.stderr
    assert [int(x) for x in r.stdout.split()] == want
    v.oracle.encode_special_tokens = True
    try:
        want_text = v.oracle.encode(TEXT).ids
    finally:
        v.oracle.encode_special_tokens = False
    r = _run(pagoda_bin, "tokenize", "--model", str(v.model_dir), "--text", TEXT, "--json", "--no-special")
    assert json.loads(r.stdout) == {"ids": want_text}


def test_detokenize_json_matches_hf(pagoda_bin, variants):
    v = variants["qwen3-files"]
    ids = variants["qwen3-json"].oracle.encode(TEXT).ids
    for extra, skip in [([], False), (["--skip-special-tokens"], True)]:
        want = variants["qwen3-json"].oracle.decode(ids, skip_special_tokens=skip)
        for stream in ([], ["--stream"]):
            r = _run(pagoda_bin, "detokenize", "--model", str(v.model_dir), "--ids", " ".join(map(str, ids)), "--json",
                     *extra, *stream)
            assert r.returncode == 0, r.stderr
            assert json.loads(r.stdout) == {"text": want}


def _one_line_error(r, *needles):
    assert r.returncode != 0
    err = r.stderr.decode("utf-8", "replace")
    assert err.count("\n") == 1 and err.endswith("\n"), err
    for n in needles:
        assert n in err, err
    assert r.stdout == b""


def test_bad_input_fails_with_one_line(pagoda_bin, variants, tmp_path):
    model = str(variants["qwen3-json"].model_dir)
    _one_line_error(_run(pagoda_bin, "tokenize", "--model", model, stdin=b"ok \xc3\x28 bad"), "UTF-8", "byte offset 3")
    _one_line_error(_run(pagoda_bin, "detokenize", "--model", model, "--ids", "1 999999 3"), "999999")
    _one_line_error(_run(pagoda_bin, "detokenize", "--model", model, "--ids", "1 -5"), "-5")
    _one_line_error(_run(pagoda_bin, "detokenize", "--model", model, "--ids", "1 x 3"), "'x'")
    _one_line_error(_run(pagoda_bin, "tokenize", "--model", str(tmp_path / "nope"), "--text", "a"), "nope")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "tokenizer.json").write_text('{"model": {"vocab": ')
    _one_line_error(_run(pagoda_bin, "tokenize", "--model", str(tmp_path / "broken"), "--text", "a"), "tokenizer.json")
    (tmp_path / "lines.jsonl").write_text('"fine"\n[1, 2]\n')
    _one_line_error(_run(pagoda_bin, "tokenize", "--model", model, "--jsonl", str(tmp_path / "lines.jsonl")),
                    "lines.jsonl:2")
    _one_line_error(_run(pagoda_bin, "tokenize", "--text", "a"), "--model")


def test_help(pagoda_bin):
    for cmd in ("tokenize", "detokenize"):
        r = _run(pagoda_bin, cmd, "--help")
        assert r.returncode == 0 and b"--model" in r.stdout
