"""Preference-pair data: the canonical record, the layout registry, loaders and the manifest."""

from patarm.data.convert import REASONS, convert_stream, pair_from_row, stable_id
from patarm.data.layouts import LAYOUTS, Layout, detect_layout, resolve_layout
from patarm.data.loaders import LoadResult, load_pairs, write_pairs
from patarm.data.schema import DataError, Manifest, PreferencePair
from patarm.data.sources import HubLoadError, Source, open_source

__all__ = [
    "PreferencePair", "DataError", "Manifest", "load_pairs", "LoadResult", "pair_from_row", "write_pairs",
    "HubLoadError", "LAYOUTS", "Layout", "REASONS", "detect_layout", "resolve_layout", "convert_stream",
    "stable_id", "open_source", "Source",
]
