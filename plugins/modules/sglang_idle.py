#!/usr/bin/python
# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_idle
short_description: Wait until an SGLang server has no request running or waiting
version_added: 0.1.0
description:
  - Reads the server's C(/v1/loads) (every data-parallel rank's running and waiting requests) until
    none is left, or O(timeout) seconds pass; then returns, idle or not (the caller decides what a
    restart with requests still in flight means), with a warning when some are left.
  - A server that does not answer (not running) has nothing in flight.
  - Changes nothing. In check mode it reads once and does not wait.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  host:
    description: Address of the server.
    type: str
    default: 127.0.0.1
  port:
    description: Port of the server.
    type: int
    required: true
  api_key:
    description: The server's API key (C(/v1/loads) requires it when the server has one).
    type: str
    default: ""
  timeout:
    description: Seconds to wait for the requests in flight to finish.
    type: int
    default: 600
  interval:
    description: Seconds between two readings.
    type: float
    default: 1.0
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - glm.fleet.attributes
"""

EXAMPLES = r"""
- name: Wait for the requests in flight before a restart
  glm.fleet.sglang_idle:
    port: 18080
    api_key: "{{ sglang_server_api_key }}"
    timeout: 600
"""

RETURN = r"""
idle:
  description: Whether no request was left.
  returned: always
  type: bool
requests:
  description: Requests running or waiting at the last reading.
  returned: always
  type: int
requests_at_start:
  description: Requests running or waiting at the first reading.
  returned: always
  type: int
waited:
  description: Seconds spent waiting.
  returned: always
  type: float
running:
  description: Whether the server answered.
  returned: always
  type: bool
"""

import json
import urllib.error

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.glm.fleet.plugins.module_utils._sglang_load import LoadsError, in_flight, wait_idle


def reader(module: AnsibleModule):  # noqa: ANN201 - a closure over the module's parameters
    p = module.params
    url = f"http://{p['host']}:{p['port']}/v1/loads?include=core"
    headers = {"Authorization": f"Bearer {p['api_key']}"} if p["api_key"] else {}

    def read() -> int | None:
        try:
            with open_url(url, headers=headers, timeout=10) as resp:
                return in_flight(json.loads(resp.read()))
        except urllib.error.HTTPError as e:
            raise LoadsError(f"{url} answered {e.code}" + (": the API key was refused" if e.code == 401 else "")) from e
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None

    return read


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "host": {"type": "str", "default": "127.0.0.1"},
            "port": {"type": "int", "required": True},
            "api_key": {"type": "str", "default": "", "no_log": True},
            "timeout": {"type": "int", "default": 600},
            "interval": {"type": "float", "default": 1.0},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = wait_idle(reader(module), 0 if module.check_mode else p["timeout"], p["interval"])
    except LoadsError as e:
        module.fail_json(msg=str(e))
    if not result["idle"] and not module.check_mode:
        module.warn(
            f"{p['host']}:{p['port']} still has {result['requests']} request(s) in flight after {p['timeout']} s"
        )
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
