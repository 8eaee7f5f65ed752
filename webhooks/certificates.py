"""A self-signed serving certificate, for the HTTPS endpoints ``kbatch run`` serves the
API server (its admission webhooks, its visibility API) when none is given. Made with
``cryptography``: kopf's own needs certbuilder and oscrypto, and oscrypto cannot load
OpenSSL 3.0.10 and later. No kopf here: the visibility API imports it too."""

import datetime
import ipaddress
from collections.abc import Collection

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 365


def self_signed(
    hostnames: Collection[str], password: str | None = None, *, client: bool = False
) -> tuple[bytes, bytes]:
    """A self-signed CA certificate for ``hostnames`` (IPs and DNS names as SANs; the first
    DNS name, else the first IP, as common name) and its key, both PEM; a server's, or
    with ``client`` a client's (a test's front proxy)."""
    names: list[str] = []
    ips: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []
    for hostname in dict.fromkeys(hostnames):
        try:
            ip = ipaddress.ip_address(hostname)
        except ValueError:
            names.append(hostname)
            continue
        if not ip.is_unspecified:
            ips.append(ip)
    common = names[0] if names else str(ips[0]) if ips else "localhost"
    usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])
    now = datetime.datetime.now(datetime.UTC)
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
    sans += [x509.IPAddress(ip) for ip in ips]
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .sign(key, hashes.SHA256())
    )
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password
        else serialization.NoEncryption()
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, encryption
    )
    return certificate.public_bytes(serialization.Encoding.PEM), key_pem
