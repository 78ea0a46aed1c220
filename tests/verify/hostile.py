"""Hostile programs for the sandbox battery (kept as data: name → source template).

Placeholders such as `{secret_path}`, `{outside_path}` or `{port}` are filled in by the tests.
"""

# --- resource exhaustion -------------------------------------------------------------------------
FORK_BOMB = """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
THREAD_BOMB = """
import threading, time
n = 0
while True:
    try:
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start(); n += 1
    except RuntimeError:
        print("threads", n, flush=True); time.sleep(60)
"""
BUSY_LOOP = "while True:\n    pass\n"
BUSY_THREADS = """
import threading
def spin():
    while True:
        pass
for _ in range(4):
    threading.Thread(target=spin, daemon=True).start()
spin()
"""
# Catches SIGXCPU at the soft CPU limit and keeps going: the hard limit's SIGKILL must still end it.
IGNORE_SIGXCPU = "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass\n"
MEMORY_BOMB = "chunks = []\nwhile True:\n    chunks.append(bytearray(50 * 2**20))\n"
# Each process stays under a per-process limit; together they exceed the run's.
MEMORY_SPLIT = """
import os, time
for _ in range({n}):
    if os.fork() == 0:
        block = bytearray({mib} * 2**20)
        time.sleep(0.5)
        os._exit(0)
statuses = [os.wait()[1] for _ in range({n})]
print("all allocated" if not any(statuses) else "some died")
"""
# Writes `{mib}` MiB into `{path}` one MiB at a time; prints the error it stops at.
FILL = """
import os
try:
    with open({path!r}, "wb") as fh:
        for _ in range({mib}):
            fh.write(b"x" * 2**20)
            fh.flush()
    print("WROTE ALL")
except OSError as e:
    print("STOPPED", e.errno, e.strerror)
"""
# Many files of 1 MiB each into `{folder}`: a file-size limit alone does not bound this.
MANY_FILES = """
import os
written = 0
try:
    for i in range({mib}):
        with open(os.path.join({folder!r}, f"f{{i}}"), "wb") as fh:
            fh.write(b"x" * 2**20)
        written += 1
    print("WROTE ALL")
except OSError as e:
    print("STOPPED", written, e.strerror)
"""
FD_EXHAUST = """
import os
fds = []
try:
    while True:
        fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError as e:
    print("fds", len(fds), e.strerror)
"""
GIGABYTE_OUTPUT = "import sys\nchunk = 'x' * 2**20\nfor _ in range(1024):\n    sys.stdout.write(chunk)\n"
SLEEP_FOREVER = "import time\nprint('sleeping', flush=True)\ntime.sleep(3600)\n"
CLOSE_STREAMS_AND_HANG = "import os, time\nos.close(1)\nos.close(2)\ntime.sleep(3600)\n"

# --- escape attempts -----------------------------------------------------------------------------
NETWORK = """
import socket
socket.create_connection(("1.1.1.1", 80), timeout=3).close()
print("CONNECTED")
"""
LOCALHOST = """
import socket
s = socket.create_connection(("127.0.0.1", {port}), timeout=2)
print("CONNECTED", s.recv(100))
"""
PRINT_ENV = "import os\nprint(dict(os.environ))\n"
READ_SHADOW = "print(open('/etc/shadow').read())\n"
READ_SECRET = "print(open({secret_path!r}).read())\n"
WRITE_OUTSIDE = "open({outside_path!r}, 'w').write('pwned')\nprint('WROTE')\n"
KILL_PARENT = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('still here')\n"
KILL_EVERYTHING = "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError as e:\n    print(e)\n"
LIST_PROCESSES = """
import os
for pid in sorted(int(p) for p in os.listdir('/proc') if p.isdigit()):
    try:
        print(pid, open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' ')[:80])
    except OSError:
        pass
"""
# A daemon that leaves the session and outlives its parent; `{marker}` identifies it on the host.
DOUBLE_FORK = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(30)", {marker!r}])
    os._exit(0)
time.sleep(0.3)
print("parent done")
"""
# A nested user namespace whose root mounts an (unbounded) tmpfs and fills it.
NESTED_USERNS_TMPFS = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
uid, gid = os.getuid(), os.getgid()
if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
    print("unshare failed", os.strerror(ctypes.get_errno())); raise SystemExit(1)
