# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A site's own certificate authority and the certificates it signs: servers' (the gateway's HTTPS,
the GPU nodes' TLS front) and clients' (the gateway's and the monitoring host's, to the servers).

Pure functions over PEM bytes, with the `cryptography` package Ansible's controller already has:
what to create, what to renew, and the PEM to write. Keys are EC P-256.
"""

from __future__ import annotations

import datetime
import ipaddress

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    HAS_CRYPTOGRAPHY = True
except ImportError:  # pragma: no cover - reported by the module
    HAS_CRYPTOGRAPHY = False

RENEW_BEFORE = datetime.timedelta(days=30)
# What a certificate is for (its extended key usage): a server's, or a client's for mutual TLS.
PURPOSES = ("server", "client")


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _encryption(passphrase: str):  # noqa: ANN202 - a cryptography KeySerializationEncryption
    if passphrase:
        return serialization.BestAvailableEncryption(passphrase.encode())
    return serialization.NoEncryption()


def new_key_pem(passphrase: str = "") -> bytes:
    """A new private key in PEM (PKCS #8), encrypted with `passphrase` where one is given."""
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, _encryption(passphrase))


def _key(pem: bytes, passphrase: str = ""):  # noqa: ANN202 - a cryptography private key
    return serialization.load_pem_private_key(pem, password=passphrase.encode() if passphrase else None)


def key_encrypted(pem: bytes) -> bool:
    """Whether a PEM private key is encrypted (PKCS #8's ENCRYPTED PRIVATE KEY, or a legacy DEK-Info)."""
    return b"-----BEGIN ENCRYPTED PRIVATE KEY-----" in pem or b"DEK-Info:" in pem


def key_problem(pem: bytes, passphrase: str) -> str | None:
    """Why the key cannot be read with `passphrase` (empty: none), or None."""
    if key_encrypted(pem) and not passphrase:
        return "is encrypted, and no passphrase was given"
    try:
        _key(pem, passphrase if key_encrypted(pem) else "")
    except (ValueError, TypeError):
        return "does not open with the passphrase given" if passphrase else "is not a PEM private key"
    return None


def encrypted_key_pem(pem: bytes, passphrase: str) -> bytes:
    """The same private key, encrypted with `passphrase`."""
    return _key(pem).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, _encryption(passphrase)
    )


def new_ca_pem(key_pem: bytes, name: str, days: int, passphrase: str = "") -> bytes:
    key = _key(key_pem, passphrase)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    start = now() - datetime.timedelta(minutes=5)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


def san_entries(names: list[str]) -> list:
    """IP addresses as IP entries, anything else as a DNS name."""
    entries: list = []
    for name in names:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return entries


def _usage(purpose: str):  # noqa: ANN202 - a cryptography ObjectIdentifier
    return ExtendedKeyUsageOID.CLIENT_AUTH if purpose == "client" else ExtendedKeyUsageOID.SERVER_AUTH


def new_server_cert_pem(
    ca_key_pem: bytes,
    ca_pem: bytes,
    key_pem: bytes,
    names: list[str],
    days: int,
    *,
    purpose: str = "server",
    ca_passphrase: str = "",
) -> bytes:
    ca_key, ca = _key(ca_key_pem, ca_passphrase), x509.load_pem_x509_certificate(ca_pem)
    public = _key(key_pem).public_key()
    start = now() - datetime.timedelta(minutes=5)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca.subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(san_entries(names)), critical=False)
        .add_extension(x509.ExtendedKeyUsage([_usage(purpose)]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


def cert_problem(
    cert_pem: bytes | None, ca_pem: bytes, key_pem: bytes, names: list[str], purpose: str = "server"
) -> str | None:
    """Why the certificate must be issued again; None when it is fit."""
    if not cert_pem:
        return "no certificate yet"
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        return "the certificate file does not hold a PEM certificate"
    return _trust_problem(cert, ca_pem, key_pem) or _usage_problem(cert, purpose) or _names_problem(cert, names)


def _usage_problem(cert: x509.Certificate, purpose: str) -> str | None:
    try:
        usages = list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    except x509.ExtensionNotFound:
        usages = []
    if usages != [_usage(purpose)]:
        return f"not a {purpose} certificate (its extended key usage)"
    return None


def _trust_problem(cert: x509.Certificate, ca_pem: bytes, key_pem: bytes) -> str | None:
    ca = x509.load_pem_x509_certificate(ca_pem)
    if cert.issuer != ca.subject:
        return "signed by another CA"
    try:
        cert.verify_directly_issued_by(ca)
    except Exception:
        return "not signed by this CA's key"
    if cert.public_key().public_numbers() != _key(key_pem).public_key().public_numbers():
        return "does not match the key"
    return None


def _names_problem(cert: x509.Certificate, names: list[str]) -> str | None:
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "no subject alternative names"
    have = sorted(str(v) for v in sans.get_values_for_type(x509.DNSName)) + sorted(
        str(v) for v in sans.get_values_for_type(x509.IPAddress)
    )
    wanted = san_entries(names)
    want = sorted(str(e.value) for e in wanted if isinstance(e, x509.DNSName)) + sorted(
        str(e.value) for e in wanted if isinstance(e, x509.IPAddress)
    )
    if have != want:
        return f"names {have} differ from {want}"
    if cert.not_valid_after_utc - now() < RENEW_BEFORE:
        return f"expires {cert.not_valid_after_utc:%Y-%m-%d}, within {RENEW_BEFORE.days} days"
    return None


def cert_summary(cert_pem: bytes) -> str:
    """A certificate in one line, for --diff: its subject, names and expiry."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        return "not a PEM certificate"
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = [str(v) for v in sans.get_values_for_type(x509.DNSName)]
        names += [str(v) for v in sans.get_values_for_type(x509.IPAddress)]
    except x509.ExtensionNotFound:
        names = []
    shown = f", names {', '.join(names)}" if names else ""
    return f"certificate {cert.subject.rfc4514_string()}{shown}, expires {cert.not_valid_after_utc:%Y-%m-%d}"


def pair_problem(cert_pem: bytes, key_pem: bytes) -> str | None:
    """Whether a given certificate and key belong together (a site CA's certificate from variables)."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        return "the certificate is not a PEM certificate"
    try:
        key = _key(key_pem)
    except (ValueError, TypeError):
        return "the key is not an unencrypted PEM private key"
    if cert.public_key().public_numbers() != key.public_key().public_numbers():
        return "the certificate does not match the key"
    return None
