# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a certificate and a private key (PEM text) belong together."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.glm.fleet.plugins.module_utils import _tls

DOCUMENTATION = r"""
---
name: tls_pair_problem
short_description: What is wrong with a certificate and its key, or an empty string
version_added: 0.1.0
description:
  - Loads a PEM certificate and an unencrypted PEM private key and says why they are not a pair (not
    PEM, not matching); neither value appears in the message.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  _input:
    description: The certificate, PEM.
    type: str
    required: true
  key:
    description: The private key, PEM.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Refuse a certificate that does not match its key
  ansible.builtin.assert:
    that: (gateway_tls_cert | glm.fleet.tls_pair_problem(gateway_tls_key)) == ''
"""

RETURN = r"""
_value:
  description: The problem, or an empty string when the certificate matches the key.
  type: str
"""


def tls_pair_problem(cert: str, key: str) -> str:
    if not _tls.HAS_CRYPTOGRAPHY:
        raise AnsibleFilterError("glm.fleet.tls_pair_problem needs the cryptography package on the controller")
    return _tls.pair_problem(str(cert).encode(), str(key).encode()) or ""


class FilterModule:
    def filters(self) -> dict:
        return {"tls_pair_problem": tls_pair_problem}
