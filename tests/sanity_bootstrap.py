"""Let `ansible-test sanity --local` bootstrap pip in its virtual environments without network.

ansible-test downloads a get-pip script from Ansible's CI file host, which cannot be reached from
the lab machines. This writes, into ansible-test's cache, a script that does the same job with the
standard library's ensurepip and then installs what ansible-test asked for from the package index
that pip is configured with.
"""

from __future__ import annotations

import re
from pathlib import Path

import ansible_test

SHIM = """\
# Offline stand-in for get-pip: bootstrap pip with ensurepip, then install what was asked.
import ensurepip, os, subprocess, sys
ensurepip.bootstrap()
os.environ.pop("PIP_CONFIG_FILE", None)  # ensurepip sets it to /dev/null; keep the system pip config
os.environ.pop("ENSUREPIP_OPTIONS", None)
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "pip", "install"] + args)
"""


def wanted_pip_version() -> str:
    source = (Path(ansible_test.__file__).parent / "_internal" / "python_requirements.py").read_text()
    match = re.search(r"pip='([0-9.]+)'", source)
    if not match:
        raise SystemExit("sanity_bootstrap: cannot find the pip version that ansible-test bootstraps")
    return match.group(1)


def main() -> None:
    cache = Path.home() / ".ansible" / "test" / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / f"get_pip_{wanted_pip_version().replace('.', '_')}.py"
    target.write_text(SHIM)
    print(f"sanity_bootstrap: wrote {target}")


if __name__ == "__main__":
    main()
