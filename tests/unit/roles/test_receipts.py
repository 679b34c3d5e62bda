"""Each role that ends at its door on a standing receipt (glm.fleet.stage_receipt) looks, in that
receipt, at every path it writes: a path missing from `__<role>_receipt` would drift unseen, since a
converged node never reaches the task that writes it. The receipt and each writing task's path are
rendered with Ansible's own templating from the role's defaults and vars, for a GPU node of the lab's
shape (gpu-2 runs two servers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from conftest import REPO
from jinja2 import meta

from ansible_collections.glm.fleet.plugins.action.stage_receipt import trusted

# The roles with a receipt, and the hosts' variables they are rendered for.
ROLES = sorted(
    p.parent.parent.name
    for p in (REPO / "roles").glob("*/vars/main.yml")
    if f"__{p.parent.parent.name}_receipt" in (yaml.safe_load(p.read_text()) or {})
)
# The modules that write a file or directory on the node, and the argument naming it.
WRITERS = {
    "ansible.builtin.copy": "dest",
    "ansible.builtin.template": "dest",
    "ansible.builtin.file": "path",
    "ansible.builtin.unarchive": "dest",
    "glm.fleet.apt_signing_key": "dest",
    "glm.fleet.file_snapshot": "dest",
}
# Written on the node for a moment, not left there: the JIT caches packed into a temporary file
# (ansible.builtin.tempfile) on their way to the controller.
# Files a run makes and removes within it (a temporary file's mode for its fetch), outside any receipt.
TRANSIENT = {("sglang_server", "Let the login user read the packed kernels")}
TWO_SERVERS = [
    {"name": "pareto-glm53-flash", "port": 18080, "gpus": [0, 1, 2, 3]},
    {"name": "pareto-glm53-flash-2", "port": 18081, "gpus": [4, 5, 6, 7]},
]


def load(path: Path) -> Any:
    """A YAML file of the role, its strings trusted as templates, as Ansible trusts a role's files."""
    return trusted(yaml.safe_load(path.read_text()))


def variables(role: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "inventory_hostname": "gpu-2",
        "ansible_host": "10.0.0.12",
        "group_names": ["gpu_nodes"],
        "groups": {"all": ["gpu-2"], "gpu_nodes": ["gpu-2"]},
        "hostvars": {},
        "ansible_check_mode": False,
        "ansible_facts": {},
    }
    # What glm.fleet.tls_certificate returned on the controller (the files the TLS tasks copy from).
    issued = {"ca_cert": "/ctl/ca/ca.pem", "cert": "/ctl/ca/x.pem", "key": "/ctl/ca/x.key", "changed": False}
    out.update(
        {
            f"__{name}_issued": issued
            for name in ("sglang_server", "gateway_client", "gateway_metrics", "monitoring_client", "exporters")
        }
    )
    for name in ("deployment", role):
        for part in ("defaults", "vars"):
            path = REPO / "roles" / name / part / "main.yml"
            if path.is_file():
                out.update(load(path) or {})
    if role == "claude_code":  # the directories preflight.yml resolves from the developer's home
        home = "/home/dev"
        out.update(
            ansible_facts={"env": {"HOME": home}},
            inventory_hostname="laptop-1",
            group_names=["developer_laptops"],
            deployment_gateway_url="https://gw.example:8443",
            claude_code_fleet_ca_cert="-----BEGIN CERTIFICATE-----",
            claude_code_install_cli=True,
            __claude_code_root=f"{home}/.config/glm-fleet/claude",
            __claude_code_bin=f"{home}/.local/bin",
            __claude_code_prefix=f"{home}/.local",
        )
    if role == "gateway":  # with the floating address: keepalived's configuration too
        out.update(deployment_gateway_address="10.0.0.60", groups={"all": ["gw-1"], "gateway": ["gw-1"]})
        out.update(inventory_hostname="gw-1", group_names=["gateway"])
    if role == "sglang_server":  # every file it can write: two servers, a key and an environment
        out.update(
            sglang_server_instances=TWO_SERVERS,
            sglang_server_api_key="k" * 32,
            sglang_server_env={"SGLANG_ENABLE_JIT_DEEPGEMM": "1"},
        )
    return out


class AnyFilter(dict):
    """Every filter and test name known, for reading the names a condition uses (not running it)."""

    def __contains__(self, name: object) -> bool:
        return True

    def get(self, name: object, default: object = None) -> object:
        return super().get(name) or (lambda *args, **kwargs: None)


NAMES = jinja2.Environment()  # noqa: S701 - parses conditions only, renders nothing
NAMES.filters = AnyFilter(NAMES.filters)
NAMES.tests = AnyFilter(NAMES.tests)


