# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How each server's rollback ended, in words, from the results of checking it again."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: rollback_outcomes
short_description: How each server's rollback ended, from the health checks after it
version_added: 0.1.0
description:
  - Takes the looped results of the C(glm.fleet.sglang_health) check that follows a rollback (each
    with its C(__sglang_server_restore), the C(glm.fleet.file_snapshot) result that restored the
    server, and that with its C(__sglang_server_instance)); returns the server's name to a sentence
    for the run's failure message.
  - A server with no last good version (skipped, nothing restored) was not rolled back; one that
    was says whether its last good version serves again, and if not, why.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  _input:
    description: The results of the looped health check.
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Record how each rollback ended
  ansible.builtin.set_fact:
    outcome: "{{ health_after_rollback.results | glm.fleet.rollback_outcomes }}"
"""

RETURN = r"""
_value:
  description: Server name to a sentence.
  type: dict
"""

from typing import Any  # noqa: E402 - after the documentation, as Ansible plugins are laid out


def outcome(result: dict[str, Any]) -> str:
    restore = result.get("__sglang_server_restore") or {}
    if not restore.get("restored"):
        return "Not rolled back: it has no earlier version that passed the health gate."
    if result.get("ready"):
        return "Rolled back to its last good version (unit, environment; the current keys), which serves again."
    reason = str(result.get("msg") or "the health check failed")
    return f"Rolled back to its last good version, which does not serve either: {reason}"


def rollback_outcomes(results: list[dict[str, Any]]) -> dict[str, str]:
    return {
        str(((r.get("__sglang_server_restore") or {}).get("__sglang_server_instance") or {}).get("name")): outcome(r)
        for r in results
    }


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"rollback_outcomes": rollback_outcomes}
