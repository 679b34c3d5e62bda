"""The lab's upstream CA: it signs the certificate of the lab's HTTPS stand-in of NVIDIA's apt
repository (tests/lab/https_static.py), as a site's own CA signs its mirror's. It is not the fleet's
site CA (glm.fleet makes that one) and no host trusts it by default: the inventory hands its
certificate to the role that needs it (nvidia_container_toolkit_repo_ca). Made once per lab with the
collection's own certificate code."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from glm_lab.config import STATE_DIR

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "collections"))
_tls = importlib.import_module("ansible_collections.glm.fleet.plugins.module_utils._tls")  # the collection's

DIR = STATE_DIR / "upstream-tls"


def server_files(address: str) -> tuple[Path, Path, Path]:
    """(the CA's certificate, the server's certificate, its key) for `address`, made on first use."""
    ca, cert, key = DIR / "ca.pem", DIR / f"{address}.pem", DIR / f"{address}.key"
    if not (ca.exists() and cert.exists() and key.exists()):
        DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        ca_key = _tls.new_key_pem()
        ca_pem = _tls.new_ca_pem(ca_key, "glm.fleet lab upstream CA", 365)
        server_key = _tls.new_key_pem()
        key.touch(mode=0o600)
        key.write_bytes(server_key)
        cert.write_bytes(_tls.new_server_cert_pem(ca_key, ca_pem, server_key, [address], 365))
        ca.write_bytes(ca_pem)
    return ca, cert, key
