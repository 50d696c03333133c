"""A certificate for 127.0.0.1, made at run time, so the benchmarks can serve the fake
Perplexity over TLS as the real one is (curl_cffi then does its handshake and decryption, as in
a real install). A throwaway authority signs it (BoringSSL, curl_cffi's TLS library, does not
take a self-signed server certificate as its own anchor); clients trust the authority through
SSL_CERT_FILE, which curl_cffi, httpx and Python's ssl module all read."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path


def make(folder: Path) -> tuple[Path, Path, Path]:
    """(authority, certificate, key) as PEM files in `folder`; the certificate is valid for
    127.0.0.1 and localhost for a day."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def name(text: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])

    now = datetime.datetime.now(datetime.UTC)

    def certificate(subject: str, key, issuer: str, issuer_key, ca: bool) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(subject))
            .issuer_name(name(issuer))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
                ),
                critical=False,
            )
        return builder.sign(issuer_key, hashes.SHA256())

    authority_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    authority = certificate(
        "pplxweb benchmark authority", authority_key, "pplxweb benchmark authority", authority_key, True
    )
    cert = certificate("127.0.0.1", key, "pplxweb benchmark authority", authority_key, False)
    paths = folder / "authority.pem", folder / "fake-cert.pem", folder / "fake-key.pem"
    paths[0].write_bytes(authority.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths
