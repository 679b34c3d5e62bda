#!/usr/bin/python
# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: image_pull
short_description: Pull a container image pinned by digest and prove that the engine holds that digest
version_added: 0.1.0
description:
  - Pulls O(reference) (C(NAME[:TAG]@sha256:<64 hex>); tag-only references are refused) through the
    docker engine API, unless the engine already holds it.
  - After the pull, the image's C(RepoDigests) must contain C(NAME@DIGEST); otherwise the module fails.
  - With O(job_file), the pull runs in a detached worker process and the module returns at once; the
    worker writes its pid, the pull's progress (layers and bytes) and at last its result to O(job_file),
    which M(glm.fleet.await_job) watches. A pull of the same reference whose worker still runs is
    joined, not started twice. Neither an SSH drop nor a task timeout stops the worker.
  - Registry credentials travel in the engine API's C(X-Registry-Auth) header, never in argv or on disk.
    The worker holds them in memory only (unlike Ansible's C(async), which keeps a module's arguments
    in a file on the host while it runs); run the task with pipelining so that they do not reach the
    host's disk on the way in either.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  reference:
    description: Image reference pinned by digest.
    type: str
    required: true
  registry_username:
    description: User for a registry that needs a login.
    type: str
  registry_password:
    description: Password or token for O(registry_username).
    type: str
  prune:
    description:
      - Remove older images pulled by digest from the same repository (those in use stay).
      - Images built on the host, or pulled from another repository, are never touched.
    type: bool
    default: false
  keep:
    description:
      - With O(prune), how many of the newest older images of the repository stay (the versions a
        rollback returns to).
    type: int
    default: 0
  job_file:
    description:
      - Run the pull detached and record it in this file (JSON, mode 0600, no credentials).
      - Without it, the pull runs in the module and the module returns when it ends.
    type: path
  docker_socket:
    description: The engine's API socket.
    type: path
    default: /var/run/docker.sock
  engine_missing:
    description:
      - What to do when O(docker_socket) does not exist, no engine runs on the host.
      - V(fail) fails, naming the socket and O(engine_hint).
      - V(report) returns C(pulled=true), C(changed=true) and C(engine=false) without contacting
        anything, for a check-mode run in which an earlier stage would install the engine.
    type: str
    choices: [fail, report]
    default: fail
  engine_hint:
    description: What to do about a missing engine, appended to the failure.
    type: str
    default: ""
  timeout:
    description: Seconds a read from the engine may wait (a pull that stalls longer fails).
    type: int
    default: 600
  retries:
    description: Attempts at the pull before failing (the engine resumes layers it already has).
    type: int
    default: 3
  retry_delay:
    description: Seconds between two attempts.
    type: int
    default: 5
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - glm.fleet.attributes
attributes:
  check_mode:
    support: full
    details: Reports whether a pull or prune would happen; pulls nothing.
  idempotent:
    description: An image already present with the pinned digest is left alone.
    support: full
"""

EXAMPLES = r"""
- name: Pull the SGLang image by digest
  glm.fleet.image_pull:
    reference: lmsysorg/sglang:glm-5.3-flash@sha256:aa9210e3507fef64ded0c78afc571d9412b53417c6e271721a095fbde754ad40
    job_file: /var/lib/glm-fleet/image-pull.json
  vars:
    ansible_pipelining: true  # no module arguments in a file on the host
  register: pull_job

- name: Wait for it, showing its progress
  glm.fleet.await_job:
    job_file: /var/lib/glm-fleet/image-pull.json
    what: pull
"""

RETURN = r"""
image_id:
  description: The engine's id of the image.
  returned: success
  type: str
repo_digests:
  description: The image's RepoDigests; they contain the pinned one.
  returned: success
  type: list
  elements: str
pulled:
  description: Whether the image was pulled in this run (with O(job_file), whether a pull was started or joined).
  returned: always
  type: bool
job:
  description: The detached worker's record (pid, start time, reference, state).
  returned: when a pull was started or joined with O(job_file)
  type: dict
progress:
  description: Layers and bytes of the pull.
  returned: when pulled
  type: dict
removed:
  description: Ids of older images of the repository that were removed.
  returned: always
  type: list
  elements: str
engine:
  description: Whether an engine runs on the host (false only with O(engine_missing=report)).
  returned: always
  type: bool
"""

import os
import time
from collections.abc import Callable

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm.fleet.plugins.module_utils._detach import alive, read_json, spawn, write_json
from ansible_collections.glm.fleet.plugins.module_utils._docker_api import (
    DockerError,
    Engine,
    Reference,
    parse_reference,
    pull_with_progress,
    registry_auth,
    stale_images,
)


def progress_writer(job_file: str | None, record: dict) -> Callable[..., None]:
    """Write the pull's progress into the job record, at most once a second unless forced."""
    last = [0.0]

    def write(summary: dict[str, int], force: bool = False) -> None:
        now = time.monotonic()
        if not job_file or (not force and now - last[0] < 1.0):
            return
        last[0] = now
        write_json(job_file, {**record, "progress": summary, "time": time.time()})

    return write


