"""The stand-in's Prometheus metrics, with SGLang 0.5.23's names, labels, types and buckets
(`sglang/srt/observability/metrics_collector.py` of the pinned wheel), driven by its real load.

SGLang exports two families:
- the scheduler's gauges (labels model_name, engine_type, tp_rank, pp_rank, moe_ep_rank; only rank 0
  of the attention TP group reports): num_running_reqs, num_queue_reqs, gen_throughput (decode
  tokens per second over the last log interval), token_usage (KV-cache tokens in use over
  max_total_num_tokens), cache_hit_rate, max_total_num_tokens, context_len;
- the tokenizer manager's counters and histograms, observed when a request finishes
  (tokenizer_manager.py 3220-3296 collect_metrics, metrics_collector.py 2092-2159): labels
  model_name, engine_type and every label of --tokenizer-metrics-allowed-custom-labels (empty
  unless the request's custom-labels header gave it a value: tokenizer_metric_labels, 1806-1819),
  is_streaming on prompt_tokens_total, generation_tokens_total, num_requests_total,
  time_to_first_token_seconds and e2e_request_latency_seconds, cache_source ("device" without a
  host cache) on cached_tokens_total, which counts only requests with cached tokens;
  num_aborted_requests_total and inter_token_latency_seconds carry the labels alone.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import deque
from dataclasses import dataclass, field

# SGLang 0.5.23's default buckets (metrics_collector.py, TokenizerMetricsCollector.__init__).
TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400)
ITL_BUCKETS = (
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100,
    0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000,
)  # fmt: skip
THROUGHPUT_WINDOW = 10.0  # seconds of decode the gen_throughput gauge averages over
# /v1/loads (sglang 0.5.23 entrypoints/v1_loads.py, managers/load_snapshot.py): the sections a
# caller may ask for, and LoadSnapshot's flat fields, returned under "core".
LOAD_SECTIONS = frozenset({"core", "memory", "spec", "lora", "disagg", "queues", "all"})
LOAD_CORE_KEYS = (
    "timestamp", "dp_rank", "num_running_reqs", "num_waiting_reqs", "num_waiting_uncached_tokens",
    "num_used_tokens", "num_total_tokens", "num_active_tokens", "num_prealloc_ready_tokens",
    "max_total_num_tokens", "max_running_requests", "token_usage", "gen_throughput", "cache_hit_rate",
    "utilization", "total_prefill_uncached_tokens", "total_prefill_busy_us", "decode_moments",
)  # fmt: skip


def _labels(labels: dict[str, str]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in labels.items())


def _num(value: float) -> str:
    return repr(float(value))


Labels = tuple[tuple[str, str], ...]  # one series' labels, in SGLang's order


@dataclass
class Histogram:
    buckets: tuple[float, ...]
    counts: dict[Labels, list[int]] = field(default_factory=dict)
    sums: dict[Labels, float] = field(default_factory=dict)

    def observe(self, key: Labels, value: float) -> None:
        counts = self.counts.setdefault(key, [0] * (len(self.buckets) + 1))
        counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sums[key] = self.sums.get(key, 0.0) + value

    def render(self, name: str) -> list[str]:
        lines = []
        for key, counts in sorted(self.counts.items()):
            base = _labels(dict(key))
            total = 0
            for bound, count in zip([*self.buckets, float("inf")], counts, strict=True):
                total += count
                le = "+Inf" if bound == float("inf") else repr(float(bound))
                lines.append(f'{name}_bucket{{{base},le="{le}"}} {_num(total)}')
            lines.append(f"{name}_sum{{{base}}} {_num(self.sums[key])}")
            lines.append(f"{name}_count{{{base}}} {_num(total)}")
        return lines


class Request:
    """One generation request from the moment it holds a running slot until it finishes."""

    def __init__(self, metrics: Metrics, streaming: bool) -> None:
        self.metrics = metrics
        self.streaming = streaming
        self.labels = dict(metrics.tokenizer_labels)  # and the request's custom labels, once known
        self.started = time.monotonic()
        self.last_tick: float | None = None
        self.first_token: float | None = None
        self.ticks = 0
        self.prompt = 0
        self.completion = 0
        self.cached = 0

    def tokens(self, prompt: int, completion: int, cached: int = 0) -> None:
        """The request's size, known once its answer is chosen: its prompt now holds KV cache (the
        prefix found in the cache is shared, not held again)."""
        self.prompt, self.completion, self.cached = prompt, completion, cached
        self.metrics.kv_add(prompt - cached)

    def label(self, custom: dict[str, str] | None) -> None:
        """The request's custom labels (already limited to the allowed ones) over the defaults."""
        self.labels.update(custom or {})

    def tick(self) -> None:
        """One step of generation sent to the client (a token, or a streamed piece)."""
        now = time.monotonic()
        if self.first_token is None:
            self.first_token = now
        elif self.last_tick is not None:
            self.metrics.itl.observe(tuple(self.labels.items()), now - self.last_tick)
        self.last_tick = now
        self.ticks += 1
        self.metrics.decoded(1)
        self.metrics.kv_add(1)

    def finish(self, aborted: bool = False) -> None:
        now = time.monotonic()
        self.metrics.finished(self, now, aborted)


