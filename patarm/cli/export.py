"""`patarm export [--checkpoint DIR] [--output DIR] [--overwrite] [--push_to_hub REPO]`."""

from __future__ import annotations


def main(command: str, argv: list[str]) -> None:
    from patarm import export
    from patarm.config import parse_stage

    (args,) = parse_stage((export.ExportArguments,), argv, prog="patarm export", description=export.__doc__)
    print(export.main(args))
