"""Isolation levels for the Python sandbox, the commands that wrap a run in them, and what each guarantees.

Levels, strongest first (docs/sandbox.md has the full table):

- ``bwrap``: bubblewrap with new user/pid/net/ipc/uts/cgroup namespaces, an empty environment, a new
  session, read-only binds of /usr, /lib* and the interpreter's prefix, a read-only root and /dev,
  size-limited tmpfs for the only writable places (/tmp, /dev/shm and the working directory), and no
  further user namespaces inside. Holds every guarantee in GUARANTEES.
- ``unshare``: util-linux ``unshare`` with new user/net/pid/mount namespaces and a private /proc; the
  boot script drops every capability and forbids nested user namespaces. No network, and the run's
  processes die together, but the host's files stay visible and what it writes where their
  permissions allow (/tmp, /var/tmp, /dev/shm, a non-root user's home) persists.
- ``limits``: resource limits and a new session only: the host's files and network are reachable.

The weaker levels run untrusted code only when the caller opts in (`allow_weak`, or the environment
variable PATARM_SANDBOX_ALLOW_WEAK=1); `missing_guarantees` names what they lack.

When the host runs as root, the wrapper runs as a fresh unprivileged uid reserved for the run
(`patarm.verify.uids`): root is exempt from RLIMIT_NPROC, and an unprivileged uid cannot read root-only files,
signal the host or keep capabilities; the uid also finds every process of the run at cleanup.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from patarm.verify import seccomp, uids

LEVELS = ("bwrap", "unshare", "limits")
SANDBOX_DIR = "/sandbox"  # where the run's private directory appears inside bwrap
ENV_ISOLATION = "PATARM_SANDBOX_ISOLATION"  # force a level (e.g. to test the fallbacks)
ENV_PYTHON = "PATARM_SANDBOX_PYTHON"  # interpreter for sandboxed programs
ENV_ALLOW_WEAK = "PATARM_SANDBOX_ALLOW_WEAK"  # "1": accept the weaker levels without a flag

# What a level may promise; `missing_guarantees` lists the ones a level does not keep.
GUARANTEES = {
    "files": "the host's files are hidden (only system directories, read-only)",
    "persistence": "nothing the program writes outlives the run",
    "network": "no network at all, not even the host's loopback",
    "processes": "no process of the run outlives it, and host processes cannot be seen or signalled",
    "memory-total": "the run's memory (all processes and tmpfs files together) is bounded by one cgroup limit",
    "disk": "everything the run writes together is bounded (size-limited tmpfs)",
    "syscalls": "a seccomp filter kills the program at system calls it never needs (ptrace, mount, namespaces, "
                "bpf, keyrings, perf, userfaultfd, io_uring, kexec, modules)",
}
# Without these the caller must opt in; "memory-total" and "disk" are reported but not refused.
REQUIRED = ("files", "persistence", "network", "processes")


def is_root() -> bool:
    return os.geteuid() == 0


def weak_allowed(allow_weak: bool | None = None) -> bool:
    """The caller's opt-in, else the environment's (PATARM_SANDBOX_ALLOW_WEAK=1)."""
    return bool(allow_weak) if allow_weak is not None else os.environ.get(ENV_ALLOW_WEAK, "") == "1"


def _world_executable(path: Path) -> bool:
    """True when any uid can reach and execute `path` (a file) or enter it (a folder): it and
    every parent directory have o+x."""
    try:
        if not os.stat(path).st_mode & stat.S_IXOTH:
            return False
        return all(os.stat(p).st_mode & stat.S_IXOTH for p in path.parents)
    except OSError:
        return False


@functools.cache
def sandbox_python() -> str:
    """The interpreter for sandboxed programs (a plain stdlib Python; the venv is not needed).

    As root it must be usable by an unprivileged uid, so e.g. a pyenv Python under /root (0700) is
    skipped in favour of /usr/bin/python3.
    """
    forced = os.environ.get(ENV_PYTHON)
    if forced:
        return forced
    base = getattr(sys, "_base_executable", sys.executable)
    candidates = [os.path.realpath(base), os.path.realpath(sys.executable), "/usr/bin/python3",
                  "/usr/local/bin/python3", shutil.which("python3") or ""]
    for cand in filter(None, candidates):
        real = Path(os.path.realpath(cand))
        if real.is_file() and (not is_root() or _world_executable(real)):
            return str(real)
    return os.path.realpath(base)


def uses_own_uid() -> bool:
    """Whether runs get their own unprivileged uid: the host is root and the interpreter is usable
    by another uid (else the run is the host user; as root RLIMIT_NPROC is then void)."""
    return is_root() and _world_executable(Path(sandbox_python()))


def workdir_base() -> str:
    """Where private run directories are created: the temp dir, if an unprivileged uid can reach it."""
    base = tempfile.gettempdir()
    return base if not is_root() or _world_executable(Path(base)) else "/tmp"


def _python_prefix(python: str) -> str:
    """The installation prefix of `python` (…/bin/python3 → …)."""
    return str(Path(python).resolve().parent.parent)


def _system_binds() -> list[str]:
    """Read-only views of the system directories, mirroring the host's symlinks (/lib → usr/lib)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
    return args


