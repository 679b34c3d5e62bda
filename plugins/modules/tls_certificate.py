#!/usr/bin/python
# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: tls_certificate
short_description: A site CA kept in one directory, and a server or client certificate it signs
version_added: 0.1.0
description:
  - Creates, once, a certificate authority in O(ca_dir) (C(ca.key), mode 0600, and C(ca.pem)), and
    a key and certificate signed by it for O(names) (C(<name>.key), 0600, and C(<name>.pem)), for a
    server or for a client (O(purpose), its extended key usage).
  - Issues the certificate again when it is missing, signed by another CA, does not match its key,
    is for the other purpose, names other hosts, or expires within 30 days; the CA and the keys are
    never replaced.
  - "Meant for the controller (C(delegate_to: localhost)), where the CA stays; the hosts get copies."
  - With O(ca_passphrase), the CA's key is kept encrypted with it (PKCS 8); a CA key made before without
    one is encrypted in place. A CA key that is encrypted needs the passphrase on every run, and one that
    does not open with it is refused before anything changes. The keys of the certificates, which hosts
    get copies of, are not encrypted.
author:
  - glm.fleet contributors (@glm-fleet)
requirements:
  - cryptography (a dependency of ansible-core)
options:
  ca_dir:
    description: Directory of the CA and the certificates it signs (created 0700).
    type: path
    required: true
  ca_passphrase:
    description:
      - The passphrase the CA's key is encrypted with at rest (from vault). Empty, the key is kept
        unencrypted, 0600 (and an encrypted one is refused).
    type: str
    default: ""
  ca_name:
    description: Common name of the CA, created once.
    type: str
    default: glm.fleet site CA
  name:
    description: File name of the server's key and certificate (letters, digits, C(.), C(_), C(-)).
    type: str
    required: true
  names:
    description: Host names and IP addresses of the server or client (the first is its common name).
    type: list
    elements: str
    required: true
  purpose:
    description:
      - C(server) (extended key usage serverAuth) for a TLS server, C(client) (clientAuth) for a
        client that proves itself to servers which require a certificate (mutual TLS).
      - A certificate has one purpose, so a server's certificate cannot stand in for a client's.
    type: str
    choices: [server, client]
    default: server
  ca_days:
    description: Validity of a new CA, in days; at most 1095 (three years).
    type: int
    default: 1095
  days:
    description: Validity of a new server certificate, in days; at most 365, and renewed 30 days before it expires.
    type: int
    default: 365
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - glm.fleet.attributes
attributes:
  diff_mode:
    support: full
    details: The CA directory's files before and after, a line each; keys by their presence only.
  idempotent:
    description: A fit certificate is left as it is.
    support: full
"""

EXAMPLES = r"""
- name: The gateway's certificate from the site CA on the controller
  glm.fleet.tls_certificate:
    ca_dir: "{{ inventory_dir }}/.secrets/ca"
    name: gateway-1
    names: [gateway-1.example.internal, 10.0.10.5]
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
ca_cert:
  description: Path of the CA certificate (PEM).
  type: str
  returned: always
cert:
  description: Path of the server certificate (PEM).
  type: str
  returned: always
key:
  description: Path of the server key (PEM, 0600).
  type: str
  returned: always
created:
  description: What this run created or issued again, with the reason.
  type: list
  elements: str
  returned: always
