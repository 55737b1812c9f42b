"""PEP 740 attestations offline, with pypi-attestations (tools/requirements/attest.txt;
skipped where it is not installed: .ci/run's release rehearsal installs it).

An attestation is made here with a local key and a self-signed certificate for the
workflow identity, in the format `pypi-attestations sign` writes; a real one needs
Fulcio (certificate) and Rekor (log entry), which only the attest job of a tag reaches.
Checked here: make_index serves it as provenance that pypi-attestations reads; the
production verifier, offline, refuses a certificate that is not Fulcio's; and with
the sigstore chain check replaced by a check of the local key, `verify` still binds
the attestation to the wheel's name and sha256 and to the signer identity."""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
from pathlib import Path

import pytest
from test_make_index import fake_wheel, mi

pa = pytest.importorskip("pypi_attestations")
from cryptography import x509  # noqa: E402 (after the skip)
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402
from sigstore.verify.policy import Identity  # noqa: E402

IDENTITY = "https://github.com/o/r/.github/workflows/wheels.yml@refs/tags/v0.2.0"
PAYLOAD_TYPE = "application/vnd.in-toto+json"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def local_attestation(wheel: Path, key: ec.EllipticCurvePrivateKey, identity: str = IDENTITY):
    """An attestation of wheel signed by key, its certificate self-signed for identity."""
    now = datetime.datetime.now(datetime.timezone.utc)
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "local test")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(minutes=10))
            .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(identity)]), critical=False)
            .sign(key, hashes.SHA256()))
    statement = json.dumps({
        "_type": "https://in-toto.io/Statement/v1", "predicateType": "https://docs.pypi.org/attestations/publish/v1",
        "subject": [{"name": wheel.name, "digest": {"sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}}],
        "predicate": None}).encode()
    pae = b"DSSEv1 %d %s %d %s" % (len(PAYLOAD_TYPE), PAYLOAD_TYPE.encode(), len(statement), statement)
    # A log entry of the right shape: no Rekor here, so nothing in it verifies.
    entry = {"logIndex": "1", "logId": {"keyId": b64(b"\0" * 32)}, "kindVersion": {"kind": "dsse", "version": "0.0.1"},
             "integratedTime": str(int(now.timestamp())), "inclusionPromise": {"signedEntryTimestamp": b64(b"-")},
             "inclusionProof": {"logIndex": "1", "rootHash": b64(b"\1" * 32), "treeSize": "2",
                                "hashes": [b64(b"\2" * 32)], "checkpoint": {"envelope": "local\n2\n-\n"}},
             "canonicalizedBody": b64(b"{}")}
    return pa.Attestation.model_validate({
        "version": 1,
        "verification_material": {"certificate": b64(cert.public_bytes(serialization.Encoding.DER)),
                                  "transparency_entries": [entry]},
        "envelope": {"statement": b64(statement), "signature": b64(key.sign(pae, ec.ECDSA(hashes.SHA256())))}})


class LocalKeyVerifier:
    """Stands in for sigstore's Verifier: the signature must be the local key's (instead
    of a Fulcio chain and a Rekor entry), then the identity policy runs as it would."""

    def __init__(self, public_key):
        self.public_key = public_key

    def verify_dsse(self, bundle, policy):
        envelope = bundle._inner.dsse_envelope  # noqa: SLF001 (sigstore keeps it private)
        pae = b"DSSEv1 %d %s %d %s" % (len(PAYLOAD_TYPE), PAYLOAD_TYPE.encode(), len(envelope.payload), envelope.payload)
        self.public_key.verify(envelope.signatures[0].sig, pae, ec.ECDSA(hashes.SHA256()))
        policy.verify(bundle.signing_certificate)
        return PAYLOAD_TYPE, envelope.payload


@pytest.fixture
def signed(tmp_path):
    key = ec.generate_private_key(ec.SECP256R1())
    wheel = fake_wheel(tmp_path / "dist", "0.2.0+cpu", "torch>=2.10")
    att = local_attestation(wheel, key)
    Path(f"{wheel}.publish.attestation").write_text(att.model_dump_json())
    return key, wheel, att


def test_make_index_serves_it_as_pep740_provenance(signed, tmp_path):
    _, wheel, att = signed
    out = tmp_path / "site"
    assert mi.main([str(wheel.parent), str(out), "--base-url", "https://x.test", "--github-repository", "o/r"]) == 0
    prov = pa.Provenance.model_validate_json((out / "cpu" / "wheels" / f"{wheel.name}.provenance").read_text())
    (bundle,) = prov.attestation_bundles
    assert bundle.publisher == pa.GitHubPublisher(repository="o/r", workflow="wheels.yml")
    assert bundle.attestations == [att]


def test_production_verifier_refuses_a_local_certificate(signed):
    _, wheel, att = signed
    with pytest.raises(pa.VerificationError):
        att.verify(Identity(identity=IDENTITY), pa.Distribution.from_file(wheel), offline=True)


def test_verify_binds_wheel_and_identity(signed, monkeypatch):
    key, wheel, att = signed
    monkeypatch.setattr(pa._impl.Verifier, "production", lambda offline=False: LocalKeyVerifier(key.public_key()))
    predicate_type, _ = att.verify(Identity(identity=IDENTITY), pa.Distribution.from_file(wheel))
    assert predicate_type == "https://docs.pypi.org/attestations/publish/v1"
    with pytest.raises(pa.VerificationError, match="Certificate's SANs do not match"):
        att.verify(Identity(identity=IDENTITY.replace("v0.2.0", "v0.2.1")), pa.Distribution.from_file(wheel))
    tampered = pa.Distribution(name=wheel.name, digest=hashlib.sha256(wheel.read_bytes() + b"\0").hexdigest())
    with pytest.raises(pa.VerificationError, match="subject does not match distribution digest"):
        att.verify(Identity(identity=IDENTITY), tampered)
    other = pa.Distribution(name=wheel.name.replace("0.2.0", "0.2.1"), digest=hashlib.sha256(wheel.read_bytes()).hexdigest())
    with pytest.raises(pa.VerificationError, match="subject does not match distribution name"):
        att.verify(Identity(identity=IDENTITY), other)
