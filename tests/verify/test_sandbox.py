"""The sandbox: normal runs, limits, and a battery of hostile programs at every available level."""

import json
import os
import sys
import time
from pathlib import Path

import pytest

from patarm.verify import Limits, SandboxPool, run_python
from patarm.verify import isolation
from helpers import run_cli

sys.path.insert(0, str(Path(__file__).parent))
import hostile  # noqa: E402

LEVELS = [pytest.param(level, marks=pytest.mark.skipif(not isolation.level_available(level),
                                                       reason=f"{level} does not work on this machine"))
          for level in isolation.LEVELS]
FAST = Limits(timeout_s=1.0, memory_bytes=256 * 2**20)


def _sandbox_processes(wait_s: float = 3.0) -> list[int]:
    """Host pids owned by sandbox uids, after giving killed namespaces `wait_s` to be torn down
    (only meaningful when the tests run as root)."""
    deadline = time.monotonic() + wait_s
    while True:
        pids = []
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and os.stat(f"/proc/{entry}").st_uid >= isolation._UID_BASE:
                    pids.append(int(entry))
            except OSError:
                pass
        if not pids or time.monotonic() > deadline:
            return pids
        time.sleep(0.1)


def test_ok_error_and_stdout():
    ok = run_python("print(6 * 7)")
    assert (ok.status, ok.returncode, ok.stdout) == ("ok", 0, "42\n")
    assert ok.isolation in isolation.LEVELS
    bad = run_python("raise ValueError('boom')")
    assert bad.status == "error" and bad.returncode == 1 and "ValueError: boom" in bad.stderr
    assert run_python("import sys; sys.exit(3)").returncode == 3


def test_auto_picks_the_strongest_available_level():
    expected = next(level for level in isolation.LEVELS if isolation.level_available(level))
    assert run_python("pass").isolation == expected


def test_forced_level_via_environment(monkeypatch):
    monkeypatch.setenv(isolation.ENV_ISOLATION, "limits")
    assert run_python("pass").isolation == "limits"
    monkeypatch.setenv(isolation.ENV_ISOLATION, "nonsense")
    with pytest.raises(ValueError):
        run_python("pass")


def test_private_working_directory_is_writable_and_removed():
    v = run_python("import os\nopen('out.txt', 'w').write('x')\nprint(os.getcwd())")
    assert v.status == "ok"
    cwd = v.stdout.strip()
    if v.isolation != "bwrap":  # bwrap shows it as /sandbox
        assert not Path(cwd).exists()


@pytest.mark.parametrize("level", LEVELS)
def test_hostile_battery(level, tmp_path, monkeypatch):
    monkeypatch.setenv("PATARM_HOST_SECRET", "envsecret-123")
    secret = tmp_path / "secret.txt"
    secret.write_text("filesecret-456")
    outside = tmp_path / "pwned.txt"
    tmp_outside = Path("/tmp") / f"patarm-pwned-{os.getpid()}-{level}"

    def run(src, **fmt):
        return run_python(src.format(**fmt) if fmt else src, FAST, level)

    verdicts = {
        "fork_bomb": run(hostile.FORK_BOMB),
        "busy_loop": run(hostile.BUSY_LOOP),
        "memory_bomb": run(hostile.MEMORY_BOMB),
        "print_env": run(hostile.PRINT_ENV),
        "read_shadow": run(hostile.READ_SHADOW),
        "kill_parent": run(hostile.KILL_PARENT),
        "gigabyte": run(hostile.GIGABYTE_OUTPUT),
    }
    assert all(v.isolation == level for v in verdicts.values())
    assert verdicts["fork_bomb"].status == "timeout"
    assert verdicts["busy_loop"].status == "timeout"
    assert verdicts["memory_bomb"].status == "memory"
    assert "envsecret" not in verdicts["print_env"].stdout
    assert verdicts["read_shadow"].status == "error" and "root:" not in verdicts["read_shadow"].stdout
    assert verdicts["kill_parent"].status in ("ok", "killed")  # and this process is alive to check it
    giga = verdicts["gigabyte"]
    assert giga.status == "killed" and "output" in giga.reason
    assert len(giga.stdout) <= FAST.output_bytes and giga.wall_s < FAST.timeout_s

    # Files: fully hidden under bwrap; otherwise protected only by permissions (a root host runs
    # the sandbox as an unprivileged uid, and pytest's tmp_path is private to the host user).
    files_protected = level == "bwrap" or isolation.is_root()
    read = run(hostile.READ_SECRET, secret_path=str(secret))
    write = run(hostile.WRITE_OUTSIDE, outside_path=str(outside))
    write_tmp = run(hostile.WRITE_OUTSIDE, outside_path=str(tmp_outside))
    if files_protected:
        assert read.status == "error" and "filesecret" not in read.stdout
        assert write.status == "error" and not outside.exists()
    if level == "bwrap":
        assert write_tmp.status == "ok" and not tmp_outside.exists()  # it wrote into its own tmpfs
    tmp_outside.unlink(missing_ok=True)

    network = run(hostile.NETWORK)
    if level != "limits":
        assert network.status == "error" and "CONNECTED" not in network.stdout
    if isolation.is_root():
        assert _sandbox_processes() == []  # nothing of any run survives it


def test_cpu_limit_independent_of_wall_clock():
    v = run_python(hostile.BUSY_LOOP, Limits(timeout_s=5, cpu_s=1))
    assert v.status == "timeout" and "CPU" in v.reason and v.wall_s < 4


def test_pool_runs_in_order():
    verdicts = SandboxPool(workers=2).map([f"print({i})" for i in range(6)])
    assert [v.stdout.strip() for v in verdicts] == [str(i) for i in range(6)]


def test_cli_prints_json_verdict(tmp_path, capsys):
    prog = tmp_path / "p.py"
    prog.write_text("print('hi')\nwhile True: pass\n")
    run_cli("verify", *["python", str(prog), "--timeout", "1", "--memory-mb", "128"])
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"status", "returncode", "stdout", "stderr", "isolation"}
    assert out["status"] == "timeout" and out["stdout"] == "hi\n"


@pytest.mark.skipif(not isolation.level_available("bwrap"), reason="bwrap does not work on this machine")
def test_disk_is_bounded_under_bwrap():
    fill = "for i in range(10):\n    open(f'f{i}', 'wb').write(b'x' * 8 * 2**20)\n"
    v = run_python(fill, Limits(disk_bytes=16 * 2**20), "bwrap")
    assert v.status == "error" and "No space left" in v.stderr
    big = run_python("open('/tmp/big', 'wb').write(b'x' * 32 * 2**20)", Limits(file_bytes=2**20), "bwrap")
    assert big.status == "error" and "File too large" in big.stderr  # Python ignores SIGXFSZ: EFBIG
