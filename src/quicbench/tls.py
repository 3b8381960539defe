"""Per-run TLS material: a throwaway CA and a server certificate for the lab hostname.

Nothing is installed into the system trust store: clients are given the CA file (the load
client) or the SPKI hash of the server key (Chromium's --ignore-certificate-errors-spki-list).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

LAB_HOSTNAME = "www.quicbench.test"


@dataclass(frozen=True)
class TlsMaterial:
    ca_cert: Path
    cert: Path
    key: Path
    hostname: str
    spki_sha256_b64: str


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)


def spki_sha256_b64(cert: x509.Certificate) -> str:
    spki = cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()


def make_tls(directory: Path, hostname: str = LAB_HOSTNAME, ips: list[str] | tuple[str, ...] = (),
             days: int = 7) -> TlsMaterial:
    """Write ca.pem, cert.pem (leaf + CA chain) and key.pem (0600) into directory."""
    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "quicbench lab CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(now + dt.timedelta(days=days))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(hostname)]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostname)]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    (directory / "ca.pem").write_bytes(ca.public_bytes(pem))
    (directory / "cert.pem").write_bytes(leaf.public_bytes(pem) + ca.public_bytes(pem))
    _write_key(directory / "key.pem", key)
    _write_key(directory / "ca-key.pem", ca_key)
    return TlsMaterial(ca_cert=directory / "ca.pem", cert=directory / "cert.pem",
                       key=directory / "key.pem", hostname=hostname, spki_sha256_b64=spki_sha256_b64(leaf))


def load_or_make_tls(directory: Path, hostname: str = LAB_HOSTNAME,
                     ips: list[str] | tuple[str, ...] = ()) -> TlsMaterial:
    """The run's TLS material: made once, then read back (a resumed run keeps its certificates)."""
    cert_path = directory / "cert.pem"
    if (directory / "ca.pem").exists() and cert_path.exists() and (directory / "key.pem").exists():
        leaf = x509.load_pem_x509_certificates(cert_path.read_bytes())[0]
        return TlsMaterial(ca_cert=directory / "ca.pem", cert=cert_path, key=directory / "key.pem",
                           hostname=hostname, spki_sha256_b64=spki_sha256_b64(leaf))
    return make_tls(directory, hostname, ips)


def origin_certificates(tls: TlsMaterial, hosts: list[str] | tuple[str, ...], directory: Path,
                        days: int = 7) -> list[Path]:
    """One certificate per origin host (its own name as its only SAN), signed by the run's CA with
    the server's key: a replayed page's origins are served each under its own name and
    certificate (so a browser coalesces connections only as it would on the real origins), and
    the one SPKI hash Chromium trusts covers them all. Returns the chain files (leaf + CA)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_dir = tls.ca_cert.parent
    ca = x509.load_pem_x509_certificate(tls.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key((ca_dir / "ca-key.pem").read_bytes(), password=None)
    key = serialization.load_pem_private_key(tls.key.read_bytes(), password=None)
    now = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)
    out = []
    for host in sorted(set(hosts)):
        leaf = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
                .issuer_name(ca.subject).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now).not_valid_after(now + dt.timedelta(days=days))
                .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .sign(ca_key, hashes.SHA256()))   # type: ignore[arg-type]
        p = directory / f"{host}.pem"
        p.write_bytes(leaf.public_bytes(serialization.Encoding.PEM) + ca.public_bytes(serialization.Encoding.PEM))
        out.append(p)
    return out
