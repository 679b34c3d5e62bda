# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What is wrong with a deployment (glm.fleet.deployment's variables), one message per problem."""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable

from ansible_collections.glm.fleet.plugins.module_utils._grammar import commit_id, pinned_image, release, repo_id

DOCUMENTATION = r"""
---
name: deployment_problems
short_description: The problems of a deployment's settings, naming each variable and its value
version_added: 0.1.0
description:
  - Checks the variables of R(glm.fleet.deployment,ansible_collections.glm.fleet.deployment_role) with
    full matches, the same grammars the modules use (an image reference pinned by digest as
    M(glm.fleet.image_pull) parses it, a 40-hex revision and an C(ORG/NAME) repository as
    M(glm.fleet.hf_snapshot) does).
  - Each message names the variable and shows the value JSON-escaped, so a line break is visible.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  _input:
    description: The deployment's variables by name.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Check the deployment
  ansible.builtin.assert:
    that: "({'deployment_image': deployment_image} | glm.fleet.deployment_problems) == []"
"""

RETURN = r"""
_value:
  description: One message per problem; empty when the deployment is fit.
  type: list
  elements: str
"""

SERVED_NAME_RE = re.compile(r"[A-Za-z0-9/][A-Za-z0-9._/:@+-]*")
POSITIVE_RE = re.compile(r"[1-9][0-9]*")
# The SMG router forwards to the servers only the headers it knows, and of the rest only names that
# begin x-request-id- (smg model_gateway/src/routers/common/header_utils.rs,
# should_forward_request_header): the header that labels a request must be one of those.
USAGE_HEADER_RE = re.compile(r"x-request-id-[a-z0-9][a-z0-9-]{0,47}", re.IGNORECASE)
# A developer's own Lyceum key (Lyceum's keys begin lk_), by the developer's name as the gateway knows it.
DEVELOPER_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
LYCEUM_KEY_RE = re.compile(r"lk_[!-~]+")
SIZES = ("deployment_tp_size", "deployment_ep_size", "deployment_context_length")
LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
HOST_NAME_RE = re.compile(rf"(?=.{{1,253}}\Z){LABEL}(\.{LABEL})*")


def floating_address(value: str) -> bool:
    """Empty (no floating address), or one IPv4 address a host of the LAN can hold (VRRP)."""
    if value == "":
        return True
    try:
        address = ipaddress.IPv4Address(value)
    except ValueError:
        return False
    return not (address.is_loopback or address.is_multicast or address.is_unspecified or address.is_reserved)


# Each text setting: whether a value fits (a full match), and the rule the message states.
GRAMMARS: dict[str, tuple[Callable[[str], bool], str]] = {
    "deployment_image": (pinned_image, "must be pinned by digest, NAME[:TAG]@sha256:<64 hex>"),
    "deployment_sglang_version": (release, "must be a release as Python packaging writes it, like 0.5.23"),
    "deployment_model_repo_id": (repo_id, "must be ORG/NAME (letters, digits, . _ -)"),
    "deployment_model_revision": (
        commit_id,
        "must be a full 40-hex commit (branch names, tags and short SHAs are refused)",
    ),
    "deployment_served_model_name": (
        lambda v: SERVED_NAME_RE.fullmatch(v) is not None,
        "must be a model name (letters, digits and ._/:@+-, no spaces or control characters)",
    ),
    "deployment_gateway_address": (
        floating_address,
        "must be empty or one IPv4 address of the gateway hosts' LAN (not loopback, multicast or 0.0.0.0)",
    ),
    "deployment_gateway_name": (
        lambda v: v == "" or HOST_NAME_RE.fullmatch(v) is not None,
        "must be empty or a DNS name (letters, digits, - and dots)",
    ),
    "deployment_usage_label_header": (
        lambda v: USAGE_HEADER_RE.fullmatch(v) is not None,
        "must be a header name that begins x-request-id- (then letters, digits and -): the SMG router forwards"
        " no other header of its own to the servers",
    ),
}


def deployment_problems(settings: dict) -> list[str]:
    problems = [
        f"{name} {rule}; got: {json.dumps(settings[name])}"
        for name, (fits, rule) in GRAMMARS.items()
        if name in settings and not (isinstance(settings[name], str) and fits(settings[name]))
    ]
    if "deployment_developer_lyceum_keys" in settings:
        problems += _lyceum_key_problems(settings["deployment_developer_lyceum_keys"])
    sizes = {n: settings[n] for n in SIZES if n in settings}
    bad = {n: v for n, v in sizes.items() if not POSITIVE_RE.fullmatch(str(v))}
    if bad:
        problems.append(f"{', '.join(bad)} must be whole numbers of at least 1; got: {json.dumps(list(bad.values()))}")
    elif len(sizes) == len(SIZES) and int(sizes["deployment_ep_size"]) != int(sizes["deployment_tp_size"]):
        problems.append(
            f"deployment_ep_size ({sizes['deployment_ep_size']}) must equal deployment_tp_size "
            f"({sizes['deployment_tp_size']}): SGLang's expert-parallel backends require it"
        )
    return problems


def _lyceum_key_problems(keys: object) -> list[str]:
    """Each developer's own Lyceum key: names as the gateway's, keys lk_... (never shown)."""
    name = "deployment_developer_lyceum_keys"
    if not isinstance(keys, dict):
        return [f"{name} must be a mapping of developer name to Lyceum key; got {type(keys).__name__}"]
    bad_names = [str(who) for who in keys if not DEVELOPER_RE.fullmatch(str(who))]
    bad_keys = sorted(
        str(who) for who, key in keys.items() if not (isinstance(key, str) and LYCEUM_KEY_RE.fullmatch(key))
    )
    values = [key for key in keys.values() if isinstance(key, str)]
    problems = []
    if bad_names:
        problems.append(f"{name}: developer names are letters, digits, ., _ and -; got: {json.dumps(bad_names)}")
    if bad_keys:
        problems.append(
            f"{name}: a Lyceum key is lk_ then printable characters, no space or line break "
            f"(values not shown); wrong for: {json.dumps(bad_keys)}"
        )
    if len(set(values)) != len(values):
        problems.append(f"{name} gives two developers the same key (values not shown): each has their own")
    return problems


class FilterModule:
    def filters(self) -> dict:
        return {"deployment_problems": deployment_problems}