"""

import fcntl
import os
import re

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.glm.fleet.plugins.module_utils import _tls
from ansible_collections.glm.fleet.plugins.module_utils._files import read, write_private

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def plan(params: dict) -> tuple[dict[str, str], list[str]]:
    """The files of the CA directory and what must be created; no change made."""
    d = params["ca_dir"]
    paths = {"ca_key": f"{d}/ca.key", "ca_cert": f"{d}/ca.pem", "key": f"{d}/{params['name']}.key",
             "cert": f"{d}/{params['name']}.pem"}  # fmt: skip
    todo = [f"{what}: none yet" for what in ("ca_key", "ca_cert", "key") if read(paths[what]) is None]
    if not todo:
        problem = _tls.cert_problem(
            read(paths["cert"]),
            read(paths["ca_cert"]) or b"",
            read(paths["key"]) or b"",
            params["names"],
            params["purpose"],
        )
        if problem:
            todo.append(f"cert: {problem}")
    elif "cert: none yet" not in todo:
        todo.append("cert: issued with the new files")
    ca_key = read(paths["ca_key"])
    if ca_key is not None and params["ca_passphrase"] and not _tls.key_encrypted(ca_key):
        todo.insert(0, "ca_key: encrypted at rest with the passphrase")
    return paths, todo


def diff(params: dict, paths: dict[str, str], todo: list[str]) -> dict[str, str]:
    """For --diff, the CA directory's four files before and after, a line each: a key by its presence
    only (never its bytes), a certificate by its subject, names and expiry."""
    due = {item.split(":", 1)[0] for item in todo}
    new = {
        "ca_key": "a new private key (not shown)",
        "ca_cert": f"a new CA certificate CN={params['ca_name']}, valid {params['ca_days']} days",
        "key": "a new private key (not shown)",
        "cert": f"a new {params['purpose']} certificate signed by the site CA, names {', '.join(params['names'])}"
        f", valid {params['days']} days",
    }

    def now(what: str) -> str:
        data = read(paths[what])
        if data is None:
            return "absent"
        return "a private key (not shown)" if what.endswith("key") else _tls.cert_summary(data)

    if "ca_key: encrypted at rest with the passphrase" in todo:
        new["ca_key"] = "the same private key, encrypted with the passphrase (not shown)"
    before = "".join(f"{paths[w]}: {now(w)}\n" for w in new)
    after = "".join(f"{paths[w]}: {new[w] if w in due else now(w)}\n" for w in new)
    return {"before_header": params["ca_dir"], "after_header": params["ca_dir"], "before": before, "after": after}


def apply(params: dict, paths: dict[str, str]) -> None:
    """One issuer at a time in the CA directory: the hosts of a play issue their certificates at once,
    and on a new site each would otherwise create a CA of its own."""
    os.makedirs(params["ca_dir"], mode=0o700, exist_ok=True)
    os.chmod(params["ca_dir"], 0o700)
    with open(os.path.join(params["ca_dir"], ".lock"), "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _issue(params, paths)


def _issue(params: dict, paths: dict[str, str]) -> None:
    passphrase = params["ca_passphrase"]
    if read(paths["ca_key"]) is None:
        write_private(paths["ca_key"], _tls.new_key_pem(passphrase), 0o600)
    ca_key = read(paths["ca_key"]) or b""
    if passphrase and not _tls.key_encrypted(ca_key):
        ca_key = _tls.encrypted_key_pem(ca_key, passphrase)
        write_private(paths["ca_key"], ca_key, 0o600)
    if read(paths["ca_cert"]) is None:
        ca_cert = _tls.new_ca_pem(ca_key, params["ca_name"], params["ca_days"], passphrase)
        write_private(paths["ca_cert"], ca_cert, 0o644)
    if read(paths["key"]) is None:
        write_private(paths["key"], _tls.new_key_pem(), 0o600)
    ca_pem, key_pem = read(paths["ca_cert"]) or b"", read(paths["key"]) or b""
    if _tls.cert_problem(read(paths["cert"]), ca_pem, key_pem, params["names"], params["purpose"]):
        cert = _tls.new_server_cert_pem(
            ca_key,
            ca_pem,
            key_pem,
            params["names"],
            params["days"],
            purpose=params["purpose"],
            ca_passphrase=passphrase,
        )
        write_private(paths["cert"], cert, 0o644)


MAX_CA_DAYS = 1095  # a site CA lives at most three years
MAX_DAYS = 365  # a server certificate at most a year


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "ca_dir": {"type": "path", "required": True},
            "ca_name": {"type": "str", "default": "glm.fleet site CA"},
            "ca_passphrase": {"type": "str", "default": "", "no_log": True},
            "name": {"type": "str", "required": True},
            "names": {"type": "list", "elements": "str", "required": True},
            "ca_days": {"type": "int", "default": 1095},
            "days": {"type": "int", "default": 365},
            "purpose": {"type": "str", "default": "server", "choices": list(_tls.PURPOSES)},
        },
        supports_check_mode=True,
    )
    if not _tls.HAS_CRYPTOGRAPHY:
        module.fail_json(msg=missing_required_lib("cryptography"))
    params = module.params
    if not NAME_RE.fullmatch(params["name"]):
        module.fail_json(msg=f"name must be letters, digits, ., _ and -; got: {params['name']!r}")
    if not params["names"]:
        module.fail_json(msg="names must list the server's host names or addresses")
    for option, longest in (("ca_days", MAX_CA_DAYS), ("days", MAX_DAYS)):
        if not 31 <= params[option] <= longest:
            module.fail_json(msg=f"{option} must be 31 to {longest} days; got: {params[option]}")
    ca_key = read(f"{params['ca_dir']}/ca.key")
    problem = ca_key is not None and _tls.key_problem(ca_key, params["ca_passphrase"])
    if problem:
        module.fail_json(
            msg=f"the site CA's key {params['ca_dir']}/ca.key {problem} (ca_passphrase: the inventory's"
            " deployment_ca_key_passphrase, from vault); nothing was changed"
        )
    paths, todo = plan(params)
    shown = {"diff": diff(params, paths, todo)} if todo and module._diff else {}
    if todo and not module.check_mode:
        apply(params, paths)
    module.exit_json(
        changed=bool(todo), created=todo, ca_cert=paths["ca_cert"], cert=paths["cert"], key=paths["key"], **shown
    )


if __name__ == "__main__":
    main()