for name, text in (("setgroups", "deny"), ("uid_map", f"0 {{uid}} 1"), ("gid_map", f"0 {{gid}} 1")):
    with open(f"/proc/self/{{name}}", "w") as fh:
        fh.write(text)
os.makedirs("/tmp/m", exist_ok=True)
if libc.mount(b"none", b"/tmp/m", b"tmpfs", 0, None) != 0:
    print("mount failed", os.strerror(ctypes.get_errno())); raise SystemExit(1)
for i in range({mib}):
    with open(f"/tmp/m/f{{i}}", "wb") as fh:
        fh.write(b"x" * 2**20)
print("FILLED NESTED TMPFS")
"""
MOUNT_TMPFS = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs("/tmp/m", exist_ok=True)
print("mount", libc.mount(b"none", b"/tmp/m", b"tmpfs", 0, None), os.strerror(ctypes.get_errno()))
"""
NO_NEW_PRIVS = "print([l for l in open('/proc/self/status') if l.startswith(('NoNewPrivs', 'CapEff'))])\n"

# --- verdict spoofing ----------------------------------------------------------------------------
EXIT_152 = "raise SystemExit(152)\n"  # 128 + SIGXCPU
EXIT_137 = "import os\nos._exit(137)\n"  # 128 + SIGKILL
FAKE_MEMORY_ERROR = "import sys\nsys.stderr.write('MemoryError\\nCannot allocate memory\\n')\nsys.exit(3)\n"
SELF_SIGXCPU = "import os, signal\nos.kill(os.getpid(), signal.SIGXCPU)\n"
# Write a forged guard report and a guessed token into every open file and every visible process's files.
FORGE_CHANNELS = """
import json, os, sys
forged = json.dumps({"exit": 0, "cpu_s": 0.0, "cpu_limit": True}).encode()
for fd in range(3, 64):
    for data in (forged, b"0" * 32):
        try:
            os.write(fd, data)
        except OSError:
            pass
for pid in os.listdir('/proc'):
    if pid.isdigit() and int(pid) != os.getpid():
        for fd in range(3, 16):
            try:
                w = os.open(f'/proc/{pid}/fd/{fd}', os.O_WRONLY | os.O_NONBLOCK)
                os.write(w, forged)
                print('wrote into', pid, fd)
            except OSError:
                pass
raise SystemExit(7)
"""

# --- system calls the seccomp filter denies (bwrap) ----------------------------------------------
# Each makes one denied call; under bwrap the filter kills it before the call returns.
DENIED_BY_NAME = {  # calls libc names: the program reaches them as libc functions
    "ptrace": "libc.ptrace(0, 0, None, None)",  # PTRACE_TRACEME
    "mount": 'libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)',
    "umount2": 'libc.umount2(b"/tmp", 0)',
    "unshare": "libc.unshare(0x40000000)",  # CLONE_NEWNET
    "setns": "libc.setns(0, 0)",
    "pivot_root": 'libc.syscall(155, b"/tmp", b"/tmp")',  # x86_64 number, named by the filter's table
}
# Calls reached through syscall(2) by number: `{nr}` is filled from the filter's own table.
DENIED_BY_NUMBER = ("keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
                    "kexec_load", "init_module", "finit_module", "delete_module", "process_vm_readv",
                    "open_by_handle_at", "fsopen", "reboot", "swapon", "acct", "iopl", "settimeofday")
DENIED_CALL = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print("returned", {call}, flush=True)
"""
# clone with a namespace flag (what unshare(1) or a container runtime does), through syscall(2).
CLONE_NEWUSER = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print("returned", libc.syscall({nr}, 0x10000000 | 17, 0, 0, 0, 0), flush=True)  # CLONE_NEWUSER | SIGCHLD
"""
# What ordinary programs do must still work under the filter: threads, subprocesses (clone3 → clone), fork.
ORDINARY = """
import os, subprocess, sys, threading
t = threading.Thread(target=print, args=("thread",)); t.start(); t.join()
print(subprocess.run([sys.executable, "-c", "print('child')"], capture_output=True, text=True).stdout.strip())
pid = os.fork()
if pid == 0:
    os._exit(7)
print("forked", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""
