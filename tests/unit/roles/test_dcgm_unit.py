"""The DCGM exporter's unit and the URL the exporters role publishes for it, rendered with Ansible's
own templating from the role's defaults and vars: over TLS, the container gets the exporters' TLS
directory read-only at the same path and the exporter its web configuration; Prometheus is told https."""

from __future__ import annotations

import shlex
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from conftest import REPO

from ansible_collections.glm.fleet.plugins.action.stage_receipt import trusted

ROLE = REPO / "roles" / "exporters"


def rendered(**inventory: Any) -> tuple[list[str], str, str]:
    """The unit's ExecStart (argv), the web configuration's path and the published DCGM URL."""
    context = {
        **trusted(yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())),
        **trusted(yaml.safe_load((ROLE / "vars" / "main.yml").read_text())),
        "group_names": ["gpu_nodes"], "inventory_hostname": "gpu-1", "ansible_host": "10.0.0.11",
        "ansible_managed": "Managed by glm.fleet", **inventory,
    }  # fmt: skip
    templar = Templar(loader=DataLoader(), variables=context)
    unit = templar.template(trusted((ROLE / "templates" / "glm-dcgm-exporter.service.j2").read_text()))
    start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    web = templar.template(trusted("{{ __exporters_node_tls_files.web }}"))
    return shlex.split(start.removeprefix("ExecStart=")), web, templar.template(trusted("{{ __exporters_dcgm_url }}"))


def test_over_tls_the_exporter_reads_the_web_configuration_from_a_read_only_mount() -> None:
    argv, web, url = rendered()
    image = argv.index(yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())["exporters_dcgm_image"])
    directory = web.rsplit("/", 1)[0]
    assert argv[argv.index("-v") + 1] == f"{directory}:{directory}:ro"
    assert argv[image + 1 :] == ["--web-config-file", web]  # the exporter's own argument, after the image
    assert argv[argv.index("-p") + 1] == "0.0.0.0:9400:9400"
    assert url == "https://10.0.0.11:9400"


@pytest.mark.parametrize("inventory", [{"exporters_dcgm_tls": False}])
def test_without_tls_the_exporter_gets_no_web_configuration(inventory: dict[str, Any]) -> None:
    argv, _web, url = rendered(**inventory)
    assert "-v" not in argv
    assert "--web-config-file" not in argv
    assert url == "http://10.0.0.11:9400"


def test_the_units_header_says_what_answers_on_the_port() -> None:
    context = {
        **trusted(yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())),
        **trusted(yaml.safe_load((ROLE / "vars" / "main.yml").read_text())),
        "group_names": ["gpu_nodes"], "ansible_managed": "Managed by glm.fleet",
    }  # fmt: skip
    unit = Templar(loader=DataLoader(), variables=context).template(
        trusted((ROLE / "templates" / "glm-dcgm-exporter.service.j2").read_text())
    )
    lines = unit.splitlines()
    first = lines.index("# NVIDIA's DCGM exporter (glm.fleet.exporters): every GPU of the node, metrics on")
    assert lines[first : first + 2] == [
        "# NVIDIA's DCGM exporter (glm.fleet.exporters): every GPU of the node, metrics on",
        "# 0.0.0.0:9400/metrics for Prometheus, over HTTPS to a client certificate of the site CA only (its web"
        " configuration, read-only).",
    ]
