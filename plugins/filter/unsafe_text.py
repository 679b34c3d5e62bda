# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which values of a mapping or list hold control characters (a value that may be a secret is named, never shown)."""

from __future__ import annotations

import re

DOCUMENTATION = r"""
---
name: unsafe_text
short_description: The keys (or list positions) whose values hold control characters
version_added: 0.1.0
description:
  - Returns the keys of a mapping, or the positions in a list, whose value, as text, holds a control
    character (U+0000 to U+001F or U+007F, so line breaks, tabs and escapes). Such a value would end a line
    of a unit, an env file or a header, or add one. Values of any type are read as text.
  - Names the offending entries without their values, so that a check can report a secret's name.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  _input:
    description: The values to check.
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Refuse environment values with line breaks
  ansible.builtin.assert:
    that: (sglang_server_env | glm.fleet.unsafe_text) == []
    fail_msg: "sglang_server_env values hold control characters: {{ sglang_server_env | glm.fleet.unsafe_text }}"
"""

RETURN = r"""
_value:
  description: The offending keys (for a mapping) or zero-based positions (for a list).
  type: list
"""

CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def unsafe_text(values: object) -> list:
    if isinstance(values, dict):
        return [key for key, value in values.items() if CONTROL.search(str(value)) or CONTROL.search(str(key))]
    if isinstance(values, (list, tuple)):
        return [i for i, value in enumerate(values) if CONTROL.search(str(value))]
    return [0] if CONTROL.search(str(values)) else []


class FilterModule:
    def filters(self) -> dict:
        return {"unsafe_text": unsafe_text}
