"""glm.fleet.disk_shortfalls: placing paths on filesystems and adding up what they need."""

from __future__ import annotations

from ansible_collections.glm.fleet.plugins.filter.disk import FilterModule, disk_shortfalls, parse_df

# `df --all --output=avail,target -B1` on a GPU node with a separate NVMe for /var/lib (GB = 10^9).
DF = """   Avail Mounted on
 50000000000 /
           - /proc
 100000000000 /var/lib
 3500000000000 /mnt/nvme data
"""


def test_parses_df_and_skips_pseudo_filesystems() -> None:
    assert parse_df(DF) == [
        {"mount": "/", "size_available": 50_000_000_000},
        {"mount": "/var/lib", "size_available": 100_000_000_000},
        {"mount": "/mnt/nvme data", "size_available": 3_500_000_000_000},
    ]


def test_enough_space_gives_no_shortfall() -> None:
    needs = [{"path": "/var/lib/docker", "min_free_gb": 60}, {"path": "/mnt/nvme data/hf", "min_free_gb": 340}]
    assert disk_shortfalls(needs, DF) == []


def test_paths_on_one_filesystem_add_up() -> None:
    needs = [{"path": "/var/lib/docker", "min_free_gb": 60}, {"path": "/var/lib/glm-fleet", "min_free_gb": 50}]
    assert disk_shortfalls(needs, DF) == [
        {"mount": "/var/lib", "paths": ["/var/lib/docker", "/var/lib/glm-fleet"], "need_gb": 110.0, "free_gb": 100.0}
    ]


def test_a_path_that_does_not_exist_yet_counts_on_its_parent_filesystem() -> None:
    (short,) = disk_shortfalls([{"path": "/opt/not/yet", "min_free_gb": 51}], DF)
    assert short["mount"] == "/"
    assert short["free_gb"] == 50.0


def test_a_mount_point_is_not_a_prefix_of_a_sibling() -> None:
    # /var/library is not under /var/lib.
    (short,) = disk_shortfalls([{"path": "/var/library", "min_free_gb": 60}], DF)
    assert short["mount"] == "/"


def test_the_filter_is_registered() -> None:
    assert FilterModule().filters()["disk_shortfalls"] is disk_shortfalls
