"""`pagoda serve` started for the production-operations tests: its stderr goes to a file (read at any time, never a
pipe that fills), the URL is taken from the banner whatever the scheme and host, and extra environment (systemd's
variables) can be passed."""

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from test_openai_sdk import _bin as pagoda_bin


class OpsServer:
    def __init__(self, args, tmp_path, env=None, port="0", wait_for_banner=True):
        full_env = {k: v for k, v in os.environ.items()
                    if k not in ("PAGODA_API_KEY", "VLLM_API_KEY", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")}
        full_env.update(env or {})
        self.log_path = Path(tmp_path) / f"serve-{time.monotonic_ns()}.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen([pagoda_bin(), "serve", *args, "--port", port], stderr=self._log,
                                     stdout=subprocess.DEVNULL, env=full_env)
        self.url = None
        if wait_for_banner:
            self.wait_for(r" on (https?://\S+:\d+)\n")
            self.url = re.search(r" on (https?://\S+:\d+)\n", self.log()).group(1)

    def log(self):
        return self.log_path.read_text()

    def wait_for(self, pattern, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if re.search(pattern, self.log()):
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"pagoda serve exited {self.proc.returncode}:\n{self.log()}")
            time.sleep(0.02)
        raise TimeoutError(f"no {pattern!r} in the log:\n{self.log()}")

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self._log.close()
        return rc

    def exit_code(self, timeout=30):
        """For a server expected to refuse its flags: the exit status, with the log closed."""
        rc = self.proc.wait(timeout=timeout)
        self._log.close()
        return rc
