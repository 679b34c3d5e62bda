# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A role's receipt on a host: what the role left there when it last converged (files, packages,
units, images, trees of files), observed again in one read to tell whether the host still holds it.

A receipt is {"digest": <the role's inputs>, "observe": <what to look at>, "observed": <what was
there>}. It is current when the digest is the one the controller computes now and a fresh look at
the same things finds them as recorded; anything else names what differs."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable
from typing import Any

from ansible_collections.glm.fleet.plugins.module_utils._docker_api import DockerError, Engine
from ansible_collections.glm.fleet.plugins.module_utils._dpkg import DPKG_QUERY, held, installed_versions

KINDS = ("files", "dirs", "packages", "units", "images", "trees", "listings")
UNIT_PROPERTIES = ("UnitFileState", "ActiveState")
CHUNK = 1 << 20


def file_state(path: str) -> dict | None:
    """sha256, mode and ownership of a file (its target, for a link), or None when there is none."""
    try:
        st = os.stat(path)
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(CHUNK):
                digest.update(chunk)
    except FileNotFoundError:
        return None
    return {"sha256": digest.hexdigest(), "mode": f"{stat.S_IMODE(st.st_mode):04o}", "uid": st.st_uid, "gid": st.st_gid}


def dir_state(path: str) -> dict | None:
    """Mode and ownership of a directory; None when there is none (or something else is there)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None
    return {"mode": f"{stat.S_IMODE(st.st_mode):04o}", "uid": st.st_uid, "gid": st.st_gid}


def tree_state(root: str) -> str | None:
    """One sha256 over every regular file under `root` (links followed): its path, size, mtime, change
    time and inode, as a quick verification trusts them; None when `root` is not a directory."""
    if not os.path.isdir(root):
        return None
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            try:
                st = os.stat(path)
            except FileNotFoundError:  # a dangling link: its name is what is recorded
                digest.update(f"{os.path.relpath(path, root)}\0dangling\n".encode())
                continue
            line = f"{os.path.relpath(path, root)}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\n"
            digest.update(line.encode())
    return digest.hexdigest()


def listing(root: str) -> list[str] | None:
    """The names in a directory, sorted; None when it is not one."""
    try:
        return sorted(os.listdir(root))
    except (FileNotFoundError, NotADirectoryError):
        return None


def package_states(names: list[str], dpkg_output: str) -> dict[str, dict | None]:
    """{name: {"version", "held"}} from DPKG_QUERY's output, None for a package not installed."""
    versions = installed_versions(dpkg_output)
    holds = set(held(dpkg_output))
    return {
        name: {"version": ",".join(sorted(versions[name])), "held": name in holds} if name in versions else None
        for name in names
    }


def unit_states(names: list[str], show_output: str) -> dict[str, dict]:
    """{unit: {property: value}} from `systemctl show --property=Id,...` over the units, in order
    (one block per unit, separated by blank lines)."""
    blocks = show_output.strip("\n").split("\n\n") if show_output.strip() else []
    out: dict[str, dict] = {}
    for name, block in zip(names, blocks, strict=False):
        props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        out[name] = {key: props.get(key, "") for key in UNIT_PROPERTIES}
    for name in names[len(blocks) :]:
        out[name] = dict.fromkeys(UNIT_PROPERTIES, "")
    return out


def image_states(refs: list[str], engine: Engine) -> dict[str, str | None]:
    """{reference: image id} as the engine holds them, None for one it lacks."""
    out: dict[str, str | None] = {}
    for ref in refs:
        try:
            data = engine.inspect(ref)
        except DockerError as err:
            out[ref] = f"engine error: {err}"
            continue
        out[ref] = None if data is None else str(data.get("Id"))
    return out


def observe(spec: dict, run: Callable[[list[str]], str], engine: Engine | None = None) -> dict:
    """A fresh look at everything `spec` names: {kind: {name: state}}. `run` runs a command and
    returns its output (dpkg-query, systemctl); the engine is asked only when images are named."""
    out: dict[str, Any] = {}
    if spec.get("files"):
        out["files"] = {path: file_state(path) for path in spec["files"]}
    if spec.get("dirs"):
        out["dirs"] = {path: dir_state(path) for path in spec["dirs"]}
    if spec.get("packages"):
        out["packages"] = package_states(spec["packages"], run(DPKG_QUERY))
    if spec.get("units"):
        units = list(spec["units"])
        show = run(["systemctl", "show", "--property=Id," + ",".join(UNIT_PROPERTIES), "--", *units])
        out["units"] = unit_states(units, show)
    if spec.get("images"):
        out["images"] = image_states(spec["images"], engine or Engine())
    if spec.get("trees"):
        out["trees"] = {root: tree_state(root) for root in spec["trees"]}
    if spec.get("listings"):
        out["listings"] = {root: listing(root) for root in spec["listings"]}
    return out


