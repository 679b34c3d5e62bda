# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""glm.fleet's gateway keys: nginx's maps of the developers' keys that are valid now, of the expired,
of those whose hard monthly budget is spent and of those over their tokens a minute, from a ledger
of each developer's tokens.

    python3 gateway-keys KEYS [--reload]

KEYS (JSON, root-only, written by glm.fleet.gateway): {"format": 1, "map_dir": DIR, "developers":
{NAME: {"sha256": HEX, "expires": "YYYY-MM-DDTHH:MM:SSZ" or null}}, "usage": {"ledger": FILE,
"textfile": FILE, "workers": [URL], "tls": {"ca", "cert", "key"} (FILEs, for https:// workers) or null,
"prices": {"input", "cached_input", "output"} ($ per 1M),
"budgets": {NAME: {"monthly": N, "unit": "usd" or "tokens", "warn_percent": P, "hard": BOOL}},
"limits": {NAME: {"tokens_per_minute": N, ...}}}}. The gateway never holds a developer's key: nginx
hashes the key a request presents (njs) and looks the hash up in DIR/developer-keys.map (valid now:
the developer's name), DIR/expired-keys.map (expired: when), DIR/spent-keys.map (a hard budget spent: what to tell
them) and DIR/throttled-keys.map (over the tokens a minute: what to tell them).

The ledger: each run reads every server's token counters (SGLang's /metrics: prompt_tokens_total,
cached_tokens_total, generation_tokens_total, labelled by developer) and adds their growth since
the last run to each developer's month (UTC), and to the tokens the servers computed for them
(input not from the cache, and output). A server's new process counts whole: one where a series
the last run saw is missing or lower. A server seen for the first time is the baseline (its tokens
before count nowhere); a server that does not answer is read again at the next run. The month's
totals and each budget's share go to FILE "textfile" for node exporter (Prometheus warns from it),
a spent hard budget into its map, and a developer whose computed tokens from the run a minute
before to this one exceed their tokens a minute into the throttled map, until the next run.

Each file is replaced only when its text changes. With --reload, nginx reloads when a map did (a
reload lets requests in flight finish; new ones see the new maps). The gateway's timer runs this
every minute, so a key stops working within a minute of its expiry, of its hard budget being
spent or of its tokens a minute being passed, without a run of Ansible. One line of JSON on stdout:
{"changed": BOOL, "valid": [NAMES], "expired": [NAMES], "spent": [NAMES], "throttled": [NAMES]}.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import re
import ssl
import subprocess
import sys
import tempfile
import urllib.request

MOMENT = "%Y-%m-%dT%H:%M:%SZ"
HEX = re.compile(r"[0-9a-f]{64}")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
HEADER = "# glm.fleet gateway-keys: written from {}; changes here are overwritten.\n"


def maps(keys: dict, now: datetime.datetime) -> tuple[str, str, list[str], list[str]]:
    """The two maps' text for the moment now, and the names in each."""
    valid, expired = [], []
    valid_lines, expired_lines = [], []
    for name, record in sorted(keys["developers"].items()):
        if not NAME.fullmatch(name) or not HEX.fullmatch(str(record.get("sha256", ""))):
            raise ValueError(f"{name!r}: a developer needs a name of letters, digits, . _ - and a 64-hex sha256")
        expires = record.get("expires")
        moment = datetime.datetime.strptime(expires, MOMENT).replace(tzinfo=datetime.UTC) if expires else None
        if moment is not None and moment <= now:
            expired.append(name)
            expired_lines.append(f'"{record["sha256"]}" "{expires}";\n')
        else:
            valid.append(name)
            valid_lines.append(f'"{record["sha256"]}" "{name}";\n')
    return "".join(valid_lines), "".join(expired_lines), valid, expired


COUNTERS = {
    "sglang:prompt_tokens_total": "input",
    "sglang:cached_tokens_total": "cached_input",
    "sglang:generation_tokens_total": "output",
}
SAMPLE = re.compile(r"(sglang:[a-z_]+)\{(.*)\} ([0-9.eE+-]+)")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
KINDS = ("input", "cached_input", "output")
MINUTE = 60
SNAPSHOTS_KEPT = 5 * MINUTE  # seconds of the ledger's runs kept, for the tokens of the last minute


def counters(text: str) -> dict[str, float]:
    """A server's token counters from its /metrics text: each series (its name and labels, one
    string) to its value."""
    found = {}
    for line in text.splitlines():
        match = SAMPLE.fullmatch(line.strip())
        if match and match.group(1) in COUNTERS:
            found[f"{match.group(1)}{{{match.group(2)}}}"] = float(match.group(3))
    return found


