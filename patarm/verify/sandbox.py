"""Run untrusted (model-written) Python in a separate, limited and isolated process.

Each run gets: a private temporary working directory (deleted afterwards), an empty environment,
no stdin, CPU-time / wall-time / address-space / process-count / file-size limits, capped stdout
and stderr (the run is killed when a stream overflows), and the strongest isolation level that
works here (see `patarm.verify.isolation`); the verdict names the level used.

    >>> verdict = run_python("print(1 + 1)")
    >>> verdict.status, verdict.stdout
    ('ok', '2\\n')
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

from patarm.verify import isolation

BOOT_SOURCE = (Path(__file__).parent / "sandbox_boot.py").read_text(encoding="utf-8")
STATUSES = ("ok", "error", "timeout", "memory", "killed")
_MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc")


@dataclass(frozen=True)
class Limits:
    """Resource limits of one run. Times in seconds, sizes in bytes."""

    timeout_s: float = 10.0  # wall clock; the whole sandbox is killed after it
    cpu_s: int | None = None  # CPU time per process; None → ceil(timeout_s)
    memory_bytes: int = 512 * 2**20  # RLIMIT_AS (virtual address space) per process
    processes: int = 32  # RLIMIT_NPROC: processes/threads the sandbox may run at once
    output_bytes: int = 1 * 2**20  # per stream (stdout, stderr); more → killed
    file_bytes: int = 16 * 2**20  # RLIMIT_FSIZE: largest file the program may write
    disk_bytes: int = 64 * 2**20  # size of each writable tmpfs (/tmp, the working dir) under bwrap
    open_files: int = 64  # RLIMIT_NOFILE

    def boot_config(self) -> dict:
        cpu = self.cpu_s if self.cpu_s is not None else max(1, int(-(-self.timeout_s // 1)))
        return {"cpu_s": cpu, "memory_bytes": self.memory_bytes, "processes": self.processes,
                "file_bytes": self.file_bytes, "open_files": self.open_files}


@dataclass
class Verdict:
    """The outcome of one run. `status` is one of STATUSES; `returncode` is negative for a signal."""

    status: str
    returncode: int | None
    stdout: str
    stderr: str
    isolation: str
    reason: str = ""
    wall_s: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


def _read_capped(proc: subprocess.Popen, limits: Limits, deadline: float) -> tuple[bytes, bytes, str]:
    """Drain stdout/stderr until EOF; stop early on the deadline or when a stream passes its cap.

    Returns (stdout, stderr, reason) where reason is "" (finished), "timeout" or "output".
    """
    bufs = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    sel = selectors.DefaultSelector()
    for stream in bufs:
        sel.register(stream, selectors.EVENT_READ)
    reason = ""
    while sel.get_map():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            reason = "timeout"
            break
        for key, _ in sel.select(timeout=min(remaining, 0.5)):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            buf = bufs[key.fileobj]
            buf += chunk[: limits.output_bytes + 1 - len(buf)]
            if len(buf) > limits.output_bytes:
                reason = "output"
                break
        if reason:
            break
    sel.close()
    return bytes(bufs[proc.stdout][: limits.output_bytes]), bytes(bufs[proc.stderr][: limits.output_bytes]), reason


def _kill_tree(proc: subprocess.Popen, uid: int | None) -> None:
    """Kill the sandbox: its process group (wrappers kill their namespace with it) and, when the
    run had its own uid, every process left with that uid (children that left the group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if uid is not None:
        _kill_uid(uid)


def _kill_uid(uid: int) -> None:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    os.kill(int(entry), signal.SIGKILL)
            except (OSError, ProcessLookupError):
                pass


def _classify(returncode: int, reason: str, stderr: str, level: str) -> tuple[str, str]:
    """(status, reason) from how the run ended."""
    if reason == "timeout":
        return "timeout", "wall-time limit reached"
    if reason == "output":
        return "killed", "output limit exceeded"
    sig = -returncode if returncode < 0 else 0
    if level in ("bwrap", "unshare") and 128 < returncode < 192:  # a signal, reported as 128 + signo
        sig = returncode - 128
    if sig == signal.SIGXCPU:
        return "timeout", "CPU-time limit reached"
    if returncode != 0 and any(marker in stderr[-4000:] for marker in _MEMORY_MARKERS):
        return "memory", "memory limit reached"
    if sig:
        return "killed", f"terminated by signal {signal.Signals(sig).name if sig < 65 else sig}"
    return ("ok", "") if returncode == 0 else ("error", f"exit code {returncode}")


def _prepare_workdir(source: str, uid: int | None) -> str:
    """A private directory holding main.py, owned by the run's uid when it has one."""
    workdir = tempfile.mkdtemp(prefix="patarm-sbx-", dir=isolation.workdir_base())
    main = Path(workdir) / "main.py"
    main.write_text(source, encoding="utf-8")
    if uid is not None:
        os.chown(workdir, uid, uid)
        os.chown(main, uid, uid)
    return workdir


def run_python(source: str, limits: Limits | None = None, isolation_level: str = "auto") -> Verdict:
    """Run Python `source` in the sandbox and return its verdict (never raises for program faults)."""
    limits = limits or Limits()
    level = isolation.choose_level(isolation_level)
    python = isolation.sandbox_python()
    uid = isolation.sandbox_uid()
    workdir = _prepare_workdir(source, uid)
    config = limits.boot_config()
    # Without a user namespace RLIMIT_NPROC counts all the host user's processes.
    config["nproc_relative"] = level == "limits" and uid is None
    # Keep the program from being the host's child (limits) or its pid namespace's init (unshare).
    config["guard_parent"] = level in ("limits", "unshare")
    inside = isolation.inner_dir(level, workdir)
    # -u: unbuffered, so what a program printed before it was killed is still reported.
    cmd = isolation.wrap_command(level, python, workdir,
                                 ["-I", "-u", "-c", BOOT_SOURCE, json.dumps(config), f"{inside}/main.py"],
                                 limits.disk_bytes)
    ids = {"user": uid, "group": uid, "extra_groups": []} if uid is not None else {}
    start = time.monotonic()
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={}, cwd=workdir, start_new_session=True, **ids)
        try:
            out, err, reason = _read_capped(proc, limits, start + limits.timeout_s)
            if reason:
                _kill_tree(proc, uid)
            try:
                returncode = proc.wait(timeout=max(0.1, start + limits.timeout_s + 1 - time.monotonic()))
            except subprocess.TimeoutExpired:  # streams closed but the process lingers
                reason = "timeout"
                _kill_tree(proc, uid)
                returncode = proc.wait()
        finally:
            if proc.stdout:
                proc.stdout.close()
            if proc.stderr:
                proc.stderr.close()
            _kill_tree(proc, uid)  # nothing of the run may outlive it
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    stdout, stderr = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    status, why = _classify(returncode, reason, stderr, level)
    return Verdict(status, returncode, stdout, stderr, level, why, round(time.monotonic() - start, 4))


def run_python_file(path: str | os.PathLike, limits: Limits | None = None, isolation_level: str = "auto") -> Verdict:
    """`run_python` on the contents of a file."""
    return run_python(Path(path).read_text(encoding="utf-8"), limits, isolation_level)


class SandboxPool:
    """Runs many programs concurrently (threads waiting on sandbox processes).

    `workers` defaults to the number of CPUs: each run is one CPU-bound process.
    """

    def __init__(self, workers: int | None = None, limits: Limits | None = None, isolation_level: str = "auto"):
        self.workers = workers or os.cpu_count() or 1
        self.limits, self.isolation_level = limits or Limits(), isolation_level
        isolation.choose_level(isolation_level)  # probe once, before the threads start

    def map(self, sources: Iterable[str]) -> list[Verdict]:
        """Verdicts for `sources`, in order."""
        with ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(lambda s: run_python(s, self.limits, self.isolation_level), sources))
