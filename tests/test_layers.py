"""The package's layers point one way (contracts in pyproject.toml, checked by import-linter)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept():
    lint = Path(sys.executable).parent / "lint-imports"
    proc = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "0 broken" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]


def test_a_violation_is_caught(tmp_path):
    """The negative control: the same contracts on a copy where the judge core imports the CLI fail."""
    import shutil

    shutil.copytree(ROOT / "patarm", tmp_path / "patarm", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / "patarm" / "judge" / "decisions.py", "a") as fh:
        fh.write("\nimport patarm.cli  # noqa\n")
    lint = Path(sys.executable).parent / "lint-imports"
    proc = subprocess.run([str(lint), "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert proc.returncode != 0 and "patarm.judge.decisions -> patarm.cli" in proc.stdout, proc.stdout[-2000:]
