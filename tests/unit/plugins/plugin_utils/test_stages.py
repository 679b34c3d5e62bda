"""One read for several stages: which a host goes through, and the groups it joins for them."""

from __future__ import annotations

import pytest

from ansible_collections.glm.fleet.plugins.plugin_utils import _stages

SITE = [
    {"group": "glm_fleet_stage_toolkit", "roles": ["nvidia_container_toolkit"]},
    {"group": "glm_fleet_stage_artifacts", "roles": ["sglang_image", "model_weights"]},
    {"group": "glm_fleet_stage_exporters", "roles": ["monitoring-exporters"]},
    {"group": "glm_fleet_stage_server", "roles": ["sglang_server"], "secrets": True},
]


def test_a_host_whose_receipts_all_stand_joins_the_current_group_under_the_group_read() -> None:
    stages = _stages.parse(SITE)
    assert _stages.due(stages, {}) == {}
    assert _stages.dynamic_group("read", stages, {}) == ("read_current", ["read"])
    assert [stage.secrets for stage in stages] == [False, False, False, True]


def test_a_stale_receipt_sends_the_host_through_its_stage_alone_when_it_is_the_last() -> None:
    stages = _stages.parse(SITE[:3])
    reasons = _stages.due(
        stages, {"monitoring-exporters": "unit prometheus-node-exporter.service: ActiveState=inactive"}
    )
    assert reasons == {
        "glm_fleet_stage_exporters": "monitoring-exporters: unit prometheus-node-exporter.service: ActiveState=inactive"
    }
    assert _stages.dynamic_group("read", stages, reasons) == ("read_2", ["read", "glm_fleet_stage_exporters"])


def test_an_earlier_stage_due_sends_the_host_through_every_later_one() -> None:
    stages = _stages.parse(SITE)
    reasons = _stages.due(stages, {"model_weights": "no receipt"})
    assert list(reasons) == ["glm_fleet_stage_artifacts", "glm_fleet_stage_exporters", "glm_fleet_stage_server"]
    assert reasons["glm_fleet_stage_artifacts"] == "model_weights: no receipt"
    assert "after the stage of glm_fleet_stage_artifacts" in reasons["glm_fleet_stage_exporters"]
    assert _stages.dynamic_group("read", stages, reasons) == (
        "read_1_2_3",
        ["read", "glm_fleet_stage_artifacts", "glm_fleet_stage_exporters", "glm_fleet_stage_server"],
    )
    both = _stages.due(stages, {"nvidia_container_toolkit": "a", "sglang_image": "b", "model_weights": "c"})
    assert both["glm_fleet_stage_artifacts"] == "sglang_image: b; model_weights: c"
    assert list(both) == [stage["group"] for stage in SITE]


@pytest.mark.parametrize(
    ("stages", "message"),
    [
        ([], "non-empty list"),
        ("glm_fleet_stage_toolkit", "non-empty list"),
        ([{"group": "g", "roles": ["a"], "when": True}], r"stages\[0\] must have the keys group and roles"),
        ([{"group": "g"}], r"stages\[0\] must have the keys group and roles"),
        ([{"group": "g", "roles": ["a"], "secrets": "yes"}], r"stages\[0\]\.secrets must be true or false; got 'yes'"),
        (
            [{"group": "bad-name", "roles": ["a"]}],
            r"stages\[0\]\.group must be an inventory group name; got 'bad-name'",
        ),
        ([{"group": "g\n", "roles": ["a"]}], r"stages\[0\]\.group"),
        ([{"group": "g", "roles": []}], r"stages\[0\]\.roles must be a non-empty list"),
        ([{"group": "g", "roles": ["../etc"]}], r"stages\[0\]\.roles .* got \['\.\./etc'\]"),
        ([{"group": "g", "roles": ["a"]}, {"group": "g", "roles": ["b"]}], "a group more than once"),
        ([{"group": "g", "roles": ["a"]}, {"group": "h", "roles": ["a"]}], "a receipt more than once"),
    ],
)
def test_bad_stages_are_refused_naming_the_value(stages: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _stages.parse(stages)