def runs(templar: Templar, task: dict[str, Any], scope: dict[str, Any], context: dict[str, Any]) -> bool:
    """Whether the task's `when` holds for this host. A clause is evaluated only where every name in
    it is a setting of the role (or the loop's item); one on what only the run knows (a registered
    result, a task's vars over one) counts as holding."""
    clauses = task.get("when", [])
    known = set(context) | {(task.get("loop_control") or {}).get("loop_var", "item")}
    for clause in clauses if isinstance(clauses, list) else [clauses]:
        names = meta.find_undeclared_variables(NAMES.parse("{{ " + str(clause) + " }}"))
        if names <= known and not templar.copy_with_new_env(available_variables=scope).evaluate_conditional(clause):
            return False
    return True


def included_loops(role: str) -> dict[str, tuple[str, Any]]:
    """{tasks file: (loop_var, loop)} for each file the role includes in a loop (a task per profile, say)."""
    out: dict[str, tuple[str, Any]] = {}
    for path in sorted((REPO / "roles" / role / "tasks").glob("*.yml")):
        for task in load(path) or []:
            include = task.get("ansible.builtin.include_tasks")
            if include and "loop" in task:
                name = include["file"] if isinstance(include, dict) else include
                out[name] = ((task.get("loop_control") or {}).get("loop_var", "item"), task["loop"])
    return out


def writing_tasks(role: str) -> list[tuple[str, dict[str, Any]]]:
    """(file, task) for each task of the role that writes a path, blocks' rescue and always included."""
    found: list[tuple[str, dict[str, Any]]] = []

    def walk(path: Path, tasks: list[dict[str, Any]]) -> None:
        for task in tasks or []:
            for key in ("block", "rescue", "always"):
                walk(path, task.get(key) or [])
            if WRITERS.keys() & task.keys():
                found.append((path.name, task))

    for path in sorted((REPO / "roles" / role / "tasks").glob("*.yml")):
        walk(path, load(path) or [])
    return found


def rendered_paths(templar: Templar, task: dict[str, Any], context: dict[str, Any]) -> list[str]:
    """The paths a task writes: once per server where it loops over them, once per item of a list."""
    module = next(iter(WRITERS.keys() & task.keys()))
    args = task[module]
    target = args.get(WRITERS[module], args.get("dest"))  # file's path, or its alias dest (a link)
    if args.get("state") == "absent" or "delegate_to" in task:
        return []  # removes a path, or writes on another host
    loop_var = (task.get("loop_control") or {}).get("loop_var", "item")
    items = templar.copy_with_new_env(available_variables=context).template(task["loop"]) if "loop" in task else [None]
    paths = []
    for item in items:
        scope = {**context, **(task.get("vars") or {}), **({loop_var: item} if item is not None else {})}
        if not runs(templar, task, scope, context):
            continue
        paths.append(str(templar.copy_with_new_env(available_variables=scope).template(target)))
    return paths


@pytest.mark.parametrize("role", ROLES)
def test_the_receipt_looks_at_every_path_the_role_writes(role: str) -> None:
    context = variables(role)
    templar = Templar(loader=DataLoader(), variables=context)
    receipt = templar.template(context[f"__{role}_receipt"])
    whole = [*receipt.get("files", []), *receipt.get("dirs", [])]
    under = [*receipt.get("trees", []), *receipt.get("listings", [])]
    missing = []
    loops = included_loops(role)
    for name, task in writing_tasks(role):
        if (role, task.get("name")) in TRANSIENT:
            continue
        loop_var, loop = loops.get(name, (None, [None]))
        items = templar.copy_with_new_env(available_variables=context).template(loop)
        paths = [
            path
            for item in items
            for path in rendered_paths(templar, task, {**context, **({loop_var: item} if loop_var else {})})
        ]
        for path in paths:
            if path not in whole and not any(path == top or path.startswith(top.rstrip("/") + "/") for top in under):
                missing.append(f"{name}: {task.get('name')}: {path}")
    assert missing == [], f"{role}: paths written but not in __{role}_receipt: {missing}"


@pytest.mark.parametrize("source", ["hub", "mirror"])
def test_the_weights_receipt_follows_where_the_node_downloads_from(source: str) -> None:
    context = variables("model_weights")
    if source == "mirror":
        context["model_weights_mirror_url"] = "https://cache-1:8081"
    receipt = Templar(loader=DataLoader(), variables=context).template(context["__model_weights_receipt"])
    client = {"/opt/glm-fleet/hf/bin/python", "/opt/glm-fleet/hf/requirements.txt"}
    assert (client <= set(receipt["files"])) is (source == "hub"), receipt


def test_the_roles_with_a_receipt() -> None:
    assert ROLES == [
        "claude_code", "exporters", "gateway", "model_weights", "monitoring", "nvidia_container_toolkit",
        "sglang_image", "sglang_server", "site_cache",
    ]  # fmt: skip
