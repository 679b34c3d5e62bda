"""site.yml on the lab, from scratch: check mode on the fresh fleet succeeds; the first run brings
every GPU node to serving with each artifact fetched from upstream once (by the site cache); the
fleet health report says so; a second run changes nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from conftest import NO_ROLLOUT, REPO, Runner, host_results, lab, rollout_plan, run_log

# roles/nvidia_container_toolkit and roles/monitoring: the dpkg read and the apt runs after it.
APT_READ_TOOLKIT = "Read which of the role's packages are missing"
APT_TOOLKIT = "Install the toolkit at the pinned version"
APT_NODE_EXPORTER = "Install node exporter from the distribution"
TOOLKIT = {
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
}
PUBLISH = "Publish this node's servers for the gateway"
# Each role's door (its first task, glm.fleet.stage_receipt): the toolkit's, the image's and the
# weights' on a GPU node, the exporters' on every host of the fleet, and the preflight's read of the
# GPU-node roles after it but the exporters (a node none of them has work on is not checked).
DOOR = "Compare the node with the role's receipt"
EXPORTERS_DOOR = "Compare the host with the role's receipt"
PREFLIGHT_DOOR = "Compare the node with the receipts of the roles after the preflight"
# The doors of the gateway's, Prometheus' and the laptop's roles.
OTHER_DOORS = (
    "Compare the gateway with the role's receipt",
    "Compare the monitoring host with the role's receipt",
    "Compare the machine with the role's receipt",
)
PREFLIGHT_CHECK = "Check the node against what the server needs"
PREFLIGHT_GPU_READ = "Read the node's GPUs, driver and NVLink fabric"
SERVER_RECEIPT = "Compare the node with its servers' receipt"
HEALTH_ROUND = "Look at each unchanged server live, and send the node to the rolling restart or leave it serving"
PACKAGE = "nvidia-container-toolkit"


def stale(run: Any, task: str) -> dict[str, dict[str, str]]:
    """{host: {receipt: why it does not stand}} from a door's reads in the run (a task name several
    roles share: each host's reads merged)."""
    out: dict[str, dict[str, str]] = {}
    for event in run.events:
        data = event.get("event_data", {})
        if event.get("event") == "runner_on_ok" and data.get("task") == task:
            out.setdefault(data["host"], {}).update(data["res"]["stale"])
    return out


def drifts(run: Any, task: str) -> dict[str, dict[str, str]]:
    """stale() of the hosts whose receipts did not all stand."""
    return {host: why for host, why in stale(run, task).items() if why}


def reads(run: Any, task: str) -> list[str]:
    """The hosts of each read of a door in the run, one entry per read."""
    return sorted(e["event_data"]["host"] for e in run.events
                  if e.get("event") == "runner_on_ok" and e["event_data"].get("task") == task)  # fmt: skip


def assert_each_blob_reached_the_site_cache_once(registry_offset: int, lab_state: dict[str, Any]) -> None:
    # The lab's hosts only: molecule's scenarios (`make test` runs some beside these tests) pull from
    # the registry stand-in from nodes of their own.
    lab_hosts = {node["address"] for node in lab_state["nodes"]}
    transfers = [t for t in lab.registry_blob_transfers(registry_offset) if t[0] in lab_hosts]
    assert {transfer[0] for transfer in transfers} == {lab.SITE_CACHE_ADDRESS}, transfers
    services = json.loads((lab.STATE_DIR / "services.json").read_text())
    sizes = {
        blob["digest"]: int(blob["size"])
        for key in ("sglang_image", "dcgm_image")
        for blob in lab.image_blobs(services[key])
    }
    sent: dict[str, list[int]] = {}
    for _client, digest, count in transfers:
        sent.setdefault(digest, []).append(count)
    assert set(sent) == set(sizes), (sent, sizes)
    for digest, counts in sent.items():
        assert len(counts) <= 2, (digest, counts)
        assert max(counts) == sizes[digest], (digest, counts)


def test_site_check_mode_on_a_fresh_fleet(runner: Runner, lab_state: dict[str, Any]) -> None:
    hosts = {node["name"] for node in lab_state["nodes"]}
    check = runner.playbook(REPO / "site.yml", cmdline="--check")
    assert check.status == "successful", run_log(check)
    assert check.stats["failures"] == {}
    assert check.stats["dark"] == {}
    assert hosts <= set(check.stats["ok"])
    assert set(check.stats["changed"]) >= hosts - {"localhost"}  # a fresh fleet has everything to do


