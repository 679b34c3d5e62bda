from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# The lab's helpers, and this checkout as the glm.fleet collection (collections/ links back here).
sys.path.insert(0, str(REPO / "tests" / "lab"))
sys.path.insert(0, str(REPO / "collections"))

import standin_deps  # noqa: E402 - from tests/lab, put on the path above


@pytest.fixture(scope="session")
def lab_tokenizer() -> Path:
    """The lab repository's tokenizer.json (tests/lab/standin_deps.py), cached under .lab/."""
    return standin_deps.tokenizer_json(REPO / ".lab" / "cache" / "standin")
