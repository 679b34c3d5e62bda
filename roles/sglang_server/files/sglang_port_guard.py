# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Close the server's published port to every source but the allowed ones, whatever docker does.

    python3 sglang-port-guard CHAIN PORT [SOURCE...]
    python3 sglang-port-guard --check CHAIN PORT [SOURCE...]
    python3 sglang-port-guard --repair CHAIN PORT [SOURCE...]

Docker publishes a port with DNAT rules that bypass the host's INPUT chain, and engines before 28
route LAN traffic to a port published on 127.0.0.1 as well (see CVE-2025-54388). Packets forwarded
to a container pass docker's DOCKER-USER chain first; this puts one rule there that sends every
new connection whose original destination port is PORT to CHAIN, and fills CHAIN with: accept the
allowed sources (addresses or CIDRs), drop the rest. The node's own connections to 127.0.0.1 go
through docker's proxy, not the FORWARD path, and stay open. Idempotent: run before every start
(rules do not survive a reboot). It fails (exit 1, so the server does not start) where the FORWARD
chain does not pass through DOCKER-USER: its rules would then guard nothing.

With --check it changes nothing and says what is not in place (a firewall reload or an
`iptables -F` removes the rules while the server runs): exit 0 when all is, 3 with one line naming
what is missing when not. glm.fleet.sglang_server's plan runs it on every run and puts back what is
missing.

With --repair it puts the guard back only where something of it is not in place, and says what it
found missing (glm-sglang-port-guard.timer runs it every 15 s, between runs): exit 0 when the guard
stands (as it was or put back), 1 when it cannot be put back (the FORWARD chain does not pass
through DOCKER-USER: the unit fails, and the next run's plan names it).
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
import sys


def iptables(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("iptables") or "/usr/sbin/iptables"
    return subprocess.run([binary, "-w", *args], check=check, capture_output=True, text=True)


def rules(chain: str, sources: list[str]) -> list[list[str]]:
    """The chain's rules, in order."""
    allowed = [["-A", chain, "-s", str(ipaddress.ip_network(s, strict=False)), "-j", "RETURN"] for s in sources]
    return [*allowed, ["-A", chain, "-j", "DROP"]]


def jump(chain: str, port: int) -> list[str]:
    match = ["-p", "tcp", "-m", "conntrack", "--ctstate", "NEW", "--ctorigdstport", str(port)]
    return ["DOCKER-USER", *match, "-j", chain]


FORWARD_JUMP = ("FORWARD", "-j", "DOCKER-USER")


def check(chain: str, port: int, sources: list[str]) -> list[str]:
    """What of the guard is not in place; empty when all of it is."""
    problems = []
    if iptables("-C", *FORWARD_JUMP, check=False).returncode != 0:
        problems.append("the FORWARD chain does not jump to DOCKER-USER")
    if iptables("-C", *jump(chain, port), check=False).returncode != 0:
        problems.append(f"DOCKER-USER does not send port {port} to {chain}")
    listed = iptables("-S", chain, check=False)
    have = [line.split() for line in listed.stdout.splitlines() if line.startswith("-A ")]
    if listed.returncode != 0:
        problems.append(f"the chain {chain} is missing")
    elif have != rules(chain, sources):
        problems.append(
            f"the chain {chain} holds other rules than accept {', '.join(sources) or 'none'}, drop the rest"
        )
    return problems


def apply(chain: str, port: int, sources: list[str]) -> None:
    if iptables("-n", "-L", "DOCKER-USER", check=False).returncode != 0:
        iptables("-N", "DOCKER-USER")
    if iptables("-n", "-L", chain, check=False).returncode != 0:
        iptables("-N", chain)
    iptables("-F", chain)
    for rule in rules(chain, sources):
        iptables(*rule)
    if iptables("-C", *jump(chain, port), check=False).returncode != 0:
        iptables("-I", *jump(chain, port))
    if iptables("-C", *FORWARD_JUMP, check=False).returncode != 0:
        raise GuardError(
            "the FORWARD chain does not jump to DOCKER-USER, so its rules would guard nothing (docker's own iptables"
            " rules turned off?): refusing to start the server with its port unguarded"
        )


class GuardError(Exception):
    pass


def main(argv: list[str]) -> int:
    mode = argv[0] if argv[:1] in (["--check"], ["--repair"]) else ""
    argv = argv[1:] if mode else argv
    if len(argv) < 2:
        sys.stderr.write("usage: sglang-port-guard [--check|--repair] CHAIN PORT [SOURCE...]\n")
        return 2
    chain, port, sources = argv[0], int(argv[1]), argv[2:]
    problems = check(chain, port, sources) if mode else []
    if mode == "--check":
        print("; ".join(problems) or f"port {port} open to {', '.join(sources) or 'no other host'} only")
        return 3 if problems else 0
    if mode == "--repair" and not problems:
        return 0
    try:
        apply(chain, port, sources)
    except subprocess.CalledProcessError as err:
        sys.stderr.write(f"sglang-port-guard: {' '.join(err.cmd)} failed: {err.stderr.strip()}\n")
        return 1
    except GuardError as err:
        sys.stderr.write(f"sglang-port-guard: {err}\n")
        return 1
    found = f" (put back: {'; '.join(problems)})" if problems else ""
    print(f"sglang-port-guard: port {port} open to {', '.join(sources) or 'no other host'} only (chain {chain}){found}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