def developer_and_kind(series: str) -> tuple[str, str]:
    name, labels = series.split("{", 1)
    return dict(LABEL.findall(labels)).get("developer", ""), COUNTERS[name]


def grown(old: dict[str, float] | None, new: dict[str, float]) -> dict[str, float]:
    """Each series' growth from one reading of a server to the next: nothing at a first reading (the
    baseline); a new process (a series gone, or lower) counts whole; a series born counts from 0."""
    if old is None:
        return {}
    anew = any(series not in new or new[series] < value for series, value in old.items())
    return {series: value if anew else value - old.get(series, 0.0) for series, value in new.items()}


def client_context(tls: dict | None) -> ssl.SSLContext | None:
    """For https:// servers behind their TLS front: the site CA, and the gateway's client certificate."""
    if not tls:
        return None
    context = ssl.create_default_context(cafile=tls["ca"])
    context.load_cert_chain(tls["cert"], tls["key"])
    return context


def fetch(url: str, context: ssl.SSLContext | None = None) -> str | None:
    try:
        # The fleet's servers, http:// or https:// only (the gateway's preflight).
        with urllib.request.urlopen(f"{url}/metrics", timeout=5, context=context) as response:  # noqa: S310
            return response.read().decode("utf-8", "replace")
    except OSError:
        return None


def cost(used: dict[str, float], prices: dict[str, float]) -> float:
    uncached = max(used["input"] - used["cached_input"], 0.0)
    return (
        uncached * float(prices["input"])
        + used["cached_input"] * float(prices["cached_input"])
        + used["output"] * float(prices["output"])
    ) / 1e6


def account(ledger: dict, readings: dict[str, str | None], month: str, now: float = 0.0) -> dict:
    """The ledger after this run's readings of the servers (URL to /metrics text, None: no answer) at
    `now`: each developer's month by kind, and the tokens the servers computed for each (input not
    from the cache, and output) since the ledger began, as they stood at each run of the last minutes."""
    if ledger.get("month") != month:
        ledger = {**ledger, "month": month, "developers": {}}
    ledger.setdefault("servers", {})
    computed = ledger.setdefault("computed", {})
    sign = {"input": 1, "cached_input": -1, "output": 1}
    for url, text in readings.items():
        if text is None:
            continue
        new = counters(text)
        for series, growth in grown(ledger["servers"].get(url), new).items():
            developer, kind = developer_and_kind(series)
            if developer and growth:
                mine = ledger["developers"].setdefault(developer, dict.fromkeys(KINDS, 0.0))
                mine[kind] += growth
                computed[developer] = computed.get(developer, 0.0) + sign[kind] * growth
        ledger["servers"][url] = new
    ledger["servers"] = {url: seen for url, seen in ledger["servers"].items() if url in readings}
    kept = [snapshot for snapshot in ledger.get("snapshots", []) if now - snapshot[0] <= SNAPSHOTS_KEPT]
    ledger["snapshots"] = [*kept, [now, dict(computed)]]
    return ledger


def over_tokens_per_minute(ledger: dict, limits: dict[str, int]) -> dict[str, str]:
    """The developers over their tokens-per-minute limit, and what the gateway tells them: the tokens
    the servers computed for them (input not from the cache, and output) from the newest run at least
    a minute before this one (or, in the ledger's first minute, its first run) to this one, per
    minute (over less than a minute, as they are)."""
    snapshots = ledger.get("snapshots", [])
    if len(snapshots) < 2:
        return {}
    now, current = snapshots[-1]
    earlier = [snapshot for snapshot in snapshots[:-1] if now - snapshot[0] >= MINUTE - 5]
    then, past = earlier[-1] if earlier else snapshots[0]
    over = {}
    for name, limit in sorted(limits.items()):
        rate = max(current.get(name, 0.0) - past.get(name, 0.0), 0.0) * MINUTE / max(now - then, MINUTE)
        if rate > limit:
            over[name] = (
                f"this key is over its limit of {limit} tokens a minute (input not from the cache and output:"
                f" {rate:.0f} in the last minute); retry after {MINUTE} s"
            )
    return over


