"""The lab's pure helpers: image recipe identity, fleet plan, Debian mirror discovery."""

from __future__ import annotations

import json
from pathlib import Path

import lab
import pytest
from glm_lab import image, nodes


def test_image_tag_follows_the_recipe(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "image").mkdir()
    (tmp_path / "image" / "packages.txt").write_text("# comment\nsystemd\npython3\n")
    (tmp_path / "image" / "customize.sh").write_text("echo one\n")
    monkeypatch.setattr(image, "HERE", tmp_path)
    first = lab.image_tag()
    assert lab.packages() == ["systemd", "python3"]
    (tmp_path / "image" / "customize.sh").write_text("echo two\n")
    assert lab.image_tag() != first
    assert first.startswith("glm-fleet-lab/debian12:")


def test_plan_has_the_gpu_nodes_asked_for_a_site_cache_a_second_gateway_and_one_laptop() -> None:
    nodes = lab.plan(3)
    assert [(n.name, n.group) for n in nodes] == [
        ("gpu-1", "gpu_nodes"),
        ("gpu-2", "gpu_nodes"),
        ("gpu-3", "gpu_nodes"),
        ("cache-1", "site_cache"),
        ("gateway-2", "gateway"),
        ("laptop-1", "developer_laptops"),
    ]
    assert len({n.address for n in nodes} | {lab.FRONT_DOOR_ADDRESS}) == len(nodes) + 1


def test_the_inventory_puts_both_gateways_behind_the_floating_address(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(nodes, "INVENTORY", tmp_path / "hosts.yml")
    nodes.write_inventory(lab.plan(1), tmp_path / "key", tmp_path / "known_hosts")
    written = json.loads((tmp_path / "hosts.yml").read_text().split("\n", 1)[1])
    children = written["all"]["children"]
    assert list(children["gateway"]["hosts"]) == ["cache-1", "gateway-2"]  # cache-1 first: it takes the address
    assert list(children["monitoring"]["hosts"]) == ["cache-1"]
    assert written["all"]["vars"]["deployment_gateway_address"] == lab.FRONT_DOOR_ADDRESS


@pytest.mark.parametrize("count", [0, 9, -1])
def test_up_refuses_a_fleet_size_out_of_range(count: int) -> None:
    with pytest.raises(lab.LabError, match=f"got: {count}"):
        lab.up(count)


def test_mirror_comes_from_the_deb822_sources(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GLM_LAB_DEBIAN_MIRROR", raising=False)
    apt = tmp_path / "apt"
    (apt / "sources.list.d").mkdir(parents=True)
    (apt / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.test/debian\nSuites: bookworm\n\n"
        "Types: deb\nURIs: http://mirror.test/debian-security\nSuites: bookworm-security\n"
    )
    real_path = image.Path
    monkeypatch.setattr(image, "Path", lambda p: real_path(str(p).replace("/etc/apt", str(apt))))
    assert lab.debian_mirror() == "http://mirror.test/debian"


def test_mirror_override_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLM_LAB_DEBIAN_MIRROR", "http://override.test/debian")
    assert lab.debian_mirror() == "http://override.test/debian"
