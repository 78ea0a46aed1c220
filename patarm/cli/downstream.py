"""`patarm downstream [--config YAML] [--run_dir runs/downstream] [--judge_run runs/quickstart] [--key value]`:
the paper's downstream RLHF loop in miniature (a policy trained with GRPO on the judge, a BT reward model and
the rule verifier; measured on held-out prompts)."""

from __future__ import annotations


def main(command: str, argv: list[str]) -> None:
    from patarm.config import parse_stage
    from patarm.demo.downstream import loop
    from patarm.demo.downstream.config import DownstreamArguments

    (args,) = parse_stage((DownstreamArguments,), argv, prog="patarm downstream", description=loop.__doc__)
    report = loop.run(args)
    print(f"downstream finished in {report['seconds']:.0f} s; report: {report['paths']['report_md']}")
