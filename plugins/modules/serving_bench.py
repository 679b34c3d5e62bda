#!/usr/bin/python
# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: serving_bench
short_description: Measure what an SGLang fleet serves over a sweep of concurrent streaming users
version_added: 0.1.0
description:
  - For each level of O(concurrency), keeps that many clients busy with streamed chat completions
    (C(/v1/chat/completions)) of O(input_tokens) in and exactly O(output_tokens) out (SGLang's
    C(ignore_eos)), O(requests_per_client) each, spread over O(targets) in turn, and reports the
    level's output and input throughput, the speed each user saw (1000 / median time per output
    token), time to first token, inter-token latency and end-to-end latency percentiles, with the
    definitions of SGLang's own benchmark (C(sglang/benchmark/serving.py)).
  - Prompts are random word sequences sized from the server's own count of two probe prompts, so
    that none shares a cached prefix; token counts come from the stream's usage.
  - With O(profile=claude_code), each client holds conversations shaped as Claude Code's are instead, one after
    the other, O(requests_per_client) each, with a system prompt of O(system_tokens) that every conversation shares,
    O(context_tokens) of the conversation's own, then O(turns) requests, each adding O(input_tokens) and sending
    the whole conversation so far with the server's own answers of O(output_tokens). The servers' prefix cache
    serves most of each prompt, as it does for Claude Code; the figures add the cached input the servers reported
    and each turn's prompt and cache.
  - Sends load and changes nothing. In check mode it sends nothing.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  targets:
    description: Base URLs to send to (the gateway's, or each server's), C(http) or C(https).
    type: list
    elements: str
    required: true
  api_key:
    description: "The key the targets want, sent as C(Authorization: Bearer <key>)."
    type: str
  ca_file:
    description: CA certificate (PEM file on the host the module runs on) that signed an C(https) target's certificate.
    type: path
  model:
    description: The model name to ask for.
    type: str
    required: true
  concurrency:
    description: The levels of concurrent users, measured in this order.
    type: list
    elements: int
    required: true
  input_tokens:
    description:
      - Prompt length of every request, in the server's tokens (chat template included).
      - With O(profile=claude_code), the tokens each turn adds (the tool results and the message), in the model's
        tokenizer's count of the text.
    type: int
    required: true
  profile:
    description:
      - C(synthetic) sends independent requests of fixed lengths.
      - C(claude_code) sends conversations that grow a long shared prefix (see O(turns), O(system_tokens),
        O(context_tokens)); O(requests_per_client) is then the conversations each client holds at a level.
    type: str
    choices: [synthetic, claude_code]
    default: synthetic
  turns:
    description: Requests in each conversation (with O(profile=claude_code)).
    type: int
    default: 8
  system_tokens:
    description:
      - The system prompt every conversation shares, in the model's tokenizer's count (with O(profile=claude_code)).
    type: int
    default: 12000
  context_tokens:
    description:
      - The opening context of each conversation, its own, in the model's tokenizer's count (with
        O(profile=claude_code)).
    type: int
    default: 4000
  output_tokens:
    description: Output length of every request, in tokens.
    type: int
    required: true
  requests_per_client:
    description:
      - Requests each client sends at a level (a level sends concurrency x this many); with O(profile=claude_code),
        conversations.
    type: int
    default: 4
  request_timeout:
    description: Seconds one request may go without a byte before it counts as failed.
    type: float
    default: 600
  seed:
    description:
      - Seed of the prompts' words. By default a new one each run (reported in RV(calibration)), so that no prompt
        of a run finds another run's prompt in the servers' prefix cache; set it to send the same prompts again.
    type: int
  load_generator:
    description:
      - C(aiperf) runs NVIDIA's AIPerf (C(aiperf profile)) for each level, a closed loop of O(concurrency) streams
        round-robin over O(targets), and computes the figures from its per-request records.
        The key reaches it through its environment, never its argv or its configuration file.
      - C(builtin) sends the requests with this collection's own client (standard library only).
      - Either way, the prompts are sized from two probe requests' token counts, so that each request's input
        is O(input_tokens) as the server counts it (chat template included).
    type: str
    choices: [aiperf, builtin]
    default: builtin
  aiperf:
    description: The C(aiperf) executable (with O(load_generator=aiperf)).
    type: path
  tokenizer:
    description:
      - Directory with the model's C(tokenizer.json) (and C(tokenizer_config.json) when the model has one), with
        which AIPerf sizes its prompts (with O(load_generator=aiperf)).
    type: path
  artifacts_dir:
    description:
      - Where AIPerf writes each level's configuration and exports, in C(concurrency-<N>) (with
        O(load_generator=aiperf)). AIPerf writes C(<redacted>) for the key.
    type: path
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - glm.fleet.attributes
attributes:
  check_mode:
    support: full
    details: Sends nothing in check mode.
  diff_mode:
    support: none
    details: Changes nothing.
  platform:
    platforms: posix
    description: Runs on the host it is given, which must reach the targets.
    support: full
  idempotent:
    description: Changes nothing on any host.
    support: full
