"""Quiet by default: the terminal shows one progress bar per stage and patarm's own summary lines.

Known harmless messages of the libraries below are filtered where they are raised (not by muting whole
libraries), and their per-file progress bars (loading weights, writing shards, tokenising a dataset)
are switched off; per-step training metrics go to the run's metrics file and trackers instead of the
terminal (`patarm.train.common.QuietProgressCallback`). Called by the CLI, never at import time.
"""

from __future__ import annotations

import logging
import warnings

# (logger name, text) of messages that say nothing a user can act on
HARMLESS = (
    ("DeepSpeed", "Setting accelerator to CPU"),  # every CPU run: DeepSpeed's accelerator auto-detection
)


class _DropText(logging.Filter):
    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        return self.text not in record.getMessage()


def quiet_libraries() -> None:
    """Filter the known harmless messages and the libraries' own progress bars (idempotent)."""
    for name, text in HARMLESS:
        logger = logging.getLogger(name)  # the same object DeepSpeed configures later: the filter stays
        if not any(isinstance(f, _DropText) and f.text == text for f in logger.filters):
            logger.addFilter(_DropText(text))
    # transformers 5 deprecates this name; TRL still calls it on every run
    warnings.filterwarnings("ignore", message=r".*is_gradient_checkpointing.*", category=FutureWarning)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover - transformers is a dependency
        pass
    try:
        import datasets

        datasets.disable_progress_bars()
    except ImportError:  # pragma: no cover
        pass
