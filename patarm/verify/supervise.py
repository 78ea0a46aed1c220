"""The supervisor's side of one sandbox run: the pipes to the boot script, and watching the process.

`supervise` drains stdout/stderr up to a cap, enforces the wall-clock deadline, notices when the
wrapper exits (through a pidfd, so a leftover process holding the pipes open cannot stretch the run),
and kills everything of the run *before* reaping the wrapper: until it is reaped its pid, and so its
process group, cannot be reused by an unrelated process.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Observed:
    """What the supervisor saw of one run (the only inputs of the verdict)."""

    stdout: str = ""
    stderr: str = ""
    wall_timeout: bool = False
    output_overflow: bool = False
    wrapper_exit: int | None = None
    oom_kills: int = 0
    report: dict | None = None  # from the boot script's guard: {"exit", "cpu_s", "cpu_limit"}
    result: bytes = b""  # what came back on the result pipe (the token, when the program completed)


def _read_all(fd: int, limit: int) -> bytes:
    """What is in the pipe now (non-blocking), at most `limit` bytes."""
    os.set_blocking(fd, False)
    data = b""
    with contextlib.suppress(BlockingIOError, OSError):
        while len(data) <= limit:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            data += chunk
    return data[:limit]


class Channels:
    """Pipes to the boot script: the run's token goes in; the guard's report and, when the program
    completed, the token come back. Only the boot script holds the child ends (bwrap's own init
    closes inherited files), and it closes each before the program could use it."""

    def __init__(self, token: str):
        self.token = token.encode()
        self._fds: dict[str, int] = {}

    def __enter__(self) -> Channels:
        for name in ("token", "result", "report"):
            self._fds[name + "_r"], self._fds[name + "_w"] = os.pipe()
        os.write(self._fds["token_w"], self.token)
        self._close("token_w")
        return self

    def __exit__(self, *exc) -> None:
        for name in list(self._fds):
            self._close(name)

    def _close(self, name: str) -> None:
        fd = self._fds.pop(name, None)
        if fd is not None:
            os.close(fd)

    def boot_fds(self) -> dict:
        return {"token_fd": self._fds["token_r"], "result_fd": self._fds["result_w"],
                "report_fd": self._fds["report_w"]}

    def child_fds(self) -> tuple[int, ...]:
        return tuple(self.boot_fds().values())

    def close_child_ends(self) -> None:
        for name in ("token_r", "result_w", "report_w"):
            self._close(name)

    def read_result(self) -> bytes:
        return _read_all(self._fds["result_r"], 4096)

    def read_report(self) -> dict | None:
        """The guard's report, or None when there is none or it is malformed."""
        try:
            report = json.loads(_read_all(self._fds["report_r"], 4096))
        except ValueError:
            return None
        ok = (isinstance(report, dict) and type(report.get("exit")) is int
              and isinstance(report.get("cpu_s"), (int, float)) and type(report.get("cpu_limit")) is bool)
        return report if ok else None


def _drain(proc: subprocess.Popen, cap: int, deadline: float) -> tuple[bytes, bytes, str]:
    """Read stdout/stderr until the wrapper exits, the deadline passes, or a stream is over `cap`.

    Returns (stdout, stderr, why) with why "" (finished), "timeout" or "output".
    """
    bufs = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    sel = selectors.DefaultSelector()
    for fd in bufs:
        sel.register(fd, selectors.EVENT_READ)
    pidfd = os.pidfd_open(proc.pid)
    sel.register(pidfd, selectors.EVENT_READ)
    why, exited = "", False
    try:
        while not why:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                why = "timeout"
                break
            for key, _ in sel.select(timeout=min(remaining, 0.5)):
                if key.fd == pidfd:
                    exited = True
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                buf = bufs[key.fd]
                buf += chunk[: cap + 1 - len(buf)]
                if len(buf) > cap:
                    why = "output"
                    break
            if exited and not why:  # what the program wrote before it ended is in the pipes now
                for fd in list(sel.get_map()):
                    if fd != pidfd:
                        bufs[fd] += _read_all(fd, cap + 1 - len(bufs[fd]))
                        why = "output" if len(bufs[fd]) > cap else why
                break
    finally:
        sel.close()
        os.close(pidfd)
    out, err = (bytes(b[:cap]) for b in bufs.values())
    return out, err, why


def supervise(proc: subprocess.Popen, timeout_s: float, output_cap: int, kill_rest: Callable[[], None]) -> Observed:
    """Watch `proc` (started in a new session) until it ends or a limit is hit, then kill whatever is
    left of the run (its process group and `kill_rest`) and reap it."""
    start = time.monotonic()
    try:
        out, err, why = _drain(proc, output_cap, start + timeout_s)
        if why:
            _kill(proc, kill_rest)
        # The wrapper has exited (or is killed): wait without reaping, so the group id stays ours.
        with contextlib.suppress(ChildProcessError):
            os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        _kill(proc, kill_rest)
        _, status = os.waitpid(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        for stream in (proc.stdout, proc.stderr):
            stream.close()
        if proc.returncode is None:  # an exception above: leave nothing behind
            _kill(proc, kill_rest)
            proc.wait()
    return Observed(out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), why == "timeout",
                    why == "output", proc.returncode)


def _kill(proc: subprocess.Popen, kill_rest: Callable[[], None]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    kill_rest()
