"""Write docs/variables.md, every role's variables, from the roles' meta/argument_specs.yml.

    python tools/variables_doc.py          rewrite docs/variables.md
    python tools/variables_doc.py --check  exit 1 when docs/variables.md differs from the specs

The specs are the one source (Ansible checks them before a role runs, and a unit test checks that
they equal the roles' defaults); this page is derived from them, so it cannot drift.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
OUTPUT = REPO / "docs" / "variables.md"
MARKUP = re.compile(r"\b([CIMORV])\(([^)]*)\)")
# The deployment first (the others derive from it), then the roles in site.yml's order.
ORDER = ["deployment", "preflight", "nvidia_container_toolkit", "site_cache", "model_weights", "sglang_image",
         "sglang_server", "claude_code"]  # fmt: skip


def markup(match: re.Match[str]) -> str:
    """Ansible's markup as Markdown: I() in italics, R(text,label) as its text, the others as code."""
    kind, body = match.group(1), match.group(2)
    if kind == "I":
        return f"*{body}*"
    return f"`{body.split(',', 1)[0] if kind == 'R' else body}`"


def plain(text: object) -> str:
    if isinstance(text, list):
        text = " ".join(str(t) for t in text)
    text = MARKUP.sub(markup, str(text))
    return " ".join(text.split()).replace("|", "\\|")


def shown_default(option: dict, derived: object = None) -> str:
    """The spec's default; for an option whose default is derived (a template in the role's
    defaults/main.yml that the spec describes in words, as a typed default cannot be a template),
    that template."""
    if "default" not in option and derived is None:
        return "(required)" if option.get("required") else ""
    value = option.get("default", derived)
    text = value if isinstance(value, str) else json.dumps(value)
    if len(text) > 100:
        return "see `defaults/main.yml`"
    return f"`{text}`" if text != "" else '`""`'


def roles() -> list[str]:
    found = sorted(p.parent.parent.name for p in (REPO / "roles").glob("*/meta/argument_specs.yml"))
    return [r for r in ORDER if r in found] + [r for r in found if r not in ORDER]


def render() -> str:
    out = [
        "# Role variables",
        "",
        "Generated from each role's `meta/argument_specs.yml` by `tools/variables_doc.py` (`make docs`);",
        "a unit test fails when this page and the specs differ. What the roles do: [roles.md](roles.md).",
        "",
    ]
    for role in roles():
        specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
        defaults_file = REPO / "roles" / role / "defaults" / "main.yml"
        defaults = (yaml.safe_load(defaults_file.read_text()) or {}) if defaults_file.exists() else {}
        for entry, spec in specs.items():
            title = f"glm.fleet.{role}" + ("" if entry == "main" else f" (`tasks_from: {entry}`)")
            out += [f"## {title}", "", plain(spec.get("short_description", "")), ""]
            options = spec.get("options") or {}
            if entry != "main" and options == (specs.get("main") or {}).get("options"):
                out += [f"The same variables as `glm.fleet.{role}`.", ""]
                continue
            if not options:
                out += ["No variables.", ""]
                continue
            out += ["| Variable | Type | Default | Meaning |", "| --- | --- | --- | --- |"]
            for name, option in options.items():
                meaning = plain(option.get("description", ""))
                default = shown_default(option, defaults.get(name))
                out.append(f"| `{name}` | {option.get('type', 'str')} | {default} | {meaning} |")
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if OUTPUT.read_text() != text:
            print(f"{OUTPUT.relative_to(REPO)} differs from the roles' argument specs: run `make docs`")
            return 1
        return 0
    OUTPUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
