"""Reward-evaluation skills (Skill-RM): skill packages with a typed resource bank, progressive
disclosure, static routing, an agentic tool-calling judge, and the deterministic readout A(τ)."""

from patarm.skills.package import BANK_DIR, Resource, Skill, SkillError, find_skill, list_skills, load_skill
from patarm.skills.readout import load_rules, readout_best_of_n, readout_pairwise, readout_pointwise
from patarm.skills.session import SkillSession, mount
from patarm.skills.validate import Problem, validate_skill

__all__ = [
    "BANK_DIR", "Problem", "Resource", "Skill", "SkillError", "SkillSession", "find_skill", "list_skills",
    "load_rules", "load_skill", "mount", "readout_best_of_n", "readout_pairwise", "readout_pointwise",
    "validate_skill",
]
