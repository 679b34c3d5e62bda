"""The support matrix has one owner per value and meta/runtime.yml says exactly what it tests."""

from __future__ import annotations

import importlib.metadata
import re
import sys
from pathlib import Path

import ansible.release
import pytest
import yaml
from conftest import REPO
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

sys.path.insert(0, str(REPO / "tools"))

import core_matrix


def pinned(name: str) -> Version:
    found = re.search(rf"^{re.escape(name)}==(\S+)$", (REPO / "requirements.txt").read_text(), re.MULTILINE)
    assert found, f"requirements.txt pins no {name}"
    return Version(found.group(1))


def minors() -> list[Version]:
    """Every tested ansible-core: the matrix's and the development venv's."""
    return sorted([Version(row[0]) for row in core_matrix.matrix()] + [pinned("ansible-core")])


def test_the_matrix_holds_one_release_per_maintained_minor_besides_the_newest() -> None:
    tested = minors()
    assert [v.release[:2] for v in tested] == [(2, 19), (2, 20), (2, 21)]
    assert tested[-1] == pinned("ansible-core"), "requirements.txt pins the newest release of the matrix"
    for core, python in core_matrix.matrix():
        assert re.fullmatch(r"3\.1[0-9]", python), (core, python)


def test_requires_ansible_admits_exactly_the_tested_minors() -> None:
    spec = SpecifierSet(yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())["requires_ansible"])
    tested = minors()
    assert all(v in spec for v in tested), (spec, tested)
    oldest, newest = tested[0].release[:2], tested[-1].release[:2]
    assert Version(f"{oldest[0]}.{oldest[1]}.0") in spec
    assert Version(f"{oldest[0]}.{oldest[1] - 1}.99") not in spec
    assert Version(f"{newest[0]}.{newest[1] + 1}.0") not in spec


def test_the_ansible_bundle_carries_the_pinned_core() -> None:
    try:
        requires = importlib.metadata.requires("ansible") or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the ansible bundle is the development venv's only (tools/core_matrix.py leaves it out)")
    assert importlib.metadata.version("ansible") == str(pinned("ansible"))
    core = next(Requirement(r) for r in requires if Requirement(r).name == "ansible-core")
    assert pinned("ansible-core") in core.specifier, (core, pinned("ansible-core"))


def test_a_matrix_venv_takes_the_test_packages_with_its_own_core() -> None:
    text = core_matrix.requirements("2.19.14")
    names = [re.match(r"[A-Za-z0-9_.-]+", line).group(0).lower() for line in text.splitlines() if line[:1].isalpha()]
    assert "ansible-core==2.19.14" in text.splitlines()
    assert names.count("ansible-core") == 1
    assert not set(names) & (core_matrix.DEV_ONLY - {"ansible-core"})
    assert {"pytest", "pytest-mock", "pytest-xdist", "ansible-builder"} <= set(names)


def test_the_development_venv_runs_the_newest_core() -> None:
    if Path(sys.prefix).name != ".venv":
        pytest.skip("a matrix venv (tools/core_matrix.py) runs its own release")
    assert Version(ansible.release.__version__) == pinned("ansible-core")
