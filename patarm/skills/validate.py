"""`patarm skill validate DIR`: every problem of a skill folder, each with its file and field.

Checks the SKILL.md frontmatter (name in kebab-case matching the folder, description), the body,
the manifest (every resource's id, type, scope, action, path, description; no duplicates or unknown
fields) and the files behind the resources (rubric and aggregation files parse; run resources name
a function that exists in their Python file, found without executing it).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from patarm.skills.package import (
    ACTIONS,
    MANIFEST_DEFAULT,
    NAME_RE,
    RESOURCE_TYPES,
    resolve_path,
    split_frontmatter,
)

RESOURCE_FIELDS = {"id", "type", "scope", "action", "path", "description", "function"}
FRONTMATTER_FIELDS = {"name", "description", "resources", "license", "version", "metadata"}
MAX_NAME, MAX_DESCRIPTION = 64, 1024
# Types whose content is executed rather than read.
RUN_TYPES = ("verifier", "tool")


@dataclass(frozen=True)
class Problem:
    """One validation problem: where (file, field) and what."""

    file: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.field}: {self.message}"


def _frontmatter(folder: Path, problems: list[Problem]) -> dict[str, Any] | None:
    path = folder / "SKILL.md"
    if not path.is_file():
        problems.append(Problem(str(path), "-", "SKILL.md is missing"))
        return None
    meta_text, body = split_frontmatter(path.read_text(encoding="utf-8"))
    if meta_text is None:
        problems.append(Problem(str(path), "frontmatter", "no YAML frontmatter between '---' lines at the top"))
        return None
    try:
        meta = yaml.safe_load(meta_text) or {}
    except yaml.YAMLError as err:
        problems.append(Problem(str(path), "frontmatter", f"invalid YAML: {err}"))
        return None
    if not isinstance(meta, dict):
        problems.append(Problem(str(path), "frontmatter", "must be a mapping"))
        return None
    name, desc = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not NAME_RE.match(name) or len(name) > MAX_NAME:
        problems.append(
            Problem(str(path), "name", f"must be kebab-case (a-z, 0-9, '-'), <= {MAX_NAME} chars; got {name!r}")
        )
    elif name != folder.name:
        problems.append(Problem(str(path), "name", f"{name!r} does not match the folder name {folder.name!r}"))
    if not isinstance(desc, str) or not desc.strip():
        problems.append(Problem(str(path), "description", "missing or empty"))
    elif len(desc) > MAX_DESCRIPTION:
        problems.append(Problem(str(path), "description", f"longer than {MAX_DESCRIPTION} characters"))
    for key in sorted(set(meta) - FRONTMATTER_FIELDS):
        problems.append(Problem(str(path), key, "unknown frontmatter field"))
    if not body.strip():
        problems.append(Problem(str(path), "body", "the procedure (body after the frontmatter) is empty"))
    return meta


def _check_file(folder: Path, entry: dict, where: str, manifest: str, problems: list[Problem]) -> None:
    """The file behind a resource exists and has the content its type needs."""
    path = resolve_path(folder, entry["path"])
    if not path.is_file():
        problems.append(Problem(manifest, f"{where}.path", f"file not found: {path}"))
        return
    kind = entry.get("type")
    if entry.get("action") == "run":
        if path.suffix != ".py":
            problems.append(Problem(manifest, f"{where}.path", "a run resource must point at a .py file"))
            return
        func = entry.get("function", "run")
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError as err:
            problems.append(Problem(str(path), "-", f"syntax error: {err}"))
            return
        if func not in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}:
            problems.append(Problem(manifest, f"{where}.function", f"no top-level function {func!r} in {path}"))
        return
    if kind in ("rubric", "aggregation"):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as err:
            problems.append(Problem(str(path), "-", f"invalid YAML: {err}"))
            return
        if kind == "rubric":
            rubrics = data.get("rubrics") if isinstance(data, dict) else None
            if not isinstance(rubrics, list) or not all(isinstance(r, dict) and {"name", "description"} <= r.keys()
                                                         for r in rubrics):
                problems.append(Problem(str(path), "rubrics", "needs a list of {name, description, criteria}"))
        else:
            from patarm.skills.readout import check_rules

            problems += [Problem(str(path), fld, msg) for fld, msg in check_rules(data)]


def _check_resource(folder: Path, entry: Any, i: int, manifest: str, seen: set, problems: list[Problem]) -> None:
    where = f"resources[{i}]"
    if not isinstance(entry, dict):
        problems.append(Problem(manifest, where, "must be a mapping"))
        return
    rid = entry.get("id")
    if not isinstance(rid, str) or not NAME_RE.match(rid):
        problems.append(Problem(manifest, f"{where}.id", f"must be kebab-case; got {rid!r}"))
    elif rid in seen:
        problems.append(Problem(manifest, f"{where}.id", f"duplicate id {rid!r}"))
    seen.add(rid)
    kind, action = entry.get("type"), entry.get("action")
    if kind not in RESOURCE_TYPES:
        problems.append(Problem(manifest, f"{where}.type", f"must be one of {', '.join(RESOURCE_TYPES)}; got {kind!r}"))
    if action not in ACTIONS:
        problems.append(Problem(manifest, f"{where}.action", f"must be 'view' or 'run'; got {action!r}"))
    elif kind in RUN_TYPES and action != "run":
        problems.append(Problem(manifest, f"{where}.action", f"a {kind} is executed: action must be 'run'"))
    elif kind in RESOURCE_TYPES and kind not in RUN_TYPES and action != "view":
        problems.append(Problem(manifest, f"{where}.action", f"a {kind} is read: action must be 'view'"))
    scope = entry.get("scope")
    if isinstance(scope, str):
        scope = [scope]
    if not isinstance(scope, list) or not scope or not all(isinstance(s, str) and s for s in scope):
        problems.append(Problem(manifest, f"{where}.scope", "must be a non-empty list of domains/tasks ('*' = all)"))
    if not isinstance(entry.get("description"), str) or not entry["description"].strip():
        problems.append(Problem(manifest, f"{where}.description", "missing or empty"))
    for key in sorted(set(entry) - RESOURCE_FIELDS):
        problems.append(Problem(manifest, f"{where}.{key}", "unknown resource field"))
    if not isinstance(entry.get("path"), str) or not entry["path"]:
        problems.append(Problem(manifest, f"{where}.path", "missing"))
    elif action in ACTIONS:
        _check_file(folder, entry, where, manifest, problems)


def validate_skill(folder: str | Path) -> list[Problem]:
    """Every problem of the skill in `folder` (empty when it is valid)."""
    folder = Path(folder)
    if not folder.is_dir():
        return [Problem(str(folder), "-", "not a folder")]
    problems: list[Problem] = []
    meta = _frontmatter(folder, problems)
    manifest_name = (meta or {}).get("resources", MANIFEST_DEFAULT)
    manifest = folder / str(manifest_name)
    if not manifest.is_file():
        problems.append(Problem(str(manifest), "-", "resource manifest is missing"))
        return problems
    try:
        data = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        return problems + [Problem(str(manifest), "-", f"invalid YAML: {err}")]
    entries = data.get("resources") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return problems + [Problem(str(manifest), "resources", "must be a list of resources")]
    seen: set = set()
    for i, entry in enumerate(entries):
        _check_resource(folder, entry, i, str(manifest), seen, problems)
    return problems
