"""Provisioning the fleet's dashboard: the datasource looked up first, saved only when it differs."""

from __future__ import annotations

import json

from ansible_collections.glm.fleet.plugins.module_utils._grafana import (
    dashboard_diff,
    datasource_problem,
    differs,
    foreign_problem,
    save_body,
    save_problem,
    with_datasource,
)

DASHBOARD = {
    "uid": "glm-fleet",
    "title": "GLM-5.3-Flash fleet",
    "id": None,
    "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus"},
                            {"name": "node", "type": "query", "datasource": {"uid": "${datasource}"}}]},
}  # fmt: skip
DATASOURCES = [
    {"uid": "glm-prometheus", "name": "Prometheus", "type": "prometheus"},
    {"uid": "site-loki", "name": "Loki", "type": "loki"},
]


def test_a_datasource_must_exist_and_be_prometheus() -> None:
    found, problem = datasource_problem(DATASOURCES, "glm-prometheus")
    assert (found["name"], problem) == ("Prometheus", "")
    assert datasource_problem(DATASOURCES, "nope") == (
        None, "no datasource with uid 'nope' in this Grafana (it has: glm-prometheus (prometheus), site-loki (loki))"
    )  # fmt: skip
    assert datasource_problem(DATASOURCES, "site-loki")[1] == "datasource 'site-loki' is of type 'loki', not prometheus"
    assert datasource_problem([], "x")[1].endswith("(it has: none)")


def test_the_datasource_variable_opens_on_the_named_datasource() -> None:
    desired = with_datasource(DASHBOARD, DATASOURCES[0])
    variable = desired["templating"]["list"][0]
    assert variable["current"] == {"selected": True, "text": "Prometheus", "value": "glm-prometheus"}
    assert "current" not in desired["templating"]["list"][1]
    assert "id" not in desired
    assert "current" not in DASHBOARD["templating"]["list"][0], "the input is left as it was"


def test_grafana_is_written_only_when_its_copy_differs() -> None:
    desired = with_datasource(DASHBOARD, DATASOURCES[0])
    stored = {"dashboard": {**desired, "id": 3, "version": 4}, "meta": {"folderUid": "glm-fleet"}}
    assert differs(None, desired, "glm-fleet")
    assert not differs(stored, desired, "glm-fleet")
    assert differs(stored, desired, "")
    assert differs({**stored, "dashboard": {**stored["dashboard"], "title": "edited in the UI"}}, desired, "glm-fleet")


def test_the_save_never_overwrites_and_sends_the_version_it_read() -> None:
    body = save_body({"uid": "glm-fleet", "title": "t"}, "glm-fleet", None)
    assert body == {"dashboard": {"uid": "glm-fleet", "title": "t", "id": None}, "overwrite": False,
                    "message": "glm.fleet.monitoring", "folderUid": "glm-fleet"}  # fmt: skip
    assert "folderUid" not in save_body({"uid": "u", "title": "t"}, "", None)
    stored = {"dashboard": {"uid": "glm-fleet", "title": "t", "id": 3, "version": 7}, "meta": {}}
    assert save_body({"uid": "glm-fleet", "title": "t"}, "", stored)["dashboard"]["version"] == 7
    assert save_problem(412, {"status": "name-exists", "message": "..."}) == (
        "saving the dashboard answered 412: another dashboard of the same title is in the folder; rename or move it"
    )
    assert save_problem(500, {"message": "boom"}) == "saving the dashboard answered 500: {'message': 'boom'}"


def test_what_it_saves_carries_the_collections_tag_and_a_dashboard_without_it_is_foreign() -> None:
    desired = with_datasource({**DASHBOARD, "tags": ["sglang"]}, DATASOURCES[0])
    assert desired["tags"] == ["sglang", "glm.fleet"]
    assert with_datasource({**DASHBOARD, "tags": ["glm.fleet"]}, DATASOURCES[0])["tags"] == ["glm.fleet"]
    assert foreign_problem(None) == ""
    assert foreign_problem({"dashboard": desired, "meta": {}}) == ""
    theirs = {"dashboard": {"uid": "glm-fleet", "title": "Ops", "tags": ["ops"]}, "meta": {"folderUid": "ops"}}
    assert foreign_problem(theirs) == (
        "a dashboard with uid 'glm-fleet' ('Ops', in folder 'ops') is in this Grafana without the tag 'glm.fleet':"
        " it is not the collection's, and is left as it is; remove it or give it another uid"
    )


def test_the_diff_shows_grafanas_copy_and_the_dashboard_saved_without_grafanas_own_fields() -> None:
    desired = with_datasource(DASHBOARD, DATASOURCES[0])
    stored = {"dashboard": {**desired, "id": 7, "version": 3, "title": "old title"}, "meta": {"folderUid": "ops"}}
    diff = dashboard_diff(stored, desired, "glm")
    before, after = json.loads(diff["before"]), json.loads(diff["after"])
    assert (before["folderUid"], after["folderUid"]) == ("ops", "glm")
    assert (before["dashboard"]["title"], after["dashboard"]["title"]) == ("old title", "GLM-5.3-Flash fleet")
    assert "version" not in before["dashboard"]
    assert "id" not in before["dashboard"]
    assert diff["after_header"] == "GLM-5.3-Flash fleet"
    new = dashboard_diff(None, desired, "")
    assert (new["before"], new["before_header"]) == ("", "GLM-5.3-Flash fleet (absent)")