class Metrics:
    def __init__(
        self,
        served_model_name: str,
        context_len: int,
        max_total_num_tokens: int,
        custom_labels: list[str] | None = None,
    ) -> None:
        self.lock = threading.Lock()
        self.context_len = context_len
        self.max_total_num_tokens = max_total_num_tokens
        base = {"model_name": served_model_name, "engine_type": "unified"}
        self.scheduler_labels = {**base, "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
        self.tokenizer_labels = {**base, **dict.fromkeys(custom_labels or (), "")}
        self.counters: dict[str, dict[Labels, float]] = {
            name: {} for name in (
                "prompt_tokens_total", "generation_tokens_total", "cached_tokens_total", "num_requests_total",
                "num_aborted_requests_total",
            )
        }  # fmt: skip
        self.kv_tokens = 0
        self.decode_log: deque[tuple[float, int]] = deque()
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)

    def _inc(self, name: str, labels: dict[str, str], value: float) -> None:
        series = self.counters[name]
        key = tuple(labels.items())
        series[key] = series.get(key, 0) + value

    def request(self, streaming: bool) -> Request:
        return Request(self, streaming)

    def kv_add(self, tokens: int) -> None:
        with self.lock:
            self.kv_tokens += tokens

    def decoded(self, tokens: int) -> None:
        with self.lock:
            self.decode_log.append((time.monotonic(), tokens))

    def finished(self, req: Request, now: float, aborted: bool) -> None:
        rest = max(
            req.completion - req.ticks, 0
        )  # tokens sent without a tick of their own (a streamed piece holds several)
        with self.lock:
            if rest:
                self.decode_log.append((now, rest))
            self.kv_tokens -= req.prompt - req.cached + req.ticks
            if aborted:
                self._inc("num_aborted_requests_total", req.labels, 1)
                return
            stream = {**req.labels, "is_streaming": "true" if req.streaming else "false"}
            self._inc("prompt_tokens_total", stream, req.prompt)
            self._inc("generation_tokens_total", stream, req.completion)
            if req.cached > 0:
                self._inc("cached_tokens_total", {**req.labels, "cache_source": "device"}, req.cached)
            self._inc("num_requests_total", stream, 1)
            self.ttft.observe(tuple(stream.items()), (req.first_token or now) - req.started)
            self.e2e.observe(tuple(stream.items()), now - req.started)

    def gen_throughput(self, now: float) -> float:
        while self.decode_log and self.decode_log[0][0] < now - THROUGHPUT_WINDOW:
            self.decode_log.popleft()
        return sum(tokens for _when, tokens in self.decode_log) / THROUGHPUT_WINDOW

    def load(self, running: int, queued: int, max_running_requests: int) -> dict[str, object]:
        """The one DP rank's LoadSnapshot as /v1/loads returns it (to_dict: every core key)."""
        now = time.monotonic()
        with self.lock:
            used = max(self.kv_tokens, 0)
            values: dict[str, object] = {
                "timestamp": time.time(),
                "dp_rank": 0,
                "num_running_reqs": running,
                "num_waiting_reqs": queued,
                "num_used_tokens": used,
                "num_total_tokens": used,
                "num_active_tokens": used,
                "max_total_num_tokens": self.max_total_num_tokens,
                "max_running_requests": max_running_requests,
                "token_usage": round(used / self.max_total_num_tokens, 4),
                "gen_throughput": self.gen_throughput(now),
                "decode_moments": None,
            }
        return {key: values.get(key, 0) for key in LOAD_CORE_KEYS}

    def render(self, running: int, queued: int) -> str:
        sched = _labels(self.scheduler_labels)
        with self.lock:
            gauges = {
                "num_running_reqs": running,
                "num_queue_reqs": queued,
                "gen_throughput": self.gen_throughput(time.monotonic()),
                "token_usage": round(self.kv_tokens / self.max_total_num_tokens, 2),
                "cache_hit_rate": 0.0,
                "max_total_num_tokens": self.max_total_num_tokens,
                "context_len": self.context_len,
            }
            lines = []
            for name, value in gauges.items():
                lines += [f"# TYPE sglang:{name} gauge", f"sglang:{name}{{{sched}}} {_num(value)}"]
            # A counter shows its series once a request has counted in it, as prometheus_client does
            # for labelled metrics; with no series yet, SGLang's zero-valued base series.
            for name, series in self.counters.items():
                lines.append(f"# TYPE sglang:{name} counter")
                lines += [
                    f"sglang:{name}{{{_labels(dict(key))}}} {_num(value)}" for key, value in sorted(series.items())
                ]
            for name, hist in (
                ("time_to_first_token_seconds", self.ttft),
                ("inter_token_latency_seconds", self.itl),
                ("e2e_request_latency_seconds", self.e2e),
            ):
                lines.append(f"# TYPE sglang:{name} histogram")
                lines += hist.render(f"sglang:{name}")
        return "\n".join(lines) + "\n"
