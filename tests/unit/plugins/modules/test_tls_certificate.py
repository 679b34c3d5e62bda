"""glm.fleet.tls_certificate: a site CA created once, and a server certificate kept fit."""

from __future__ import annotations

import multiprocessing
import socket
import ssl
import stat
import threading
from pathlib import Path
from typing import Any

from cryptography import x509

from ansible_collections.glm.fleet.plugins.module_utils import _tls
from ansible_collections.glm.fleet.plugins.modules import tls_certificate
from ansible_collections.glm.fleet.plugins.modules.tls_certificate import apply, diff, plan


def params(tmp_path: Path, names: list[str]) -> dict:
    return {"ca_dir": str(tmp_path / "ca"), "ca_name": "test CA", "name": "gw", "names": names,
            "ca_days": 1095, "days": 365, "purpose": "server", "ca_passphrase": ""}  # fmt: skip


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
        f"{paths['cert']}: a new server certificate signed by the site CA, names 10.0.0.5, valid 365 days\n"
        in first["after"]
    )
    apply(p, paths)
    p["names"] = ["10.0.0.5", "gw.example.internal"]
    paths, todo = plan(p)
    second = diff(p, paths, todo)
    lines = dict(line.split(": ", 1) for line in second["after"].splitlines())
    assert lines[paths["ca_key"]] == "a private key (not shown)"
    assert lines[paths["ca_cert"]].startswith("certificate CN=test CA, expires ")
    assert lines[paths["cert"]].startswith(
        "a new server certificate signed by the site CA, names 10.0.0.5, gw.example.internal"
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


def handshake(server: Path, client: tuple[Path, Path] | None, ca: Path) -> str:
    """A TLS server that requires a client certificate of the CA (as the GPU nodes' front does), and
    one client: what the server made of it."""
    listener = socket.create_server(("127.0.0.1", 0))
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(server / "srv.pem", server / "srv.key")
    server_ctx.load_verify_locations(ca)
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    seen: list[str] = []

    def serve() -> None:
        conn = listener.accept()[0]
        try:
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                seen.append("accepted " + dict(x[0] for x in tls.getpeercert()["subject"])["commonName"])
                tls.sendall(b"ok")
        except ssl.SSLError as exc:
            seen.append(f"refused: {exc.reason}")

    thread = threading.Thread(target=serve)
    thread.start()
    ctx = ssl.create_default_context(cafile=ca)
    if client:
        ctx.load_cert_chain(*client)
    try:
        with (
            socket.create_connection(listener.getsockname()) as raw,
            ctx.wrap_socket(raw, server_hostname="srv") as tls,
        ):
            tls.recv(2)
    except (ssl.SSLError, ConnectionError):
        pass
    thread.join(5)
    listener.close()
    return seen[0]


def test_a_client_certificate_passes_mutual_tls_and_a_servers_certificate_does_not(tmp_path: Path) -> None:
    server = params(tmp_path, ["srv"]) | {"name": "srv"}
    apply(server, plan(server)[0])
    client = params(tmp_path, ["gateway-1"]) | {"name": "gw-client", "purpose": "client"}
    paths, todo = plan(client)
    assert todo == ["key: none yet", "cert: issued with the new files"]  # same CA; a key of its own
    apply(client, paths)
    assert plan(client)[1] == []
    ca, d = tmp_path / "ca" / "ca.pem", tmp_path / "ca"
    assert handshake(d, (d / "gw-client.pem", d / "gw-client.key"), ca) == "accepted gateway-1"
    # A server's certificate of the same CA is no client's (its extended key usage), nor is none.
    assert handshake(d, (d / "srv.pem", d / "srv.key"), ca).startswith("refused")
    assert handshake(d, None, ca).startswith("refused")
    # A certificate issued for the other purpose is issued again.
    assert plan(client | {"purpose": "server"})[1] == ["cert: not a server certificate (its extended key usage)"]


def _issue_in_a_process(p: dict) -> None:
    apply(p, plan(p)[0])


def test_hosts_that_issue_at_once_on_a_new_site_share_one_ca(tmp_path: Path) -> None:
    """Every host of a play issues its certificate at once (two gateways, the GPU nodes): on a new
    site, one of them creates the CA and every certificate is signed by that CA."""
    hosts = [{**params(tmp_path, [f"10.0.0.{i}"]), "name": f"gw-{i}"} for i in range(1, 7)]
    with multiprocessing.get_context("fork").Pool(len(hosts)) as pool:
        pool.map(_issue_in_a_process, hosts)
    ca = tmp_path / "ca" / "ca.pem"
    for p in hosts:
        context = ssl.create_default_context(cafile=str(ca))
        context.load_cert_chain(tmp_path / "ca" / f"{p['name']}.pem", tmp_path / "ca" / f"{p['name']}.key")
        assert plan(p)[1] == [], p["name"]  # signed by the CA on disk, for its names


PASSPHRASE = "a passphrase from the vault 7f3c"  # noqa: S105 - this test's


def module_args(tmp_path: Path, **more: Any) -> dict[str, Any]:
    return {"ca_dir": str(tmp_path / "ca"), "name": "gw", "names": ["gw.example.internal"]} | more


def test_with_a_passphrase_the_cas_key_is_kept_encrypted_and_still_signs(tmp_path: Path, run_main: Any) -> None:
    first = run_main(tls_certificate.main, module_args(tmp_path, ca_passphrase=PASSPHRASE))
    assert (first["failed"], first["changed"]) == (False, True), first
    ca_key = (tmp_path / "ca" / "ca.key").read_bytes()
    assert ca_key.startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
    assert stat.S_IMODE((tmp_path / "ca" / "ca.key").stat().st_mode) == 0o600
    assert not (tmp_path / "ca" / "gw.key").read_bytes().startswith(b"-----BEGIN ENCRYPTED")  # a host's copy
    ctx = ssl.create_default_context(cafile=first["ca_cert"])
    ctx.load_cert_chain(first["cert"], first["key"])
    assert _tls.cert_problem((tmp_path / "ca" / "gw.pem").read_bytes(), (tmp_path / "ca" / "ca.pem").read_bytes(),
                             (tmp_path / "ca" / "gw.key").read_bytes(), ["gw.example.internal"]) is None  # fmt: skip
    again = run_main(tls_certificate.main, module_args(tmp_path, ca_passphrase=PASSPHRASE))
    assert (again["failed"], again["changed"]) == (False, False), again
    other = run_main(tls_certificate.main, module_args(tmp_path, name="gw-2", names=["gw-2"], ca_passphrase=PASSPHRASE))
    assert (other["failed"], other["changed"]) == (False, True), other  # signed with the encrypted key


def test_a_ca_key_made_without_a_passphrase_is_encrypted_in_place_and_nothing_else_changes(
    tmp_path: Path, run_main: Any
) -> None:
    assert not run_main(tls_certificate.main, module_args(tmp_path))["failed"]
    before = {f.name: f.read_bytes() for f in (tmp_path / "ca").iterdir() if f.suffix in (".pem", ".key")}
    assert not before["ca.key"].startswith(b"-----BEGIN ENCRYPTED")
    shown = run_main(tls_certificate.main, module_args(tmp_path, ca_passphrase=PASSPHRASE), check_mode=True)
    assert (shown["changed"], shown["created"]) == (True, ["ca_key: encrypted at rest with the passphrase"])
    assert (tmp_path / "ca" / "ca.key").read_bytes() == before["ca.key"]  # check mode wrote nothing
    diffed = run_main(tls_certificate.main, module_args(tmp_path, ca_passphrase=PASSPHRASE), check_mode=True, diff=True)
    assert "ca.key: the same private key, encrypted with the passphrase (not shown)\n" in diffed["diff"]["after"]
    moved = run_main(tls_certificate.main, module_args(tmp_path, ca_passphrase=PASSPHRASE))
    assert (moved["changed"], moved["created"]) == (True, ["ca_key: encrypted at rest with the passphrase"])
    after = {f.name: f.read_bytes() for f in (tmp_path / "ca").iterdir() if f.suffix in (".pem", ".key")}
    assert {n for n in after if after[n] != before[n]} == {"ca.key"}
    assert after["ca.key"].startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
    assert _tls.encrypted_key_pem(before["ca.key"], "x") != after["ca.key"]  # salted: a new encryption each time
    opened = _tls._key(after["ca.key"], PASSPHRASE).public_key().public_numbers()
    assert opened == _tls._key(before["ca.key"]).public_key().public_numbers()  # the same key


def test_an_encrypted_ca_key_without_its_passphrase_is_refused_before_anything_changes(
    tmp_path: Path, run_main: Any
) -> None:
    assert not run_main(tls_certificate.main, module_args(tmp_path, ca_passphrase=PASSPHRASE))["failed"]
    before = {f.name: f.read_bytes() for f in (tmp_path / "ca").iterdir() if f.suffix in (".pem", ".key")}
    for passphrase, why in (("", "is encrypted, and no passphrase was given"),
                            ("not the one", "does not open with the passphrase given")):  # fmt: skip
        refused = run_main(tls_certificate.main, module_args(tmp_path, name="gw-2", names=["gw-2"],
                                                             ca_passphrase=passphrase))  # fmt: skip
        assert refused["failed"], refused
        assert refused["msg"] == (
            f"the site CA's key {tmp_path / 'ca'}/ca.key {why} (ca_passphrase: the inventory's"
            " deployment_ca_key_passphrase, from vault); nothing was changed"
        )
        assert PASSPHRASE not in refused["msg"]
    after = {f.name: f.read_bytes() for f in (tmp_path / "ca").iterdir() if f.suffix in (".pem", ".key")}
    assert after == before
