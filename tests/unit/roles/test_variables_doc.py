"""docs/variables.md is what tools/variables_doc.py derives from the roles' argument specs."""

from __future__ import annotations

import importlib.util

from conftest import REPO

spec = importlib.util.spec_from_file_location("variables_doc", REPO / "tools" / "variables_doc.py")
assert spec is not None
assert spec.loader is not None
variables_doc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(variables_doc)


def test_the_variables_page_is_generated_from_the_specs() -> None:
    assert (REPO / "docs" / "variables.md").read_text() == variables_doc.render(), "run: make docs"


def test_every_role_variable_is_on_the_page() -> None:
    page = (REPO / "docs" / "variables.md").read_text()
    for defaults in (REPO / "roles").glob("*/defaults/main.yml"):
        for line in defaults.read_text().splitlines():
            if line and not line.startswith(("#", " ", "-", "---")) and ":" in line:
                assert f"| `{line.split(':', 1)[0]}` |" in page, line
