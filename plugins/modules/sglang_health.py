#!/usr/bin/python
# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_health
short_description: Tell whether an SGLang server really serves, waiting until a deadline
version_added: 0.1.0
description:
  - Runs these checks in order and reports each, with its latency; after the first failure the
    rest are skipped. C(tcp) connect; C(health) (C(/health) answers 200);
    C(health_generate) (C(/health_generate) answers 200, which needs a generated token);
    C(models) (C(/v1/models) lists O(served_model_name)); C(chat) (a real short chat completion on
    C(/v1/chat/completions)); C(messages) (a real streamed Anthropic C(/v1/messages) call, what
    Claude Code uses, with its time to first token); C(tool_use) (Claude Code's loop, a
    C(/v1/messages) request whose C(tool_choice) forces a tool with a boolean and an integer
    property, as JSON and streamed, must come back as one C(tool_use) block with input typed by the
    schema and C(stop_reason) C(tool_use)); C(server_info) (the server's own view of its
    arguments on C(/get_server_info) or C(/server_info) compared with O(expected)).
  - GLM-5.3 always thinks before it answers, so a short generation may hold only reasoning; the
    C(chat) and C(messages) checks count reasoning as generated text.
  - A server started without C(--tool-call-parser glm47) answers the forced call as text, and one
    without C(--reasoning-parser glm45) leaves GLM's C(</think>) in the text; C(tool_use) fails both
    with a message naming the flag.
  - SGLang's C(/health) can answer 200 while generation hangs, so only all checks together mean
    ready. The module repeats the checks every O(interval) seconds until they pass or O(timeout)
    seconds have passed; argument drift fails at once, since waiting will not fix it.
  - Read-only. It sends a few short generation requests (the forced tool call at most 1024 tokens,
    the model's thinking included) and changes nothing.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  host:
    description: Address of the server, seen from the host the module runs on.
    type: str
    default: 127.0.0.1
  port:
    description: Port of the server.
    type: int
    default: 18080
  api_key:
    description: "The server's API key, sent as C(Authorization: Bearer <key>)."
    type: str
  served_model_name:
    description: The model name clients ask for; C(/v1/models) must list it.
    type: str
    required: true
  expected:
    description:
      - Arguments the server must report in its server info. Keys compared when given
        C(model_path), C(revision), C(served_model_name), C(tp_size), C(ep_size), C(context_length).
    type: dict
    default: {}
  timeout:
    description: Seconds to wait for the server to pass every check; 0 checks once.
    type: float
    default: 1800
  interval:
    description: Seconds between two rounds of checks.
    type: float
    default: 0.5
  request_timeout:
    description: Seconds one request may take; a generation that takes longer counts as hung.
    type: float
    default: 30
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - glm.fleet.attributes
attributes:
  check_mode:
    support: full
    details: The checks are read-only and run in check mode too.
  diff_mode:
    support: none
    details: The module changes nothing.
  platform:
    platforms: posix
    description: Runs on the host it is given; that host must reach the server.
    support: full
  idempotent:
    description: Checking twice changes nothing.
    support: full
notes:
  - Fails with a message that names the failed check and what it saw.
"""

EXAMPLES = r"""
- name: Wait up to 30 minutes for a freshly started server to generate tokens
  glm.fleet.sglang_health:
    port: 18080
    api_key: "{{ sglang_server_api_key }}"
    served_model_name: zai-org/GLM-5.3-Flash
    expected:
      model_path: zai-org/GLM-5.3-Flash
      revision: eb9eb208eb0d988989d07a6a12d0fdeb5f52574a
      tp_size: 4
      ep_size: 4
      context_length: 16384
    timeout: 1800

- name: Check once, now, and report without failing the play
  glm.fleet.sglang_health:
    served_model_name: zai-org/GLM-5.3-Flash
    timeout: 0
  register: health
  failed_when: false
"""

RETURN = r"""
ready:
  description: Whether every check passed.
  returned: always
  type: bool
  sample: true
failed_check:
  description: The first check that failed in the last round, or null.
  returned: always
  type: str
  sample: health_generate
checks:
  description: Per check C(ok), C(skipped), C(latency_ms) and C(detail), in the order run.
  returned: always
  type: dict
  sample:
    health: {ok: true, skipped: false, latency_ms: 1.2, detail: HTTP 200}
    health_generate: {ok: false, skipped: false, latency_ms: 30001.0, detail: "GET /health_generate: no answer in 30 s"}
ttft_ms:
  description: Time to the first streamed token of the C(messages) check, in milliseconds.
  returned: always
  type: float
  sample: 183.4
drift:
  description: Differences between the server's arguments and O(expected).
  returned: always
  type: list
  elements: str
  sample: ["tp_size: server has 2, inventory expects 4"]
server:
  description:
    - The server's own view of its arguments (model_path, revision, served_model_name, tp_size, ep_size,
      context_length).
  returned: always (empty when the server_info check was not reached)
  type: dict
  sample: {model_path: zai-org/GLM-5.3-Flash, revision: eb9eb208eb0d988989d07a6a12d0fdeb5f52574a, tp_size: 4}
attempts:
  description: Rounds of checks run.
  returned: always
  type: int
  sample: 12
waited_s:
  description: Seconds spent until the result.
  returned: always
  type: float
  sample: 41.7
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm.fleet.plugins.module_utils._sglang_health import probe


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "host": {"type": "str", "default": "127.0.0.1"},
            "port": {"type": "int", "default": 18080},
            "api_key": {"type": "str", "no_log": True},
            "served_model_name": {"type": "str", "required": True},
            "expected": {"type": "dict", "default": {}},
            "timeout": {"type": "float", "default": 1800},
            "interval": {"type": "float", "default": 0.5},
            "request_timeout": {"type": "float", "default": 30},
        },
        supports_check_mode=True,
    )
    report = probe(module.params, module.params["port"])
    if not report["ready"]:
        module.fail_json(**report)
    module.exit_json(changed=False, **report)


if __name__ == "__main__":
    main()
