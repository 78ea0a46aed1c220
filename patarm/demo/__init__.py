"""The demo: a bundled rule-verifiable preference task (`synthetic`), its rule-backed teacher (`teacher`),
and the CPU quickstart that trains a tiny judge on it end to end (`quickstart`, `report`, `configs/`)."""
