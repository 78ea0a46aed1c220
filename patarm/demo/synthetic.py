"""A bundled, rule-verifiable instruction-following preference task small enough for a CPU judge.

Each pair asks for a short sentence about a topic under one checkable constraint (case, exact word
count, first/last word, no letter e). The chosen response satisfies the constraint; the rejected one
violates it minimally and otherwise looks alike, so a judge must read the response against the
instruction. `check` is the deterministic verifier and `teacher_judgment` turns its evidence into
judge text in the project's pointwise contract (rubric, evidence-first eval, score), which is what
`make quickstart` distils into a tiny judge before GRPO.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from patarm.data.schema import PreferencePair

CONSTRAINT_KINDS = ("lowercase", "uppercase", "word_count", "starts_with", "ends_with", "no_letter_e", "avoid_letter")
# Kinds whose evidence is a per-word property plus a copy (the first offending word, or "none"): a
# ~1M-parameter judge learns these in minutes on a CPU; comparing two arbitrary words or counts
# (starts_with, ends_with, word_count) takes it far longer.
PROPERTY_KINDS = ("lowercase", "uppercase", "no_letter_e", "avoid_letter")
AVOIDABLE_LETTERS = ("a", "o", "i")
MIN_WORDS, MAX_WORDS = 4, 12

# A small vocabulary of simple English words, by word class. Every class has words with and
# without the letter e, so no_letter_e sentences use the same classes as the rest.
_W = {
    "topic": "sea sky forest city river garden moon rain mountain cat dog ship train farm bird book "
    "winter summer road sun wind hill star fish boat town park song lamp snow tree house lake storm "
    "night morning school kitchen market horse owl wolf fox frog duck island",
    "det": "the a my our this that every some",
    "adj": "old big small dark warm cold tall bright calm wild long soft loud tiny happy sad quiet "
    "green blue red gentle deep white sweet little brave empty lonely golden silver round shiny "
    "dusty foggy sunny windy rainy busy young strong slow quick proud kind fresh clean",
    "verb": "shines moves waits sleeps rests glows sings runs walks falls stands hums drifts jumps "
    "sits turns rolls flows grows shakes wakes dreams breathes smiles returns listens calls "
    "wanders sparkles changes spins floats swims hops",
    "adv": "slowly softly quietly gently today again now often always still calmly quickly loudly "
    "brightly alone together there here tonight forever",
    "opener": "today now tonight soon outside suddenly slowly sometimes",
    "prep": "near by in on at with beside under over past into through along behind across from",
    "noun": "ship hill road tree house wall door stone bridge field shore cloud light window garden "
    "river village tower harbor beach island valley bench path gate roof fire boat lamp moon star "
    "sand rock farm park town pond well barn fence",
}
WORDS = {cls: tuple(text.split()) for cls, text in _W.items()}


def _pool(cls: str, avoid: str | bool | None = None) -> list[str]:
    """Words of a class, without the letter `avoid` (True means "e", for the no_letter_e kind)."""
    letter = "e" if avoid is True else avoid or None
    return [w for w in WORDS[cls] if not (letter and letter in w)]


# kind -> (instruction sentence, rubric criterion); "{}" is the constraint's value.
_PHRASES = {
    "lowercase": ("Answer in lowercase letters only.", "The response uses only lowercase letters."),
    "uppercase": ("Answer in uppercase letters only.", "The response uses only uppercase letters."),
    "word_count": ("Answer in exactly {} words.", "The response has exactly {} words."),
    "starts_with": ("Start your answer with the word '{}'.", "The response starts with the word '{}'."),
    "ends_with": ("End your answer with the word '{}'.", "The response ends with the word '{}'."),
    "no_letter_e": ("Do not use the letter e in your answer.", "The response does not use the letter e."),
    "avoid_letter": ("Do not use the letter {} in your answer.", "The response does not use the letter {}."),
}


@dataclass(frozen=True)
class Constraint:
    """One checkable instruction; JSON-serialisable, stored in `PreferencePair.metadata["constraint"]`.

    `value` is the word count (int) for word_count, the word (str) for starts_with / ends_with, and
    None for the other kinds.
    """

    kind: str
    value: str | int | None = None

    def __post_init__(self) -> None:
        if self.kind not in CONSTRAINT_KINDS:
            raise ValueError(f"unknown constraint kind {self.kind!r}; expected one of {CONSTRAINT_KINDS}")
        if self.kind == "word_count" and not (isinstance(self.value, int) and self.value > 0):
            raise ValueError(f"word_count needs a positive int value, got {self.value!r}")
        if self.kind in ("starts_with", "ends_with") and not (isinstance(self.value, str) and self.value):
            raise ValueError(f"{self.kind} needs a non-empty word as value, got {self.value!r}")
        if self.kind == "avoid_letter" and not (
            isinstance(self.value, str) and len(self.value) == 1 and self.value.isalpha()
        ):
            raise ValueError(f"avoid_letter needs a single letter as value, got {self.value!r}")

    def describe(self) -> str:
        """The instruction sentence appended to the prompt, e.g. "Answer in exactly 6 words."."""
        return _PHRASES[self.kind][0].format(self.value)

    def criterion(self) -> str:
        """The one rubric line a judge checks, e.g. "The response has exactly 6 words."."""
        return _PHRASES[self.kind][1].format(self.value)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "value": self.value}

    @classmethod
    def from_dict(cls, d: dict) -> Constraint:
        return cls(kind=d["kind"], value=d.get("value"))


@dataclass
class Evidence:
    """What `check` measured: the rubric line, the observed fact, and whether the constraint holds."""

    criterion: str
    observation: str  # e.g. "word count: 7", "last word: ship", "word not in lowercase: Tree"
    passed: bool


def _bare(word: str) -> str:
    """A word without surrounding punctuation, lowercased (for first/last-word checks)."""
    return re.sub(r"^\W+|\W+$", "", word).lower()


def _first_offender(words: list[str], bad) -> str:
    return next((w for w in words if bad(w)), "none")


def check(constraint: Constraint, response: str) -> Evidence:
    """Deterministically verify `response` against `constraint`, reporting the evidence used.

    Property kinds report the first word that breaks the rule (or "none"); the others report the
    measured fact (word count, first/last word) to compare with the requirement.
    """
    kind, value, words = constraint.kind, constraint.value, response.split()
    if kind in ("lowercase", "uppercase"):
        bad = (lambda w: w != w.lower()) if kind == "lowercase" else (lambda w: w != w.upper())
        word = _first_offender(words, bad)
        observation, passed = f"word not in {kind}: {word}", word == "none" and any(c.isalpha() for c in response)
    elif kind == "word_count":
        observation, passed = f"word count: {len(words)}", len(words) == value
    elif kind in ("starts_with", "ends_with"):
        which = "first" if kind == "starts_with" else "last"
        word = _bare(words[0 if which == "first" else -1]) if words else ""
        observation = f"{which} word: {word or '(none)'}"
        passed = bool(word) and word == str(value).lower()
    else:  # no_letter_e / avoid_letter
        letter = "e" if kind == "no_letter_e" else str(value).lower()
        word = _first_offender(words, lambda w: letter in w.lower())
        observation, passed = f"word with letter {letter}: {word}", word == "none"
    return Evidence(criterion=constraint.criterion(), observation=observation, passed=passed)


# --- generation -------------------------------------------------------------------------------

Tagged = list[tuple[str, str]]  # (word, word class)


def _chunk(rng: random.Random, size: int, e_free: str | bool | None) -> Tagged:
    """One tail chunk: adverb (1) / "and" verb (2) / prep det noun (3) / prep det adj noun (4)."""
    if size == 1:
        return [(rng.choice(_pool("adv", e_free)), "adv")]
    if size == 2:
        return [("and", "and"), (rng.choice(_pool("verb", e_free)), "verb")]
    out = [(rng.choice(_pool("prep", e_free)), "prep"), (rng.choice(_pool("det", e_free)), "det")]
    if size == 4:
        out.append((rng.choice(_pool("adj", e_free)), "adj"))
    return out + [(rng.choice(_pool("noun", e_free)), "noun")]


def _fill(rng: random.Random, r: int, e_free: str | bool | None) -> Tagged:
    """Random tail chunks totalling exactly r words."""
    out: Tagged = []
    while r > 0:
        size = rng.choice([s for s in (1, 2, 3, 4) if s <= r])
        out += _chunk(rng, size, e_free)
        r -= size
    return out


def _core(rng: random.Random, topic: str, n: int, e_free: str | bool | None, opener: bool) -> Tagged:
    """[opener] det [adj] topic verb: the sentence head, at most n - 1 words where possible."""
    out: Tagged = [(rng.choice(_pool("opener", e_free)), "opener")] if opener else []
    out.append((rng.choice(_pool("det", e_free)), "det"))
    if n - len(out) >= 4 and rng.random() < 0.5:
        out.append((rng.choice(_pool("adj", e_free)), "adj"))
    return out + [(topic, "topic"), (rng.choice(_pool("verb", e_free)), "verb")]


def _make_one(rng: random.Random, kind: str, whole_share: float = 0.5) -> tuple[Constraint, str, str, str]:
    """One (constraint, topic, chosen, rejected) for `kind`, all drawn from `rng`.

    The rejected response is the chosen one with the least change that breaks the constraint (one
    word swapped or re-cased; for word_count the same head with a tail 1-2 words longer or shorter);
    for the case kinds it is written wholly in the other case with probability `whole_share`, so only a
    judge that reads the instruction can tell which side is right.
    """
    value = rng.choice(AVOIDABLE_LETTERS) if kind == "avoid_letter" else None
    avoid = "e" if kind == "no_letter_e" else value
    topic = rng.choice(_pool("topic", avoid))
    n = rng.randint(MIN_WORDS, MAX_WORDS)
    core = _core(rng, topic, n, avoid, opener=rng.random() < (0.5 if kind == "starts_with" else 0.25))
    capital = kind not in ("lowercase", "uppercase") and rng.random() < 0.5  # same for both sides
    if kind == "ends_with":  # the last chunk must end in a noun
        r = max(n - len(core), 3)
        size = 4 if r >= 4 and rng.random() < 0.5 else 3
        tagged = core + _fill(rng, r - size, avoid) + _chunk(rng, size, avoid)
    else:
        tagged = core + _fill(rng, n - len(core), avoid)
    chosen = [w for w, _ in tagged]
    rejected = list(chosen)
    if kind == "word_count":
        value = len(chosen)
        d = rng.choice([d for d in (-2, -1, 1, 2) if max(len(core), MIN_WORDS) <= n + d <= MAX_WORDS])
        rejected = [w for w, _ in core + _fill(rng, n + d - len(core), avoid)]
    elif kind in ("starts_with", "ends_with"):
        i = 0 if kind == "starts_with" else -1
        value, cls = tagged[i]
        rejected[i] = rng.choice([w for w in WORDS[cls] if w != value])
    elif kind in ("no_letter_e", "avoid_letter"):
        i = rng.choice([i for i, (_, cls) in enumerate(tagged) if cls not in ("topic", "and")])
        cls = tagged[i][1]
        rejected[i] = rng.choice([w for w in WORDS[cls] if avoid in w])
    else:  # lowercase / uppercase
        upper = kind == "uppercase"
        if upper:
            chosen = [w.upper() for w in chosen]
            rejected = list(chosen)
        if rng.random() < whole_share:  # the whole response in the other case
            rejected = [w.lower() if upper else w.upper() for w in rejected]
        else:  # one word in the other case
            i = rng.randrange(len(chosen))
            rejected[i] = rejected[i].lower() if upper else rejected[i].capitalize()
    texts = [" ".join(words) for words in (chosen, rejected)]
    if capital:
        texts = [t[:1].upper() + t[1:] for t in texts]
    return Constraint(kind, value), topic, texts[0], texts[1]


_REQUESTS = ("Write a sentence about the {}.", "Describe the {} in one sentence.", "Say something about the {}.")


def make_pairs(n: int, seed: int = 0, kinds: Iterable[str] = CONSTRAINT_KINDS,
               whole_share: float = 0.5) -> list[PreferencePair]:
    """`n` preference pairs from one seeded RNG, kinds balanced (each block of len(kinds) has each once).

    `whole_share`: how often a case pair's rejected response is wholly in the other case rather than one word
    re-cased (the task's own mix is 0.5; a training corpus may lean on the harder one-word rejections). Two
    shares give the same pairs up to the first case pair whose mix they decide differently."""
    kinds = tuple(kinds)
    if not kinds or any(k not in CONSTRAINT_KINDS for k in kinds):
        raise ValueError(f"kinds must be a non-empty subset of {CONSTRAINT_KINDS}, got {kinds}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not 0.0 <= whole_share <= 1.0:
        raise ValueError(f"whole_share must be in [0, 1], got {whole_share}")
    rng = random.Random(seed)
    pairs: list[PreferencePair] = []
    order: list[str] = []
    for i in range(n):
        if not order:
            order = list(kinds)
            rng.shuffle(order)
        kind = order.pop()
        while True:  # guard only: generation is built to satisfy this on the first draw
            constraint, topic, chosen, rejected = _make_one(rng, kind, whole_share)
            if chosen != rejected and check(constraint, chosen).passed and not check(constraint, rejected).passed:
                break
        prompt = f"{rng.choice(_REQUESTS).format(topic)} {constraint.describe()}"
        pairs.append(PreferencePair(
            id=f"synth-if-{seed}-{i}", prompt=[{"role": "user", "content": prompt}], chosen=chosen,
            rejected=rejected, domain="instruction-following", source="synthetic-if",
            metadata={"constraint": constraint.to_dict()},
        ))
    return pairs


def constraint_of(pair: PreferencePair) -> Constraint:
    """The constraint a synthetic pair was generated under."""
    return Constraint.from_dict(pair.metadata["constraint"])


# --- teacher ------------------------------------------------------------------------------------


def teacher_judgment(constraint: Constraint, response: str, *, rubric_mode: str = "adaptive",
                     rng: random.Random | None = None, score_range: tuple[int, int] = (1, 10)) -> str:
    """Rule-backed judge text: [<rubric>] <eval> (evidence first, then the conclusion) <score>.

    Scores are 8/9 when satisfied and 2/3 when violated on a 1-10 scale (drawn with `rng`, else 9
    and 2), mapped linearly onto `score_range`; "primary" mode omits the <rubric> block.
    """
    if rubric_mode not in ("adaptive", "primary"):
        raise ValueError(f"rubric_mode must be 'adaptive' or 'primary', got {rubric_mode!r}")
    ev = check(constraint, response)
    options = (8, 9) if ev.passed else (2, 3)
    base = rng.choice(options) if rng is not None else max(options) if ev.passed else min(options)
    lo, hi = score_range
    score = round(lo + (base - 1) * (hi - lo) / 9)
    conclusion = "The constraint is satisfied." if ev.passed else "The constraint is violated."
    rubric = f"<rubric>\n1. {ev.criterion}\n</rubric>\n" if rubric_mode == "adaptive" else ""
    return f"{rubric}<eval>\n{ev.observation}. {conclusion}\n</eval>\n<score>{score}</score>"


# --- shipped demo file ----------------------------------------------------------------------------

DEMO_PATH = Path(__file__).parent / "assets" / "if_pairs_demo.jsonl"


def write_demo_pairs(path: str | Path = DEMO_PATH, n: int = 48, seed: int = 1234) -> list[PreferencePair]:
    """Write `make_pairs(n, seed)` as JSONL (the shipped file is patarm/assets/if_pairs_demo.jsonl)."""
    pairs = make_pairs(n, seed=seed)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for pair in pairs:
            fh.write(json.dumps(pair.to_dict(), sort_keys=True) + "\n")
    return pairs