def assert_the_rerun_did_no_work_twice(runner: Runner, second: Any, gpu_nodes: set[str]) -> None:
    """What a converged fleet's rerun reads and runs on its GPU nodes."""
    # Every role ends at its door: on each GPU node the preflight's read and one read each of the
    # toolkit, the image and the weights; every receipt stands, so no node is checked (not even its
    # GPUs read) and no role goes past its door (no dpkg read, no question to the engine).
    assert reads(second, PREFLIGHT_DOOR) == sorted(gpu_nodes)
    assert stale(second, PREFLIGHT_DOOR) == {host: {} for host in gpu_nodes}
    # (the site cache's host reads the weights' receipt too: glm.fleet.site_cache depends on the role)
    assert [host for host in reads(second, DOOR) if host in gpu_nodes] == sorted(list(gpu_nodes) * 3)
    assert not any(stale(second, DOOR).values())
    # Those three take the preflight's word that their receipts stand (no role ran on the node since):
    # none of them asks the node again.
    said = [e["event_data"]["res"]["msg"] for e in second.events
            if e.get("event") == "runner_on_ok" and e["event_data"].get("task") == DOOR
            and e["event_data"]["host"] in gpu_nodes]  # fmt: skip
    assert said == ["every role's receipt stands (read earlier in this run)"] * (3 * len(gpu_nodes)), said
    # The gateway, Prometheus and the laptop's profiles end at their doors too: no package read, no
    # file written or compared past them.
    for door in OTHER_DOORS:
        assert stale(second, door), door
        assert not any(stale(second, door).values()), (door, stale(second, door))
    assert host_results(second, "Read which of the gateway's packages are missing") == {}
    assert host_results(second, "Read which of Prometheus' packages are missing") == {}
    assert host_results(second, "Read the installed Claude Code CLI version") == {}
    assert not any(stale(second, "Compare the site cache with the role's receipt").values())
    fleet = set(stale(second, EXPORTERS_DOOR))
    assert gpu_nodes < fleet
    assert stale(second, EXPORTERS_DOOR) == {host: {} for host in fleet}
    # Every host's exporters door reads its own receipt (its digest takes node exporter's certificate as
    # the controller issued it in this run, which the preflight's read cannot know).
    said = {e["event_data"]["host"]: e["event_data"]["res"]["msg"] for e in second.events
            if e.get("event") == "runner_on_ok" and e["event_data"].get("task") == EXPORTERS_DOOR}  # fmt: skip
    assert set(said) == fleet, said
    assert not {host for host, msg in said.items() if "read earlier in this run" in msg}, said
    assert host_results(second, PREFLIGHT_GPU_READ) == {}
    assert host_results(second, PREFLIGHT_CHECK) == {}
    assert host_results(second, APT_READ_TOOLKIT) == {}
    assert not set(host_results(second, "Ask the engine for the pinned image")) & gpu_nodes
    assert host_results(second, "Read whether node exporter is installed") == {}
    # The server stage's plan: the servers' receipt stands on every node, so the plan's full look (the
    # validation, the check-mode configuration) ran on none; systemd's view and a health round of each
    # server decided that no node restarts.
    assert stale(second, SERVER_RECEIPT) == {host: {} for host in gpu_nodes}
    assert host_results(second, "Check the server settings") == {}
    assert host_results(second, "Record what the node's servers run as") == {}
    assert host_results(second, "Write the systemd units") == {}
    assert set(host_results(second, HEALTH_ROUND)) == gpu_nodes
    # That round is each node's row in the fleet report: the report's play probes no GPU node again.
    assert host_results(second, "Check each server once, for the fleet report") == {}
    # What the toolkit's first run left: its packages held at the pin.
    holds = runner.module("gpu_nodes", "ansible.builtin.command", "apt-mark showhold")
    assert {host: set(res["stdout"].split()) >= TOOLKIT for host, res in host_results(holds).items()} == dict.fromkeys(
        gpu_nodes, True
    )
    # The server stage's plan publishes each node's servers; the gateway's and Prometheus' stages
    # do not pass over the GPU nodes again for them.
    published = [e["event_data"]["host"] for e in second.events
                 if e.get("event") == "runner_on_ok" and e["event_data"].get("task") == PUBLISH]  # fmt: skip
    assert sorted(published) == sorted(gpu_nodes), published
    assert host_results(second, APT_TOOLKIT) == {}
    assert host_results(second, APT_NODE_EXPORTER) == {}


