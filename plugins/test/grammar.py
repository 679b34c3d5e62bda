# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Jinja tests for the values every role checks, one grammar each (plugins/module_utils/_grammar.py);
each test is documented in the YAML file of its name beside this one."""

from __future__ import annotations

from ansible_collections.glm.fleet.plugins.module_utils import _grammar


class TestModule:
    def tests(self) -> dict:
        return {
            "pinned_image": _grammar.pinned_image,
            "commit_id": _grammar.commit_id,
            "repo_id": _grammar.repo_id,
            "port": _grammar.port,
            "gpu_list": _grammar.gpu_list,
            "api_key": _grammar.api_key,
        }
