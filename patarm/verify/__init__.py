"""Verifiers: a hardened Python sandbox and benchmark checkers (HumanEval, math answers, IFEval)."""

from patarm.verify.sandbox import Limits, SandboxPool, Verdict, run_python, run_python_file

__all__ = ["Limits", "SandboxPool", "Verdict", "run_python", "run_python_file"]
