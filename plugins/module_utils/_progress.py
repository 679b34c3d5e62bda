# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Human-readable sizes, durations and progress lines."""

from __future__ import annotations


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"


def human_seconds(s: float) -> str:
    s = round(s)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m{sec:02d}s" if h else f"{m}m{sec:02d}s" if m else f"{sec}s"


def progress_line(done: int, total: int, rate: float) -> str:
    eta = (total - done) / rate if rate > 0 else 0.0
    pct = 100.0 * done / total if total else 100.0
    return f"{human_bytes(done)} / {human_bytes(total)} ({pct:.0f}%), {human_bytes(rate)}/s, ETA {human_seconds(eta)}"
