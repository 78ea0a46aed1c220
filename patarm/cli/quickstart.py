"""`patarm quickstart [--run_dir runs/quickstart] [--small] [--seed N]`: the main job end to end on a CPU."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from patarm.config import RunArguments


@dataclass
class QuickstartArguments(RunArguments):
    """The bundled task, end to end on a CPU."""

    run_dir: str = field(default="runs/quickstart", metadata={"help": "the run folder for every artefact"})
    small: bool = field(default=False, metadata={"help": "a seconds-long version (for tests)"})
    seed: int = field(default=0, metadata={"help": "seed of the task, the models and the sampling"})


def main(command: str, argv: list[str]) -> None:
    from patarm.config import parse_stage
    from patarm.demo import quickstart

    (args,) = parse_stage((QuickstartArguments,), argv, prog="patarm quickstart", description=quickstart.__doc__)
    sizes = quickstart.Sizes.small() if args.small else quickstart.Sizes()
    report = quickstart.run(Path(args.run_dir), sizes, args.seed)
    print(f"quickstart finished in {report['seconds']:.0f} s; report: {report['paths']['report_md']}")