def spec_problem(spec: object) -> str | None:
    """Why an observation spec is not {kind: [str, ...]} over the known kinds, or None."""
    if not isinstance(spec, dict):
        return f"observe must be a mapping of {', '.join(KINDS)} to lists; got {type(spec).__name__}"
    unknown = sorted(set(spec) - set(KINDS))
    if unknown:
        return f"observe has unknown kinds {unknown}; known: {', '.join(KINDS)}"
    for kind, names in spec.items():
        if not isinstance(names, list) or not all(isinstance(n, str) and n and n.isprintable() for n in names):
            return f"observe.{kind} must be a list of non-empty printable strings; got {json.dumps(names)[:200]}"
    for kind in ("files", "dirs", "trees", "listings"):
        relative = [p for p in spec.get(kind, []) if not p.startswith("/")]
        if relative:
            return f"observe.{kind} must be absolute paths; got {relative}"
    return None


def differences(recorded: dict, observed: dict) -> list[str]:
    """What differs between two observations of the same spec, one phrase each."""
    out: list[str] = []
    for kind in KINDS:
        old, new = recorded.get(kind, {}), observed.get(kind, {})
        for name in sorted(set(old) | set(new)):
            if old.get(name) != new.get(name):
                out.append(f"{kind[:-1]} {name}: {describe(old.get(name))} -> {describe(new.get(name))}")
    return out


def describe(state: object) -> str:
    if state is None:
        return "absent"
    if isinstance(state, dict):
        return " ".join(f"{k}={str(v)[:16]}" for k, v in sorted(state.items()))
    if isinstance(state, list):
        return f"{len(state)} entries"
    return str(state)[:24]


def staleness(receipt: dict | None, digest: str, observed: dict | None) -> str | None:
    """Why a receipt does not stand for the host now (None when it does): no receipt, inputs that
    changed (settings, the collection), or what the fresh look found different."""
    if receipt is None:
        return "no receipt: the role has not converged on this host with this collection"
    if receipt.get("digest") != digest:
        return "the role's settings or code changed since its receipt"
    diffs = differences(receipt.get("observed", {}), observed or {})
    if diffs:
        return (
            "changed since its receipt: "
            + "; ".join(diffs[:5])
            + (f" (and {len(diffs) - 5} more)" if len(diffs) > 5 else "")
        )
    return None


def shown(receipt: dict | None, other: dict | None) -> str:
    """A receipt as `--diff` shows it beside `other` (the receipt before or after it): a line for its
    inputs and for each thing it looks at. Neither the inputs' digest nor a file's hash is shown (the
    servers' key files are among the files): whether they differ from `other`'s is."""
    if receipt is None:
        return ""
    other = other or {}
    inputs = "the same" if receipt.get("digest") == other.get("digest") else "other settings or code"
    lines = [f"inputs: {inputs}"]
    mine, theirs = receipt.get("observed", {}), other.get("observed", {})
    for kind in KINDS:
        for name, state in sorted(mine.get(kind, {}).items()):
            was, seen = theirs.get(kind, {}).get(name), state
            if kind == "files" and state is not None:
                same = isinstance(was, dict) and was.get("sha256") == state.get("sha256")
                seen = {**{k: v for k, v in state.items() if k != "sha256"}, "content": "same" if same else "other"}
            elif kind == "trees" and state is not None:
                seen = "the same files" if was == state else "other files"
            lines.append(f"{kind[:-1]} {name}: {describe(seen) if kind != 'listings' else seen}")
    return "\n".join(lines) + "\n"


def render(digest: str, spec: dict, observed: dict) -> bytes:
    """A receipt's bytes: stable for the same content, so an unchanged receipt is not rewritten."""
    return (
        json.dumps({"digest": digest, "observe": spec, "observed": observed}, sort_keys=True, indent=1) + "\n"
    ).encode()


def parse(data: bytes | None) -> dict | None:
    """A receipt read back; None for a missing or unreadable one (a role to run again)."""
    if data is None:
        return None
    try:
        receipt = json.loads(data)
    except ValueError:
        return None
    if not isinstance(receipt, dict) or spec_problem(receipt.get("observe")) is not None:
        return None
    return receipt
