import base64
import hashlib
import stat

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from quicbench.tls import make_tls


def test_tls_material(tmp_path):
    m = make_tls(tmp_path, "www.quicbench.test", ips=["198.18.1.2"])
    for key in (m.key, tmp_path / "ca-key.pem"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    leaf = x509.load_pem_x509_certificates(m.cert.read_bytes())[0]
    ca = x509.load_pem_x509_certificate(m.ca_cert.read_bytes())
    leaf.verify_directly_issued_by(ca)
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["www.quicbench.test"]
    assert [str(i) for i in sans.get_values_for_type(x509.IPAddress)] == ["198.18.1.2"]
    spki = leaf.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)
    assert m.spki_sha256_b64 == base64.b64encode(hashlib.sha256(spki).digest()).decode()
