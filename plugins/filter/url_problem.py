# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What is wrong, if anything, with a URL that a token will be sent to."""

from __future__ import annotations

import ipaddress
import json
import re
from urllib.parse import urlsplit

DOCUMENTATION = r"""
---
name: url_problem
short_description: Why a URL is not fit to carry a token, or an empty string
version_added: 0.1.0
description:
  - Checks a URL the way it will be used, on its parsed parts, not on a pattern over the text. It
    must be C(http) or C(https) with a host name, hold no space or control character (a line break
    would end a line of an env file, a launcher or a header), and carry no user info
    (C(http://127.0.0.1@other.host) goes to C(other.host)).
  - Plain C(http) is allowed only to this machine (C(localhost), C(127.0.0.0/8), C(::1)) as the
    parsed host, so C(http://127.other.host) is not local, unless O(allow_insecure_http).
  - The message names the variable and shows the value JSON-escaped.
author:
  - glm.fleet contributors (@glm-fleet)
positional: variable, allow_insecure_http, allow_variable
options:
  _input:
    description: The URL.
    type: raw
    required: true
  variable:
    description: The variable that holds it, named in the message.
    type: str
    required: true
  allow_insecure_http:
    description: Accept plain C(http) to any host.
    type: bool
    default: false
  allow_variable:
    description: The variable that would allow plain C(http), named in the message.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Refuse a base URL that would send the token in clear
  ansible.builtin.assert:
    that: (claude_code_fleet_base_url | glm.fleet.url_problem('claude_code_fleet_base_url')) == ''
"""

RETURN = r"""
_value:
  description: An empty string when the URL is fit, else why not (naming the variable and the value).
  type: str
"""

CONTROL = re.compile(r"[\x00-\x20\x7f]")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def shape_problem(url: object) -> str:
    """What makes url no http(s) URL with a host of its own, as a phrase, or ''."""
    if not isinstance(url, str) or not url:
        return "must be an http(s) URL"
    if CONTROL.search(url):
        return "must hold no spaces or control characters"
    parts = urlsplit(url)
    try:
        host = parts.hostname
        parts.port  # noqa: B018 - parsing the port is the check
    except ValueError:
        return "has an invalid port"
    if parts.scheme not in ("http", "https") or not host:
        return "must be an http(s) URL with a host"
    if "@" in parts.netloc:
        return "must not carry user info (the part before @ is not the host)"
    return ""


def url_problem(url: object, variable: str, allow_insecure_http: bool = False, allow_variable: str = "") -> str:
    shape = shape_problem(url)
    if shape:
        return f"{variable} {shape}; got: {json.dumps(url)}"
    parts = urlsplit(str(url))
    if parts.scheme == "http" and not allow_insecure_http and not is_loopback(parts.hostname or ""):
        allow = f", or with {allow_variable}=true" if allow_variable else ""
        return (
            f"{variable}={url} must be an https URL (http only to this machine: localhost, 127.0.0.0/8, ::1{allow}): "
            "the token would cross the network in clear"
        )
    return ""


class FilterModule:
    def filters(self) -> dict:
        return {"url_problem": url_problem}
