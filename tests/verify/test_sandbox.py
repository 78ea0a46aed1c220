"""The sandbox's ordinary behaviour, its levels and opt-in, uid reservations, and operator inputs."""

import glob
import json
import os
import random
import threading
import time
from pathlib import Path

import pytest
from sandbox_env import BWRAP, CGROUP, ROOT

from helpers import run_cli
from patarm.verify import Limits, SandboxPool, cgroup, isolation, run_python, run_python_file, uids
from patarm.verify.sandbox import SandboxRefused


def test_ok_error_and_stdout():
    ok = run_python("print(6 * 7)")
    assert (ok.status, ok.returncode, ok.stdout, ok.completed) == ("ok", 0, "42\n", True)
    assert ok.isolation in isolation.LEVELS and ok.cpu_s is not None
    bad = run_python("raise ValueError('boom')")
    assert bad.status == "error" and bad.returncode == 1 and "ValueError: boom" in bad.stderr and not bad.completed
    assert run_python("import sys; sys.exit(3)").returncode == 3


def test_exit_zero_is_ok_but_not_completed():
    for early in ("import sys\nsys.exit(0)\nprint('after')", "import os\nos._exit(0)", "raise SystemExit"):
        v = run_python(early)
        assert (v.status, v.returncode, v.completed) == ("ok", 0, False), early


def test_auto_picks_the_strongest_available_level():
    expected = next(level for level in isolation.LEVELS if isolation.level_available(level))
    assert run_python("pass", allow_weak=True).isolation == expected


def test_forced_level_via_environment(monkeypatch, weak_ok):
    monkeypatch.setenv(isolation.ENV_ISOLATION, "limits")
    assert run_python("pass").isolation == "limits"
    monkeypatch.setenv(isolation.ENV_ISOLATION, "nonsense")
    with pytest.raises(ValueError):
        run_python("pass")


@pytest.mark.parametrize("level", ["unshare", "limits"])
def test_weak_levels_refuse_without_opt_in(level, monkeypatch, tmp_path, capsys):
    if not isolation.level_available(level):
        pytest.skip(f"{level} does not work here")
    monkeypatch.delenv(isolation.ENV_ALLOW_WEAK, raising=False)
    v = run_python("print('ran')", isolation_level=level)
    assert v.status == "refused" and v.stdout == "" and "persistence" in v.reason and "allow_weak" in v.reason
    assert {"files", "persistence"} <= set(v.missing)
    with pytest.raises(SandboxRefused, match="does not guarantee"):
        SandboxPool(isolation_level=level)
    prog = tmp_path / "p.py"
    prog.write_text("print('ran')\n")
    verify_main(["python", str(prog), "--isolation", level])
    assert json.loads(capsys.readouterr().out)["status"] == "refused"
    verify_main(["python", str(prog), "--isolation", level, "--allow-weak-isolation"])
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "ok" and out["stdout"] == "ran\n" and "persistence" in out["missing"]
    allowed = run_python("print('ran')", isolation_level=level, allow_weak=True)
    assert allowed.status == "ok" and allowed.missing == v.missing
    if level == "limits":
        assert "network" in v.missing


@BWRAP
def test_bwrap_has_every_isolation_guarantee():
    v = run_python("pass", isolation_level="bwrap")
    assert not set(v.missing) & set(isolation.REQUIRED)


def test_private_working_directory_is_writable_and_removed(weak_ok):
    for level in [lv for lv in isolation.LEVELS if isolation.level_available(lv)]:
        v = run_python("import os\nopen('out.txt', 'w').write('x')\nprint(os.getcwd())", isolation_level=level)
        assert v.status == "ok", (level, v)
        if v.isolation != "bwrap":  # bwrap shows it as /sandbox
            assert not Path(v.stdout.strip()).exists()


def test_pool_runs_in_order():
    verdicts = SandboxPool(workers=2).map([f"print({i})" for i in range(6)])
    assert [v.stdout.strip() for v in verdicts] == [str(i) for i in range(6)]


def test_cli_prints_json_verdict(tmp_path, capsys):
    prog = tmp_path / "p.py"
    prog.write_text("print('hi')\nwhile True: pass\n")
    verify_main(["python", str(prog), "--timeout", "1", "--memory-mb", "128"])
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"status", "returncode", "stdout", "stderr", "isolation", "completed", "missing"}
    assert out["status"] == "timeout" and out["stdout"] == "hi\n" and not out["completed"]


# --- uid reservations ----------------------------------------------------------------------------

@ROOT
def test_a_reserved_uid_is_never_handed_out_twice(monkeypatch):
    """Regression: uids were pid % 10000 based, so two runs could share one and kill each other."""
    picks = iter([5, 5, 5, 6])
    monkeypatch.setattr(random.SystemRandom, "randrange", lambda self, n: next(picks))
    with uids.reserve_uid(True) as first, uids.reserve_uid(True) as second:
        assert first == uids.UID_BASE + 5 and second == uids.UID_BASE + 6
    assert not os.path.exists(uids._lock_dir() / str(first))  # released and removed


