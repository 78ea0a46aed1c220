"""Helpers for the sandbox tests (import as `sandbox_env`): which levels and kernel features this machine has."""

import os
import time

import pytest

from patarm.verify import cgroup, isolation, uids

BWRAP = pytest.mark.skipif(not isolation.level_available("bwrap"), reason="bwrap does not work on this machine")
CGROUP = pytest.mark.skipif(cgroup.parent() is None, reason="no writable memory cgroup on this machine")
ROOT = pytest.mark.skipif(not isolation.uses_own_uid(), reason="runs get their own uid only when the host is root")
LEVELS = [pytest.param(level, marks=pytest.mark.skipif(not isolation.level_available(level),
                                                       reason=f"{level} does not work on this machine"))
          for level in isolation.LEVELS]
# The same, with the weaker levels in the slow tier (for the longer cases).
LEVELS_WEAK_SLOW = [pytest.param(*p.values, marks=[*p.marks, *([pytest.mark.slow] if p.values[0] != "bwrap" else [])])
                    for p in LEVELS]


def sandbox_processes(wait_s: float = 3.0) -> list[int]:
    """Host pids owned by sandbox uids, after giving killed namespaces `wait_s` to be torn down
    (only meaningful when the tests run as root)."""
    deadline = time.monotonic() + wait_s
    while True:
        pids = []
        for entry in os.listdir("/proc"):
            try:
                uid = os.stat(f"/proc/{entry}").st_uid if entry.isdigit() else -1
                if uids.UID_BASE <= uid < uids.UID_BASE + uids.UID_SPAN:
                    pids.append(int(entry))
            except OSError:
                pass
        if not pids or time.monotonic() > deadline:
            return pids
        time.sleep(0.1)


def processes_with(marker: str, wait_s: float = 3.0) -> list[int]:
    """Host pids whose command line contains `marker` (after up to `wait_s` for them to go)."""
    deadline = time.monotonic() + wait_s
    while True:
        found = []
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and marker.encode() in open(f"/proc/{entry}/cmdline", "rb").read():
                    found.append(int(entry))
            except OSError:
                pass
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)
