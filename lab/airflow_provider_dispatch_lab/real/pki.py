"""The real control plane's keys and certificates, made with `cryptography` at start and never reused.

- one CA (`ca.crt`), which every client trusts: the API server's serving certificate and the controllers' webhook
  serving certificates are signed by it, and the webhook configurations and CRD conversion stanzas carry it as
  their `caBundle`;
- one serving certificate for `127.0.0.1` and `localhost` (`serving.crt`/`serving.key`), shared by the API server
  and every webhook server, since all of them listen on loopback only;
- the service account signing key (`sa.key`, its public half `sa.pub`), with which the API server issues and
  checks the identities' tokens (TokenRequest);
- the CA's key (`ca.key`), kept for `client_pair`: a client certificate the API server (`--client-ca-file`)
  authenticates as its subject, the user its common name and the groups its organizations, as it authenticates
  a kubelet's (`system:node:<name>` in `system:nodes`, what the Node authorizer and `NodeRestriction` act on).
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=2)
"""Long enough for any test session or an afternoon's `dispatch lab real`; a new CA is made at every start."""


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _private_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _write(path: Path, data: bytes, mode: int = 0o600) -> Path:
    path.write_bytes(data)
    path.chmod(mode)
    return path


@dataclass(frozen=True)
class Pki:
    """Where the files are: `ca_file` is what a client verifies the API server and the webhooks with."""

    ca_file: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    sa_private_key: Path
    sa_public_key: Path

    @property
    def ca_bundle(self) -> bytes:
        """The PEM of the CA, as webhook configurations carry it (base64 in YAML, bytes in a client)."""
        return self.ca_file.read_bytes()


def make_pki(directory: Path, ca_name: str = "dispatch real control plane CA") -> Pki:
    """A new CA, a loopback serving certificate and a service account key, written into `directory`.

    The lab's `--tls` uses it too (`ca_name` tells the two CAs apart); it needs only the CA and the serving pair."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    not_before = now - datetime.timedelta(minutes=5)  # tolerate a little clock skew between the processes

    ca_key = _key()
    ca_subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ca_name)])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_subject)
        .issuer_name(ca_subject)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    serving_key = _key()
    serving_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_subject)
        .public_key(serving_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(now + VALIDITY)
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.IPAddress(ipaddress.IPv4Address("127.0.0.1")),
                    x509.DNSName("localhost"),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    sa_key = _key()
    sa_public = sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return Pki(
        ca_file=_write(directory / "ca.crt", ca_cert.public_bytes(serialization.Encoding.PEM), 0o644),
        ca_key=_write(directory / "ca.key", _private_pem(ca_key)),
        serving_cert=_write(directory / "serving.crt", serving_cert.public_bytes(serialization.Encoding.PEM), 0o644),
        serving_key=_write(directory / "serving.key", _private_pem(serving_key)),
        sa_private_key=_write(directory / "sa.key", _private_pem(sa_key)),
        sa_public_key=_write(directory / "sa.pub", sa_public, 0o644),
    )


def install_serving_pair(pki: Pki, directory: Path, cert_name: str = "tls.crt", key_name: str = "tls.key") -> Path:
    """Copy the serving pair into `directory` under the names a controller-runtime webhook server reads."""
    directory.mkdir(parents=True, exist_ok=True)
    _write(directory / cert_name, pki.serving_cert.read_bytes(), 0o644)
    _write(directory / key_name, pki.serving_key.read_bytes())
    return directory


def client_pair(pki: Pki, directory: Path, user: str, groups: Sequence[str]) -> tuple[Path, Path]:
    """A client certificate and its key (`client.crt`, `client.key` in `directory`), signed by the CA.

    The API server's x509 authenticator (`--client-ca-file`) reads the common name as the user and each
    organization as a group (`apiserver/pkg/authentication/request/x509/x509.go` `CommonNameUserConversion`),
    so a kubelet's is `user="system:node:<name>"`, `groups=("system:nodes",)`, as kubeadm issues it."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert = x509.load_pem_x509_certificate(pki.ca_file.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{pki.ca_key} is not the EC key make_pki writes")
    now = datetime.datetime.now(datetime.UTC)
    key = _key()
    subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups]
    subject.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(subject))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(ca_cert.not_valid_after_utc)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return (
        _write(directory / "client.crt", cert.public_bytes(serialization.Encoding.PEM), 0o644),
        _write(directory / "client.key", _private_pem(key)),
    )