@functools.cache
def bwrap_features() -> frozenset[str]:
    """Options of the installed bwrap that the sandbox uses when present: `--size` (tmpfs sizes)
    and `--disable-userns` (no nested user namespaces), both bubblewrap >= 0.8."""
    try:
        out = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    text = out.stdout + out.stderr
    return frozenset(opt for opt in ("--size", "--disable-userns") if opt in text)


def missing_guarantees(level: str, cgroup: bool = False) -> tuple[str, ...]:
    """The GUARANTEES that `level` does not keep on this host (`cgroup`: a run cgroup is in use)."""
    missing = []
    if level in ("unshare", "limits"):
        missing += ["files", "persistence"]
    if level == "limits":
        missing.append("network")
        if not (uses_own_uid() or cgroup):  # the uid sweep or the cgroup finds escaped processes
            missing.append("processes")
    if not cgroup:
        missing.append("memory-total")
    if level != "bwrap" or "--size" not in bwrap_features():
        missing.append("disk")
    if level != "bwrap" or seccomp.bpf_program() is None:
        missing.append("syscalls")
    return tuple(missing)


def _bwrap_private(workdir: str, disk_bytes: int | None) -> list[str]:
    """The writable places under bwrap: size-limited tmpfs where bwrap can size them, else the host
    folder `workdir` (disk-backed, so the memory limit holds, but the total written is unbounded)."""
    if disk_bytes and "--size" in bwrap_features():
        size = ["--size", str(int(disk_bytes))]
        return [*size, "--tmpfs", "/dev/shm", *size, "--tmpfs", "/tmp", *size, "--tmpfs", SANDBOX_DIR,
                "--ro-bind", f"{workdir}/main.py", f"{SANDBOX_DIR}/main.py"]
    return ["--bind", workdir, SANDBOX_DIR, "--bind", f"{workdir}/tmp", "/tmp", "--bind", f"{workdir}/shm", "/dev/shm"]


def private_subdirs(level: str) -> tuple[str, ...]:
    """Folders the run's private directory must hold (owned by the run): bwrap binds them as /tmp
    and /dev/shm where it cannot size a tmpfs."""
    return ("tmp", "shm") if level == "bwrap" and "--size" not in bwrap_features() else ()


