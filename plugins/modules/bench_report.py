#!/usr/bin/python
# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: bench_report
short_description: Write a serving benchmark's report, with the recipe's comparison and the cost per token
version_added: 0.1.0
description:
  - From the levels glm.fleet.serving_bench measured, writes C(bench-serving.json),
    C(bench-serving.md) and C(bench-serving.png) in O(dest) - the throughput against tok/s per
    user with the recipe's point marked, TTFT and ITL per level, the recipe's headline line by line,
    and the $ per 1M output and input tokens at the fastest level of most throughput that still
    gives each user O(cost_min_user_tps), side by side with O(hosted)'s prices, with the
    utilisation at which self-hosting breaks even.
author:
  - glm.fleet contributors (@glm-fleet)
requirements:
  - matplotlib (for the chart)
options:
  dest:
    description: Directory of the report (created).
    type: path
    required: true
  model:
    description: The model benchmarked.
    type: str
    required: true
  targets:
    description: The URLs the benchmark sent to.
    type: list
    elements: str
    required: true
  via:
    description: How the load reached the servers (C(gateway) or C(servers)).
    type: str
    required: true
  gpus:
    description: GPUs of the servers measured.
    type: int
    required: true
  benchmark:
    description: The benchmark's settings (C(input_tokens), C(output_tokens), C(requests_per_client)).
    type: dict
    required: true
  levels:
    description: glm.fleet.serving_bench's C(levels).
    type: list
    elements: dict
    required: true
  calibration:
    description: glm.fleet.serving_bench's C(calibration).
    type: dict
    default: {}
  recipe:
    description: The recipe's headline (C(output_tps), C(per_user_tps), C(gpus)).
    type: dict
    required: true
  gpu_hour_usd:
    description: Price of one GPU for an hour, in $.
    type: float
    required: true
  cost_min_user_tps:
    description: The per-user speed (tok/s) the priced throughput must still give every user.
    type: float
    required: true
  hosted:
    description:
      - The hosted service's prices to compare with, C(name) and C(input), C(cached_input), C(output) in $ per 1M
        tokens.
    type: dict
    required: true
  claude_code:
    description:
      - The Claude Code profile's measurement (C(glm.fleet.serving_bench) with C(profile=claude_code)), C(benchmark)
        (its shape, C(turns), C(system_tokens), C(context_tokens), C(turn_tokens), C(output_tokens),
        C(sessions_per_client)), C(levels) and C(calibration), reported beside the synthetic profile's O(levels), with
        its own cost at its own mix of input, cached input and output.
    type: dict
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - glm.fleet.attributes
attributes:
  check_mode:
    support: full
    details: Reports whether the JSON or the Markdown would change, and writes nothing.
  diff_mode:
    support: full
    details: The JSON and the Markdown before and after; the chart is not shown.
  platform:
    platforms: posix
    description: Runs on the controller (delegate it to localhost).
    support: full
  idempotent:
    description: The same figures write the same JSON and Markdown.
    support: partial
"""

EXAMPLES = r"""
- name: Write the benchmark report
  glm.fleet.bench_report:
    dest: "{{ playbook_dir }}/bench-report"
    model: zai-org/GLM-5.3-Flash
    targets: ["https://gateway.example.internal"]
    via: gateway
    gpus: 8
    benchmark: {input_tokens: 1024, output_tokens: 1024, requests_per_client: 4}
    levels: "{{ bench.levels }}"
    recipe: {output_tps: 2591, per_user_tps: 140, gpus: 4}
    gpu_hour_usd: 5.0
    cost_min_user_tps: 140
    hosted: {name: Lyceum, input: 0.20, cached_input: 0.05, output: 0.50}
  delegate_to: localhost
"""

RETURN = r"""
files:
  description: The report's files.
  returned: always
  type: list
  elements: str
cost:
  description: The $ per 1M tokens at the operating point, or null when no level is fast enough.
  returned: always
  type: dict
