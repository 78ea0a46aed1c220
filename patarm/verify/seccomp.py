"""The seccomp filter of the bwrap sandbox: a deny-list of system calls sandboxed code never needs.

The filter is compiled by libseccomp (the system library, through ctypes: `seccomp_export_bpf` writes the
classic-BPF program bwrap's `--seccomp FD` loads just before it starts the program, so bwrap's own set-up
is unaffected and the filter holds for every process of the run, across exec). A denied call is never
made: the kernel answers it with SIGSYS (SECCOMP_RET_TRAP), which kills the program; the verdict names
the call when the boot script's SIGSYS handler saw it (the program's own process; see `sandbox_boot`).
Everything else is allowed: this narrows the kernel surface within reach of sandboxed
code (the namespaces, read-only binds and limits do the confining), it is not a whitelist.

Denied: process inspection (ptrace, process_vm_*), mounts and the new mount API, namespaces (unshare,
setns, and clone with any CLONE_NEW* flag; clone3, whose flags a filter cannot read, answers ENOSYS so
libc falls back to clone), the kernel keyring, bpf, perf_event_open, userfaultfd, io_uring, kexec and
kernel modules, and host administration (reboot, swap, clock, accounting, quotas, port I/O, syslog).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os

DENIED = (
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr", "name_to_handle_at", "open_by_handle_at",
    "unshare", "setns",
    "keyctl", "add_key", "request_key",
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "syslog", "acct", "quotactl", "iopl", "ioperm", "settimeofday",
    "clock_settime", "clock_adjtime", "adjtimex", "vhangup", "lookup_dcookie", "uselib",
)
CLONE_NEW_FLAGS = {"CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
                   "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
                   "CLONE_NEWNET": 0x40000000, "CLONE_NEWTIME": 0x00000080}

_ACT_ALLOW = 0x7FFF0000
_ACT_TRAP = 0x00030000  # SIGSYS; killing unless the program handles it (the call is never made either way)
_CMP_MASKED_EQ = 7


def _act_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


@functools.cache
def _libseccomp() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None
    lib.seccomp_init.restype, lib.seccomp_init.argtypes = ctypes.c_void_p, [ctypes.c_uint32]
    lib.seccomp_release.restype, lib.seccomp_release.argtypes = None, [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.restype = ctypes.c_int
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ArgCmp)]
    lib.seccomp_export_bpf.restype, lib.seccomp_export_bpf.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_int]
    return lib


def syscall_numbers() -> dict[int, str]:
    """{number: name} of the denied calls this machine's kernel architecture has (for the verdict)."""
    lib = _libseccomp()
    if lib is None:
        return {}
    numbers = {}
    for name in (*DENIED, "clone"):
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr >= 0:
            numbers[nr] = name
    return numbers


@functools.cache
def bpf_program() -> bytes | None:
    """The compiled filter (classic BPF for `bwrap --seccomp`), or None where libseccomp is missing."""
    lib = _libseccomp()
    if lib is None:
        return None
    ctx = lib.seccomp_init(_ACT_ALLOW)
    if not ctx:
        return None
    try:
        def add(action: int, name: str, *cmps: _ArgCmp) -> None:
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:  # not a call of this architecture (e.g. iopl on arm64)
                return
            array = (_ArgCmp * len(cmps))(*cmps) if cmps else None
            rc = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), array)
            if rc < 0:
                raise OSError(-rc, f"libseccomp refused the rule for {name}: {os.strerror(-rc)}")

        for name in DENIED:
            add(_ACT_TRAP, name)
        for flag in CLONE_NEW_FLAGS.values():  # clone(flags, ...): any namespace flag is denied
            add(_ACT_TRAP, "clone", _ArgCmp(0, _CMP_MASKED_EQ, flag, flag))
        add(_act_errno(errno.ENOSYS), "clone3")
        read_fd, write_fd = os.pipe()
        try:
            rc = lib.seccomp_export_bpf(ctx, write_fd)
            os.close(write_fd)
            write_fd = -1
            if rc < 0:
                raise OSError(-rc, f"libseccomp could not export the filter: {os.strerror(-rc)}")
            chunks = []
            while chunk := os.read(read_fd, 65536):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(read_fd)
            if write_fd >= 0:
                os.close(write_fd)
    finally:
        lib.seccomp_release(ctx)


def program_fd() -> int | None:
    """A readable fd holding the filter for one bwrap run (the caller passes it on and closes it)."""
    program = bpf_program()
    if program is None:
        return None
    read_fd, write_fd = os.pipe()  # the program is a few hundred bytes: far below a pipe's buffer
    try:
        os.write(write_fd, program)
    finally:
        os.close(write_fd)
    return read_fd
