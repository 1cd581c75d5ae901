"""The sources' tests keep their indexes in their own tmp folder, not in the user's cache (nothing here needs the
engine that FANOUT_CACHE holds)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def own_index_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FANOUT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"
