"""PaTaRM: train pointwise generative reward models (LLM judges) from pairwise preference data."""

__version__ = "0.1.0"
