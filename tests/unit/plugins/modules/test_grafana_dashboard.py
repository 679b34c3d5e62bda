"""glm.fleet.grafana_dashboard against the lab's Grafana stand-in (tests/lab/grafana_standin.py, which
decides a save as Grafana's dashboard store does): it saves the fleet's dashboard once, and never
replaces a dashboard that is not the collection's, whether of its uid or of its title in the folder,
nor one that changed while it read it."""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.common.warnings import get_warning_messages

from ansible_collections.glm.fleet.plugins.modules import grafana_dashboard

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "lab"))
grafana_standin = importlib.import_module("grafana_standin")  # the lab's stand-in, from tests/lab

RunMain = Callable[..., dict[str, Any]]  # the run_main fixture (tests/unit/conftest.py)
TOKEN = "glsa_unit_token"  # noqa: S105 - the stand-in's, for this test
DASHBOARD = {"uid": "glm-fleet", "title": "GLM-5.3-Flash fleet", "tags": ["glm.fleet", "sglang"],
             "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus"}]}}  # fmt: skip


@pytest.fixture
def grafana() -> Iterator[tuple[str, Any]]:
    store = grafana_standin.Store()
    server = ThreadingHTTPServer(("127.0.0.1", 0), grafana_standin.make_handler(store, TOKEN))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", store
    server.shutdown()
    server.server_close()


def args(url: str, **more: Any) -> dict[str, Any]:
    return {"url": url, "token": TOKEN, "dashboard": DASHBOARD, "datasource_uid": "glm-prometheus",
            "folder_uid": "glm-fleet"} | more  # fmt: skip


def site_dashboard(store: Any, uid: str, title: str) -> None:
    status, _answer = grafana_standin.save(store, {"dashboard": {"uid": uid, "title": title, "tags": ["ops"]},
                                                   "folderUid": "glm-fleet"})  # fmt: skip
    assert status == 200


def test_the_dashboard_is_saved_once_with_the_collections_tag(grafana: Any, run_main: RunMain) -> None:
    url, store = grafana
    first = run_main(grafana_dashboard.main, args(url))
    assert (first["failed"], first["changed"], first["version"]) == (False, True, 1), first
    assert "glm.fleet" in store.dashboards["glm-fleet"]["dashboard"]["tags"]
    again = run_main(grafana_dashboard.main, args(url))
    assert (again["failed"], again["changed"], again["version"]) == (False, False, 1), again
    edited = run_main(grafana_dashboard.main, args(url, dashboard={**DASHBOARD, "refresh": "1m"}))
    assert (edited["changed"], edited["version"]) == (True, 2), edited


def test_a_dashboard_of_its_uid_that_is_not_the_collections_is_refused_and_left(
    grafana: Any, run_main: RunMain
) -> None:
    url, store = grafana
    site_dashboard(store, "glm-fleet", "Ops overview")
    before = dict(store.dashboards)
    for check_mode in (True, False):
        refused = run_main(grafana_dashboard.main, args(url), check_mode=check_mode)
        assert refused["failed"], refused
        assert "a dashboard with uid 'glm-fleet' ('Ops overview', in folder 'glm-fleet') is in this Grafana without" \
               " the tag 'glm.fleet'" in refused["msg"]  # fmt: skip
    assert store.dashboards == before


def test_another_dashboard_of_its_title_in_the_folder_is_not_replaced(grafana: Any, run_main: RunMain) -> None:
    url, store = grafana
    site_dashboard(store, "site-own", "GLM-5.3-Flash fleet")
    before = dict(store.dashboards)
    refused = run_main(grafana_dashboard.main, args(url))
    assert refused["failed"], refused
    assert refused["msg"].endswith(
        "saving the dashboard answered 412: another dashboard of the same title is in the folder; rename or move it"
    )
    assert store.dashboards == before
    # What `overwrite` (which the module never sends) would have done: Grafana saves over the site's one.
    status, answer = grafana_standin.save(store, {"dashboard": DASHBOARD, "folderUid": "glm-fleet", "overwrite": True})
    assert (status, answer["uid"]) == (200, "site-own")


def test_a_dashboard_changed_while_it_was_read_is_not_saved_over(
    grafana: Any, run_main: RunMain, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, store = grafana
    assert not run_main(grafana_dashboard.main, args(url))["failed"]
    call = grafana_dashboard.Grafana.call

    def someone_saves_first(self: Any, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        if method == "POST":  # between the module's read and its save, an edit in Grafana's UI
            stored = store.dashboards["glm-fleet"]["dashboard"]
            assert grafana_standin.save(store, {"dashboard": {**stored, "description": "edited"},
                                                "folderUid": "glm-fleet"})[0] == 200  # fmt: skip
        return call(self, method, path, body)

    monkeypatch.setattr(grafana_dashboard.Grafana, "call", someone_saves_first)
    refused = run_main(grafana_dashboard.main, args(url, dashboard={**DASHBOARD, "refresh": "1m"}))
    assert refused["failed"], refused
    assert refused["msg"].endswith("the dashboard changed in Grafana while this run read it; run again")
    assert store.dashboards["glm-fleet"]["dashboard"]["description"] == "edited"


def test_a_grafana_whose_certificate_is_not_verified_is_warned_of(grafana: Any, run_main: RunMain) -> None:
    url, _store = grafana
    run_main(grafana_dashboard.main, args(url, validate_certs=False))
    assert not [w for w in get_warning_messages() if "validate_certs" in w]  # plain http: nothing to verify
    https = "https://127.0.0.1:1"  # nothing listens: the run fails after warning
    failed = run_main(grafana_dashboard.main, args(https, validate_certs=False))
    assert failed["failed"]
    assert (
        f"validate_certs is false: Grafana's certificate at {https} is not verified, and the token goes to whoever"
        " answers there"
    ) in get_warning_messages()