"""

EXAMPLES = r"""
- name: Sweep 1 to 256 users through the gateway
  glm.fleet.serving_bench:
    targets: ["https://gateway.example.internal"]
    api_key: "{{ bench_key }}"
    ca_file: /etc/glm-fleet/ca.pem
    model: zai-org/GLM-5.3-Flash
    concurrency: [1, 4, 16, 64, 256]
    input_tokens: 1024
    output_tokens: 1024
  register: bench
"""

RETURN = r"""
levels:
  description:
    - One entry per level, in order, with C(concurrency), C(requests), C(completed), C(failed),
      C(first_error), C(duration_s), C(output_throughput), C(busy_output_throughput) (while every
      client was busy, without the ramp-down of the level's last requests), C(input_throughput),
      C(request_throughput), C(per_user_tps), C(mean_input_tokens), C(mean_output_tokens) and
      C(ttft_ms), C(itl_ms), C(tpot_ms), C(e2e_ms) (each C(mean), C(p50), C(p90), C(p95), C(p99)), and the input the
      servers found in their prefix cache (C(cached_input_tokens), C(cached_input_throughput), C(cached_input_share)).
    - With O(profile=claude_code), also C(turns), per place in the conversation, its C(requests),
      C(mean_input_tokens), C(mean_cached_input_tokens) and C(ttft_ms_p50).
    - With O(load_generator=aiperf), also C(aiperf), AIPerf's own figures for the level as a cross-check
      (C(output_throughput), C(per_user_tps_p50), C(ttft_p50_ms)).
  returned: success
  type: list
  elements: dict
calibration:
  description:
    - How the prompts were sized (C(words), C(tokens_per_word), C(template_tokens)), and by which load generator
      (C(load_generator), for AIPerf with its version and the prompt length it was given, C(aiperf_isl)), the
      C(profile) and the C(seed) of the prompts.
  returned: success
  type: dict
failed_requests:
  description: Requests that failed, over all levels.
  returned: success
  type: int
"""

import json
import os
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm.fleet.plugins.module_utils import _aiperf
from ansible_collections.glm.fleet.plugins.module_utils._bench_metrics import level_metrics
from ansible_collections.glm.fleet.plugins.module_utils._serving_load import Target, run_level, run_sessions, words_for


def aiperf_levels(module: AnsibleModule, isl: int) -> tuple[list[dict[str, Any]], str]:
    """Each level through AIPerf: its configuration file, its run, its records as samples."""
    p = module.params
    version = "unknown"
    env = _aiperf.environment(os.environ, p["api_key"], p["ca_file"])
    levels = []
    conversations = p["profile"] == "claude_code"
    for concurrency in p["concurrency"]:
        artifacts = os.path.join(p["artifacts_dir"], p["profile"], f"concurrency-{concurrency}")
        _aiperf.prepare(artifacts)
        sessions = {"count": concurrency * p["requests_per_client"], "turns": p["turns"],
                    "system": p["system_tokens"], "context": p["context_tokens"]}  # fmt: skip
        config = _aiperf.level_config(
            urls=p["targets"], model=p["model"], concurrency=concurrency,
            requests=concurrency * p["requests_per_client"], isl=isl, osl=p["output_tokens"],
            timeout=p["request_timeout"], seed=p["seed"] + len(levels), tokenizer=p["tokenizer"],
            artifacts=artifacts, with_key=bool(p["api_key"]), sessions=sessions if conversations else None,
        )  # fmt: skip
        config_file = os.path.join(artifacts, "aiperf.yaml")
        with open(os.open(config_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as f:
            json.dump(config, f, indent=1)  # JSON is YAML
        result = _aiperf.run(p["aiperf"], config_file, env)
        lines = _aiperf.read_records(artifacts)
        if lines is None:
            tail = (result.stdout + result.stderr)[-2000:]
            module.fail_json(msg=f"serving benchmark: aiperf wrote no records for {concurrency} users "
                             f"(exit status {result.returncode}): {tail}")  # fmt: skip
        version = _aiperf.read_version(artifacts) or version
        samples = _aiperf.samples(lines)
        duration, window = _aiperf.span(samples, concurrency)
        levels.append(
            {**level_metrics(concurrency, samples, duration, window), "aiperf": _aiperf.own_figures(artifacts)}
        )
    return levels, f"aiperf {version}"


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "targets": {"type": "list", "elements": "str", "required": True},
            "api_key": {"type": "str", "no_log": True},
            "ca_file": {"type": "path"},
            "model": {"type": "str", "required": True},
            "concurrency": {"type": "list", "elements": "int", "required": True},
            "input_tokens": {"type": "int", "required": True, "no_log": False},
            "output_tokens": {"type": "int", "required": True, "no_log": False},
            "requests_per_client": {"type": "int", "default": 4},
            "request_timeout": {"type": "float", "default": 600},
            "seed": {"type": "int"},
            "profile": {"type": "str", "choices": ["synthetic", "claude_code"], "default": "synthetic"},
            "turns": {"type": "int", "default": 8},
            "system_tokens": {"type": "int", "default": 12000, "no_log": False},
            "context_tokens": {"type": "int", "default": 4000, "no_log": False},
            "load_generator": {"type": "str", "choices": ["aiperf", "builtin"], "default": "builtin"},
            "aiperf": {"type": "path"},
            "tokenizer": {"type": "path"},
            "artifacts_dir": {"type": "path"},
        },
        required_if=[("load_generator", "aiperf", ("aiperf", "tokenizer", "artifacts_dir"))],
        supports_check_mode=True,
    )
    p = module.params
    if module.check_mode:
        module.exit_json(changed=False, levels=[], calibration={}, failed_requests=0)
    if p["seed"] is None:
        p["seed"] = int.from_bytes(os.urandom(3), "big")
    targets = [Target(url, p["api_key"], p["ca_file"], p["request_timeout"]) for url in p["targets"]]
    try:
        words, calibration = words_for(targets, p["model"], p["input_tokens"])
    except RuntimeError as err:
        module.fail_json(msg=f"serving benchmark: {err}")
    conversations = p["profile"] == "claude_code"
    if p["load_generator"] == "aiperf":
        # AIPerf counts a prompt's tokens before the chat template; the server counts them with it. A
        # conversation's parts are counted as the tokenizer counts their text, so AIPerf takes them as they are.
        isl = p["input_tokens"] if conversations else max(1, p["input_tokens"] - round(calibration["template_tokens"]))
        calibration["aiperf_isl"] = isl
        levels, generator = aiperf_levels(module, int(isl))
    else:
        levels, generator = [], "builtin"
        per_word = calibration["tokens_per_word"]
        parts = {name: max(1, round(p[option] / per_word)) for name, option in
                 (("system", "system_tokens"), ("context", "context_tokens"), ("turn", "input_tokens"))}  # fmt: skip
        for concurrency in p["concurrency"]:
            seed = p["seed"] + 1_000_000 * len(levels)
            if conversations:
                samples, duration, window = run_sessions(
                    targets, p["model"], concurrency=concurrency, sessions=concurrency * p["requests_per_client"],
                    turns=p["turns"], words=parts, max_tokens=p["output_tokens"], seed=seed,
                )  # fmt: skip
            else:
                samples, duration, window = run_level(
                    targets, p["model"], concurrency=concurrency, requests=concurrency * p["requests_per_client"],
                    words=words, max_tokens=p["output_tokens"], seed=seed,
                )  # fmt: skip
            levels.append(level_metrics(concurrency, samples, duration, window))
    module.exit_json(
        changed=False,
        levels=levels,
        calibration={
            "load_generator": generator,
            "profile": p["profile"],
            "seed": p["seed"],
            "words": words,
            **calibration,
        },
        failed_requests=sum(level["failed"] for level in levels),
    )


if __name__ == "__main__":
    main()
