#!/usr/bin/python
# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: router_worker
short_description: Take an SGLang server out of the SMG router's rotation, or put it back
version_added: 0.1.0
description:
  - Runs on the gateway host and speaks to the SMG router's worker API on O(router).
  - With O(state=absent), drains the server out of the rotation (the router stops sending it new
    requests; those in flight go on) and waits until the router has let it go, after SMG's settle time.
  - With O(state=drained), the same drain, but it returns once the router lists the server draining
    (it routes it no new request; SMG removes it after its settle time meanwhile). The server role
    does this before it restarts a server, then waits for the server's own requests in flight
    (M(glm.fleet.sglang_idle)).
  - With O(state=present), adds the server (with O(api_key) as the key the router sends it) unless
    the router already routes to it, and waits until the router counts it ready and healthy.
  - When nothing listens on O(router) (no gateway yet, or its router stopped), no request goes
    through it, so it changes nothing and returns C(router_running=false).
author:
  - glm.fleet contributors (@glm-fleet)
options:
  router:
    description: The router's own address, C(http://127.0.0.1:<gateway_router_port>) on the gateway host.
    type: str
    required: true
  url:
    description: The server as the router knows it, C(http://<address>:<port>) (one of O(router)'s C(--worker-urls)).
    type: str
    required: true
  api_key:
    description:
      - The key a server added here is sent (the router's C(--api-key), the servers' key). Empty when
        the servers have none.
      - Without O(admin_key_file), also the key the worker API is called with (a router without a
        control-plane key lets C(--api-key) open it).
    type: str
    default: ""
  admin_key_file:
    description:
      - A file, on the host the module runs on, that holds the router's control-plane key (the only
        key that opens its worker API once the router has one). This module's calls to
        the worker API carry it; it never leaves the host.
      - When the file does not exist, or the router refuses its key (a router set up, or not restarted,
        since before it had a control-plane key), the calls carry O(api_key).
    type: path
    default: ""
  state:
    description: Out of the router's list (C(absent)), out of its rotation (C(drained)), or in it (C(present)).
    type: str
    choices: [absent, drained, present]
    default: present
  timeout:
    description: Seconds to wait for the router to finish the change.
    type: int
    default: 120
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - glm.fleet.attributes
"""

EXAMPLES = r"""
- name: Drain the server out of the gateway's rotation
  glm.fleet.router_worker:
    router: http://127.0.0.1:30000
    url: http://10.0.0.11:18080
    api_key: "{{ sglang_server_api_key }}"
    admin_key_file: /etc/glm-fleet/gateway/router-admin.key
    state: drained
  delegate_to: gateway-1

- name: Put it back, sent the servers' key
  glm.fleet.router_worker:
    router: http://127.0.0.1:30000
    url: http://10.0.0.11:18080
    api_key: "{{ sglang_server_api_key }}"
    admin_key_file: /etc/glm-fleet/gateway/router-admin.key
    state: present
  delegate_to: gateway-1
"""

RETURN = r"""
router_running:
  description: Whether the router answered at all.
  returned: always
  type: bool
before:
  description: The server's place in the rotation before the change, as the router described it.
  returned: when the router is running
  type: str
  sample: status ready, healthy True, 0 request(s) in flight
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm.fleet.plugins.module_utils._router_workers import (
    Router,
    RouterDown,
    RouterError,
    RouterRefused,
    add,
    remove,
)


def control_key(module: AnsibleModule, path: str, api_key: str) -> str:
    """The key the worker API is called with: the router's control-plane key from path, or api_key
    where there is no such file."""
    if not path or not os.path.exists(path):
        return api_key
    try:
        with open(path, encoding="utf-8") as f:
            key = f.read().strip()
    except OSError as e:
        module.fail_json(msg=f"admin_key_file {path}: cannot read the router's control-plane key: {e.strerror}")
    if not key:
        module.fail_json(
            msg=f"admin_key_file {path} is empty: no control-plane key to call the router's worker API with"
        )
    module.no_log_values.add(key)
    return key


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "router": {"type": "str", "required": True},
            "url": {"type": "str", "required": True},
            "api_key": {"type": "str", "default": "", "no_log": True},
            "admin_key_file": {"type": "path", "default": ""},
            "state": {"type": "str", "default": "present", "choices": ["absent", "drained", "present"]},
            "timeout": {"type": "int", "default": 120},
        },
        supports_check_mode=True,
    )
    p = module.params
    key = control_key(module, p["admin_key_file"], p["api_key"])

    def change(router: Router) -> dict:
        if p["state"] in ("absent", "drained"):
            return remove(router, p["url"], p["timeout"], module.check_mode, until_gone=p["state"] == "absent")
        return add(router, p["url"], p["api_key"], p["timeout"], module.check_mode)

    try:
        try:
            result = change(Router(p["router"], key))
        except RouterRefused:
            # A router that has not restarted since its control-plane key was made (the run that made
            # it stopped before its handlers) still opens its API to --api-key only.
            if not p["api_key"] or key == p["api_key"]:
                raise
            result = change(Router(p["router"], p["api_key"]))
    except RouterDown:
        module.exit_json(changed=False, router_running=False)
    except RouterError as e:
        module.fail_json(msg=str(e), router_running=True)
    module.exit_json(router_running=True, **result)


if __name__ == "__main__":
    main()
