#!/usr/bin/python
# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: registry_warm
short_description: Make a pull-through registry mirror store an image, each layer fetched upstream once
version_added: 0.1.0
description:
  - Reads the image's manifest through the mirror (for a multi-platform index, the linux/amd64 one),
    then asks the mirror for each blob its storage lacks, one byte of the stream only, and waits
    until the mirror has stored it. Distribution's proxy fetches a missed blob twice (to stream it,
    and to store it); this way only the stored copy crosses the upstream link.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  image:
    description: Image reference pinned by digest.
    type: str
    required: true
  registry_url:
    description: The mirror's API, e.g. C(http://127.0.0.1:5000).
    type: str
    required: true
  storage_dir:
    description: The mirror's filesystem storage (distribution's C(rootdirectory)).
    type: path
    required: true
  timeout:
    description: Seconds to wait for the mirror to store one blob.
    type: int
    default: 3600
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - glm.fleet.attributes
attributes:
  check_mode:
    support: full
    details: Reads the manifests and lists the blobs that would be fetched; fetches none.
  idempotent:
    description: Blobs already stored are not asked for again.
    support: full
"""

EXAMPLES = r"""
- name: Warm the site cache's mirror with the SGLang image
  glm.fleet.registry_warm:
    image: lmsysorg/sglang:glm-5.3-flash@sha256:aa9210e3507fef64ded0c78afc571d9412b53417c6e271721a095fbde754ad40
    registry_url: http://127.0.0.1:5000
    storage_dir: /var/lib/glm-fleet/registry
"""

RETURN = r"""
fetched:
  description: The blobs the mirror fetched from upstream in this run (or would, in check mode).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.glm.fleet.plugins.module_utils._docker_api import DockerError
from ansible_collections.glm.fleet.plugins.module_utils._registry_warm import Mirror, WarmError, missing_blobs, warm


def run(module: AnsibleModule, mirror: Mirror) -> dict:
    p = module.params
    repo, missing = missing_blobs(mirror, p["image"])
    if missing and not module.check_mode:
        warm(mirror, repo, missing, wait=p["timeout"])
    return {"changed": bool(missing), "fetched": missing}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "image": {"type": "str", "required": True},
            "registry_url": {"type": "str", "required": True},
            "storage_dir": {"type": "path", "required": True},
            "timeout": {"type": "int", "default": 3600},
        },
        supports_check_mode=True,
    )
    try:
        mirror = Mirror(
            base=module.params["registry_url"].rstrip("/"),
            storage=module.params["storage_dir"],
            opener=lambda url, headers, timeout: open_url(url, headers=headers, timeout=timeout),
        )
        module.exit_json(**run(module, mirror))
    except (WarmError, DockerError, OSError, ValueError) as err:
        module.fail_json(msg=f"{module.params['image']}: {err}")


if __name__ == "__main__":
    main()
