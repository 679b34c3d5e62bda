"""requirements.yml lists every collection the project uses besides ansible.builtin and its own, and
the installed ones (the pinned `ansible` bundle's) satisfy it."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import yaml
from conftest import REPO
from packaging.specifiers import SpecifierSet
from packaging.version import Version

REQUIRED = {c["name"]: c["version"] for c in yaml.safe_load((REPO / "requirements.yml").read_text())["collections"]}
FQCN = re.compile(r"\b([a-z][a-z0-9_]*\.[a-z][a-z0-9_]*)\.[a-z][a-z0-9_]*\b")
OURS = {"ansible.builtin", "glm.fleet"}
NAMESPACES = ("ansible", "community", "containers", "kubernetes", "amazon", "azure", "google")
IMPORT = re.compile(r"^\s*(from|import) ansible\b")
# Names of ansible-core's Python packages that prose and docstrings mention, not collections.
# ansible.legacy is ansible-core's name for a plugin looked up the old way.
CORE_PACKAGES = {"ansible.module_utils", "ansible.modules", "ansible.plugins", "ansible.errors", "ansible.release",
                 "ansible.legacy"}  # fmt: skip


def installed() -> dict[str, str]:
    """Each installed collection's version, as ansible-galaxy lists them for this checkout."""
    listed = subprocess.run(
        ["ansible-galaxy", "collection", "list", "--format", "json"], cwd=REPO, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    found: dict[str, str] = {}
    for collections in json.loads(listed.stdout or "{}").values():
        for name, info in collections.items():
            found.setdefault(name, info["version"])
    return found


def test_every_collection_a_file_names_is_in_requirements_yml() -> None:
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    named = set()
    for name in files:
        path = REPO / name
        if path.suffix not in (".yml", ".yaml", ".py", ".cfg", ".j2") or not path.is_file():
            continue
        for line in path.read_text(errors="replace").splitlines():
            if not IMPORT.match(line):  # ansible-core's own Python packages (ansible.utils, ...) are no collections
                named |= {m.group(1) for m in FQCN.finditer(line)}
    collections = {n for n in named if n.split(".")[0] in NAMESPACES} - CORE_PACKAGES
    assert collections - OURS <= set(REQUIRED), collections - OURS - set(REQUIRED)


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_the_installed_collection_satisfies_requirements_yml(name: str) -> None:
    version = installed().get(name)
    if version is None:
        pytest.skip(f"{name} is not installed here (a matrix venv without the ansible bundle)")
    assert Version(version) in SpecifierSet(REQUIRED[name]), f"{name} {version} does not satisfy {REQUIRED[name]}"


def test_molecule_and_the_benchmark_use_what_requirements_yml_names() -> None:
    """The two users the file names: molecule's docker driver, the scale benchmark's callback."""
    assert "driver:\n  name: docker" in (REPO / ".config" / "molecule" / "config.yml").read_text()
    assert "ansible.posix.profile_tasks" in (REPO / "bench" / "scale.py").read_text()
    assert set(REQUIRED) == {"community.docker", "ansible.posix"}
