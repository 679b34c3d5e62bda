"""glm.fleet.tls_certificate: a site CA created once, and a server certificate kept fit."""

from __future__ import annotations

import ssl
import stat
from pathlib import Path
from typing import Any

from cryptography import x509

from ansible_collections.glm.fleet.plugins.module_utils import _tls
from ansible_collections.glm.fleet.plugins.modules import tls_certificate
from ansible_collections.glm.fleet.plugins.modules.tls_certificate import apply, diff, plan


def params(tmp_path: Path, names: list[str]) -> dict:
    return {"ca_dir": str(tmp_path / "ca"), "ca_name": "test CA", "name": "gw", "names": names,
            "ca_days": 1095, "days": 365}  # fmt: skip


def test_a_new_ca_signs_a_certificate_that_python_ssl_trusts(tmp_path: Path) -> None:
    p = params(tmp_path, ["gw.example.internal", "10.0.0.5"])
    paths, todo = plan(p)
    assert todo == ["ca_key: none yet", "ca_cert: none yet", "key: none yet", "cert: issued with the new files"]
    assert not (tmp_path / "ca").exists()  # planning changes nothing (check mode)
    apply(p, paths)
    assert plan(p)[1] == []  # a second run has nothing to do
    for private in ("ca.key", "gw.key"):
        assert stat.S_IMODE((tmp_path / "ca" / private).stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "ca").stat().st_mode) == 0o700
    ctx = ssl.create_default_context(cafile=paths["ca_cert"])
    ctx.load_cert_chain(paths["cert"], paths["key"])  # the pair matches
    cert = ssl._ssl._test_decode_cert(paths["cert"])
    assert ("IP Address", "10.0.0.5") in cert["subjectAltName"]
    assert ("DNS", "gw.example.internal") in cert["subjectAltName"]


def test_new_names_reissue_the_certificate_but_keep_the_ca_and_keys(tmp_path: Path) -> None:
    p = params(tmp_path, ["10.0.0.5"])
    apply(p, plan(p)[0])
    before = {f.name: f.read_bytes() for f in (tmp_path / "ca").iterdir()}
    p["names"] = ["10.0.0.5", "gw.example.internal"]
    paths, todo = plan(p)
    assert len(todo) == 1
    assert todo[0].startswith("cert: names ['10.0.0.5'] differ")
    apply(p, paths)
    after = {f.name: f.read_bytes() for f in (tmp_path / "ca").iterdir()}
    assert {n for n in after if after[n] != before[n]} == {"gw.pem"}


def test_a_certificate_of_another_ca_or_key_is_not_fit(tmp_path: Path) -> None:
    ca_key, key = _tls.new_key_pem(), _tls.new_key_pem()
    ca = _tls.new_ca_pem(ca_key, "A", 10)
    other_ca_key = _tls.new_key_pem()
    other_ca = _tls.new_ca_pem(other_ca_key, "B", 10)
    cert = _tls.new_server_cert_pem(ca_key, ca, key, ["h"], 90)
    assert _tls.cert_problem(cert, ca, key, ["h"]) is None
    assert _tls.cert_problem(cert, other_ca, key, ["h"]) == "signed by another CA"
    assert _tls.cert_problem(cert, ca, _tls.new_key_pem(), ["h"]) == "does not match the key"
    assert _tls.cert_problem(_tls.new_server_cert_pem(ca_key, ca, key, ["h"], 10), ca, key, ["h"]).startswith("expires")
    assert _tls.pair_problem(cert, key) is None
    assert _tls.pair_problem(cert, other_ca_key) == "the certificate does not match the key"
    assert _tls.pair_problem(b"junk", key) == "the certificate is not a PEM certificate"


def test_the_diff_shows_which_files_change_and_never_a_key(tmp_path: Path) -> None:
    p = params(tmp_path, ["10.0.0.5"])
    paths, todo = plan(p)
    first = diff(p, paths, todo)
    assert first["before"] == "".join(f"{paths[w]}: absent\n" for w in ("ca_key", "ca_cert", "key", "cert"))
    assert f"{paths['ca_cert']}: a new CA certificate CN=test CA, valid 1095 days\n" in first["after"]
    assert (
        f"{paths['cert']}: a new certificate signed by the site CA, names 10.0.0.5, valid 365 days\n" in first["after"]
    )
    apply(p, paths)
    p["names"] = ["10.0.0.5", "gw.example.internal"]
    paths, todo = plan(p)
    second = diff(p, paths, todo)
    lines = dict(line.split(": ", 1) for line in second["after"].splitlines())
    assert lines[paths["ca_key"]] == "a private key (not shown)"
    assert lines[paths["ca_cert"]].startswith("certificate CN=test CA, expires ")
    assert lines[paths["cert"]].startswith(
        "a new certificate signed by the site CA, names 10.0.0.5, gw.example.internal"
    )
    old_cert = dict(line.split(": ", 1) for line in second["before"].splitlines())[paths["cert"]]
    assert old_cert.startswith("certificate CN=10.0.0.5, names 10.0.0.5, expires ")
    shown = first["before"] + first["after"] + second["before"] + second["after"]
    for name in ("ca.key", "gw.key"):
        key_lines = (tmp_path / "ca" / name).read_text().splitlines()[1:-1]  # the key's base64
        assert not [line for line in key_lines if line in shown], name


def test_lifetimes_beyond_three_years_and_a_year_are_refused_before_anything_is_written(
    tmp_path: Path, run_main: Any
) -> None:
    args = {"ca_dir": str(tmp_path / "ca"), "name": "gw", "names": ["10.0.0.5"]}
    for option, value, longest in (("ca_days", 3650, 1095), ("days", 397, 365), ("days", 0, 365)):
        out = run_main(tls_certificate.main, {**args, option: value})
        assert out["failed"] is True
        assert out["msg"] == f"{option} must be 31 to {longest} days; got: {value}"
    assert not (tmp_path / "ca").exists()


def test_by_default_the_ca_lives_three_years_and_a_certificate_one(tmp_path: Path, run_main: Any) -> None:
    out = run_main(tls_certificate.main, {"ca_dir": str(tmp_path / "ca"), "name": "gw", "names": ["10.0.0.5"]})
    assert out["failed"] is False, out
    ca = x509.load_pem_x509_certificate(Path(out["ca_cert"]).read_bytes())
    cert = x509.load_pem_x509_certificate(Path(out["cert"]).read_bytes())
    assert (ca.not_valid_after_utc - ca.not_valid_before_utc).days <= 1095
    assert (cert.not_valid_after_utc - cert.not_valid_before_utc).days <= 365
