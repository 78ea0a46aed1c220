"""Primary rubrics per domain (PaTaRM §3.2, Appendix B.3), stored as YAML data files beside this module.

A rubric *mode* says which criteria the judge uses (the paper's Table 4 ablation):
``primary`` (only the predefined rubric), ``generated`` (only criteria the judge writes for this
instance) and ``adaptive`` (both; the paper's default).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

RUBRIC_DIR = Path(__file__).parent
RUBRIC_MODES = ("primary", "generated", "adaptive")
DOMAIN_ALIASES = {
    "general": "chat", "chat_hard": "chat", "reasoning": "math", "coding": "code",
    "if": "instruction-following", "instruction_following": "instruction-following",
    "safety-refuse": "safety", "safety-response": "safety",
}
DEFAULT_DOMAIN = "chat"
DOMAIN_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")  # a file stem, never a path


@dataclass(frozen=True)
class Rubric:
    """One named primary criterion group of a domain (e.g. math → Correctness, Logic)."""

    name: str
    description: str
    criteria: tuple[str, ...] = field(default_factory=tuple)

    def render(self) -> str:
        lines = [f"{self.name}: {self.description}"]
        lines += [f"  - {c}" for c in self.criteria]
        return "\n".join(lines)


def available_domains(extra_dirs: tuple[str, ...] = ()) -> list[str]:
    """Domains that have a primary rubric file, in the bundled folder and in `extra_dirs`."""
    dirs = [RUBRIC_DIR, *map(Path, extra_dirs)]
    return sorted({p.stem for d in dirs for p in d.glob("*.yaml")})


def canonical_domain(domain: str | None) -> str:
    """Map a dataset's domain label to a rubric domain; a missing label means general chat."""
    if not domain:
        return DEFAULT_DOMAIN
    domain = domain.strip().lower()
    return DOMAIN_ALIASES.get(domain, domain)


def load_primary_rubrics(domain: str | None, extra_dirs: tuple[str, ...] = ()) -> tuple[Rubric, ...]:
    """The primary rubrics of `domain`; files in `extra_dirs` override the bundled ones.

    A domain is a name looked up among the rubric files, never a path: a server passes clients' domains
    here, and `../x` or `/etc/x` must neither read a file nor tell whether one exists."""
    name = canonical_domain(domain)
    if not DOMAIN_NAME_RE.match(name) or name not in available_domains(extra_dirs):
        raise ValueError(
            f"no primary rubric for domain {domain!r}; available: {available_domains(extra_dirs)}. "
            "Add a YAML file named after the domain to a rubric folder (rubric_dirs in the config)."
        )
    return _load_rubrics(name, extra_dirs)


@functools.lru_cache(maxsize=64)  # keyed by the canonical name: new spellings of a domain add nothing
def _load_rubrics(name: str, extra_dirs: tuple[str, ...]) -> tuple[Rubric, ...]:
    for folder in [*map(Path, reversed(extra_dirs)), RUBRIC_DIR]:
        path = folder / f"{name}.yaml"
        if path.is_file():
            break
    else:
        raise ValueError(
            f"no primary rubric for domain {name!r}; available: {available_domains(extra_dirs)}. "
            "Add a YAML file named after the domain to a rubric folder (rubric_dirs in the config)."
        )
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    try:
        return tuple(
            Rubric(r["name"], r["description"], tuple(r.get("criteria", ()))) for r in data["rubrics"]
        )
    except (KeyError, TypeError) as err:
        raise ValueError(f"{path}: each rubric needs 'name' and 'description' under 'rubrics' ({err})") from err


def render_primary_rubrics(domain: str | None, extra_dirs: tuple[str, ...] = ()) -> str:
    """The primary rubric block as it appears in a judge prompt."""
    return "\n".join(r.render() for r in load_primary_rubrics(domain, extra_dirs))


def check_rubric_mode(mode: str) -> str:
    if mode not in RUBRIC_MODES:
        raise ValueError(f"rubric_mode must be one of {RUBRIC_MODES}, got {mode!r}")
    return mode
