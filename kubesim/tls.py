"""HTTPS for kubesim (`KubeSim(tls=True)`, `python -m kubesim --tls`): a self-signed certificate for 127.0.0.1 and
localhost, made at start, its PEM written into the kubeconfig as `certificate-authority-data`.

Why: kubectl (client-go's clientcmd) sends a kubeconfig's credentials only over TLS ("only try to read the auth
information if we are secure", tools/clientcmd/client_config.go `ClientConfig`), so under `--authz rbac` a kubectl
talking plain HTTP is `system:anonymous`. The Python clients send their token either way.
"""
from __future__ import annotations

import datetime
import ipaddress
import ssl
import tempfile
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def self_signed(host: str = "127.0.0.1") -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) valid for `host`, 127.0.0.1 and localhost, for 10 years."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubesim")])
    now = datetime.datetime.now(datetime.UTC)
    ips = {ipaddress.ip_address("127.0.0.1")}
    try:
        ips.add(ipaddress.ip_address(host))
    except ValueError:
        pass
    san = x509.SubjectAlternativeName([x509.DNSName("localhost"), *(x509.IPAddress(ip) for ip in ips)])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=3650)).add_extension(san, critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def server_context(cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory() as d:      # ssl loads certificates from files only
        cert, key = Path(d) / "tls.crt", Path(d) / "tls.key"
        cert.write_bytes(cert_pem)
        key.write_bytes(key_pem)
        ctx.load_cert_chain(cert, key)
    return ctx
