"""`patarm skill <validate|list|show|route|bon> ...`: check, browse and route skill packages, and select
best-of-N with one (`patarm skill bon --pool FILE`, also `patarm bon`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from patarm.skills.package import BANK_DIR


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="patarm skill", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("bon", help="best-of-N selection with a skill (see `patarm skill bon --help`)", add_help=False)
    val = sub.add_parser("validate", help="report every problem of skill folders (file: field: message)")
    val.add_argument("dirs", nargs="+", help="skill folders, or names of skills in the shipped bank")
    lst = sub.add_parser(
        "list", help="names and descriptions of the skills in a bank (progressive disclosure, level 1)"
    )
    lst.add_argument("--bank", default=str(BANK_DIR))
    show = sub.add_parser("show", help="a skill's procedure and resource list, or one resource's content")
    show.add_argument("skill", help="a skill folder or a name in the shipped bank")
    show.add_argument("--resource", default=None, help="view this resource's content")
    show.add_argument("--domain", default=None, help="only the resources that apply to this domain")
    route = sub.add_parser("route", help="print the statically routed prompt for a domain and its size")
    route.add_argument("skill")
    route.add_argument("--domain", required=True)
    route.add_argument("--prompt", default="(the user prompt)")
    route.add_argument("--response", default="(the response)")
    return parser


def _validate(dirs: list[str]) -> int:
    from patarm.skills.validate import validate_skill

    bad = 0
    for folder in dirs:
        if not Path(folder).is_dir() and (BANK_DIR / folder).is_dir():  # a skill name in the shipped bank
            folder = str(BANK_DIR / folder)
        elif not Path(folder).is_dir():
            from patarm.skills.package import find_skill

            find_skill(folder)  # raises: no such folder or skill, with the names the bank has
        problems = validate_skill(folder)
        for p in problems:
            print(p)
        print(f"{folder}: {'OK' if not problems else f'{len(problems)} problem(s)'}", file=sys.stderr)
        bad += bool(problems)
    return 1 if bad else 0


def _bon(argv: list[str]) -> None:
    from patarm.config import parse_stage
    from patarm.skills.bon import BonArguments, run_bon

    (args,) = parse_stage((BonArguments,), argv, prog="patarm skill bon",
                          description="Best-of-N selection with a skill: selection accuracy (percent) without the "
                          "reference answer and with it mounted as a per-sample resource, beside every single "
                          "source's accuracy and Oracle@N.")
    print(json.dumps(run_bon(args), indent=1))


def main(command: str, argv: list[str]) -> None:
    if command == "bon" or (argv and argv[0] == "bon"):
        return _bon(argv if command == "bon" else argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "validate":
        sys.exit(_validate(args.dirs))
    from patarm.skills.package import find_skill, list_skills
    from patarm.skills.session import SkillSession

    if args.command == "list":
        for entry in list_skills(args.bank):
            print(json.dumps(entry, ensure_ascii=False))
        return
    skill = find_skill(args.skill)
    session = SkillSession(skill, {"prompt": "", "candidates": [], "domain": getattr(args, "domain", None)})
    if args.command == "show":
        if args.resource:
            print(session.view_resource(args.resource))
            return
        print(f"# {skill.name}\n{skill.description}\n\n{skill.procedure}\n\n## Resources")
        for r in session.list_resources(all_scopes=args.domain is None):
            print(f"- {r['id']} [{r['type']}, {r['action']}, scope {','.join(r['scope'])}]: {r['description']}")
        return
    from patarm.skills.router import static_prompt

    messages = static_prompt(skill, args.prompt, args.response, args.domain)
    for m in messages:
        print(f"[{m['role']}]\n{m['content']}\n")
    print(f"chars={sum(len(m['content']) for m in messages)}", file=sys.stderr)

