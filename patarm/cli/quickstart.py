"""`patarm quickstart [--recipe case|gsm8k-skill] ...`: a recipe end to end on a CPU.

* `case` (the default): the bundled case-instruction task and a tiny judge built from scratch —
  `patarm quickstart [--run_dir runs/quickstart] [--small] [--seed N]`.
* `gsm8k-skill`: SmolLM2-135M-Instruct learns to judge real GSM8K solutions with a skill (the reference answer
  mounted per sample; nothing; the arithmetic check without the reference), measured as a best-of-4 selector —
  `patarm quickstart --recipe gsm8k-skill [--config more.yaml] [--key value ...] [--seeds 0 1 2]
  [--ablation NAME|all]` (`--help` lists the keys).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from patarm.config import RunArguments

RECIPES = ("case", "gsm8k-skill")


@dataclass
class QuickstartArguments(RunArguments):
    """The bundled task, end to end on a CPU."""

    run_dir: str = field(default="runs/quickstart", metadata={"help": "the run folder for every artefact"})
    small: bool = field(default=False, metadata={"help": "a seconds-long version (for tests)"})
    seed: int = field(default=0, metadata={"help": "seed of the task, the models and the sampling"})
    recipe: str = field(default="case", metadata={"help": "which recipe to run", "choices": list(RECIPES)})


def _recipe(argv: list[str]) -> tuple[str, list[str]]:
    """The value of --recipe (default `case`) and the other arguments."""
    rest, recipe, k = [], "case", 0
    while k < len(argv):
        if argv[k] == "--recipe" and k + 1 < len(argv):
            recipe, k = argv[k + 1], k + 2
            continue
        if argv[k].startswith("--recipe="):
            recipe = argv[k].split("=", 1)[1]
        else:
            rest.append(argv[k])
        k += 1
    return recipe, rest


def main(command: str, argv: list[str]) -> None:
    from patarm.config import parse_stage

    recipe, rest = _recipe(argv)
    if recipe == "gsm8k-skill":
        from patarm.demo.gsm8k import recipe as gsm8k

        report = gsm8k.main(rest)
        print(f"gsm8k-skill finished in {report['seconds']:.0f} s; report: {report['paths']['report_md']}")
        return
    from patarm.demo import quickstart

    (args,) = parse_stage((QuickstartArguments,), argv, prog="patarm quickstart", description=__doc__)
    sizes = quickstart.Sizes.small() if args.small else quickstart.Sizes()
    report = quickstart.run(Path(args.run_dir), sizes, args.seed)
    print(f"quickstart finished in {report['seconds']:.0f} s; report: {report['paths']['report_md']}")
