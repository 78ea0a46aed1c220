"""Unprivileged uids for sandbox runs on a root host: one per run, never shared, never leaked.

A run's uid is reserved with an exclusive flock on a per-uid file in a root-only folder, held for the
whole run and its cleanup; the kernel drops the lock when its holder dies. Because no two live runs
hold the same uid, killing every process of a run's uid (`kill_uid`) kills that run and nothing else.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import signal
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

UID_BASE, UID_SPAN = 1_700_000_000, 1_000_000  # far above any real account


def _lock_dir() -> Path:
    """A root-only folder for uid reservations (/run when writable, else the temp dir)."""
    base = Path("/run") if os.access("/run", os.W_OK) else Path(tempfile.gettempdir())
    path = base / "patarm-sandbox-uids"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise RuntimeError(f"{path}: not a private folder of this user; remove it and retry")
    return path


def _uid_in_use(uid: int) -> bool:
    """Whether any live process runs as `uid` (a leftover of a crashed supervisor)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    return True
    return False


@contextlib.contextmanager
def reserve_uid(own_uid: bool) -> Iterator[int | None]:
    """A uid no other run holds while this one lasts (None unless `own_uid`: the host is root).

    The reservation is an exclusive flock on a per-uid file: the kernel drops it when the holder
    dies, so a crashed supervisor never leaks one, and two supervisors never share a uid.
    """
    if not own_uid:
        yield None
        return
    folder, rng = _lock_dir(), random.SystemRandom()
    for _ in range(1000):
        uid = UID_BASE + rng.randrange(UID_SPAN)
        path = folder / str(uid)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        # The file may have been unlinked by its previous holder between our open and flock.
        try:
            same = os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same or _uid_in_use(uid):
            os.close(fd)
            continue
        try:
            yield uid
        finally:
            kill_uid(uid)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # unlinked before the lock is dropped: see the inode check above
            os.close(fd)
        return
    raise RuntimeError(f"no free sandbox uid after 1000 tries in {folder}")


def kill_uid(uid: int) -> None:
    """SIGKILL every process running as `uid` (a reserved run uid: only that run's processes)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    os.kill(int(entry), signal.SIGKILL)
