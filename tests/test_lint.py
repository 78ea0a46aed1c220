"""`make test` lints: ruff, with the rules in pyproject.toml ([tool.ruff]), finds nothing in the repository."""

from __future__ import annotations

import subprocess
import sys

from helpers import ROOT


def test_ruff_finds_nothing():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)], capture_output=True,
                          text=True, cwd=ROOT)
    assert "No module named ruff" not in proc.stderr, "ruff is in the test extra: pip install -e '.[test]'"
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-1000:]
