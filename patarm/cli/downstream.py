"""`patarm downstream [--recipe case|ifeval] [--config YAML] [--key value ...]`: the paper's downstream RLHF loop.

* `case` (the default): in miniature — a tiny policy trained with GRPO on the judge of a quickstart run, a BT reward
  model and the rule verifier, measured on held-out prompts: `patarm downstream [--run_dir runs/downstream]
  [--judge_run runs/quickstart]`.
* `ifeval`: a real policy (SmolLM2-135M-Instruct) on verifiable Alpaca + IFEval-constraint prompts, rewarded by a
  PaTaRM judge trained in the run, a BT model or the IFEval checkers, measured on the official IFEval:
  `patarm downstream --recipe ifeval [--config more.yaml] [--until prompts|start|pairs|judge|all]` (`--help` lists
  the keys).
"""

from __future__ import annotations

RECIPES = ("case", "ifeval")


def _recipe(argv: list[str]) -> tuple[str, list[str]]:
    """The value of --recipe (default `case`) and the other arguments."""
    from patarm.cli.quickstart import _recipe as split

    recipe, rest = split(argv)
    if recipe not in RECIPES:
        raise ValueError(f"--recipe {recipe!r}: choose from {list(RECIPES)}")
    return recipe, rest


def main(command: str, argv: list[str]) -> None:
    from patarm.config import parse_stage

    recipe, rest = _recipe(argv)
    if recipe == "ifeval":
        from patarm.demo.ifeval import recipe as ifeval

        report = ifeval.main(rest)
        print(f"downstream --recipe ifeval finished in {report['seconds']:.0f} s; report: "
              f"{report['paths']['report_md']}")
        return
    from patarm.demo.downstream import loop
    from patarm.demo.downstream.config import DownstreamArguments

    (args,) = parse_stage((DownstreamArguments,), rest, prog="patarm downstream", description=loop.__doc__)
    report = loop.run(args)
    print(f"downstream finished in {report['seconds']:.0f} s; report: {report['paths']['report_md']}")
