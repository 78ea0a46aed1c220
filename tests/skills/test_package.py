"""Skill packages: the shipped bank validates, and a broken skill reports every problem by file and field."""

import shutil
from pathlib import Path

import pytest
import yaml

from helpers import run_cli
from patarm.rubrics import RUBRIC_DIR, available_domains, render_primary_rubrics
from patarm.skills.package import BANK_DIR, RESOURCE_TYPES, SkillError, find_skill, list_skills, load_skill
from patarm.skills.session import SkillSession
from patarm.skills.validate import validate_skill

DOMAINS = ("chat", "math", "code", "safety", "instruction-following")


def test_shipped_skill_is_valid_and_covers_domains_and_types():
    assert validate_skill(BANK_DIR / "reward-judge") == []
    skill = find_skill("reward-judge")
    assert skill.name == "reward-judge" and "evidence" in skill.procedure
    for domain in DOMAINS:
        assert any(r.type == "rubric" and r.applies_to(domain) for r in skill.resources.values()), domain
        assert any(r.type == "checklist" and r.applies_to(domain) for r in skill.resources.values()), domain
    assert {r.type for r in skill.resources.values()} == set(RESOURCE_TYPES)
    assert list_skills() == [{"name": "reward-judge", "description": skill.description}]


def test_rubric_resources_are_the_primary_rubric_files():
    skill = find_skill("reward-judge")
    rubrics = skill.by_type("rubric")
    assert sorted(skill.resolve(r).resolve() for r in rubrics) == sorted(
        (RUBRIC_DIR / f"{d}.yaml").resolve() for d in available_domains())
    session = SkillSession(skill, {"prompt": "", "candidates": [], "domain": "math"})
    assert session.view_resource("math-rubric") == render_primary_rubrics("math")


def _broken_skill(tmp_path: Path) -> Path:
    folder = tmp_path / "my-skill"
    shutil.copytree(BANK_DIR / "reward-judge", folder)
    (folder / "SKILL.md").write_text("---\nname: Bad_Name\nextra: 1\n---\n\n")
    manifest = yaml.safe_load((folder / "resources.yaml").read_text())
    manifest["resources"][1]["type"] = "opinion"
    manifest["resources"][2]["id"] = manifest["resources"][0]["id"]
    manifest["resources"][3]["path"] = "nowhere.md"
    manifest["resources"][4]["scope"] = []
    manifest["resources"][5]["action"] = "run"
    manifest["resources"][6]["colour"] = "red"
    runnable = next(i for i, r in enumerate(manifest["resources"]) if r["type"] == "verifier")
    manifest["resources"][runnable]["function"] = "missing_function"
    (folder / "resources.yaml").write_text(yaml.safe_dump(manifest))
    (folder / "aggregation" / "default.yaml").write_text("scale: [10, 1]\nweights: {a: -1}\n")
    return folder


def test_broken_skill_reports_every_problem(tmp_path, capsys):
    folder = _broken_skill(tmp_path)
    problems = {(Path(p.file).name, p.field) for p in validate_skill(folder)}
    expected = {("SKILL.md", "name"), ("SKILL.md", "description"), ("SKILL.md", "extra"), ("SKILL.md", "body"),
                ("resources.yaml", "resources[1].type"), ("resources.yaml", "resources[2].id"),
                ("resources.yaml", "resources[3].path"), ("resources.yaml", "resources[4].scope"),
                ("resources.yaml", "resources[5].action"), ("resources.yaml", "resources[6].colour"),
                ("default.yaml", "scale"), ("default.yaml", "weights.a")}
    assert expected <= problems
    assert any(f.endswith(".function") for _, f in problems)
    with pytest.raises(SkillError):
        load_skill(folder)
    with pytest.raises(SystemExit) as exit_info:
        run_cli("skill", *["validate", str(folder)])
    assert exit_info.value.code == 1
    printed = capsys.readouterr().out
    assert "resources.yaml: resources[1].type:" in printed and "SKILL.md: name:" in printed


def test_missing_files_are_reported(tmp_path):
    empty = tmp_path / "empty-skill"
    empty.mkdir()
    fields = {p.field for p in validate_skill(empty)}
    assert fields == {"-"} and len(validate_skill(empty)) == 2  # SKILL.md and the manifest


def test_cli_validate_ok_and_show(capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_cli("skill", *["validate", str(BANK_DIR / "reward-judge")])
    assert exit_info.value.code == 0
    run_cli("skill", *["show", "reward-judge", "--resource", "safety-hard-constraints"])
    assert "constraint:no-serious-harm" in capsys.readouterr().out