def budgets(ledger: dict, usage: dict) -> tuple[str, dict[str, str]]:
    """The textfile for node exporter (each developer's month, each budget's share), and for each
    developer whose hard budget is spent, what the gateway tells them."""
    lines = [
        "# HELP glm_fleet_developer_month_tokens Tokens this calendar month (UTC) by developer and kind, from the"
        " gateway's ledger of the servers' counters.",
        "# TYPE glm_fleet_developer_month_tokens gauge",
    ]
    developers = ledger.get("developers", {})
    for name, used in sorted(developers.items()):
        lines += [
            f'glm_fleet_developer_month_tokens{{developer="{name}",kind="{kind}"}} {used[kind]:.0f}' for kind in KINDS
        ]
    lines += [
        "# HELP glm_fleet_developer_budget_used_ratio The share of the developer's monthly budget used (1: spent).",
        "# TYPE glm_fleet_developer_budget_used_ratio gauge",
        "# HELP glm_fleet_developer_budget_warn_ratio The share of the developer's budget at which it warns.",
        "# TYPE glm_fleet_developer_budget_warn_ratio gauge",
    ]
    spent = {}
    for name, budget in sorted(usage.get("budgets", {}).items()):
        used = developers.get(name, dict.fromkeys(KINDS, 0.0))
        if budget["unit"] == "usd":
            amount = cost(used, usage["prices"])
            shown, of = f"USD {amount:.2f}", f"USD {budget['monthly']:.2f}"
        else:
            amount = used["input"] + used["output"]
            shown, of = f"{amount:.0f} tokens", f"{budget['monthly']:.0f} tokens"
        ratio = amount / budget["monthly"]
        hard = "true" if budget["hard"] else "false"
        labels = f'developer="{name}",unit="{budget["unit"]}",hard="{hard}"'
        lines.append(f"glm_fleet_developer_budget_used_ratio{{{labels}}} {ratio:.6f}")
        lines.append(f'glm_fleet_developer_budget_warn_ratio{{developer="{name}"}} {budget["warn_percent"] / 100:.2f}')
        if budget["hard"] and ratio >= 1:
            spent[name] = (
                f"{name}: the monthly budget of {of} is spent ({shown} used in {ledger['month']}); it starts anew"
                f" next month, or ask your operator to raise it"
            )
    return "\n".join(lines) + "\n", spent


def replace(path: str, text: str, mode: int = 0o600) -> bool:
    """Write text to path (root-only unless mode says otherwise) when it differs; whether it did."""
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return False
    except FileNotFoundError:
        pass
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".gateway-keys.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return True


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-") or set(argv[1:]) - {"--reload"}:
        sys.stderr.write("usage: gateway-keys KEYS [--reload]\n")
        return 2
    path = argv[0]
    with open(path, encoding="utf-8") as f:
        keys = json.load(f)
    now = datetime.datetime.now(datetime.UTC)
    valid_map, expired_map, valid, expired = maps(keys, now)
    spent: dict[str, str] = {}
    throttled: dict[str, str] = {}
    usage = keys.get("usage")
    if usage:
        # One run at a time reads and writes the ledger (the timer's, and Ansible's).
        with open(usage["ledger"] + ".lock", "a", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                with open(usage["ledger"], encoding="utf-8") as f:
                    ledger = json.load(f)
            except FileNotFoundError:
                ledger = {}
            context = client_context(usage.get("tls"))
            readings = {url: fetch(url, context) for url in usage["workers"]}
            ledger = account(ledger, readings, now.strftime("%Y-%m"), now.timestamp())
            replace(usage["ledger"], json.dumps(ledger, sort_keys=True) + "\n")
            textfile, spent = budgets(ledger, usage)
            replace(usage["textfile"], textfile, 0o644)
            limits = {name: int(own["tokens_per_minute"]) for name, own in usage.get("limits", {}).items()}
            throttled = over_tokens_per_minute(ledger, limits)
    spent_map = "".join(
        f'"{keys["developers"][name]["sha256"]}" "{message}";\n'
        for name, message in sorted(spent.items())
        if name in keys["developers"]
    )
    throttled_map = "".join(
        f'"{keys["developers"][name]["sha256"]}" "{message}";\n'
        for name, message in sorted(throttled.items())
        if name in keys["developers"]
    )
    header = HEADER.format(path)
    changed = replace(os.path.join(keys["map_dir"], "developer-keys.map"), header + valid_map)
    changed = replace(os.path.join(keys["map_dir"], "expired-keys.map"), header + expired_map) or changed
    changed = replace(os.path.join(keys["map_dir"], "spent-keys.map"), header + spent_map) or changed
    changed = replace(os.path.join(keys["map_dir"], "throttled-keys.map"), header + throttled_map) or changed
    if changed and "--reload" in argv[1:]:
        subprocess.run(["systemctl", "reload", "nginx"], check=True)
    print(json.dumps({
        "changed": changed, "valid": valid, "expired": expired, "spent": sorted(spent), "throttled": sorted(throttled)
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
