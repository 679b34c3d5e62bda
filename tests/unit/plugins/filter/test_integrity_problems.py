"""npm downloads against pinned integrities: a match passes, any difference is named."""

from __future__ import annotations

import json

from ansible_collections.glm.fleet.plugins.filter.integrity_problems import integrity_problems

CLI, NATIVE = "claude-code", "claude-code-linux-x64"
PINS = {CLI: "sha512-aaa==", NATIVE: "sha512-bbb=="}


def pack(**integrity: str) -> str:
    names = {"cli": f"@anthropic-ai/{CLI}", "native": f"@anthropic-ai/{NATIVE}"}
    return json.dumps([{"name": names[k], "integrity": v, "filename": f"{k}.tgz"} for k, v in integrity.items()])


def test_downloads_with_the_pinned_integrity_pass() -> None:
    assert integrity_problems(pack(cli="sha512-aaa==", native="sha512-bbb=="), PINS, [CLI, NATIVE], "v") == []


def test_a_different_download_is_named_with_both_values() -> None:
    problems = integrity_problems(pack(cli="sha512-aaa==", native="sha512-evil=="), PINS, [CLI, NATIVE], "pins_var")
    assert problems == [f"{NATIVE}: the download's integrity is sha512-evil==, pins_var pins sha512-bbb=="]


def test_a_missing_download_or_pin_is_a_problem() -> None:
    assert integrity_problems(pack(cli="sha512-aaa=="), PINS, [CLI, NATIVE], "v") == [
        f"{NATIVE} is not among the downloads ({CLI})"
    ]
    other = "claude-code-freebsd-x64"
    assert integrity_problems(pack(cli="sha512-aaa=="), PINS, [CLI, other], "v") == [f"v has no integrity for {other}"]


def test_output_that_is_not_json_is_a_problem() -> None:
    assert integrity_problems("npm ERR! 404", PINS, [CLI], "v") == ["npm pack printed no JSON: 'npm ERR! 404'"]
