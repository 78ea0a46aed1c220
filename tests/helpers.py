"""Helpers the tests share (importable as `helpers`: tests/ is on sys.path through its conftest)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO_PAIRS = ROOT / "patarm" / "demo" / "assets" / "if_pairs_demo.jsonl"  # 48 pairs of the bundled task


def run_cli(*argv: object) -> None:
    """`patarm ARGV...` in this process (what a user types); a command error exits with SystemExit(2)."""
    from patarm.cli import main

    main([str(a) for a in argv])
