# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Packages `npm pack --json` downloaded whose integrity is not the pinned one."""

from __future__ import annotations

import json

DOCUMENTATION = r"""
---
name: integrity_problems
short_description: The packages of an npm download whose integrity differs from the pinned one
version_added: 0.1.0
description:
  - Compares what C(npm pack --json) reports for each downloaded package (its C(name) and
    C(integrity), the sha512 of the tarball) with pinned integrities, for every wanted package.
    Names are compared without their scope (C(@anthropic-ai/claude-code) is C(claude-code)).
  - Returns one message per problem, naming the package, the pinned and the downloaded value, and
    O(variable); a wanted package missing from the download, or one without a pin, is a problem too.
author:
  - glm.fleet contributors (@glm-fleet)
positional: pins, wanted, variable
options:
  _input:
    description: The standard output of C(npm pack --json).
    type: str
    required: true
  pins:
    description: Pinned integrity by package name (without its scope).
    type: dict
    required: true
  wanted:
    description: The package names that must be in the download.
    type: list
    elements: str
    required: true
  variable:
    description: The variable that holds the pins, named in the messages.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Require the downloads to have the pinned integrity
  ansible.builtin.assert:
    that: (pack.stdout | glm.fleet.integrity_problems(pins, names, 'claude_code_cli_integrity')) == []
"""

RETURN = r"""
_value:
  description: One message per package whose download differs from its pin (empty when all match).
  type: list
  elements: str
"""


def integrity_problems(pack_json: str, pins: dict, wanted: list, variable: str) -> list[str]:
    try:
        packed = json.loads(pack_json)
    except ValueError:
        return [f"npm pack printed no JSON: {pack_json[:200]!r}"]
    got = {str(p.get("name")).rsplit("/", 1)[-1]: p.get("integrity") for p in packed if isinstance(p, dict)}
    problems = []
    for name in wanted:
        pinned = pins.get(name)
        if pinned is None:
            problems.append(f"{variable} has no integrity for {name}")
        elif name not in got:
            problems.append(f"{name} is not among the downloads ({', '.join(sorted(map(str, got)))})")
        elif got[name] != pinned:
            problems.append(f"{name}: the download's integrity is {got[name]}, {variable} pins {pinned}")
    return problems


class FilterModule:
    def filters(self) -> dict:
        return {"integrity_problems": integrity_problems}
