# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A command line as one systemd ExecStart= value: each word quoted and escaped for systemd."""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
---
name: systemd_exec
short_description: Words of a command line, quoted and escaped for a systemd Exec*= line
version_added: 0.1.0
description:
  - Returns the words joined by spaces, each one a single argument when systemd splits the line
    (systemd.service(5), "Command lines"), whatever it contains. A word of plain characters
    (letters, digits and C(_@+=:,./-)) stays as it is; any other word is put in single quotes, or,
    when it holds C(') or C(\\), in double quotes with C(\\) and C(") escaped. In every word C(%)
    becomes C(%%) (a specifier otherwise) and C($) becomes C($$) (an environment variable otherwise).
  - Refuses a word with a control character (a line break would end the Exec line and let the
    rest of the value become unit settings) and a value that is not a list of strings or numbers.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  _input:
    description: The command line, one list element per argument.
    type: list
    elements: raw
    required: true
"""

EXAMPLES = r"""
- name: The unit's command line
  ansible.builtin.debug:
    msg: "ExecStart={{ ['/usr/bin/docker', 'run', '--shm-size=64g', 'x y', '50%'] | glm.fleet.systemd_exec }}"
  # ExecStart=/usr/bin/docker run --shm-size=64g 'x y' '50%%'
"""

RETURN = r"""
_value:
  description: The words, quoted and escaped, joined by single spaces.
  type: str
"""

PLAIN = re.compile(r"[A-Za-z0-9_@+=:,./-]+")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def systemd_word(word: object) -> str:
    if isinstance(word, bool) or not isinstance(word, (str, int, float)):
        raise AnsibleFilterError(f"systemd_exec: an argument must be a string or a number; got {word!r}")
    text = str(word)
    if CONTROL.search(text):
        raise AnsibleFilterError(f"systemd_exec: an argument holds a control character: {text!r}")
    escaped = text.replace("%", "%%").replace("$", "$$")
    if PLAIN.fullmatch(text):
        return escaped
    if "'" not in text and "\\" not in text:
        return "'" + escaped + "'"
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_exec(words: object) -> str:
    if not isinstance(words, (list, tuple)):
        raise AnsibleFilterError(f"systemd_exec: expects a list of arguments; got {type(words).__name__}")
    return " ".join(systemd_word(w) for w in words)


class FilterModule:
    def filters(self) -> dict:
        return {"systemd_exec": systemd_exec}
