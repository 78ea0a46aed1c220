"""Skill packages S = (M, U): a SKILL.md specification and a typed resource bank.

A skill is a folder::

    reward-judge/
      SKILL.md          # YAML frontmatter (name, description[, resources]) + the procedure
      resources.yaml    # the manifest: a list of resources
      resources/...     # the files they point at

A resource is (id, type, scope, action, path, description). Paths are relative to the skill
folder, or ``pkg://…`` relative to the `patarm` package (how the skill bank points at the primary
rubrics in ``patarm/rubrics/`` — one source of truth). Run resources name a Python file and the
function in it (``function``, default ``run``). Sample-specific resources (a reference answer, a
test suite) are not in the manifest: they are mounted per sample with content in memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from patarm.config import nearest

PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # the `patarm` package folder
BANK_DIR = Path(__file__).resolve().parent / "bank"  # skills shipped with patarm
PKG_SCHEME = "pkg://"
RESOURCE_TYPES = ("rubric", "reference", "checklist", "constraint", "verifier", "tool", "calibration", "aggregation")
ACTIONS = ("view", "run")
ANY_SCOPE = "*"
NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
MANIFEST_DEFAULT = "resources.yaml"
_FRONTMATTER_RE = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)(.*)\Z", re.S)


class SkillError(ValueError):
    """A skill folder that cannot be loaded; `problems` lists every issue found."""

    def __init__(self, problems: list):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


@dataclass(frozen=True)
class Resource:
    """One entry of a resource bank. `content` is set only for mounted (sample-specific) resources."""

    id: str
    type: str
    scope: tuple[str, ...]
    action: str
    description: str
    path: str = ""
    function: str = "run"
    content: Any = None
    mounted: bool = False

    def applies_to(self, *scopes: str | None) -> bool:
        """Whether the resource's scope covers any of `scopes` (``*`` covers everything)."""
        wanted = {s.lower() for s in scopes if s}
        return ANY_SCOPE in self.scope or bool(wanted & {s.lower() for s in self.scope})

    def summary(self) -> dict[str, Any]:
        """What progressive disclosure shows before the content: no content, no path."""
        return {"id": self.id, "type": self.type, "action": self.action, "scope": list(self.scope),
                "description": self.description, "mounted": self.mounted}


@dataclass
class Skill:
    """A loaded skill: metadata, procedure text and resources (manifest order)."""

    name: str
    description: str
    procedure: str
    root: Path
    resources: dict[str, Resource] = field(default_factory=dict)

    def resolve(self, resource: Resource) -> Path:
        """The file behind a resource path."""
        return resolve_path(self.root, resource.path)

    def by_type(self, *types: str) -> list[Resource]:
        return [r for r in self.resources.values() if r.type in types]


def resolve_path(root: Path, path: str) -> Path:
    """A manifest path: ``pkg://x`` → patarm/x; otherwise relative to the skill folder."""
    if path.startswith(PKG_SCHEME):
        return PACKAGE_ROOT / path[len(PKG_SCHEME):]
    return Path(root) / path


def split_frontmatter(text: str) -> tuple[str | None, str]:
    """(frontmatter YAML text or None, body) of a SKILL.md."""
    match = _FRONTMATTER_RE.match(text)
    return (match.group(1), match.group(2)) if match else (None, text)


def resource_from_dict(entry: dict[str, Any], mounted: bool = False) -> Resource:
    """A Resource from a manifest entry (fields as in the manifest; scope may be a string)."""
    scope = entry.get("scope", ANY_SCOPE)
    scope = (scope,) if isinstance(scope, str) else tuple(scope)
    return Resource(id=entry["id"], type=entry["type"], scope=scope, action=entry["action"],
                    description=entry.get("description", ""), path=entry.get("path", ""),
                    function=entry.get("function", "run"), content=entry.get("content"), mounted=mounted)


def load_skill(folder: str | Path) -> Skill:
    """Load and validate a skill folder; raise SkillError listing every problem."""
    from patarm.skills.validate import validate_skill

    folder = Path(folder)
    problems = validate_skill(folder)
    if problems:
        raise SkillError(problems)
    meta_text, body = split_frontmatter((folder / "SKILL.md").read_text(encoding="utf-8"))
    meta = yaml.safe_load(meta_text)
    manifest = yaml.safe_load((folder / meta.get("resources", MANIFEST_DEFAULT)).read_text(encoding="utf-8"))
    resources = [resource_from_dict(e) for e in manifest["resources"]]
    return Skill(meta["name"], meta["description"].strip(), body.strip(), folder.resolve(),
                 {r.id: r for r in resources})


def find_skill(name_or_path: str | Path, bank: str | Path = BANK_DIR) -> Skill:
    """A skill by folder path, or by name from the shipped bank (or another bank folder)."""
    path = Path(name_or_path)
    if path.is_dir():
        return load_skill(path)
    candidate = Path(bank) / str(name_or_path)
    if candidate.is_dir():
        return load_skill(candidate)
    names = sorted(p.name for p in Path(bank).iterdir() if (p / "SKILL.md").is_file())
    raise ValueError(
        f"no skill {str(name_or_path)!r}{nearest(str(name_or_path), names)}: not a folder, and the bank {bank} "
        f"has {names}"
    )


def list_skills(bank: str | Path = BANK_DIR) -> list[dict[str, str]]:
    """Level 1 of progressive disclosure: the name and description of every skill in a bank."""
    out = []
    for folder in sorted(Path(bank).iterdir()):
        skill_md = folder / "SKILL.md"
        if skill_md.is_file():
            meta_text, _ = split_frontmatter(skill_md.read_text(encoding="utf-8"))
            meta = yaml.safe_load(meta_text or "") or {}
            out.append({"name": str(meta.get("name", folder.name)), "description": str(meta.get("description", ""))})
    return out