def test_site_converges_once_per_site_then_changes_nothing(
    runner: Runner, lab_state: dict[str, Any], tmp_path: Path
) -> None:
    hosts = {node["name"] for node in lab_state["nodes"]}
    gpu_nodes = {node["name"] for node in lab_state["nodes"] if node["group"] == "gpu_nodes"}
    lab.hub_call("/_lab/reset", {})
    registry_offset = lab.registry_log_offset()
    report_dir = tmp_path / "report"

    first = runner.playbook(REPO / "site.yml", extravars={"glm_fleet_report_dir": str(report_dir)})
    assert first.status == "successful", run_log(first)
    assert hosts <= set(first.stats["ok"])
    assert first.stats["failures"] == {}
    assert first.stats["dark"] == {}

    # Every GPU node passed preflight and has docker with NVIDIA's runtime.
    checked = host_results(first, PREFLIGHT_CHECK)
    assert set(checked) == gpu_nodes
    assert all("NVLink fabric registered" in res["msg"] for res in checked.values()), checked
    runtimes = "docker info --format '{{ '{{' }}json .Runtimes{{ '}}' }}'"
    check = runner.module("gpu_nodes", "ansible.builtin.command", runtimes, cmdline="--become")
    assert check.status == "successful", run_log(check)
    for host, res in host_results(check).items():
        assert '"nvidia"' in res["stdout"], f"{host}: {res['stdout']}"

    # Once per site: the Hub stand-in served the repository once (to the site cache), and the
    # registry stand-in sent each blob of the images the fleet runs (the server's, the DCGM
    # exporter's) to the site cache only, in full once, plus at most the warm-up's first stream
    # (glm.fleet.registry_warm: the mirror streams a blob it lacks while it stores it; the warm-up
    # cuts that stream short, which a small blob outruns).
    hub = lab.hub_call("/_lab/stats")
    assert hub["bytes_served"] == hub["repo_bytes"], hub
    assert_each_blob_reached_the_site_cache_once(registry_offset, lab_state)

    # The fleet health report: every server of every node ready (gpu-2, the 8-GPU node, runs two),
    # serving the pinned revision, no drift.
    report = json.loads((report_dir / "fleet-health.json").read_text())
    servers = {(node, 18080) for node in gpu_nodes} | ({("gpu-2", 18081)} if "gpu-2" in gpu_nodes else set())
    assert {(row["node"], row["port"]) for row in report["servers"]} == servers
    assert report["ready"] == report["total"] == len(servers)
    assert report["nodes"] == len(gpu_nodes)
    for row in report["servers"]:
        assert row["ready"], row
        assert row["revision"] == "eb9eb208eb0d988989d07a6a12d0fdeb5f52574a"
        assert row["served_model"] == "zai-org/GLM-5.3-Flash"
        assert row["sglang"] == "0.5.23"  # the server's own report of the release, the one recorded
        assert "ttft_ms" not in row  # this probe's timing: in the output, not in the files
        assert row["drift"] == ""
    # The gateway's view: every server healthy as the router sees it, and a message streamed through
    # the front door over HTTPS with a developer's key.
    assert report["gateway"]["front_door"] == {"ok": True, "status": 200}
    assert len(report["gateway"]["workers"]) == len(servers)
    assert all(report["gateway"]["workers"].values()), report["gateway"]
    markdown = (report_dir / "fleet-health.md").read_text()
    assert f"{len(servers)}/{len(servers)} servers ready on {len(gpu_nodes)} nodes." in markdown
    assert "servers ready on" in run_log(first)  # the table is in the run's output too, with the timings
    assert re.search(
        r"gpu-1 +pareto-glm53-flash +18080 +yes +- +[0-9.]+ +[0-9.]+ +zai-org/GLM-5.3-Flash +0\.5\.23 ", run_log(first)
    )

    assert set(rollout_plan(first)) == gpu_nodes  # the server stage's plan: every node to (re)start
    # apt ran for what a fresh node lacked: the toolkit at its pin, node exporter everywhere.
    assert set(host_results(first, APT_TOOLKIT)) == gpu_nodes
    servers_hosts = {node["name"] for node in lab_state["nodes"] if node["group"] != "developer_laptops"}
    assert set(host_results(first, APT_NODE_EXPORTER)) == servers_hosts

    second = runner.playbook(REPO / "site.yml", extravars={"glm_fleet_report_dir": str(report_dir)})
    assert second.status == "successful", run_log(second)
    assert rollout_plan(second) == NO_ROLLOUT  # and the serial play ran on no node
    changed = {host: n for host, n in second.stats["changed"].items() if n}
    assert changed == {}, f"second run changed something (the controller's report files included): {changed}"
    assert (report_dir / "fleet-health.json").read_text() == json.dumps(report, indent=4, sort_keys=True) + "\n"
    assert_the_rerun_did_no_work_twice(runner, second, gpu_nodes)
    assert lab.hub_call("/_lab/stats")["bytes_served"] == hub["bytes_served"], "the second run downloaded again"


