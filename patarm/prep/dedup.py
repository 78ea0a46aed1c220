"""Exact and near-duplicate removal of preference pairs (first occurrence kept).

* exact: the same normalised text (lowercased, punctuation and extra whitespace removed), or the same
  pair id — later steps join judgments back to pairs by id;
* near: MinHash over word n-gram shingles with LSH banding; a candidate is a duplicate when its
  estimated Jaccard similarity to an already kept pair reaches `threshold`.

`key` picks the text: "pair" (prompt + chosen + rejected) or "prompt" (one pair per prompt).
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from tqdm.auto import tqdm

from patarm.data import Manifest, PreferencePair

_PUNCT = re.compile(r"[^\w\s]+")
_SPACE = re.compile(r"\s+")
# Universal hashing (a*x + b) mod p over 32-bit shingle hashes; a < 2**31 keeps a*x + b inside uint64.
_PRIME = np.uint64(4294967311)


def normalize_text(text: str) -> str:
    """Lowercase, drop punctuation, collapse whitespace: formatting-only differences vanish."""
    return _SPACE.sub(" ", _PUNCT.sub(" ", text.lower())).strip()


def pair_text(pair: PreferencePair, key: str = "pair") -> str:
    """The text that identifies a pair for deduplication."""
    prompt = "\n".join(m["content"] for m in pair.prompt)
    if key == "prompt":
        return normalize_text(prompt)
    if key == "pair":
        return normalize_text(f"{prompt}\n{pair.chosen}\n{pair.rejected}")
    raise ValueError(f"dedup key must be 'pair' or 'prompt', got {key!r}")


class MinHasher:
    """MinHash signatures of word n-gram sets: `num_perm` uint64 minima per text (seeded, deterministic)."""

    def __init__(self, num_perm: int = 64, ngram: int = 5, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.a = rng.integers(1, 2**31, size=num_perm, dtype=np.uint64)
        self.b = rng.integers(0, 2**31, size=num_perm, dtype=np.uint64)
        self.ngram = ngram

    def signature(self, text: str) -> np.ndarray:
        words = text.split()
        n = min(self.ngram, max(len(words), 1))
        shingles = {" ".join(words[i:i + n]) for i in range(max(len(words) - n + 1, 1))}
        x = np.fromiter((zlib.crc32(s.encode()) for s in shingles), dtype=np.uint64, count=len(shingles))
        return ((x[:, None] * self.a + self.b) % _PRIME).min(axis=0)


def dedup_pairs(pairs: Sequence[PreferencePair], key: str = "pair", near: bool = True, threshold: float = 0.85,
                num_perm: int = 64, bands: int = 16, ngram: int = 5) -> tuple[list[PreferencePair], Manifest]:
    """Pairs without duplicates; drops counted as duplicate_id, exact_duplicate, near_duplicate."""
    if num_perm % bands:
        raise ValueError(f"num_perm ({num_perm}) must be a multiple of bands ({bands})")
    manifest, kept = Manifest(rows_in=len(pairs)), []
    seen_ids: set[str] = set()
    seen_text: dict[str, str] = {}
    hasher = MinHasher(num_perm, ngram)
    rows = num_perm // bands
    buckets: dict[tuple[int, bytes], list[np.ndarray]] = defaultdict(list)
    for pair in tqdm(pairs, desc="dedup", unit="pair", mininterval=1.0, disable=len(pairs) < 10000):
        text = pair_text(pair, key)
        digest = hashlib.sha1(text.encode()).hexdigest()
        if pair.id in seen_ids:
            manifest.drop("duplicate_id", f"pair {pair.id}: the id appeared before")
            continue
        if digest in seen_text:
            manifest.drop("exact_duplicate", f"pair {pair.id}: same text as pair {seen_text[digest]}")
            continue
        if near:
            sig = hasher.signature(text)
            bands_of = [(b, sig[b * rows:(b + 1) * rows].tobytes()) for b in range(bands)]
            candidates = [other for band in bands_of for other in buckets.get(band, ())]
            if any(np.mean(sig == other) >= threshold for other in candidates):
                manifest.drop("near_duplicate", f"pair {pair.id}: estimated Jaccard >= {threshold}")
                continue
            for band in bands_of:
                buckets[band].append(sig)
        seen_ids.add(pair.id)
        seen_text[digest] = pair.id
        kept.append(pair)
    manifest.rows_out = len(kept)
    manifest.extra.update(key=key, near=near, threshold=threshold, num_perm=num_perm, bands=bands, ngram=ngram)
    return kept, manifest
