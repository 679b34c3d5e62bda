"""Every file of the distribution that a role replaces whole is listed for glm.fleet.foreign_files
(its first-run refusal), and what the role writes there says glm.fleet in its first five lines, so
that the role's own file is never taken for a site's."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from conftest import REPO

ROLES = ["monitoring", "exporters", "gateway", "site_cache"]
PACKAGES_FILES = ("/etc/default/", "/etc/prometheus/prometheus.yml", "/etc/prometheus/alertmanager.yml",
                  "/etc/prometheus/blackbox.yml", "/etc/docker/registry/", "/etc/keepalived/")  # fmt: skip
ANSIBLE_MANAGED_LINES = 3  # `{{ ansible_managed | comment }}`: "#", "# Ansible managed", "#"


def tasks(role: str) -> list[dict[str, Any]]:
    found = []

    def walk(items: list[dict[str, Any]]) -> None:
        for task in items or []:
            found.append(task)
            for key in ("block", "rescue", "always"):
                walk(task.get(key, []))

    for path in sorted((REPO / "roles" / role / "tasks").glob("*.yml")):
        walk(yaml.safe_load(path.read_text()))
    return found


def resolve(text: str, role_vars: dict[str, Any]) -> str:
    """A path as written in a task, with `{{ __var }}` of the role's vars put in."""
    return re.sub(r"\{\{ *(__\w+) *\}\}", lambda m: str(role_vars.get(m.group(1), m.group(0))), text)


def replaced(role: str, role_vars: dict[str, Any]) -> set[str]:
    """The paths the role's list for foreign_files names (a templated list: its literal paths and variables)."""
    listing = role_vars[f"__{role}_replaced_files"]
    if isinstance(listing, list):
        return {resolve(str(item["path"]), role_vars) for item in listing}
    paths = set(re.findall(r"'path': '(/[^']+)'", listing))
    paths |= {str(role_vars[name]) for name in re.findall(r"'path': (__\w+)", listing)}
    return paths


@pytest.mark.parametrize("role", ROLES)
def test_what_the_role_writes_over_a_packages_file_says_glm_fleet(role: str) -> None:
    role_vars = yaml.safe_load((REPO / "roles" / role / "vars" / "main.yml").read_text())
    listed = replaced(role, role_vars)
    assert listed, role
    written: dict[str, str] = {}
    for task in tasks(role):
        for module in ("ansible.builtin.copy", "ansible.builtin.template"):
            args = task.get(module)
            if not isinstance(args, dict) or "dest" not in args:
                continue
            dest = resolve(str(args["dest"]), role_vars)
            # A distribution's defaults file, or a file of a package's own directory in /etc, is a package's.
            if dest.startswith(PACKAGES_FILES):
                assert dest in listed, (role, dest, "replaced but not listed for glm.fleet.foreign_files")
            if dest not in listed:
                continue
            if "content" in args:
                head = str(args["content"]).splitlines()[:5]
            else:
                template = REPO / "roles" / role / "templates" / str(args["src"])
                lines = template.read_text().splitlines()
                managed = lines[0].startswith("{{ ansible_managed")
                head = ["#"] * ANSIBLE_MANAGED_LINES + lines[1:3] if managed else lines[:5]
            written[dest] = "\n".join(head[:5])
    # nginx's default site is only disabled (site_cache), never written.
    assert set(written) == listed - {"/etc/nginx/sites-available/default"}, (role, sorted(written), sorted(listed))
    for dest, head in written.items():
        assert "glm.fleet" in head, (role, dest, head)


def test_a_packages_files_that_roles_replace_are_its_conffiles() -> None:
    """The packages named are those that install the files (Debian 12's conffiles, as checked)."""
    conffiles = {
        "prometheus": {"/etc/default/prometheus", "/etc/prometheus/prometheus.yml"},
        "prometheus-alertmanager": {"/etc/default/prometheus-alertmanager", "/etc/prometheus/alertmanager.yml"},
        "prometheus-blackbox-exporter": {"/etc/default/prometheus-blackbox-exporter", "/etc/prometheus/blackbox.yml"},
        "prometheus-node-exporter": {"/etc/default/prometheus-node-exporter"},
        "mtail": {"/etc/default/mtail"},
        "docker-registry": {"/etc/docker/registry/config.yml"},
        "nginx-common": {"/etc/nginx/sites-available/default"},
    }
    for role in ROLES:
        role_vars = yaml.safe_load((REPO / "roles" / role / "vars" / "main.yml").read_text())
        listing = role_vars[f"__{role}_replaced_files"]
        items = listing if isinstance(listing, list) else []
        for item in items:
            path = resolve(str(item["path"]), role_vars)
            assert path in conffiles[item["package"]], (role, path, item["package"])
        text = listing if isinstance(listing, str) else ""
        for path, package in re.findall(r"'path': '(/[^']+)', 'package': '([^']+)'", text):
            assert path in conffiles[package], (role, path, package)
        for name, package in re.findall(r"'path': (__\w+), 'package': '([^']+)'", text):
            assert str(role_vars[name]) in conffiles[package], (role, name, package)


def test_keepalived_has_no_conffile_to_compare_with() -> None:
    role_vars = yaml.safe_load((REPO / "roles" / "gateway" / "vars" / "main.yml").read_text())
    assert "{'path': __gateway_keepalived_conf, 'package': none}" in role_vars["__gateway_replaced_files"]


def test_every_role_reads_its_list_at_its_door_on_its_first_run() -> None:
    for role in ROLES:
        main = (REPO / "roles" / role / "tasks" / "main.yml").read_text()
        assert f'files: "{{{{ __{role}_replaced_files }}}}"' in main, role
        assert "is match('no receipt')" in main, role
        first_change = "import_tasks: node_exporter.yml" if role == "exporters" else "import_tasks: install.yml"
        assert main.index("glm.fleet.foreign_files") < main.index(first_change), role