def test_a_node_that_drifted_goes_through_the_stage_again(runner: Runner, lab_state: dict[str, Any]) -> None:
    """After the converged run above: what an operator changes by hand on one node sends that node,
    and that node only, through the stage that owns it, which puts it back and records it again."""
    gpu_nodes = sorted(node["name"] for node in lab_state["nodes"] if node["group"] == "gpu_nodes")
    first, last = gpu_nodes[0], gpu_nodes[-1]
    unhold = runner.module(
        first, "ansible.builtin.command", "apt-mark unhold nvidia-container-toolkit", cmdline="--become"
    )
    assert unhold.status == "successful", run_log(unhold)
    stop = runner.module(last, "ansible.builtin.command", "systemctl stop prometheus-node-exporter", cmdline="--become")
    assert stop.status == "successful", run_log(stop)

    drifted = runner.playbook(REPO / "site.yml", cmdline="--tags toolkit,monitoring")
    assert drifted.status == "successful", run_log(drifted)
    assert first != last
    toolkit, exporters = drifts(drifted, DOOR), drifts(drifted, EXPORTERS_DOOR)
    assert {host: set(why) for host, why in toolkit.items()} == {first: {"nvidia_container_toolkit"}}, toolkit
    assert "package nvidia-container-toolkit: held=True" in toolkit[first]["nvidia_container_toolkit"], toolkit
    assert "held=False" in toolkit[first]["nvidia_container_toolkit"], toolkit
    assert {host: set(why) for host, why in exporters.items()} == {last: {"exporters"}}, exporters
    assert "unit prometheus-node-exporter.service: " in exporters[last]["exporters"], exporters
    assert "-> ActiveState=inactive" in exporters[last]["exporters"], exporters
    # Each role went past its door where its receipt did not stand, and only there.
    assert set(host_results(drifted, APT_READ_TOOLKIT)) == {first}
    assert set(host_results(drifted, "Read whether node exporter is installed")) == {last}
    holds = runner.module(first, "ansible.builtin.command", "apt-mark showhold")
    assert set(host_results(holds)[first]["stdout"].split()) >= TOOLKIT
    active = runner.module(last, "ansible.builtin.command", "systemctl is-active prometheus-node-exporter")
    assert host_results(active)[last]["stdout"] == "active"

    # A helper file edited by hand: the server stage's plan finds the receipt stale, naming the file,
    # works out the change in full, and that node alone goes through the rolling restart.
    guard = "/usr/local/libexec/glm-fleet/sglang-port-guard"
    edit = runner.module(first, "ansible.builtin.shell", f"echo '# edited' >> {guard}", cmdline="--become")
    assert edit.status == "successful", run_log(edit)
    server = runner.playbook(REPO / "site.yml", cmdline="--tags server")
    assert server.status == "successful", run_log(server)
    assert f"file {guard}:" in stale(server, SERVER_RECEIPT)[first]["sglang_server"]
    assert set(rollout_plan(server)) == {first}, rollout_plan(server)
    assert "port guard would change" in rollout_plan(server)[first]
    # The run's preflight (not in --tags server) did not check that node: its rolling restart did, before
    # writing anything, and on no other node.
    assert set(host_results(server, PREFLIGHT_CHECK)) == set(host_results(server, PREFLIGHT_GPU_READ)) == {first}
    restored = runner.module(first, "ansible.builtin.command", f"tail -n 1 {guard}")
    assert host_results(restored)[first]["stdout"] != "# edited"

    # Put back and recorded: the same runs again find every receipt standing and change nothing.
    quiet = runner.playbook(REPO / "site.yml", cmdline="--tags server")
    assert quiet.status == "successful", run_log(quiet)
    assert stale(quiet, SERVER_RECEIPT) == {host: {} for host in gpu_nodes}
    assert rollout_plan(quiet) == NO_ROLLOUT
    again = runner.playbook(REPO / "site.yml", cmdline="--tags toolkit,monitoring")
    assert again.status == "successful", run_log(again)
    assert stale(again, DOOR) == {host: {} for host in gpu_nodes}
    assert not any(stale(again, EXPORTERS_DOOR).values())
    assert {host: n for host, n in again.stats["changed"].items() if n} == {}

    # glm_fleet_ignore_receipts sends every node through every role, which finds nothing to change:
    # the server stage's plan works every node out in full (the server settings' checks included),
    # finds it steady, and records its receipt again, unchanged.
    forced = runner.playbook(
        REPO / "site.yml", cmdline="--tags toolkit,server", extravars={"glm_fleet_ignore_receipts": True}
    )
    assert forced.status == "successful", run_log(forced)
    assert set(host_results(forced, APT_READ_TOOLKIT)) == set(gpu_nodes)
    assert set(host_results(forced, "Check the server settings")) == set(gpu_nodes)
    assert rollout_plan(forced) == NO_ROLLOUT
    assert set(host_results(forced, "Record what the node's servers run as")) == set(gpu_nodes)
    assert {host: n for host, n in forced.stats["changed"].items() if n} == {}