def wrap_command(level: str, python: str, workdir: str, inner: list[str], disk_bytes: int | None = None,
                 seccomp_fd: int | None = None) -> list[str]:
    """The full command that runs `python *inner` under `level`, with `workdir` as the private dir.

    `inner` holds the interpreter arguments; paths in it refer to SANDBOX_DIR under bwrap and to
    `workdir` otherwise (see `inner_dir`). Under bwrap the root and /dev are read-only, so the only
    writable places are /tmp, /dev/shm and SANDBOX_DIR, each a tmpfs of `disk_bytes`; `seccomp_fd`
    (bwrap only) holds the filter of `patarm.verify.seccomp`, loaded just before the program starts.
    """
    if level == "bwrap":
        prefix = _python_prefix(python)
        binds = _system_binds()
        if not prefix.startswith("/usr/") and prefix != "/usr":
            binds += ["--ro-bind", prefix, prefix]
        userns = ["--disable-userns", "--assert-userns-disabled"] if "--disable-userns" in bwrap_features() else []
        return ["bwrap", "--unshare-all", "--unshare-user", *userns, "--die-with-parent", "--new-session",
                "--clearenv", *binds, "--proc", "/proc", "--dev", "/dev", *_bwrap_private(workdir, disk_bytes),
                "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", SANDBOX_DIR,
                *(["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []), "--", python, *inner]
    if level == "unshare":
        return ["unshare", "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child",
                "--mount", "--mount-proc", "--", python, *inner]
    if level == "limits":
        return [python, *inner]
    raise ValueError(f"unknown isolation level {level!r}; choose from {LEVELS}")


def inner_dir(level: str, workdir: str) -> str:
    """Where the run's private directory is seen from inside the sandbox."""
    return SANDBOX_DIR if level == "bwrap" else workdir


def _probe(level: str) -> bool:
    """Whether `level` works on this machine: run a trivial program through it."""
    if level == "limits":
        return True
    if shutil.which(level) is None:
        return False
    with (tempfile.TemporaryDirectory(prefix="patarm-probe-", dir=workdir_base()) as tmp,
          uids.reserve_uid(uses_own_uid()) as uid):
        Path(tmp, "main.py").write_text("")
        cmd = wrap_command(level, sandbox_python(), tmp, ["-I", "-c", "print('ok')"], 2**20)
        kwargs = {}
        if uid is not None:
            os.chmod(tmp, 0o755)
            kwargs = {"user": uid, "group": uid, "extra_groups": []}
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=20, env={},
                                 stdin=subprocess.DEVNULL, **kwargs)
        except (OSError, subprocess.SubprocessError):
            return False
    return out.returncode == 0 and out.stdout.strip() == "ok"


@functools.cache
def level_available(level: str) -> bool:
    """Cached `_probe`: each level is tried once per process."""
    return _probe(level)


def choose_level(requested: str = "auto") -> str:
    """The strongest available level, or `requested` (error if it does not work here).

    The environment variable PATARM_SANDBOX_ISOLATION overrides ``auto``.
    """
    if requested == "auto":
        requested = os.environ.get(ENV_ISOLATION, "auto") or "auto"
    if requested == "auto":
        return next(level for level in LEVELS if level_available(level))
    if requested not in LEVELS:
        raise ValueError(f"unknown isolation level {requested!r}; choose from auto, {', '.join(LEVELS)}")
    if not level_available(requested):
        raise RuntimeError(f"isolation level {requested!r} does not work on this machine")
    return requested


def refusal(level: str, cgroup: bool, allow_weak: bool | None) -> str:
    """Why `level` may not run untrusted code without an opt-in ("" when it may)."""
    lacking = [g for g in missing_guarantees(level, cgroup) if g in REQUIRED]
    if not lacking or weak_allowed(allow_weak):
        return ""
    why = "; ".join(f"{g}: {GUARANTEES[g]}" for g in lacking)
    hint = "" if level == "bwrap" else " (install bubblewrap for the full isolation)"
    return (f"isolation level {level!r} does not guarantee {why}{hint}; to run untrusted code anyway pass "
            f"allow_weak=True / --allow-weak-isolation or set {ENV_ALLOW_WEAK}=1")
