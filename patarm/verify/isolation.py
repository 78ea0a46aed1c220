"""Isolation levels for the Python sandbox and the commands that wrap a run in them.

Levels, strongest first:

- ``bwrap``: bubblewrap with new user/pid/net/ipc/uts namespaces, an empty environment, a new
  session, read-only binds of /usr, /lib* and the interpreter's prefix, a tmpfs /tmp and only the
  run's private directory writable. The host's files outside these binds are not visible.
- ``unshare``: util-linux ``unshare`` with new user/net/pid/mount namespaces and a private /proc.
  No network and the sandbox's processes die together, but the host's files stay visible
  (readable where their permissions allow).
- ``limits``: resource limits and a new session only.

When the host runs as root, the wrapper runs as a fresh unprivileged uid (per run): root is
exempt from RLIMIT_NPROC (the kernel skips the check for uid 0), and an unprivileged uid cannot
read root-only files, signal the host or keep capabilities.
"""

from __future__ import annotations

import functools
import itertools
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

LEVELS = ("bwrap", "unshare", "limits")
SANDBOX_DIR = "/sandbox"  # where the run's private directory appears inside bwrap
ENV_ISOLATION = "PATARM_SANDBOX_ISOLATION"  # force a level (e.g. to test the fallbacks)
ENV_PYTHON = "PATARM_SANDBOX_PYTHON"  # interpreter for sandboxed programs
_UID_BASE = 1_700_000_000  # far above any real account; one uid per run
_uid_counter = itertools.count()


def is_root() -> bool:
    return os.geteuid() == 0


def fresh_uid() -> int:
    """An unused unprivileged uid for one run (unique per host process and run)."""
    return _UID_BASE + (os.getpid() % 10_000) * 10_000 + next(_uid_counter) % 10_000


def _world_executable(path: Path) -> bool:
    """True when any uid can reach and execute `path` (a file) or enter it (a folder): it and
    every parent directory have o+x."""
    try:
        if not os.stat(path).st_mode & stat.S_IXOTH:
            return False
        return all(os.stat(p).st_mode & stat.S_IXOTH for p in path.parents)
    except OSError:
        return False


@functools.lru_cache(maxsize=None)
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


def sandbox_uid() -> int | None:
    """The uid a run's wrapper runs as: a fresh unprivileged one when the host is root and the
    interpreter is usable by it, else None (run as the host user; as root RLIMIT_NPROC is then void)."""
    if not is_root() or not _world_executable(Path(sandbox_python())):
        return None
    return fresh_uid()


def workdir_base() -> str:
    """Where private run directories are created: the temp dir, if an unprivileged uid can reach it."""
    import tempfile

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


@functools.lru_cache(maxsize=None)
def _bwrap_has_size() -> bool:
    """Whether this bwrap can size a tmpfs (`--size`, bubblewrap >= 0.8)."""
    try:
        out = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return "--size" in out.stdout + out.stderr


def wrap_command(level: str, python: str, workdir: str, inner: list[str], disk_bytes: int | None = None) -> list[str]:
    """The full command that runs `python *inner` under `level`, with `workdir` as the private dir.

    `inner` holds the interpreter arguments; paths in it refer to SANDBOX_DIR under bwrap and to
    `workdir` otherwise (see `inner_dir`). Under bwrap with `disk_bytes`, the writable places
    (/tmp and SANDBOX_DIR) are tmpfs of that size and `workdir` only provides main.py, read-only;
    elsewhere only RLIMIT_FSIZE bounds what the program writes.
    """
    if level == "bwrap":
        prefix = _python_prefix(python)
        binds = _system_binds()
        if not prefix.startswith("/usr/") and prefix != "/usr":
            binds += ["--ro-bind", prefix, prefix]
        if disk_bytes and _bwrap_has_size():
            size = ["--size", str(int(disk_bytes))]
            private = [*size, "--tmpfs", "/tmp", *size, "--tmpfs", SANDBOX_DIR,
                       "--ro-bind", f"{workdir}/main.py", f"{SANDBOX_DIR}/main.py"]
        else:
            private = ["--tmpfs", "/tmp", "--bind", workdir, SANDBOX_DIR]
        return ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
                *binds, "--proc", "/proc", "--dev", "/dev", *private, "--chdir", SANDBOX_DIR, "--", python, *inner]
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
    import tempfile

    with tempfile.TemporaryDirectory(prefix="patarm-probe-", dir=workdir_base()) as tmp:
        cmd = wrap_command(level, sandbox_python(), tmp, ["-I", "-c", "print('ok')"])
        kwargs = {}
        uid = sandbox_uid()
        if uid is not None:
            os.chmod(tmp, 0o755)
            kwargs = {"user": uid, "group": uid, "extra_groups": []}
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=20, env={},
                                 stdin=subprocess.DEVNULL, **kwargs)
        except (OSError, subprocess.SubprocessError):
            return False
    return out.returncode == 0 and out.stdout.strip() == "ok"


@functools.lru_cache(maxsize=None)
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
