"""No-op cost against fleet size: a fresh lab at each size, site.yml from scratch, then the no-op
rerun timed, with `ansible all -m ping` on the same lab as the baseline, under ansible.cfg's strategy
(Ansible's own linear); with --mitogen, both again with Mitogen's linear strategy turned on.

    python bench/scale.py [--sizes 2 4 8] [--reruns 3] [--profile] [--mitogen] [--lab-probes]

For each number of GPU nodes (plus the lab's site cache and laptop): the first run's wall time, the
no-op rerun's wall time (the median of --reruns runs, one after the other), its task-host results
(ok + skipped + failed) and changed count on every host (the controller included), the no-op time
per task-host and ping's time per host. Then the largest size's no-op time over the smallest's (the
goal: the 8-node time at most 1.5x the 2-node one). With --profile the largest size runs one more
no-op rerun, untimed, under ansible.posix.profile_tasks, and the ten slowest tasks are printed: what
limits the no-op run.

Every lab node is a container on this machine, so the controller and all nodes share its cores. The
lab's inventory probes every 2 s (Prometheus' scrapes, the gateway's health checks), so that an
alert fires within a test; ten containers' exporters answering that often take a fifth of the two
cores, a load that grows with the lab and that no fleet has. The runs here take the probe intervals
of the roles' defaults instead (PROBES, read from roles/*/defaults/main.yml); --lab-probes keeps
the lab's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import time

import yaml
from fleet import REPO, lab, mitogen, playbook, sh, task_hosts

PROFILE_LINE = re.compile(r"^(.+?) -+ (\d+\.\d+)s$", re.M)


# The probe intervals the lab's inventory shortens, by role: the runs take the role's default.
PROBES = {"monitoring": ["monitoring_scrape_interval"], "gateway": ["gateway_health_check_interval_secs"]}


def default_probes() -> list[str]:
    """Extra-vars arguments setting each of PROBES to its role's default (the defaults file owns it)."""
    values = {}
    for role, names in PROBES.items():
        defaults = yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text())
        values.update({name: defaults[name] for name in names})
    return ["-e", json.dumps(values)]


def ping_per_host(hosts: int, env: dict[str, str] | None = None) -> float:
    started = time.monotonic()
    ping = sh(["ansible", "all", "-m", "ansible.builtin.ping"], env={**os.environ, **env} if env else None)
    seconds = time.monotonic() - started
    if ping.returncode != 0:
        raise SystemExit(f"bench: ping failed:\n{ping.stdout}")
    return seconds / hosts


def one_size(
    gpu_nodes: int, reruns: int, profile: bool, with_mitogen: bool, extra: list[str]
) -> dict[str, float | int | str]:
    print(f"bench: fresh lab with {gpu_nodes} GPU nodes, a site cache and a laptop", flush=True)
    state = lab.up(gpu_nodes)
    hosts = len(state["nodes"])
    first_s, _first_output = playbook("site.yml", *extra)
    noops = []
    for _round in range(reruns):
        noop_s, out = playbook("site.yml", *extra)
        noops.append(noop_s)
    results, changed = task_hosts(out)
    if profile:  # after the timed runs: the callback's own cost stays out of them
        os.environ["ANSIBLE_CALLBACKS_ENABLED"] = "ansible.posix.profile_tasks"
        os.environ["PROFILE_TASKS_TASK_OUTPUT_LIMIT"] = "10"
        try:
            _profiled_s, profiled = playbook("site.yml", *extra)
        finally:
            os.environ.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    per_ping = ping_per_host(hosts)
    mitogen_s, per_ping_mitogen = float("nan"), float("nan")
    if with_mitogen:
        mitogen_s, _mitogen_output = playbook("site.yml", *extra, env=mitogen())
        per_ping_mitogen = ping_per_host(hosts, mitogen())
    slowest = (
        "\n".join(f"    {m.group(1).strip()}: {m.group(2)} s" for m in PROFILE_LINE.finditer(profiled))
        if profile
        else ""
    )
    noop_s = statistics.median(noops)
    print(f"bench: {gpu_nodes} GPU nodes, no-op reruns: {', '.join(f'{s:.1f} s' for s in noops)}", flush=True)
    return {
        "gpu_nodes": gpu_nodes, "hosts": hosts, "first_s": first_s, "noop_s": noop_s, "results": results,
        "changed": changed, "per_task_host": noop_s / results, "per_ping": per_ping, "slowest": slowest,
        "mitogen_s": mitogen_s, "per_ping_mitogen": per_ping_mitogen,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--reruns", type=int, default=3, help="no-op reruns per size (the median is reported)")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--mitogen", action="store_true", help="also time Mitogen's linear strategy, turned on")
    parser.add_argument("--lab-probes", action="store_true", help="keep the lab's 2 s probe intervals")
    args = parser.parse_args(argv)
    os.environ["PATH"] = f"{REPO / '.venv' / 'bin'}:{os.environ['PATH']}"
    sizes = sorted(args.sizes)
    extra = [] if args.lab_probes else default_probes()
    print(f"bench: probe intervals {'of the lab inventory' if args.lab_probes else extra[1]}", flush=True)
    rows = [one_size(n, args.reruns, args.profile and n == sizes[-1], args.mitogen, extra) for n in sizes]

    print(f"\n{'GPU nodes':>9}  {'hosts':>5}  {'first run':>9}  {'no-op':>7}  {'results':>7}  {'changed':>7}"
          f"  {'per task-host':>13}  {'ping/host':>9}  {'ratio':>5}  {'no-op/ping':>10}  {'Mitogen no-op':>13}"
          f"  {'Mitogen ping/host':>17}")  # fmt: skip
    for r in rows:
        print(
            f"{r['gpu_nodes']:>9}  {r['hosts']:>5}  {r['first_s']:>8.1f}s  {r['noop_s']:>6.1f}s  {r['results']:>7}"
            f"  {r['changed']:>7}  {r['per_task_host']:>12.3f}s  {r['per_ping']:>8.3f}s"
            f"  {r['per_task_host'] / r['per_ping']:>5.2f}  {r['noop_s'] / (r['per_ping'] * r['hosts']):>10.1f}"
            f"  {r['mitogen_s']:>12.1f}s  {r['per_ping_mitogen']:>16.3f}s"
        )
    print(
        f"\nno-op time at {sizes[-1]} GPU nodes / at {sizes[0]}: {rows[-1]['noop_s'] / rows[0]['noop_s']:.2f}"
        f" (goal for 8 / 2: <= 1.5; with Mitogen {rows[-1]['mitogen_s'] / rows[0]['mitogen_s']:.2f});"
        " no-op / ping: goal <= 12"
    )
    if rows[-1]["slowest"]:
        print(f"\nslowest tasks of the no-op run at {sizes[-1]} GPU nodes (ansible.posix.profile_tasks):")
        print(rows[-1]["slowest"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
