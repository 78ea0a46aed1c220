"""Progressive disclosure: one skill applied to one sample.

Only names and descriptions are shown first (`list_resources`); a resource's content enters the
context when it is viewed (`view_resource`) and a verifier's output when it is run
(`run_resource`). Sample-specific resources (a reference answer, a test suite, a constraint spec)
are mounted for this sample only. Every action is logged in `trace` (the τ of Skill-RM), and the
evidence rows that verifiers return are collected per candidate for the readout A(τ).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from patarm.judge.judgment import EvidenceItem, Judgment
from patarm.rubrics import RUBRIC_DIR, Rubric, render_primary_rubrics
from patarm.skills.package import PACKAGE_ROOT, Resource, Skill, resource_from_dict
from patarm.skills.readout import load_rules, readout_best_of_n, readout_pairwise, readout_pointwise

_FUNCTION_CACHE: dict[tuple[str, str], Callable] = {}


def load_function(path: Path, name: str) -> Callable:
    """The function `name` of a Python file; files inside the patarm package import as modules."""
    key = (str(path), name)
    if key not in _FUNCTION_CACHE:
        path = path.resolve()
        if PACKAGE_ROOT in path.parents:
            rel = path.relative_to(PACKAGE_ROOT.parent).with_suffix("")
            module = importlib.import_module(".".join(rel.parts))
        else:
            spec = importlib.util.spec_from_file_location(f"patarm_skill_{abs(hash(str(path)))}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        _FUNCTION_CACHE[key] = getattr(module, name)
    return _FUNCTION_CACHE[key]


def render_rubric_file(path: Path) -> str:
    """A rubric resource as the judge sees it; the primary rubrics render exactly as in PaTaRM prompts."""
    if path.resolve().parent == RUBRIC_DIR.resolve():
        return render_primary_rubrics(path.stem)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return "\n".join(Rubric(r["name"], r["description"], tuple(r.get("criteria", ()))).render()
                     for r in data["rubrics"])


def mount(id: str, type: str, content: Any, description: str = "", scope: Sequence[str] = ("*",)) -> Resource:
    """A sample-specific resource with in-memory content (type e.g. reference, constraint)."""
    action = "run" if type in ("verifier", "tool") else "view"
    return resource_from_dict({"id": id, "type": type, "scope": list(scope), "action": action,
                               "description": description or f"sample-specific {type}", "content": content},
                              mounted=True)


class SkillSession:
    """A skill bound to one sample: ``{"prompt", "candidates": [...], "domain"}`` plus mounted resources."""

    def __init__(self, skill: Skill, sample: dict[str, Any], mounted: Sequence[Resource] = ()):
        self.skill, self.sample = skill, sample
        self.domain = sample.get("domain")
        self.mounted = {r.id: r for r in mounted}
        self.trace: list[dict[str, Any]] = []
        self.evidence: list[list[EvidenceItem]] = [[] for _ in sample.get("candidates", [])]

    # --- disclosure -------------------------------------------------------------------------
    def _resources(self) -> dict[str, Resource]:
        return {**self.skill.resources, **self.mounted}

    def _get(self, rid: str) -> Resource:
        resource = self._resources().get(rid)
        if resource is None:
            raise KeyError(f"no resource {rid!r}; see list_resources()")
        return resource

    def list_resources(self, all_scopes: bool = False) -> list[dict[str, Any]]:
        """Names, types and descriptions (no content) of the resources that apply to this sample."""
        found = [r.summary() for r in self._resources().values()
                 if all_scopes or r.mounted or r.applies_to(self.domain)]
        self.trace.append({"action": "list_resources", "observation": [r["id"] for r in found]})
        return found

    def view_resource(self, rid: str) -> str:
        """A view resource's content as text."""
        resource = self._get(rid)
        if resource.action != "view":
            raise ValueError(f"resource {rid!r} is run, not viewed: use run_resource")
        if resource.mounted:
            c = resource.content
            text = c if isinstance(c, str) else json.dumps(c, ensure_ascii=False, indent=1)
        elif resource.type == "rubric":
            text = render_rubric_file(self.skill.resolve(resource))
        else:
            text = self.skill.resolve(resource).read_text(encoding="utf-8").strip()
        self.trace.append({"action": "view_resource", "id": rid, "observation": text})
        return text

    def run_resource(self, rid: str, **args: Any) -> dict[str, Any]:
        """Run a verifier/tool on this sample; its evidence rows are recorded per candidate."""
        resource = self._get(rid)
        if resource.action != "run":
            raise ValueError(f"resource {rid!r} is viewed, not run: use view_resource")
        func = resource.content if resource.mounted else load_function(self.skill.resolve(resource), resource.function)
        context = {"prompt": self.sample.get("prompt", ""), "candidates": list(self.sample.get("candidates", [])),
                   "domain": self.domain, "sources": self.sample.get("sources"),
                   "mounted": {k: r.content for k, r in self.mounted.items() if r.action == "view"}}
        observation = func(context, **args)
        for row in observation.get("evidence", []):
            i = int(row["candidate"])
            if 0 <= i < len(self.evidence):
                self.evidence[i].append(
                    EvidenceItem(row["criterion"], row.get("observation", ""), row.get("assessment"))
                )
        self.trace.append({"action": "run_resource", "id": rid, "args": args, "observation": observation})
        return observation

    def add_evidence(self, candidate: int, item: EvidenceItem) -> None:
        """Record an evidence item produced by the judge itself (e.g. a judge model's criterion score)."""
        self.evidence[candidate].append(item)

    # --- readout A(τ) -----------------------------------------------------------------------
    def rules(self, rid: str | None = None) -> dict[str, Any]:
        """Aggregation rules: resource `rid`, else the first aggregation resource for this domain."""
        if rid is None:
            candidates = [r for r in self.skill.by_type("aggregation") if r.applies_to(self.domain)]
            candidates.sort(key=lambda r: "*" in r.scope)  # domain-specific rules before general ones
            if not candidates:
                return load_rules(None)
            rid = candidates[0].id
        resource = self._get(rid)
        data = resource.content if resource.mounted else yaml.safe_load(self.skill.resolve(resource).read_text())
        self.trace.append({"action": "view_resource", "id": rid, "observation": "aggregation rules"})
        return load_rules(data)

    def judgments(self) -> list[Judgment]:
        """One Judgment per candidate holding its evidence items (score not yet read out)."""
        return [
            Judgment(text="", evidence=list(items), criteria=[e.criterion for e in items]) for items in self.evidence
        ]

    def pointwise(self, rules: dict | None = None) -> list[Judgment]:
        """K = 1 per candidate: each Judgment with its score read out from the evidence."""
        rules = rules or self.rules()
        return [readout_pointwise(j, rules) for j in self.judgments()]

    def pairwise(self, rules: dict | None = None) -> str | None:
        """K = 2: "A", "B" or "tie"."""
        a, b = self.judgments()
        return readout_pairwise(a, b, rules or self.rules())

    def best_of_n(self, rules: dict | None = None) -> tuple[int | None, list[float | None]]:
        """K >= 2: the selected index and every candidate's score."""
        return readout_best_of_n(self.judgments(), rules or self.rules())
