"""Bootstrap run *inside* the sandbox, before the untrusted program (passed to `python -I -c`).

It is executed as source text, never imported by the host: it sets the resource limits from a JSON
config in argv[1] and then runs the program file argv[2] in the same interpreter (one interpreter
start per run, which dominates the cost of a short program). Limits are set here, after the
wrapper has created its user namespace, because RLIMIT_NPROC then counts only the processes of
this sandbox (see sandbox.py).
"""

import json
import os
import resource
import sys


def _set(name, soft, hard=None):
    resource.setrlimit(getattr(resource, name), (soft, soft if hard is None else hard))


def _own_process_count():
    """Processes of our real uid on the host (only used when no user namespace separates us)."""
    uid, count = os.getuid(), 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                count += os.stat("/proc/" + entry).st_uid == uid
            except OSError:
                pass
    return count


def _guard_parent():
    """Fork and let the program run in the child, this process waiting as its guard.

    Without a pid namespace the guard keeps the host from being the program's parent (killing its
    parent kills only the guard); in a pid namespace it keeps the program from being the
    namespace's init, which ignores signals such as SIGXCPU. A death by signal is passed on by
    re-raising it, or, where that is ignored (namespace init), as exit code 128 + signal.
    """
    pid = os.fork()
    if pid == 0:
        return
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        os.kill(os.getpid(), os.WTERMSIG(status))
        os._exit(128 + os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status))


def main():
    cfg, path = json.loads(sys.argv[1]), sys.argv[2]
    cpu = int(cfg["cpu_s"])
    # SIGXCPU at the soft limit, SIGKILL one second later if it is caught.
    _set("RLIMIT_CPU", cpu, cpu + 1)
    _set("RLIMIT_AS", int(cfg["memory_bytes"]))
    _set("RLIMIT_FSIZE", int(cfg["file_bytes"]))
    _set("RLIMIT_NOFILE", int(cfg["open_files"]))
    _set("RLIMIT_CORE", 0)
    nproc = int(cfg["processes"])
    if cfg.get("nproc_relative"):
        nproc += _own_process_count()
    _set("RLIMIT_NPROC", nproc)
    if cfg.get("guard_parent"):
        _guard_parent()
    os.chdir(os.path.dirname(path))
    sys.argv = [path]
    sys.path.insert(0, os.path.dirname(path))
    import runpy

    runpy.run_path(path, run_name="__main__")


main()
