"""docs/security.md names the test behind each promise: every test it names exists, so a renamed or
deleted test cannot leave a promise without its proof."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "security.md"
NAMED = re.compile(r"`((?:tests|molecule)/[\w/.-]+\.py)(?:::(\w+))?`")


def test_every_test_the_security_page_names_exists() -> None:
    named = NAMED.findall(PAGE.read_text())
    assert len(named) >= 20, named  # the promises table, not an empty page
    missing = []
    for path, function in named:
        source = REPO / path
        if not source.is_file() or (function and not re.search(rf"^def {function}\(", source.read_text(), re.M)):
            missing.append(f"{path}::{function}" if function else path)
    assert missing == []
