#!/usr/bin/python
# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: grafana_dashboard
short_description: Provision a dashboard into a Grafana, on a datasource that must exist there
version_added: 0.1.0
description:
  - Looks up O(datasource_uid) among the Grafana's datasources and, if given, O(folder_uid) among its
    folders, and fails before writing anything when either is missing or the datasource is not
    Prometheus.
  - Sets the dashboard's datasource variable to that datasource, adds the tag C(glm.fleet), and saves
    the dashboard through C(POST /api/dashboards/db) when Grafana's copy differs in content or folder;
    otherwise changes nothing.
  - Never replaces a dashboard that is not the collection's. A dashboard of the same uid without the
    tag C(glm.fleet) is refused before anything is written. The save is sent without C(overwrite),
    with the version read, so Grafana refuses it when the dashboard changed in between or another
    dashboard of the same title is in the folder.
  - Run it where the token already is, on the controller (C(delegate_to) V(localhost)), so that the
    token reaches no other host.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  url:
    description: Grafana's base URL.
    type: str
    required: true
  token:
    description: "A service account token with dashboard write access, sent as C(Authorization: Bearer <token>)."
    type: str
    required: true
  dashboard:
    description: The dashboard's JSON model (with its C(uid)).
    type: dict
    required: true
  datasource_uid:
    description: The uid of the Prometheus datasource the dashboard reads.
    type: str
    required: true
  folder_uid:
    description: The folder to keep the dashboard in; empty for the General folder.
    type: str
    default: ""
  validate_certs:
    description:
      - Verify Grafana's TLS certificate.
      - V(false) sends the token to whoever answers at O(url), and the module warns so on every run.
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - glm.fleet.attributes
attributes:
  check_mode:
    support: full
    details: Looks everything up and reports whether the dashboard would be saved.
  diff_mode:
    support: full
    details: Grafana's copy of the dashboard and the one it saves (would save), as sorted JSON with their folder.
  platform:
    platforms: posix
    description: Runs on a host that reaches Grafana.
    support: full
  idempotent:
    description: An unchanged dashboard is not saved again.
    support: full
"""

EXAMPLES = r"""
- name: Provision the fleet's dashboard
  glm.fleet.grafana_dashboard:
    url: https://grafana.example.internal
    token: "{{ vault_grafana_token }}"
    dashboard: "{{ lookup('ansible.builtin.file', 'glm-fleet.json') | from_json }}"
    datasource_uid: prometheus-fleet
  delegate_to: localhost
  become: false
  run_once: true
"""

RETURN = r"""
url:
  description: The dashboard's URL in Grafana.
  returned: success
  type: str
version:
  description: The dashboard's version in Grafana after the run.
  returned: success
  type: int
"""

import json
import urllib.error
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.glm.fleet.plugins.module_utils._grafana import (
    dashboard_diff,
    datasource_problem,
    differs,
    foreign_problem,
    save_body,
    save_problem,
    with_datasource,
)


class Grafana:
    def __init__(self, url: str, token: str, validate_certs: bool) -> None:
        self.url = url.rstrip("/")
        self.headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        self.validate_certs = validate_certs

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        try:
            resp = open_url(f"{self.url}{path}", method=method, data=data, headers=self.headers,
                            validate_certs=self.validate_certs, timeout=30)  # fmt: skip
            return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as err:
            raw = err.read()
            try:
                return err.code, json.loads(raw or b"null")
            except ValueError:
                return err.code, {"message": raw.decode(errors="replace")[:200]}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "token": {"type": "str", "required": True, "no_log": True},
            "dashboard": {"type": "dict", "required": True},
            "datasource_uid": {"type": "str", "required": True},
            "folder_uid": {"type": "str", "default": ""},
            "validate_certs": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    if not p["validate_certs"] and p["url"].startswith("https://"):
        module.warn(
            f"validate_certs is false: Grafana's certificate at {p['url']} is not verified, and the token goes"
            " to whoever answers there"
        )
    grafana = Grafana(p["url"], p["token"], p["validate_certs"])
    try:
        status, datasources = grafana.call("GET", "/api/datasources")
        if status != 200:
            module.fail_json(msg=f"Grafana at {p['url']}: GET /api/datasources answered {status}: {datasources}")
        datasource, problem = datasource_problem(datasources, p["datasource_uid"])
        if datasource is None:
            module.fail_json(msg=f"Grafana at {p['url']}: {problem}")
        if p["folder_uid"]:
            status, _folder = grafana.call("GET", f"/api/folders/{p['folder_uid']}")
            if status != 200:
                module.fail_json(msg=f"Grafana at {p['url']}: no folder with uid {p['folder_uid']!r} ({status})")
        desired = with_datasource(p["dashboard"], datasource)
        status, current = grafana.call("GET", f"/api/dashboards/uid/{desired.get('uid', '')}")
        if status not in (200, 404):
            module.fail_json(msg=f"Grafana at {p['url']}: GET the dashboard answered {status}: {current}")
        current = current if status == 200 else None
        if problem := foreign_problem(current):
            module.fail_json(msg=f"Grafana at {p['url']}: {problem}")
        if not differs(current, desired, p["folder_uid"]):
            module.exit_json(
                changed=False, url=current["meta"].get("url", ""), version=current["dashboard"].get("version")
            )
        diff = {"diff": dashboard_diff(current, desired, p["folder_uid"])} if module._diff else {}
        if module.check_mode:
            module.exit_json(changed=True, url="", version=None, **diff)
        status, saved = grafana.call("POST", "/api/dashboards/db", save_body(desired, p["folder_uid"], current))
        if status != 200:
            module.fail_json(msg=f"Grafana at {p['url']}: {save_problem(status, saved)}")
        module.exit_json(changed=True, url=saved.get("url", ""), version=saved.get("version"), **diff)
    except (OSError, ValueError) as err:
        module.fail_json(msg=f"Grafana at {p['url']}: {err}")


if __name__ == "__main__":
    main()
