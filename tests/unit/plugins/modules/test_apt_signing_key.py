"""glm.fleet.apt_signing_key: the key is fetched, refused unless its primary key has the pinned
fingerprint (nothing written then), and written armored and dearmored only when either differs.
The keys (tests/unit/fixtures/signing_keys) are served over HTTPS, with a certificate of a CA made
for these tests that the module is told to trust, and read back by the real gpg; plain http is
refused, and without the CA the server's certificate is."""

from __future__ import annotations

import os
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.glm.fleet.plugins.module_utils import _tls
from ansible_collections.glm.fleet.plugins.module_utils._signing_key import (
    fingerprints,
    pinned,
    primaries,
    refusal,
    to_write,
)
from ansible_collections.glm.fleet.plugins.modules import apt_signing_key

RunMain = Callable[..., dict[str, Any]]  # the run_main fixture (tests/unit/conftest.py)
VARIABLE = "nvidia_container_toolkit_gpg_key_fingerprint"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def gpg(home: Path, *args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(
        ["gpg", "--batch", "--homedir", str(home), *args], input=data, capture_output=True, check=True
    ).stdout


# Two ed25519 signing keys, each with an encryption subkey, made by gpg for these tests (public
# parts only, so that reading them needs no gpg-agent): name -> primary key's fingerprint.
KEYS = {"repo": "81DA1CEF961EC22C3E93AECDFEDF5340916FB01C", "other": "7435794C1D849199102D6A2A7B0D5E57D647F411"}


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bytes, str]]:
    """name -> (armored key, primary fingerprint), the fingerprint as gpg reads it from the key."""
    home = tmp_path_factory.mktemp("gnupg")
    home.chmod(0o700)
    made = {}
    for name, fpr in KEYS.items():
        armored = (FIXTURES / "signing_keys" / f"{name}.asc").read_bytes()
        listed = fingerprints(gpg(home, "--with-colons", "--show-keys", data=armored).decode())
        assert listed[0] == fpr
        assert len(listed) == 2  # the primary key and its subkey
        made[name] = (armored, fpr)
    return made


# A CA of a site's own and its mirror's certificate for 127.0.0.1: the module is told to trust the CA.
_CA_KEY, _SERVER_KEY = _tls.new_key_pem(), _tls.new_key_pem()
MIRROR_CA = _tls.new_ca_pem(_CA_KEY, "a site's mirror CA", 30).decode()
_SERVER_CERT = _tls.new_server_cert_pem(_CA_KEY, MIRROR_CA.encode(), _SERVER_KEY, ["127.0.0.1"], 30)


