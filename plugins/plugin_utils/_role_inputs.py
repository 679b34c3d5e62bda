# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The inputs of one of this collection's roles on one host, as one digest (controller side): the
role's code (its directory, those of the roles it depends on, and the collection's plugins) and the
values of its options (meta/argument_specs.yml, every entry point: the host's value where the
inventory or the run sets one, else the option's default, which equals the role's defaults).

What the host is (its distribution, say) is not an input: a receipt looks at it where a role
depends on it (/etc/os-release), so a run with --tags, which gathers no facts, compares the same
digest. Options marked no_log are left out unless the role asks for them (receipt_secrets): a role
that only downloads with a secret does not run again for a changed one; a role that writes one into
a file (the servers' API keys) asks for them, so that a new key reaches the node. A role whose inputs
include what no option holds (the scrape targets other hosts published, keys generated on the
controller) names them in `__<role>_receipt_inputs` (receipt_inputs). All enter the one sha256 over
all the inputs, which is all that is written (root-only) or shown."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import yaml

NAMESPACE = "glm.fleet."
# libyaml's loader where PyYAML has it: a read of several stages parses each role's specs once, and
# the pure-Python loader took most of that time.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=512)
def _read(path: Path, mtime_ns: int, size: int) -> bytes:
    """A file's bytes, once per version of it (its mtime and size are in the key) and process: the
    roles of several stages share the deployment role and the collection's plugins."""
    del mtime_ns, size
    return path.read_bytes()


def read_bytes(path: Path) -> bytes:
    st = path.stat()
    return _read(path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=128)
def _parse(path: Path, mtime_ns: int, size: int) -> object:
    del mtime_ns, size
    return yaml.load(path.read_bytes(), Loader=LOADER)  # noqa: S506 - the safe loader, in C where there is one


def load_yaml(path: Path) -> object:
    """A YAML file's data, parsed once per version of it and process; callers do not change it."""
    st = path.stat()
    return _parse(path, st.st_mtime_ns, st.st_size)


def collection_root() -> Path:
    """The collection's directory (this file is plugins/module_utils/ in it)."""
    return Path(__file__).resolve().parents[2]


def closure(root: Path, role: str) -> list[str]:
    """The role and the collection's roles it depends on (meta/main.yml), depth first, each once."""
    out: list[str] = []

    def visit(name: str) -> None:
        if name in out:
            return
        meta_path = root / "roles" / name / "meta" / "main.yml"
        if not meta_path.is_file():
            raise ValueError(f"glm.fleet has no role {name!r} ({meta_path} is missing)")
        meta = load_yaml(meta_path) or {}
        out.append(name)
        for dep in meta.get("dependencies") or []:
            dep_name = dep.get("role", "") if isinstance(dep, dict) else str(dep)
            if dep_name.startswith(NAMESPACE):
                visit(dep_name[len(NAMESPACE) :])

    visit(role)
    return out


def options(root: Path, role: str) -> dict[str, dict]:
    """The role's options as argument_specs.yml declares them, over all its entry points (an option
    that several declare has the same default in each: the defaults file is one)."""
    specs = load_yaml(root / "roles" / role / "meta" / "argument_specs.yml") or {}
    out: dict[str, dict] = {}
    for entry in (specs.get("argument_specs") or {}).values():
        out.update((entry or {}).get("options") or {})
    return out


def defaults(root: Path, role: str) -> dict[str, object]:
    """The role's defaults/main.yml: the owner of each default. The spec repeats each one but those
    it describes in words (a number derived from another variable cannot be a typed default)."""
    path = root / "roles" / role / "defaults" / "main.yml"
    return (load_yaml(path) or {}) if path.is_file() else {}


def receipt_secrets(root: Path, role: str) -> bool:
    """Whether the role's receipt covers its secrets: `__<role>_receipt_secrets: true` in its
    vars/main.yml, the role's own word (it writes a secret into a file)."""
    path = root / "roles" / role / "vars" / "main.yml"
    data = (load_yaml(path) or {}) if path.is_file() else {}
    return data.get(f"__{role}_receipt_secrets") is True


def receipt_inputs(root: Path, role: str) -> bool:
    """Whether the role's receipt takes inputs the role computes before its door (what no option holds:
    other hosts' published facts read once, files on the controller): `__<role>_receipt_inputs` in its
    vars/main.yml, a mapping templated at the door. Such a receipt is read at the role's own door only,
    where those values are known."""
    path = root / "roles" / role / "vars" / "main.yml"
    data = (load_yaml(path) or {}) if path.is_file() else {}
    return f"__{role}_receipt_inputs" in data


def code_digest(root: Path, roles: list[str]) -> str:
    """sha256 over the roles' files and the collection's plugins, path and bytes."""
    digest = hashlib.sha256()
    paths = [p for role in roles for p in sorted((root / "roles" / role).rglob("*"))]
    paths += sorted((root / "plugins").rglob("*"))
    for path in paths:
        if path.is_file() and "__pycache__" not in path.parts:
            data = read_bytes(path)
            digest.update(f"{path.relative_to(root)}\0{len(data)}\0".encode())
            digest.update(data)
    return digest.hexdigest()


def settings(
    root: Path, roles: list[str], value: Callable[[str, object], object], secrets: bool = False
) -> dict[str, object]:
    """{option: value} over the roles' options, the no_log ones only with `secrets`; `value(name,
    default)` gives the host's value of an option (its default when nothing sets it), templated."""
    out: dict[str, object] = {}
    for role in roles:
        owned = defaults(root, role)
        for name, spec in sorted(options(root, role).items()):
            if secrets or not (spec or {}).get("no_log"):
                out[name] = value(name, (spec or {}).get("default", owned.get(name)))
    return out


def inputs_digest(code: str, values: dict[str, object]) -> str:
    """The digest a receipt is compared by."""
    doc = {"code": code, "settings": values}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()