@ROOT
def test_a_run_never_reuses_the_uid_of_a_running_one(monkeypatch):
    """Hold one run open, then force the next uid choice onto its uid: the second run must get another
    one, and the second run's cleanup must not touch the first run's process."""
    seen = {}

    def long_run():
        seen["v"] = run_python("import os, time\nprint(os.getuid(), flush=True)\ntime.sleep(1.5)\nprint('alive')")

    thread = threading.Thread(target=long_run)
    thread.start()
    time.sleep(0.5)
    held = [int(p.name) for p in uids._lock_dir().iterdir() if p.name.isdigit()]
    assert held
    real, forced = random.SystemRandom.randrange, [uid - uids.UID_BASE for uid in held]
    monkeypatch.setattr(random.SystemRandom, "randrange", lambda self, n: forced.pop() if forced else real(self, n))
    other = run_python("import os\nprint(os.getuid())")
    thread.join()
    assert int(other.stdout) not in held
    assert seen["v"].status == "ok" and seen["v"].stdout.endswith("alive\n")


# --- operator inputs -----------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [{"timeout_s": float("inf")}, {"timeout_s": float("nan")}, {"timeout_s": 0},
                                 {"timeout_s": -1}, {"memory_bytes": -2**20}, {"memory_bytes": 0},
                                 {"cpu_s": 0}, {"processes": -1}, {"disk_bytes": 1.5}, {"open_files": True}])
def test_invalid_limits_are_rejected(bad):
    with pytest.raises(ValueError, match="invalid sandbox"):
        Limits(**bad)


@pytest.mark.parametrize("argv", [["--memory-mb", "-1"], ["--memory-mb", "0"], ["--timeout", "inf"],
                                  ["--timeout", "nan"], ["--timeout", "-3"]])
def test_cli_rejects_bad_limits_in_one_line_and_leaves_no_temp_dir(argv, tmp_path, capsys):
    """Regression: --memory-mb -1 turned the limit off; --timeout inf/nan gave a traceback and left a
    /tmp/patarm-sbx-* folder behind."""
    prog = tmp_path / "p.py"
    prog.write_text("print(1)\n")
    before = set(glob.glob(os.path.join(isolation.workdir_base(), "patarm-sbx-*")))
    with pytest.raises(SystemExit) as exc:
        verify_main(["python", str(prog), *argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith("patarm verify: error: invalid sandbox") and err.count("\n") == 1
    assert set(glob.glob(os.path.join(isolation.workdir_base(), "patarm-sbx-*"))) <= before


def test_source_bytes_keep_pythons_encoding_rules(tmp_path):
    """Regression: a valid latin-1 source file gave a UnicodeDecodeError traceback on the host."""
    declared = tmp_path / "latin.py"
    declared.write_bytes("# -*- coding: latin-1 -*-\nprint('café', len('café'))\n".encode("latin-1"))
    v = run_python_file(declared)
    assert v.status == "ok" and v.stdout == "café 4\n"
    undeclared = tmp_path / "bad.py"
    undeclared.write_bytes("print('café')\n".encode("latin-1"))
    bad = run_python_file(undeclared)
    assert bad.status == "error" and "SyntaxError" in bad.stderr  # Python's own verdict, in the sandbox


def test_source_files_must_be_regular_and_bounded(tmp_path, capsys):
    """Regression: `verify python /dev/zero` read without bound (3.9 GB in the host process)."""
    with pytest.raises(SystemExit) as exc:
        verify_main(["python", "/dev/zero"])
    assert exc.value.code == 2 and "not a regular file" in capsys.readouterr().err
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        run_python_file(fifo)  # and it does not block on the open
    big = tmp_path / "big.py"
    big.write_bytes(b"#" * 5000)
    with pytest.raises(ValueError, match="larger than the source limit"):
        run_python_file(big, Limits(source_bytes=4096))
    assert run_python("x = 1\n" * 1000, Limits(source_bytes=100)).status == "error"


# --- kernel features the sandbox adapts to -------------------------------------------------------

@BWRAP
def test_bwrap_without_tmpfs_sizes_still_runs_and_says_disk_is_unbounded(monkeypatch):
    monkeypatch.setattr(isolation, "bwrap_features", lambda: frozenset())
    v = run_python("open('/tmp/x', 'w').write('x')\nopen('out', 'w').write('y')\nprint('ok')", isolation_level="bwrap")
    assert v.status == "ok" and v.stdout == "ok\n" and "disk" in v.missing


@CGROUP
def test_without_cgroup_memory_is_per_process(monkeypatch):
    monkeypatch.setenv(cgroup.ENV_CGROUP, "off")
    cgroup.parent.cache_clear()
    try:
        v = run_python("x = bytearray(300 * 2**20)", Limits(memory_bytes=128 * 2**20))
        assert v.status == "error" and "MemoryError" in v.stderr and "memory-total" in v.missing
    finally:
        monkeypatch.undo()
        cgroup.parent.cache_clear()


def test_cgroup_v2_files_are_read(tmp_path):
    (tmp_path / "cgroup.procs").write_text("")
    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\noom_group_kill 0\n")
    cg = cgroup.RunCgroup(tmp_path, 2)
    assert cg.oom_kills() == 2 and cg.pids() == []
    os.close(cg.procs_fd)


def verify_main(argv: list[str]) -> None:
    run_cli("verify", *argv)
