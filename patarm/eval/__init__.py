"""Reward-model benchmarks scored exactly as their official code scores them (RewardBench 1 and 2, RM-Bench,
JudgeBench), the harness that judges them with a PaTaRM judge, and reports.

Metrics are small pure functions: `patarm.eval.registry.get(name).score(records)`.
"""
