"""One grammar each, for the roles (test plugins) and the modules alike: full matches only."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.glm.fleet.plugins.module_utils import _grammar as g

REPO = Path(__file__).resolve().parents[4]  # the collection (plugin tests also run under ansible-test units)

DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("value", "fits"),
    [
        (f"lmsysorg/sglang:glm-5.3-flash@{DIGEST}", True),
        (f"registry.example.internal:5000/team/sglang@{DIGEST}", True),
        (f"Registry.Example:5000/team/sglang@{DIGEST}", True),
        (f"lmsysorg/sglang@{DIGEST}\n", False),
        ("lmsysorg/sglang:latest", False),
        (f"lmsysorg/sglang@{DIGEST[:-1]}", False),
        (f"Lmsysorg/sglang@{DIGEST}", False),
        (None, False),
    ],
)
def test_pinned_image(value: object, fits: bool) -> None:
    assert g.pinned_image(value) is fits


@pytest.mark.parametrize(
    ("value", "fits"),
    [("0.5.23", True), ("0.5.23.post1", True), ("0.5.24rc0", True), ("0.5.23+cu129", True), ("1.0", True),
     ("0.5.23\n", False), ("latest", False), ("v0.5.23", False), ("0.5", True), ("5", False), (0.5, False)],
)  # fmt: skip
def test_release(value: object, fits: bool) -> None:
    assert g.release(value) is fits


@pytest.mark.parametrize(
    ("value", "fits"),
    [("eb9eb208eb0d988989d07a6a12d0fdeb5f52574a", True), ("eb9eb208eb0d988989d07a6a12d0fdeb5f52574a\n", False),
     ("main", False), ("eb9eb20", False), ("EB9EB208EB0D988989D07A6A12D0FDEB5F52574A", False), (40, False)],
)  # fmt: skip
def test_commit_id(value: object, fits: bool) -> None:
    assert g.commit_id(value) is fits


@pytest.mark.parametrize(
    ("value", "fits"),
    [(18080, True), ("18080", True), (1, True), (65535, True), (0, False), (65536, False), ("18080\n", False),
     (True, False), ("-1", False), (None, False)],
)  # fmt: skip
def test_port(value: object, fits: bool) -> None:
    assert g.port(value) is fits


@pytest.mark.parametrize(
    ("value", "fits"),
    [([0, 1, 2, 3], True), (["4", "5"], True), ([], False), ([0, 0], False), ([-1, 0], False), (["0\n"], False),
     ("0,1,2,3", False), ([True], False)],
)  # fmt: skip
def test_gpu_list(value: object, fits: bool) -> None:
    assert g.gpu_list(value) is fits


def test_repo_id() -> None:
    assert g.repo_id("zai-org/GLM-5.3-Flash")
    assert not g.repo_id("../../etc")
    assert not g.repo_id("zai-org/GLM-5.3-Flash\n")


@pytest.mark.parametrize(
    ("value", "fits"),
    [("b289b2bebfa72f911345651e5a1a6dd4fc004829f5fb7f1e", True), ("sk-" + "A_z-9" * 7, True), ("a" * 128, True),
     ("a" * 31, False), ("a" * 129, False), ("a" * 40 + "\n", False), ("a" * 40 + "$x", False),
     ('a' * 40 + '"', False), ("a" * 40 + ";", False), ("a" * 20 + " " + "a" * 20, False), ("é" * 40, False),
     (12345678901234567890123456789012345, False), (None, False)],
)  # fmt: skip
def test_api_key(value: object, fits: bool) -> None:
    assert g.api_key(value) is fits


def test_no_role_keeps_a_pattern_of_its_own_for_these_values() -> None:
    """The image, commit, port and key grammars live in one file; the roles call them by name."""
    patterns = ("@sha256:[0-9a-f]{64}", "[0-9a-f]{40}", "<= 65535", "{32,128}")
    for path in Path(REPO / "roles").glob("*/tasks/*.yml"):
        text = path.read_text()
        assert not [p for p in patterns if p in text], path
