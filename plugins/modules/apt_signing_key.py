#!/usr/bin/python
# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: apt_signing_key
short_description: Fetch an apt repository's signing key, refuse it unless it has the pinned fingerprint, and install it
version_added: 0.1.0
description:
  - Fetches the armored key at O(url) and reads its fingerprints with C(gpg --show-keys) in a
    throw-away home directory. Unless the file holds exactly one primary key (with its subkeys) and
    its fingerprint is O(fingerprint), fails naming the fingerprints found and
    O(fingerprint_variable), and writes nothing; a second key beside the pinned one is refused too,
    as apt would trust every key of the keyring.
  - Otherwise writes the armored key to O(dest) and its binary form (C(gpg --dearmor)) to
    O(keyring), the file a C(signed-by) option names, each only when its content differs (mode
    C(0644), which apt's unprivileged fetcher reads). Reports changed when it wrote either.
  - One task for what a fetch, a fingerprint read, a check, a copy and a dearmor would do, so that a
    host whose key is in place costs one task.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  url:
    description: The armored key's URL, C(https).
    type: str
    required: true
  ca:
    description:
      - The certificate (PEM) of the CA that signs the certificate of O(url)'s server, for a mirror behind a
        site's own CA; it is trusted for this fetch only. Empty, the system's CAs are.
    type: str
    default: ""
  fingerprint:
    description: The pinned fingerprint of the primary key (40 hex digits; spaces are ignored).
    type: str
    required: true
  fingerprint_variable:
    description: The variable that holds O(fingerprint), named in the refusal.
    type: str
    default: fingerprint
  dest:
    description: Where the armored key goes. Missing directories on the way are created (mode 0755).
    type: path
    required: true
  keyring:
    description: Where the binary key goes. Missing directories on the way are created (mode 0755).
    type: path
    required: true
  timeout:
    description: Seconds to wait for the key's server.
    type: int
    default: 30
requirements:
  - gpg
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - glm.fleet.attributes
attributes:
  check_mode:
    support: full
    details: Fetches and checks the key, and reports what it would write.
  diff_mode:
    support: full
    details: Each file it writes (would write, in check mode); the armored key as text, the keyring by its size and
      sha256.
"""

EXAMPLES = r"""
- name: Install NVIDIA's repository signing key
  glm.fleet.apt_signing_key:
    url: https://nvidia.github.io/libnvidia-container/gpgkey
    fingerprint: C95B321B61E88C1809C4F759DDCAE044F796ECB0
    dest: /etc/apt/keyrings/nvidia-container-toolkit.asc
    keyring: /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg
"""

RETURN = r"""
fingerprint:
  description: The primary key's fingerprint.
  returned: always
  type: str
  sample: C95B321B61E88C1809C4F759DDCAE044F796ECB0
written:
  description: The files written (in check mode, that would be written).
  returned: success
  type: list
  elements: str
"""

import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url

from ansible_collections.glm.fleet.plugins.module_utils._files import file_diff, read, write_private
from ansible_collections.glm.fleet.plugins.module_utils._signing_key import primaries, refusal, to_write


def gpg(module: AnsibleModule, home: str, args: list[str], data: bytes) -> tuple[int, bytes, str]:
    rc, out, err = module.run_command(
        ["gpg", "--batch", "--homedir", home, *args], data=data, binary_data=True, encoding=None
    )
    return rc, out, err.decode(errors="replace").strip()


def make_dirs(path: str) -> None:
    """Create path's missing directories with mode 0755 whatever the umask (apt's fetcher reads the keys)."""
    missing = []
    while path and not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    for directory in reversed(missing):
        os.mkdir(directory)
        os.chmod(directory, 0o755)  # noqa: S103 - a keyring directory is world-readable, as apt's own


def fetch(module: AnsibleModule, url: str, ca: str, timeout: int) -> bytes:
    """The key's bytes from `url`, over TLS that trusts `ca` (PEM) where given, else the system's CAs."""
    with tempfile.NamedTemporaryFile("w", suffix=".pem", prefix="glm-fleet-ca-") as ca_file:
        if ca:
            ca_file.write(ca)
            ca_file.flush()
        resp, info = fetch_url(module, url, timeout=timeout, ca_path=ca_file.name if ca else None)
        if info.get("status") != 200 or resp is None:
            why = f"{info.get('status')} {info.get('msg', '')}".strip()
            module.fail_json(msg=f"could not fetch the signing key from {url}: {why}")
        return resp.read()


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "ca": {"type": "str", "default": ""},
            "fingerprint": {"type": "str", "required": True},
            "fingerprint_variable": {"type": "str", "default": "fingerprint"},
            "dest": {"type": "path", "required": True},
            "keyring": {"type": "path", "required": True},
            "timeout": {"type": "int", "default": 30},
        },
        supports_check_mode=True,
    )
    p = module.params
    if shutil.which("gpg") is None:
        module.fail_json(msg="gpg is not installed; it reads the key's fingerprint")
    if not p["url"].startswith("https://"):
        module.fail_json(
            msg=f"the signing key's URL must be https (a key fetched over plain http is anyone's): {p['url']}"
        )
    armored = fetch(module, p["url"], p["ca"], p["timeout"])
    home = tempfile.mkdtemp(prefix="glm-fleet-gpg-")
    try:
        # Data that is not a key makes gpg fail: that is a key without the pinned fingerprint.
        _rc, listing, _err = gpg(module, home, ["--with-colons", "--show-keys"], armored)
        found = primaries(listing.decode(errors="replace"))
        why = refusal(p["url"], found, p["fingerprint"], p["fingerprint_variable"])
        if why is not None:
            module.fail_json(msg=why, fingerprint=found[0] if found else "")
        rc, binary, err = gpg(module, home, ["--dearmor"], armored)
        if rc != 0:
            module.fail_json(msg=f"gpg --dearmor failed ({rc}) on the key from {p['url']}: {err}")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    files = {p["dest"]: armored, p["keyring"]: binary}
    current = {path: read(path) for path in files}
    written = to_write(files, current)
    if not module.check_mode:
        for path in written:
            make_dirs(os.path.dirname(path))
            write_private(path, files[path], 0o644)  # apt's unprivileged fetcher reads the keyring
    diff = [file_diff(path, current[path], files[path]) for path in written] if module._diff else None
    module.exit_json(changed=bool(written), fingerprint=found[0], written=written, **({"diff": diff} if diff else {}))


if __name__ == "__main__":
    main()
