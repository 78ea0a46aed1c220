"""A memory cgroup per sandbox run, where the host lets us create one (root, or a delegated cgroup).

The cgroup bounds the memory of the whole run (every process, and the tmpfs pages it writes) with one
limit, counts the kernel's OOM kills (the supervisor's evidence for a ``memory`` verdict) and finds
every process of the run at cleanup. The run enters it from inside: the supervisor opens the cgroup's
``cgroup.procs`` and passes the open file to the sandbox's boot script, which writes "0" (itself) and
closes it before the program starts; the kernel checks permission against the opener, so this works
from any namespace and uid.

Both hierarchies are supported: cgroup v1 (``memory.limit_in_bytes``, ``memory.oom_control``) and
v2 (``memory.max``, ``memory.events``). The parent is the supervisor's own memory cgroup, or the folder
named by PATARM_SANDBOX_CGROUP (e.g. a delegated v2 cgroup whose ``cgroup.subtree_control`` has memory).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
import uuid
from pathlib import Path

ENV_CGROUP = "PATARM_SANDBOX_CGROUP"  # parent folder for run cgroups; "off" disables them


def _v1_memory_mount() -> Path | None:
    """Where the v1 memory controller is mounted (from /proc/self/mountinfo)."""
    with contextlib.suppress(OSError), open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            fields = right.split()
            if fields and fields[0] == "cgroup" and "memory" in fields[-1].split(","):
                return Path(left.split()[4])
    return None


def _own_parent() -> tuple[Path, int] | None:
    """(folder, version) of the supervisor's memory cgroup, where child cgroups may be made."""
    with contextlib.suppress(OSError), open("/proc/self/cgroup", encoding="utf-8") as fh:
        lines = [line.rstrip("\n").split(":", 2) for line in fh]
    for hid, controllers, path in (parts for parts in lines if len(parts) == 3):
        if "memory" in controllers.split(","):
            mount = _v1_memory_mount()
            if mount is not None:
                return mount / path.lstrip("/"), 1
        if hid == "0" and controllers == "":
            folder = Path("/sys/fs/cgroup") / path.lstrip("/")
            with contextlib.suppress(OSError):
                if "memory" in (folder / "cgroup.subtree_control").read_text().split():
                    return folder, 2
    return None


@functools.cache
def parent() -> tuple[Path, int] | None:
    """Where run cgroups go, or None when this host gives us none (checked once per process)."""
    forced = os.environ.get(ENV_CGROUP, "")
    if forced == "off":
        return None
    found = (Path(forced), 1 if (Path(forced) / "memory.limit_in_bytes").exists() else 2) if forced else _own_parent()
    if found is None:
        return None
    try:  # a trial cgroup: mkdir, a limit, rmdir
        probe = RunCgroup.create(2**30, found)
    except OSError:
        return None
    return found if probe.remove() else None


class RunCgroup:
    """One run's cgroup: `procs_fd` for the boot script, `oom_kills`, `kill_all`, `remove`."""

    def __init__(self, path: Path, version: int):
        self.path, self.version = path, version
        self.procs_fd = os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)

    @classmethod
    def create(cls, memory_bytes: int, where: tuple[Path, int]) -> RunCgroup:
        """A new cgroup under `where` limited to `memory_bytes` (RAM; swap too where the knob exists)."""
        folder, version = where
        path = folder / f"patarm-sbx-{uuid.uuid4().hex[:16]}"
        path.mkdir()
        try:
            knobs = (("memory.limit_in_bytes", "memory.memsw.limit_in_bytes") if version == 1
                     else ("memory.max", "memory.swap.max"))
            (path / knobs[0]).write_text(str(int(memory_bytes)))
            if (path / knobs[1]).exists():
                with contextlib.suppress(OSError):  # v1 memsw: the limit of RAM + swap; v2: swap alone
                    (path / knobs[1]).write_text(str(int(memory_bytes)) if version == 1 else "0")
            return cls(path, version)
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            raise

    def oom_kills(self) -> int:
        """How many processes of the run the kernel killed for exceeding the memory limit."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        with contextlib.suppress(OSError, ValueError):
            for line in (self.path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def pids(self) -> list[int]:
        with contextlib.suppress(OSError):
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        return []

    def kill_all(self) -> None:
        """SIGKILL every process in the cgroup (v2: atomically with cgroup.kill where it exists)."""
        if self.version == 2 and (self.path / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                (self.path / "cgroup.kill").write_text("1")
        for pid in self.pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def remove(self, wait_s: float = 2.0) -> bool:
        """Close the procs file, kill what is left and delete the cgroup (it empties as the dead are
        reaped); False when it could not be deleted within `wait_s`."""
        if self.procs_fd >= 0:
            os.close(self.procs_fd)
            self.procs_fd = -1
        deadline = time.monotonic() + wait_s
        while True:
            self.kill_all()
            try:
                self.path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.01)
