"""What the deployment files (deploy/docker, deploy/kubernetes) hand to `pagoda serve`, checked against the binary:
its flags as `pagoda serve --help` lists them, an argument list checked against those, and the list adapted to run
here (the demo model, loopback, a free port) so that a test can start pagoda with exactly those flags."""

import re
import subprocess

# An option line of the help text: two spaces, the flag, and its value's name when it takes one.
_OPTION = re.compile(r"^  (--[a-z0-9][a-z0-9-]*)(?: (\S+))?$", re.M)


def serve_help(pagoda_bin):
    r = subprocess.run([str(pagoda_bin), "serve", "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def serve_flags(pagoda_bin):
    """{flag: whether it takes a value} for every option `pagoda serve --help` lists."""
    flags = {m.group(1): m.group(2) is not None for m in _OPTION.finditer(serve_help(pagoda_bin))}
    # A change of the help text's layout must fail here, not turn every later check into a vacuous one.
    assert len(flags) > 40 and flags.get("--port") is True and flags.get("--enable-lora") is False, flags
    return flags


def help_default(pagoda_bin, flag):
    """The '(default N)' that --help gives for `flag`, as an int."""
    m = re.search(rf"^  {re.escape(flag)} \S+\n\s+.*?\(default (\d+)", serve_help(pagoda_bin), re.M)
    assert m, f"no default for {flag} in `pagoda serve --help`"
    return int(m.group(1))


def arg_problems(args, flags):
    """What is wrong with `pagoda serve ARGS`: unknown flags, a missing value, not exactly one MODEL_DIR."""
    problems, positional = [], []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("-"):
            name, eq, _ = arg.partition("=")
            if name not in flags:
                problems.append(f"{name}: not a flag of `pagoda serve --help`")
            elif flags[name] and not eq:
                if i + 1 == len(args) or args[i + 1].startswith("--"):
                    problems.append(f"{name} needs a value")
                else:
                    i += 1
            elif not flags[name] and eq:
                problems.append(f"{name} takes no value")
        else:
            positional.append(arg)
        i += 1
    if len(positional) != 1:
        problems.append(f"expected one MODEL_DIR, got {positional} (the image's entrypoint is `pagoda serve`)")
    return problems


def flag_value(args, flag, default=None):
    """The value given to `flag` (the last one wins, as in pagoda), else `default`."""
    value = default
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value


def runnable_here(args, flags, model_dir):
    """`args` with the model directory replaced by `model_dir`, --host by loopback, --device by cpu (no GPU here) and
    --port left out (the test's server adds --port 0); every other flag stays as the deployment file gives it."""
    out, i = [], 0
    while i < len(args):
        arg = args[i]
        takes_value = flags.get(arg, False)
        if arg in ("--host", "--device"):
            out += [arg, "127.0.0.1" if arg == "--host" else "cpu"]
        elif arg == "--port":
            pass
        elif arg.startswith("-"):
            out += args[i:i + 1 + takes_value]
        else:
            out.append(str(model_dir))
        i += 1 + takes_value
    return out
