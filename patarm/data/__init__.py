"""Preference-pair data: the canonical record, loaders for common layouts, and the manifest."""

from patarm.data.formats import FORMATS, REASONS, detect_format, pair_from_row, stable_id
from patarm.data.loaders import HubLoadError, LoadResult, Source, load_pairs, open_source, write_pairs
from patarm.data.schema import DataError, Manifest, PreferencePair

__all__ = [
    "PreferencePair", "DataError", "Manifest", "load_pairs", "LoadResult", "pair_from_row",
    "write_pairs", "HubLoadError", "FORMATS", "REASONS", "detect_format", "stable_id", "open_source", "Source",
]