def pull_retrying(
    engine: Engine, ref: Reference, auth: str | None, write: Callable[..., None], p: dict
) -> tuple[dict[str, int], int]:
    """Pull, trying again after a failure (a registry or mirror that is down); (progress, attempts)."""
    errors = []
    for attempt in range(1, p["retries"] + 1):
        try:
            return pull_with_progress(engine, ref, auth, write), attempt
        except DockerError as err:
            errors.append(f"attempt {attempt}: {err}")
            if attempt < p["retries"]:
                time.sleep(p["retry_delay"])
    raise DockerError(f"pulling {p['reference']} failed after {p['retries']} attempts: " + "; ".join(errors))


def pull(p: dict, ref: Reference, engine: Engine, write: Callable[..., None]) -> dict:
    """Pull the pinned image and prove the engine holds its digest; the pull's result."""
    auth = None
    if p["registry_username"]:
        auth = registry_auth(p["registry_username"], p["registry_password"] or "", ref.registry)
    progress, attempts = pull_retrying(engine, ref, auth, write, p)
    write(progress, force=True)
    image = engine.inspect(ref.pinned)
    if image is None:
        raise DockerError(f"the engine reports no image {ref.pinned} after pulling it")
    return {"progress": progress, "attempts": attempts, **verified(image, ref, p["reference"])}


def verified(image: dict, ref: Reference, reference: str) -> dict:
    digests = image.get("RepoDigests") or []
    if ref.pinned not in digests:
        raise DockerError(f"{reference}: the image's RepoDigests {digests} do not contain {ref.pinned}")
    return {"image_id": image["Id"], "repo_digests": digests}


def start_job(p: dict, ref: Reference, engine: Engine) -> dict:
    """Start the pull in a detached worker, or join the one that already pulls this reference."""
    job_file = p["job_file"]
    running = read_json(job_file)
    if running and running.get("state") == "running" and running.get("reference") == p["reference"] and alive(running):
        return {**running, "joined": True}

    def work(record: dict) -> dict:
        return pull(p, ref, engine, progress_writer(job_file, record))

    return spawn(job_file, {"reference": p["reference"], "started": time.time()}, work)


def prune(module: AnsibleModule, engine: Engine, ref: Reference, result: dict) -> None:
    for stale in stale_images(engine.images(ref.repository), ref, module.params["keep"]):
        result["changed"] = True
        if module.check_mode:
            result["removed"].append(stale["Id"])
            continue
        ok, detail = engine.remove(stale["Id"])
        if ok:
            result["removed"].append(stale["Id"])
        else:
            module.warn(f"kept {stale['Id']} ({stale.get('RepoTags')}): {detail}")


def no_engine(socket: str, engine_missing: str, hint: str) -> dict:
    """The result for a host without an engine (no socket), or the failure that names it."""
    if engine_missing == "report":
        return {"changed": True, "pulled": True, "engine": False}
    raise DockerError(f"no docker engine runs here ({socket} is missing){'; ' + hint if hint else ''}")


def run(module: AnsibleModule) -> dict:
    p = module.params
    ref = parse_reference(p["reference"])
    result: dict = {"changed": False, "pulled": False, "removed": [], "reference": p["reference"], "engine": True}
    if not os.path.exists(p["docker_socket"]):
        return {**result, **no_engine(p["docker_socket"], p["engine_missing"], p["engine_hint"])}
    engine = Engine(p["docker_socket"], p["timeout"])
    image = engine.inspect(ref.pinned)
    if image is None:
        result.update(changed=True, pulled=True)
        if module.check_mode:
            return result
        if p["job_file"]:
            result["job"] = start_job(p, ref, engine)
            return result
        result.update(pull(p, ref, engine, progress_writer(None, {})))
    else:
        result.update(verified(image, ref, p["reference"]))
    if p["prune"]:
        prune(module, engine, ref, result)
    return result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "reference": {"type": "str", "required": True},
            "registry_username": {"type": "str"},
            "registry_password": {"type": "str", "no_log": True},
            "prune": {"type": "bool", "default": False},
            "keep": {"type": "int", "default": 0},
            "job_file": {"type": "path"},
            "docker_socket": {"type": "path", "default": "/var/run/docker.sock"},
            "engine_missing": {"type": "str", "choices": ["fail", "report"], "default": "fail"},
            "engine_hint": {"type": "str", "default": ""},
            "timeout": {"type": "int", "default": 600},
            "retries": {"type": "int", "default": 3},
            "retry_delay": {"type": "int", "default": 5},
        },
        supports_check_mode=True,
    )
    try:
        module.exit_json(**run(module))
    except (DockerError, OSError) as err:
        module.fail_json(msg=str(err))


if __name__ == "__main__":
    main()