def test_the_preflight_checks_the_nodes_a_run_has_work_on(runner: Runner, lab_state: dict[str, Any]) -> None:
    """A stopped server is work for the run on that node alone: its server receipt does not stand, so
    the preflight checks it (and refuses it here, before anything on it changes), and leaves out the
    nodes whose every receipt stands; the run goes on without the refused node (its server stage's
    plan runs on the others)."""
    last = sorted(node["name"] for node in lab_state["nodes"] if node["group"] == "gpu_nodes")[-1]
    stopped = runner.module(last, "ansible.builtin.command", "systemctl stop pareto-glm53-flash", cmdline="--become")
    assert stopped.status == "successful", run_log(stopped)
    refused = runner.playbook(REPO / "site.yml", extravars={"preflight_required_gpus": 16})
    assert refused.status == "failed", run_log(refused)
    assert set(refused.stats["failures"]) == {last}, refused.stats
    assert "ActiveState=inactive" in stale(refused, PREFLIGHT_DOOR)[last]["sglang_server"]
    assert {host: why for host, why in stale(refused, PREFLIGHT_DOOR).items() if why} == {
        last: stale(refused, PREFLIGHT_DOOR)[last]
    }
    assert set(host_results(refused, PREFLIGHT_GPU_READ)) == {last}
    assert host_results(refused, "Write the systemd units") == {}
    assert rollout_plan(refused) == NO_ROLLOUT
    inactive = runner.module(last, "ansible.builtin.command", "systemctl is-active pareto-glm53-flash")
    assert host_results(inactive)[last]["stdout"] == "inactive"
    # The next run checks it (it passes), restarts its server, and puts it back behind the gateway and
    # into Prometheus' targets, which the refused run left it out of.
    back = runner.playbook(REPO / "site.yml")
    assert back.status == "successful", run_log(back)
    assert set(host_results(back, PREFLIGHT_CHECK)) == {last}
    assert set(rollout_plan(back)) == {last}, rollout_plan(back)
    again = runner.playbook(REPO / "site.yml")
    assert again.status == "successful", run_log(again)
    assert {host: n for host, n in again.stats["changed"].items() if n} == {}
