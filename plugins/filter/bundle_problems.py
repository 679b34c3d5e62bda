# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What is wrong with a developer's onboarding bundle (claude_code_bundle), its key never shown."""

from __future__ import annotations

import datetime
import json
import re
from typing import Any

from ansible_collections.glm.fleet.plugins.filter.gateway_key_records import parse_moment

DOCUMENTATION = r"""
---
name: bundle_problems
short_description: What is wrong with a developer's onboarding bundle, without showing its key
version_added: 0.1.0
description:
  - Checks C(claude_code_bundle), the bundle glm.fleet.gateway writes for each developer
    (C(<deployment_secrets_dir>/bundles/<name>.yml)) - its format, that it holds every field, and each field's
    shape. The endpoint's URL and the key are checked again with the profile's own checks.
  - A problem names the field and shows its value, except the keys' (C(auth_token), C(lyceum_auth_token)),
    which it never shows. A bundle whose key has expired (C(expires) in the past) is refused.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  _input:
    description: The bundle, C(claude_code_bundle).
    type: raw
    required: true
"""

EXAMPLES = r"""
problems: "{{ claude_code_bundle | glm.fleet.bundle_problems }}"
"""

RETURN = r"""
_value:
  description: One sentence per problem, each naming claude_code_bundle and the field; empty when all is well.
  type: list
  elements: str
"""

FORMAT = 1
FIELDS = ("format", "developer", "base_url", "ca_cert", "auth_token", "model", "context_length")
# When the key expires (UTC; null: never), and only in the bundle of a developer with a Lyceum key
# of their own, that key.
OPTIONAL = ("expires", "lyceum_auth_token")
SECRET = ("auth_token", "lyceum_auth_token")
DEVELOPER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
POSITIVE = re.compile(r"[1-9][0-9]{0,8}")
CERTIFICATE = re.compile(r"\s*(-----BEGIN CERTIFICATE-----\n[A-Za-z0-9+/=\n]+-----END CERTIFICATE-----\s*)+")
HOW = " (a bundle is the file glm.fleet.gateway wrote for you, given whole: -e @NAME.yml)"


def _shown(value: Any) -> str:
    return json.dumps(value, default=str)


def bundle_problems(bundle: Any) -> list[str]:
    if not isinstance(bundle, dict):
        kind = "a list" if isinstance(bundle, list) else type(bundle).__name__
        return [f"claude_code_bundle must be a mapping of {', '.join(FIELDS)}; got {kind}{HOW}"]
    missing = [field for field in FIELDS if field not in bundle]
    if missing:
        return [f"claude_code_bundle lacks {', '.join(missing)}; it holds: {', '.join(sorted(map(str, bundle)))}{HOW}"]
    if str(bundle["format"]) != str(FORMAT):
        return [f"claude_code_bundle.format must be {FORMAT} (the bundles this collection writes); got: "
                f"{_shown(bundle['format'])}"]  # fmt: skip
    problems = []
    unknown = sorted(set(map(str, bundle)) - set(FIELDS) - set(OPTIONAL))
    if unknown:
        problems.append(
            f"claude_code_bundle has unknown fields {_shown(unknown)} (known: {', '.join(FIELDS + OPTIONAL)})"
        )
    if not isinstance(bundle["developer"], str) or not DEVELOPER.fullmatch(bundle["developer"]):
        problems.append(f"claude_code_bundle.developer must be a developer's name; got: {_shown(bundle['developer'])}")
    for field in ("base_url", "model", "auth_token", *(f for f in ("lyceum_auth_token",) if f in bundle)):
        if not isinstance(bundle[field], str) or not bundle[field]:
            shown = "(not shown)" if field in SECRET else _shown(bundle[field])
            problems.append(f"claude_code_bundle.{field} must be a non-empty string; got: {shown}")
    if isinstance(bundle["context_length"], bool) or not POSITIVE.fullmatch(str(bundle["context_length"])):
        shown = _shown(bundle["context_length"])
        problems.append(f"claude_code_bundle.context_length must be a whole number of tokens; got: {shown}")
    problems += _expiry_problems(bundle.get("expires"))
    ca_cert = bundle["ca_cert"]
    if isinstance(ca_cert, str) and "PRIVATE KEY" in ca_cert:
        problems.append("claude_code_bundle.ca_cert holds a private key: a bundle carries the CA's certificate only")
    elif not isinstance(ca_cert, str) or (ca_cert and not CERTIFICATE.fullmatch(ca_cert)):
        head = ca_cert.strip().splitlines()[0] if isinstance(ca_cert, str) and ca_cert.strip() else ca_cert
        problems.append(
            "claude_code_bundle.ca_cert must be PEM certificates (or empty for the system's CAs); it begins: "
            f"{_shown(head)}"
        )
    return problems


def _expiry_problems(expires: Any) -> list[str]:
    """When the bundle's key expires: null (never) or a UTC moment still ahead."""
    if expires is None:
        return []
    moment = parse_moment(expires)
    if moment is None:
        return [f"claude_code_bundle.expires must be YYYY-MM-DDTHH:MM:SSZ (UTC) or null; got: {_shown(expires)}"]
    if moment <= datetime.datetime.now(datetime.timezone.utc):
        return [
            f"claude_code_bundle.expires is {expires}: this bundle's key has expired; ask your operator to renew it"
            " (they hand you a new bundle)"
        ]
    return []


class FilterModule:
    def filters(self) -> dict:
        return {"bundle_problems": bundle_problems}
