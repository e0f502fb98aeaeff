"""A hollow kubelet's credential apart from any API server: the client certificate `lab/real/pki.py` signs for a
node, and the kubeconfig that carries it (`lab/runtime.py` `write_kubeconfig`).

The real tier (`tests/real/test_real_cluster.py`) shows a real API server takes the certificate as the node and
bounds it; here each part can fail by itself: the subject the x509 authenticator reads (common name the user,
organizations the groups), the signature by the cluster's CA, the client-auth usage, and a kubeconfig asked for
no credential or two refused before anything is written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from airflow_provider_dispatch_lab.real.pki import client_pair, make_pki
from airflow_provider_dispatch_lab.runtime import write_kubeconfig


def test_a_nodes_certificate_names_the_node_in_system_nodes_and_is_signed_by_the_ca(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "ca")
    cert_file, key_file = client_pair(pki, tmp_path / "node-1", "system:node:node-1", ("system:nodes",))
    cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
    ca = x509.load_pem_x509_certificate(pki.ca_file.read_bytes())
    cert.verify_directly_issued_by(ca)  # raises if another key signed it
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == ["system:node:node-1"]
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == ["system:nodes"]
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert key_file.stat().st_mode & 0o077 == 0, "the key is readable by others"


def test_a_kubeconfig_carries_the_certificate_instead_of_a_token(tmp_path: Path) -> None:
    pair = (tmp_path / "client.crt", tmp_path / "client.key")
    path = write_kubeconfig(
        tmp_path / "kubeconfig", "https://127.0.0.1:1", None, "system:node:node-1", client_pair=pair
    )
    user = yaml.safe_load(path.read_text())["users"][0]
    assert user == {
        "name": "system:node:node-1",
        "user": {"client-certificate": str(pair[0]), "client-key": str(pair[1])},
    }


@pytest.mark.parametrize(
    ("token", "pair"), [(None, None), ("a-token", ("client.crt", "client.key"))], ids=["none", "both"]
)
def test_a_kubeconfig_needs_exactly_one_credential(
    tmp_path: Path, token: str | None, pair: tuple[str, str] | None
) -> None:
    path = tmp_path / "kubeconfig"
    client = None if pair is None else (tmp_path / pair[0], tmp_path / pair[1])
    with pytest.raises(ValueError, match="exactly one credential"):
        write_kubeconfig(path, "https://127.0.0.1:1", token, client_pair=client)
    assert not path.exists()