@pytest.fixture
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, bytes]]]:
    """An HTTPS server (the mirror's certificate) answering GET /<name> from the dict it yields (404
    for other names)."""
    where = tmp_path_factory.mktemp("mirror-tls")
    (where / "server.pem").write_bytes(_SERVER_CERT)
    (where / "server.key").write_bytes(_SERVER_KEY)
    files: dict[str, bytes] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = files.get(self.path.lstrip("/"))
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(where / "server.pem", where / "server.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"https://127.0.0.1:{server.server_address[1]}", files
    server.shutdown()


def module_args(url: str, fingerprint: str, tmp_path: Path) -> dict[str, Any]:
    return {
        "url": url,
        "ca": MIRROR_CA,
        "fingerprint": fingerprint,
        "fingerprint_variable": VARIABLE,
        "dest": str(tmp_path / "key.asc"),
        "keyring": str(tmp_path / "keyring.gpg"),
        "timeout": 5,
    }


def dearmored(armored: bytes, tmp_path: Path) -> bytes:
    home = tmp_path / "check-home"
    home.mkdir(mode=0o700, exist_ok=True)
    return gpg(home, "--dearmor", data=armored)


@pytest.fixture
def repo_key(keys: dict[str, tuple[bytes, str]], served: tuple[str, dict[str, bytes]]) -> tuple[str, bytes, str]:
    """The repository's key, served: (its URL, the armored key, its fingerprint)."""
    base, files = served
    armored, fpr = keys["repo"]
    files["gpgkey"] = armored
    return f"{base}/gpgkey", armored, fpr


def test_the_pinned_key_is_written_armored_and_dearmored_once(
    run_main: RunMain, repo_key: tuple[str, bytes, str], tmp_path: Path
) -> None:
    url, armored, fpr = repo_key
    args = module_args(url, fpr, tmp_path)
    first = run_main(apt_signing_key.main, args)
    assert first["failed"] is False
    assert first["changed"] is True
    assert first["fingerprint"] == fpr
    assert (tmp_path / "key.asc").read_bytes() == armored
    assert (tmp_path / "keyring.gpg").read_bytes() == dearmored(armored, tmp_path)
    assert {oct((tmp_path / name).stat().st_mode & 0o777) for name in ("key.asc", "keyring.gpg")} == {"0o644"}
    # apt reads the keyring as a binary key whose fingerprint is the pinned one
    listing = gpg(tmp_path / "check-home", "--with-colons", "--show-keys", str(tmp_path / "keyring.gpg")).decode()
    assert fingerprints(listing)[0] == fpr
    second = run_main(apt_signing_key.main, args)
    assert (second["changed"], second["written"]) == (False, [])


def test_missing_directories_of_the_key_are_created(
    run_main: RunMain, repo_key: tuple[str, bytes, str], tmp_path: Path
) -> None:
    url, armored, fpr = repo_key
    args = {**module_args(url, fpr, tmp_path), "dest": str(tmp_path / "etc" / "keyrings" / "key.asc")}
    assert run_main(apt_signing_key.main, args, check_mode=True)["changed"] is True
    assert not (tmp_path / "etc").exists()
    old_umask = os.umask(0o077)
    try:
        assert run_main(apt_signing_key.main, args)["changed"] is True
    finally:
        os.umask(old_umask)
    assert (tmp_path / "etc" / "keyrings" / "key.asc").read_bytes() == armored
    assert {oct((tmp_path / d).stat().st_mode & 0o777) for d in ("etc", "etc/keyrings")} == {"0o755"}


def test_the_fingerprint_may_be_written_with_spaces_and_in_lower_case(
    run_main: RunMain, repo_key: tuple[str, bytes, str], tmp_path: Path
) -> None:
    url, _armored, fpr = repo_key
    spaced = " ".join(fpr[i : i + 4] for i in range(0, 40, 4)).lower()
    assert run_main(apt_signing_key.main, module_args(url, spaced, tmp_path))["changed"] is True


def test_a_key_with_another_fingerprint_is_refused_and_nothing_is_written(
    run_main: RunMain, keys: dict[str, tuple[bytes, str]], served: tuple[str, dict[str, bytes]], tmp_path: Path
) -> None:
    base, files = served
    files["gpgkey"] = keys["other"][0]
    (tmp_path / "key.asc").write_bytes(b"the key in place")
    result = run_main(apt_signing_key.main, module_args(f"{base}/gpgkey", keys["repo"][1], tmp_path))
    assert result["failed"] is True
    assert result["msg"] == (
        f"the key at {base}/gpgkey has the fingerprint {keys['other'][1]}, not the pinned "
        f"{VARIABLE}={keys['repo'][1]}; it was not installed"
    )
    assert (tmp_path / "key.asc").read_bytes() == b"the key in place"
    assert not (tmp_path / "keyring.gpg").exists()


def test_a_second_key_beside_the_pinned_one_is_refused_and_nothing_is_written(
    run_main: RunMain, keys: dict[str, tuple[bytes, str]], served: tuple[str, dict[str, bytes]], tmp_path: Path
) -> None:
    """Whoever controls the key's URL appends a key of their own to the pinned one: apt would trust
    both, so the file is refused whole."""
    base, files = served
    for order in (("repo", "other"), ("other", "repo")):
        files["gpgkey"] = keys[order[0]][0] + keys[order[1]][0]
        result = run_main(apt_signing_key.main, module_args(f"{base}/gpgkey", keys["repo"][1], tmp_path))
        assert result["failed"] is True
        assert result["msg"] == (
            f"the key file at {base}/gpgkey holds 2 keys ({keys[order[0]][1]}, {keys[order[1]][1]}); only the pinned "
            f"{VARIABLE}={keys['repo'][1]} may be in it; it was not installed"
        )
        assert os.listdir(tmp_path) == []


def test_a_page_that_is_not_a_key_is_refused(
    run_main: RunMain, keys: dict[str, tuple[bytes, str]], served: tuple[str, dict[str, bytes]], tmp_path: Path
) -> None:
    base, files = served
    files["gpgkey"] = b"<html>moved</html>\n"
    result = run_main(apt_signing_key.main, module_args(f"{base}/gpgkey", keys["repo"][1], tmp_path))
    assert result["failed"] is True
    assert "has the fingerprint none (not an OpenPGP key)" in result["msg"]
    assert os.listdir(tmp_path) == []


def test_an_unreachable_key_names_the_url(
    run_main: RunMain, keys: dict[str, tuple[bytes, str]], served: tuple[str, dict[str, bytes]], tmp_path: Path
) -> None:
    base, _files = served
    result = run_main(apt_signing_key.main, module_args(f"{base}/missing", keys["repo"][1], tmp_path))
    assert result["failed"] is True
    assert result["msg"].startswith(f"could not fetch the signing key from {base}/missing: 404")


def test_a_lost_keyring_is_written_again_alone_and_check_mode_writes_nothing(
    run_main: RunMain, repo_key: tuple[str, bytes, str], tmp_path: Path
) -> None:
    url, armored, fpr = repo_key
    args = module_args(url, fpr, tmp_path)
    run_main(apt_signing_key.main, args)
    (tmp_path / "keyring.gpg").unlink()
    checked = run_main(apt_signing_key.main, args, check_mode=True)
    assert (checked["changed"], checked["written"]) == (True, [str(tmp_path / "keyring.gpg")])
    assert not (tmp_path / "keyring.gpg").exists()
    again = run_main(apt_signing_key.main, args)
    assert again["written"] == [str(tmp_path / "keyring.gpg")]
    assert (tmp_path / "keyring.gpg").read_bytes() == dearmored(armored, tmp_path)


def test_fingerprints_lists_the_primary_key_first_and_ignores_other_records() -> None:
    colons = (
        "pub:-:255:22:DDCAE044F796ECB0:1:::-:::scESC::::::23::0:\n"
        "fpr:::::::::C95B321B61E88C1809C4F759DDCAE044F796ECB0:\n"
        "uid:-::::1::0::NVIDIA CORPORATION (Open Source Projects) <cudatools@nvidia.com>::::::::::0:\n"
        "sub:-:255:18:1111111111111111:1::::::e::::::23:\n"
        "fpr:::::::::AAAABBBBCCCCDDDDEEEEFFFF0000111122223333:\n"
        "fpr:::::::::not-a-fingerprint:\n"
    )
    assert fingerprints(colons) == [
        "C95B321B61E88C1809C4F759DDCAE044F796ECB0",
        "AAAABBBBCCCCDDDDEEEEFFFF0000111122223333",
    ]
    assert fingerprints("") == []


def test_primaries_lists_the_primary_keys_not_their_subkeys() -> None:
    colons = (
        "pub:-:255:22:DDCAE044F796ECB0:1:::-:::scESC::::::23::0:\n"
        "fpr:::::::::C95B321B61E88C1809C4F759DDCAE044F796ECB0:\n"
        "sub:-:255:18:1111111111111111:1::::::e::::::23:\n"
        "fpr:::::::::AAAABBBBCCCCDDDDEEEEFFFF0000111122223333:\n"
        "pub:-:255:22:2222222222222222:1:::-:::scESC::::::23::0:\n"
        "fpr:::::::::BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB:\n"
    )
    assert primaries(colons) == ["C95B321B61E88C1809C4F759DDCAE044F796ECB0", "B" * 40]
    assert primaries("") == []


def test_refusal_takes_the_pinned_key_alone() -> None:
    wanted = "c95b 321b 61e8 8c18 09c4 f759 ddca e044 f796 ecb0"
    assert pinned(wanted) == "C95B321B61E88C1809C4F759DDCAE044F796ECB0"
    assert refusal("u", ["C95B321B61E88C1809C4F759DDCAE044F796ECB0"], wanted, "v") is None
    assert refusal("u", ["A" * 40], wanted, "v") == (
        f"the key at u has the fingerprint {'A' * 40}, not the pinned v=C95B321B61E88C1809C4F759DDCAE044F796ECB0; "
        "it was not installed"
    )
    assert "holds 2 keys" in (refusal("u", ["C95B321B61E88C1809C4F759DDCAE044F796ECB0", "A" * 40], wanted, "v") or "")


def test_to_write_names_the_files_whose_content_differs() -> None:
    assert to_write({"a": b"1", "b": b"2"}, {"a": b"1", "b": None}) == ["b"]
    assert to_write({"a": b"1"}, {"a": b"0"}) == ["a"]
    assert to_write({"a": b"1"}, {"a": b"1"}) == []


def test_check_mode_with_diff_shows_the_key_it_would_write(
    run_main: RunMain, repo_key: tuple[str, bytes, str], tmp_path: Path
) -> None:
    url, armored, fpr = repo_key
    args = module_args(url, fpr, tmp_path)
    (tmp_path / "key.asc").write_text("an older key\n")
    result = run_main(apt_signing_key.main, args, check_mode=True, diff=True)
    assert result["changed"] is True
    assert not (tmp_path / "keyring.gpg").exists()
    diffs = {d["after_header"]: d for d in result["diff"]}
    key = diffs[str(tmp_path / "key.asc")]
    assert (key["before"], key["after"]) == ("an older key\n", armored.decode())
    keyring = diffs[str(tmp_path / "keyring.gpg")]
    assert keyring["before_header"] == f"{tmp_path / 'keyring.gpg'} (absent)"
    assert keyring["before"] == ""
    assert keyring["after"].startswith("(binary, ")
    assert "sha256 " in keyring["after"]
    run_main(apt_signing_key.main, args)
    assert "diff" not in run_main(apt_signing_key.main, args, diff=True)  # nothing to write, nothing to show


def test_a_key_over_plain_http_or_from_a_server_no_trusted_ca_signed_is_refused(
    run_main: RunMain, repo_key: tuple[str, bytes, str], tmp_path: Path
) -> None:
    url, _armored, fpr = repo_key
    plain = url.replace("https://", "http://")
    refused = run_main(apt_signing_key.main, module_args(plain, fpr, tmp_path))
    assert refused["failed"]
    assert refused["msg"] == f"the signing key's URL must be https (a key fetched over plain http is anyone's): {plain}"
    untrusted = run_main(apt_signing_key.main, {**module_args(url, fpr, tmp_path), "ca": ""})
    assert untrusted["failed"]
    assert untrusted["msg"].startswith(f"could not fetch the signing key from {url}: ")
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted["msg"], untrusted["msg"]
    assert not (tmp_path / "key.asc").exists()
    assert not (tmp_path / "keyring.gpg").exists()