claude_code_cost:
  description: The same for the Claude Code profile, at its own mix; null without it or when no level is fast enough.
  returned: always
  type: dict
recipe_comparison:
  description: The recipe's headline figures against the measured ones.
  returned: always
  type: list
  elements: dict
summary:
  description: One line per level (output tok/s, tok/s per user, TTFT p50) and one for the cost.
  returned: always
  type: list
  elements: str
"""

import importlib.util
import json
import os

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.glm.fleet.plugins.module_utils._bench_metrics import cost, operating_point, recipe_comparison
from ansible_collections.glm.fleet.plugins.module_utils._bench_report import chart_png, markdown, summary
from ansible_collections.glm.fleet.plugins.module_utils._files import file_diff, read

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


def profile_cost(p: dict, levels: list) -> dict | None:
    point = operating_point(levels, p["cost_min_user_tps"])
    return cost(point, p["gpus"], p["gpu_hour_usd"], p["hosted"]) if point else None


def build(p: dict) -> dict:
    levels = p["levels"]
    claude = p["claude_code"]
    return {
        "model": p["model"],
        "targets": p["targets"],
        "via": p["via"],
        "gpus": p["gpus"],
        "benchmark": p["benchmark"],
        "calibration": p["calibration"],
        "levels": levels,
        "recipe": p["recipe"],
        "recipe_comparison": recipe_comparison(levels, p["recipe"], p["gpus"]),
        "hosted": p["hosted"],
        "cost_min_user_tps": p["cost_min_user_tps"],
        "cost": profile_cost(p, levels),
        **(
            {"claude_code": {**claude, "cost": profile_cost(p, claude.get("levels") or [])}}
            if claude is not None
            else {}
        ),
    }


def write(path: str, data: bytes) -> bool:
    if os.path.exists(path):
        with open(path, "rb") as f:
            if f.read() == data:
                return False
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, 0o644)
    return True


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "dest": {"type": "path", "required": True},
            "model": {"type": "str", "required": True},
            "targets": {"type": "list", "elements": "str", "required": True},
            "via": {"type": "str", "required": True},
            "gpus": {"type": "int", "required": True},
            "benchmark": {"type": "dict", "required": True},
            "levels": {"type": "list", "elements": "dict", "required": True},
            "calibration": {"type": "dict", "default": {}},
            "recipe": {"type": "dict", "required": True},
            "gpu_hour_usd": {"type": "float", "required": True},
            "cost_min_user_tps": {"type": "float", "required": True},
            "hosted": {"type": "dict", "required": True},
            "claude_code": {"type": "dict"},
        },
        supports_check_mode=True,
    )
    if not HAS_MATPLOTLIB:
        module.fail_json(msg=missing_required_lib("matplotlib"))
    report = build(module.params)
    dest = module.params["dest"]
    outputs = {
        "bench-serving.json": (json.dumps(report, indent=2, sort_keys=True) + "\n").encode(),
        "bench-serving.md": markdown(report).encode(),
    }
    files = [os.path.join(dest, name) for name in (*outputs, "bench-serving.png")]
    # The JSON and the Markdown as they would change (the chart is drawn only when written).
    diffs = [
        file_diff(path, before, data)
        for path, data in ((os.path.join(dest, name), data) for name, data in outputs.items())
        if (before := read(path)) != data
    ]
    changed = False
    if not module.check_mode:
        os.makedirs(dest, mode=0o755, exist_ok=True)
        outputs["bench-serving.png"] = chart_png(report)
        for name, data in outputs.items():
            changed = write(os.path.join(dest, name), data) or changed
    module.exit_json(
        changed=changed if not module.check_mode else bool(diffs), files=files, cost=report["cost"],
        claude_code_cost=report.get("claude_code", {}).get("cost"),
        recipe_comparison=report["recipe_comparison"], summary=summary(report),
        **({"diff": diffs} if module._diff else {}),
    )  # fmt: skip


if __name__ == "__main__":
    main()
