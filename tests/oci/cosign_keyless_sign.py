"""Sign keylessly, as Fulcio + Rekor + cosign would, independently of
toolgate: a test certificate authority and a test transparency log key are
made here (Python's `cryptography`), a ten-minute leaf certificate is
issued for a CI identity (SAN URI, code-signing EKU, Fulcio's OIDC issuer
extension 1.3.6.1.4.1.57264.1.8 as a DER UTF8String), the artifact is
signed with the leaf's key, a `hashedrekord` 0.0.1 log entry is made and
its signed entry timestamp (SET) signed by the log key over the canonical
JSON {body, integratedTime, logID, logIndex}. As Fulcio does, the leaf
embeds an SCT (RFC 6962, extension 1.3.6.1.4.1.11129.2.4.2) from a test
CT log key: the log's signature over the precertificate (the leaf's
TBSCertificate without that extension, as `cryptography` builds it before
the extension is added) and the issuer's key hash. TRUSTED_ROOT_OUT gets a
Sigstore trusted root (certificateAuthorities, tlogs, ctlogs,
timestampAuthorities) naming the CA, the logs, the CT log and the TSA.
The RFC 3161 timestamps (DER TimeStampResp, CMS SignedData of a TSTInfo)
are encoded here by hand, with the few DER helpers below.

usage:
  cosign_keyless_sign.py oci REGISTRY REPOSITORY DIGEST TRUSTED_ROOT_OUT [MODE [SCT]]
      signs the simple-signing payload of DIGEST and pushes it as cosign
      does for a keyless signature: the layer under sha256-HEX.sig with the
      annotations dev.cosignproject.cosign/signature,
      dev.sigstore.cosign/certificate, dev.sigstore.cosign/chain and
      dev.sigstore.cosign/bundle.
  cosign_keyless_sign.py referrer REGISTRY REPOSITORY DIGEST TRUSTED_ROOT_OUT [MODE]
      signs DIGEST as `cosign sign` 3 does by default: an in-toto statement
      (subject: DIGEST's sha256, predicateType
      https://sigstore.dev/cosign/sign/v1) in a DSSE envelope, logged as a
      `dsse` 0.0.1 entry, in a Sigstore bundle v0.3 pushed as an OCI
      referrer (artifactType application/vnd.dev.sigstore.bundle.v0.3+json,
      empty config, the bundle as the one layer, `subject` = DIGEST's
      descriptor); when the registry has no referrers API (a 404), the
      referrers tag schema index `sha256-HEX` is written, as
      go-containerregistry does for cosign. Prints a second line: `api` or
      `tag`, how the referrer is found. Extra MODEs: `other-digest` (the
      statement names another digest), `bad-signature` (the envelope's
      signature, also the one logged, is over another payload),
      `other-subject` (the referrer's `subject` is another manifest),
      `key` (signed as `cosign sign --key` 3 does: the bundle names a
      public key by its hint instead of a certificate, the log entry
      records that key; its PEM is written to TRUSTED_ROOT_OUT.pub),
      `rekor2` (logged as Rekor v2 logs: a `hashedrekord` 0.0.2 entry of
      the envelope's PAE digest, no integratedTime and no SET, in an
      Ed25519 log whose checkpoint key id is its logId; timed instead by
      an RFC 3161 timestamp of a test TSA over the signature, 15 minutes
      ago, while the certificate was valid), `rekor2-after-expiry` (the
      timestamp is 5 minutes old: after the certificate expired),
      `rekor2-untrusted-tsa` (the timestamp is by a TSA the trusted root
      does not name), `rekor2-key` (`key` logged as `rekor2` is: the
      entry's verifier is the public key), `rekor2-dsse` (a `dsse` 0.0.2
      entry instead: the payload's digest), `rekor2-dsse-other-payload`
      (that entry names another payload's digest).
  cosign_keyless_sign.py bundle FILE BUNDLE_OUT TRUSTED_ROOT_OUT [MODE [SCT]]
      writes a Sigstore bundle v0.3 for FILE, with an inclusion proof (a
      one-entry tree) and a checkpoint signed by the log key.

MODE: `logged-while-valid` (default: the certificate expired before now,
but the entry was logged while it was valid) or `logged-after-expiry` (the
entry was logged after the certificate expired: must be refused).
SCT: `good` (default), `extensions` (good, with 8 bytes of SCT extensions,
as a Static CT log writes), or a hostile one: `unknown-log` (signed by a
CT key the trusted root does not name), `outside-validity` (the CT log's
validFor ends before the SCT), `wrong-signature` (signed over another
precertificate), `corrupt` (the list's length is wrong), `huge` (40 SCTs,
about 5 KB), `none` (no SCT extension), `no-ctlogs` (the trusted root
names no CT log).
Prints the identity: ISSUER SUBJECT.
"""

import base64
import datetime
import hashlib
import json
import struct
import sys
import time
import urllib.error
import urllib.request

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ISSUER = "https://token.actions.githubusercontent.com"
SUBJECT = "https://github.com/acme/guard/.github/workflows/release.yml@refs/tags/v1.0"

command = sys.argv[1]
mode = sys.argv[6] if command in ("oci", "referrer") and len(sys.argv) > 6 else (
    sys.argv[5] if command == "bundle" and len(sys.argv) > 5 else "logged-while-valid"
)
sct_mode = sys.argv[7] if command == "oci" and len(sys.argv) > 7 else (
    sys.argv[6] if command == "bundle" and len(sys.argv) > 6 else "good"
)
now = int(time.time())
utc = datetime.timezone.utc


def ts(secs: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(secs, utc)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def spki_der(key) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


# The certificate authority: a self-signed P-384 root, valid for days.
ca_key = ec.generate_private_key(ec.SECP384R1())
ca_name = x509.Name(
    [
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "toolgate-test"),
        x509.NameAttribute(NameOID.COMMON_NAME, "test-fulcio"),
    ]
)
ca = (
    x509.CertificateBuilder()
    .subject_name(ca_name)
    .issuer_name(ca_name)
    .public_key(ca_key.public_key())
    .serial_number(x509.random_serial_number())
    .not_valid_before(ts(now - 86400))
    .not_valid_after(ts(now + 86400))
    .add_extension(x509.BasicConstraints(ca=True, path_length=1), critical=True)
    .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
    .add_extension(
        x509.KeyUsage(
            digital_signature=False, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True,
            crl_sign=True, encipher_only=False, decipher_only=False,
        ),
        critical=True,
    )
    .sign(ca_key, hashes.SHA384())
)

# The leaf: ten minutes, 20 to 10 minutes ago (expired now).
leaf_key = ec.generate_private_key(ec.SECP256R1())
issuer_der = bytes([0x0C, len(ISSUER)]) + ISSUER.encode()
leaf_serial = x509.random_serial_number()
precert = (
    x509.CertificateBuilder()
    .subject_name(x509.Name([]))
    .issuer_name(ca_name)
    .public_key(leaf_key.public_key())
    .serial_number(leaf_serial)
    .not_valid_before(ts(now - 1200))
    .not_valid_after(ts(now - 600))
    .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(SUBJECT)]), critical=True)
    .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
    .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    .add_extension(x509.SubjectKeyIdentifier.from_public_key(leaf_key.public_key()), critical=False)
    .add_extension(
        x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=False,
            crl_sign=False, encipher_only=False, decipher_only=False,
        ),
        critical=True,
    )
    .add_extension(
        x509.UnrecognizedExtension(x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8"), issuer_der),
        critical=False,
    )
)

# The CT log, and the leaf's SCT over its precertificate.
ct_key = ec.generate_private_key(ec.SECP256R1())
other_ct_key = ec.generate_private_key(ec.SECP256R1())
sct_ms = (now - 1200) * 1000
tbs = precert.sign(ca_key, hashes.SHA384()).tbs_certificate_bytes
issuer_key_hash = hashlib.sha256(spki_der(ca_key)).digest()


def der(tag: int, content: bytes) -> bytes:
    n = len(content)
    if n < 0x80:
        head = bytes([n])
    else:
        size = n.to_bytes((n.bit_length() + 7) // 8, "big")
        head = bytes([0x80 | len(size)]) + size
    return bytes([tag]) + head + content


def der_octets(data: bytes) -> bytes:
    return der(0x04, data)


def der_seq(*items: bytes) -> bytes:
    return der(0x30, b"".join(items))


def der_set(*items: bytes) -> bytes:
    return der(0x31, b"".join(sorted(items)))


def der_int(n: int) -> bytes:
    return der(0x02, n.to_bytes((n.bit_length() + 8) // 8, "big"))


def der_oid(dotted: str) -> bytes:
    parts = [int(p) for p in dotted.split(".")]
    body = bytes([40 * parts[0] + parts[1]])
    for p in parts[2:]:
        enc = [p & 0x7F]
        p >>= 7
        while p:
            enc.append(0x80 | (p & 0x7F))
            p >>= 7
        body += bytes(reversed(enc))
    return der(0x06, body)


def sct(key, ext: bytes = b"", over: bytes = tbs) -> bytes:
    signed = (
        struct.pack("!BBQH", 0, 0, sct_ms, 1) + issuer_key_hash
        + len(over).to_bytes(3, "big") + over + struct.pack("!H", len(ext)) + ext
    )
    sig = key.sign(signed, ec.ECDSA(hashes.SHA256()))
    log_id = hashlib.sha256(spki_der(key)).digest()
    return (
        struct.pack("!B", 0) + log_id + struct.pack("!QH", sct_ms, len(ext)) + ext
        + bytes([4, 3]) + struct.pack("!H", len(sig)) + sig
    )


def sct_list(scts) -> bytes:
    body = b"".join(struct.pack("!H", len(s)) + s for s in scts)
    return struct.pack("!H", len(body)) + body


scts = {
    "extensions": lambda: sct_list([sct(ct_key, b"\x00\x00\x05\x00\x00\x00\x00\x2a")]),
    "unknown-log": lambda: sct_list([sct(other_ct_key)]),
    "wrong-signature": lambda: sct_list([sct(ct_key, over=tbs[:-1] + bytes([tbs[-1] ^ 1]))]),
    "corrupt": lambda: b"\x00\x05" + sct_list([sct(ct_key)])[2:],
    "huge": lambda: sct_list([sct(ct_key)] * 40),
    "none": lambda: None,
}.get(sct_mode, lambda: sct_list([sct(ct_key)]))()
if scts is not None:
    precert = precert.add_extension(
        x509.UnrecognizedExtension(x509.ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2"), der_octets(scts)),
        critical=False,
    )
leaf = precert.sign(ca_key, hashes.SHA384())
if sct_mode in ("good", "extensions"):
    # cryptography's own precertificate TBS is what the SCT signed.
    assert leaf.tbs_precertificate_bytes == tbs
leaf_pem = leaf.public_bytes(serialization.Encoding.PEM)
ca_pem = ca.public_bytes(serialization.Encoding.PEM)
integrated_time = now - 300 if mode == "logged-after-expiry" else now - 900

# The transparency log.
log_key = ec.generate_private_key(ec.SECP256R1())
log_id = hashlib.sha256(spki_der(log_key)).digest()
log_index = 4242

# A Rekor v2 log: Ed25519; its logId is its signed-note key id,
# SHA-256(origin ‖ "\n" ‖ 0x01 ‖ public key), which checkpoints' key hints
# start with.
V2_ORIGIN = "log2025-test.rekor.test"
v2_key = ed25519.Ed25519PrivateKey.generate()
v2_raw = v2_key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
v2_log_id = hashlib.sha256(V2_ORIGIN.encode() + b"\n\x01" + v2_raw).digest()


def tsa_pair(name: str):
    """A TSA: a self-signed P-384 root and its P-256 signing certificate
    (extended key usage: time stamping only, critical, as RFC 3161 says)."""
    root_key = ec.generate_private_key(ec.SECP384R1())
    root_name = x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "toolgate-test"),
        x509.NameAttribute(NameOID.COMMON_NAME, f"{name}-root"),
    ])
    root = (
        x509.CertificateBuilder().subject_name(root_name).issuer_name(root_name)
        .public_key(root_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(ts(now - 86400)).not_valid_after(ts(now + 86400))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(root_key.public_key()), critical=False)
        .sign(root_key, hashes.SHA384())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(root_name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(ts(now - 86400)).not_valid_after(ts(now + 86400))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]), critical=True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(root_key.public_key()), critical=False)
        .sign(root_key, hashes.SHA384())
    )
    return key, cert, root


tsa_key, tsa_cert, tsa_root = tsa_pair("test-tsa")


def timestamp(signature: bytes, at: int, key, cert) -> bytes:
    """An RFC 3161 TimeStampResp (granted) over SHA-256(signature) at `at`,
    signed by `key` (CMS SignedData, signed attributes: content type and
    message digest), embedding `cert`."""
    sha256 = der_seq(der_oid("2.16.840.1.101.3.4.2.1"))
    tst_info = der_seq(
        der_int(1),
        der_oid("1.3.6.1.4.1.57264.2"),
        der_seq(sha256, der_octets(hashlib.sha256(signature).digest())),
        der_int(x509.random_serial_number()),
        der(0x18, ts(at).strftime("%Y%m%d%H%M%SZ").encode()),
    )
    tst_type = der_oid("1.2.840.113549.1.9.16.1.4")
    attrs = der_set(
        der_seq(der_oid("1.2.840.113549.1.9.3"), der_set(tst_type)),
        der_seq(der_oid("1.2.840.113549.1.9.4"), der_set(der_octets(hashlib.sha256(tst_info).digest()))),
    )
    signer_info = der_seq(
        der_int(1),
        der_seq(cert.issuer.public_bytes(), der_int(cert.serial_number)),
        sha256,
        b"\xa0" + attrs[1:],  # [0] IMPLICIT: the SET's contents, retagged
        der_seq(der_oid("1.2.840.10045.4.3.2")),  # ecdsa-with-SHA256
        der_octets(key.sign(attrs, ec.ECDSA(hashes.SHA256()))),
    )
    signed_data = der_seq(
        der_int(3),
        der_set(sha256),
        der_seq(tst_type, der(0xA0, der_octets(tst_info))),
        der(0xA0, cert.public_bytes(serialization.Encoding.DER)),
        der_set(signer_info),
    )
    token = der_seq(der_oid("1.2.840.113549.1.7.2"), der(0xA0, signed_data))
    return der_seq(der_seq(der_int(0)), token)


def log_entry(artifact: bytes, signature: bytes, spec=None):
    body = json.dumps(
        {
            "apiVersion": "0.0.1",
            "kind": "hashedrekord" if spec is None else "dsse",
            "spec": spec or {
                "data": {"hash": {"algorithm": "sha256", "value": hashlib.sha256(artifact).hexdigest()}},
                "signature": {"content": b64(signature), "publicKey": {"content": b64(leaf_pem)}},
            },
        },
        separators=(",", ":"),
        sort_keys=True,
    ).encode()
    canonical = json.dumps(
        {"body": b64(body), "integratedTime": integrated_time, "logID": log_id.hex(), "logIndex": log_index},
        separators=(",", ":"),
        sort_keys=True,
    ).encode()
    set_ = log_key.sign(canonical, ec.ECDSA(hashes.SHA256()))
    return body, set_


def one_entry_proof(body: bytes, rekor_v2: bool = False):
    """A one-entry tree's root (the leaf hash; the proof is empty) and its
    checkpoint, signed by the v1 log key (key hint: its logId) or the v2
    one (its note key id)."""
    root_hash = hashlib.sha256(b"\x00" + body).digest()
    if rekor_v2:
        name, hint = V2_ORIGIN, v2_log_id[:4]
        note = f"{V2_ORIGIN}\n1\n{b64(root_hash)}\n"
        signature = v2_key.sign(note.encode())
    else:
        name, hint = "rekor.test", log_id[:4]
        note = f"rekor.test - 1\n1\n{b64(root_hash)}\n"
        signature = log_key.sign(note.encode(), ec.ECDSA(hashes.SHA256()))
    return root_hash, note + "\n" + f"\u2014 {name} " + b64(hint + signature) + "\n"


def write_root(path: str):
    start = ts(now - 86400).strftime("%Y-%m-%dT%H:%M:%SZ")
    root = {
        "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
        "tlogs": [
            {
                "baseUrl": "https://rekor.test",
                "hashAlgorithm": "SHA2_256",
                "publicKey": {"rawBytes": b64(spki_der(log_key)), "keyDetails": "PKIX_ECDSA_P256_SHA_256", "validFor": {"start": start}},
                "logId": {"keyId": b64(log_id)},
            },
            {
                "baseUrl": f"https://{V2_ORIGIN}",
                "hashAlgorithm": "SHA2_256",
                "publicKey": {
                    "rawBytes": b64(v2_key.public_key().public_bytes(
                        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)),
                    "keyDetails": "PKIX_ED25519",
                    "validFor": {"start": start},
                },
                "logId": {"keyId": b64(v2_log_id)},
            },
        ],
        "certificateAuthorities": [
            {
                "subject": {"organization": "toolgate-test", "commonName": "test-fulcio"},
                "uri": "https://fulcio.test",
                "certChain": {"certificates": [{"rawBytes": b64(ca.public_bytes(serialization.Encoding.DER))}]},
                "validFor": {"start": start},
            }
        ],
        "ctlogs": [] if sct_mode == "no-ctlogs" else [
            {
                "baseUrl": "https://ctfe.test",
                "hashAlgorithm": "SHA2_256",
                "publicKey": {
                    "rawBytes": b64(spki_der(ct_key)),
                    "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                    "validFor": {"start": start, "end": ts(now - 3600).strftime("%Y-%m-%dT%H:%M:%SZ")}
                    if sct_mode == "outside-validity" else {"start": start},
                },
                "logId": {"keyId": b64(hashlib.sha256(spki_der(ct_key)).digest())},
            }
        ],
        "timestampAuthorities": [
            {
                "subject": {"organization": "toolgate-test", "commonName": "test-tsa"},
                "uri": "https://tsa.test",
                "certChain": {"certificates": [
                    {"rawBytes": b64(c.public_bytes(serialization.Encoding.DER))} for c in (tsa_cert, tsa_root)
                ]},
                "validFor": {"start": start},
            }
        ],
    }
    with open(path, "w") as f:
        json.dump(root, f, indent=2)


def push_blob(base: str, registry: str, data: bytes) -> str:
    d = "sha256:" + hashlib.sha256(data).hexdigest()
    with urllib.request.urlopen(urllib.request.Request(f"{base}/blobs/uploads/", method="POST")) as r:
        location = r.headers["Location"]
    if location.startswith("/"):
        location = f"http://{registry}{location}"
    sep = "&" if "?" in location else "?"
    urllib.request.urlopen(
        urllib.request.Request(
            f"{location}{sep}digest={d}", data=data, method="PUT",
            headers={"Content-Type": "application/octet-stream"},
        )
    ).close()
    return d


if command == "oci":
    registry, repository, digest, root_out = sys.argv[2:6]
    base = f"http://{registry}/v2/{repository}"
    payload = json.dumps(
        {
            "critical": {
                "identity": {"docker-reference": f"{registry}/{repository}"},
                "image": {"docker-manifest-digest": digest},
                "type": "cosign container image signature",
            },
            "optional": None,
        },
        separators=(",", ":"),
    ).encode()
    signature = leaf_key.sign(payload, ec.ECDSA(hashes.SHA256()))
    body, set_ = log_entry(payload, signature)
    rekor_bundle = json.dumps(
        {
            "SignedEntryTimestamp": b64(set_),
            "Payload": {"body": b64(body), "integratedTime": integrated_time, "logIndex": log_index, "logID": log_id.hex()},
        }
    )
    payload_digest = push_blob(base, registry, payload)
    config = json.dumps(
        {"architecture": "", "config": {}, "created": "0001-01-01T00:00:00Z",
         "history": [{"created": "0001-01-01T00:00:00Z"}], "os": "",
         "rootfs": {"type": "layers", "diff_ids": [payload_digest]}},
        separators=(",", ":"),
    ).encode()
    config_digest = push_blob(base, registry, config)
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "size": len(config), "digest": config_digest},
            "layers": [
                {
                    "mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
                    "size": len(payload),
                    "digest": payload_digest,
                    "annotations": {
                        "dev.cosignproject.cosign/signature": b64(signature),
                        "dev.sigstore.cosign/certificate": leaf_pem.decode(),
                        "dev.sigstore.cosign/chain": ca_pem.decode(),
                        "dev.sigstore.cosign/bundle": rekor_bundle,
                    },
                }
            ],
        }
    ).encode()
    tag = digest.replace(":", "-", 1) + ".sig"
    urllib.request.urlopen(
        urllib.request.Request(
            f"{base}/manifests/{tag}", data=manifest, method="PUT",
            headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"},
        )
    ).close()
    write_root(root_out)
elif command == "referrer":
    registry, repository, digest, root_out = sys.argv[2:6]
    base = f"http://{registry}/v2/{repository}"
    named = digest if mode != "other-digest" else "sha256:" + hashlib.sha256(b"another").hexdigest()
    statement = json.dumps(
        {
            "_type": "https://in-toto.io/Statement/v1",
            "subject": [{"digest": {"sha256": named.split(":", 1)[1]}}],
            "predicateType": "https://sigstore.dev/cosign/sign/v1",
            "predicate": {},
        },
        separators=(",", ":"),
    ).encode()
    payload_type = "application/vnd.in-toto+json"

    def pae(body: bytes) -> bytes:
        return b"DSSEv1 %d %s %d %s" % (len(payload_type), payload_type.encode(), len(body), body)

    # `key`: as `cosign sign --key` 3 signs (the same key pair, without
    # its certificate): the bundle names the key by a hint, the log entry
    # records the public key; the key's PEM goes to TRUSTED_ROOT_OUT.pub.
    key_pem = leaf_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    signed = statement if mode != "bad-signature" else statement + b" "
    signature = leaf_key.sign(pae(signed), ec.ECDSA(hashes.SHA256()))
    envelope = {"payload": b64(statement), "payloadType": payload_type, "signatures": [{"sig": b64(signature)}]}
    spec = {
        "envelopeHash": {"algorithm": "sha256", "value": hashlib.sha256(json.dumps(envelope).encode()).hexdigest()},
        "payloadHash": {"algorithm": "sha256", "value": hashlib.sha256(statement).hexdigest()},
        "signatures": [{"signature": b64(signature), "verifier": b64(key_pem if mode == "key" else leaf_pem)}],
    }
    keyed = mode in ("key", "rekor2-key")
    material = (
        {"publicKey": {"hint": b64(hashlib.sha256(spki_der(leaf_key)).digest())}} if keyed else
        {"certificate": {"rawBytes": b64(leaf.public_bytes(serialization.Encoding.DER))}}
    )
    if mode.startswith("rekor2"):
        # Rekor v2: "hashedrekord over DSSE" (the PAE's digest), no
        # integratedTime, no SET; the time is the TSA's.
        verifier = {
            "keyDetails": "PKIX_ECDSA_P256_SHA_256",
            **({"publicKey": {"rawBytes": b64(spki_der(leaf_key))}} if keyed else
               {"x509Certificate": {"rawBytes": b64(leaf.public_bytes(serialization.Encoding.DER))}}),
        }
        v2_kind = "dsse" if mode.startswith("rekor2-dsse") else "hashedrekord"
        if v2_kind == "dsse":
            # A `dsse` 0.0.2 entry (Rekor v2's DSSE request): the payload's
            # digest, the signature and its verifier.
            logged = statement if mode == "rekor2-dsse" else statement + b" "
            spec = {"dsseV002": {
                "payloadHash": {"algorithm": "SHA2_256", "digest": b64(hashlib.sha256(logged).digest())},
                "signatures": [{"content": b64(signature), "verifier": verifier}],
            }}
        else:
            spec = {"hashedRekordV002": {
                "data": {"algorithm": "SHA2_256", "digest": b64(hashlib.sha256(pae(statement)).digest())},
                "signature": {"content": b64(signature), "verifier": verifier},
            }}
        body = json.dumps(
            {"apiVersion": "0.0.2", "kind": v2_kind, "spec": spec}, separators=(",", ":")
        ).encode()
        root_hash, checkpoint = one_entry_proof(body, rekor_v2=True)
        stamped_at = now - 300 if mode == "rekor2-after-expiry" else now - 900
        key, cert, _ = tsa_pair("other-tsa") if mode == "rekor2-untrusted-tsa" else (tsa_key, tsa_cert, None)
        entry = {
            "logIndex": "0",
            "logId": {"keyId": b64(v2_log_id)},
            "kindVersion": {"kind": v2_kind, "version": "0.0.2"},
            "inclusionProof": {
                "logIndex": "0", "rootHash": b64(root_hash), "treeSize": "1", "hashes": [],
                "checkpoint": {"envelope": checkpoint},
            },
            "canonicalizedBody": b64(body),
        }
        material["timestampVerificationData"] = {
            "rfc3161Timestamps": [{"signedTimestamp": b64(timestamp(signature, stamped_at, key, cert))}]
        }
    else:
        body, set_ = log_entry(statement, signature, spec)
        root_hash, checkpoint = one_entry_proof(body)
        entry = {
            "logIndex": str(log_index),
            "logId": {"keyId": b64(log_id)},
            "kindVersion": {"kind": "dsse", "version": "0.0.1"},
            "integratedTime": str(integrated_time),
            "inclusionPromise": {"signedEntryTimestamp": b64(set_)},
            "inclusionProof": {
                "logIndex": "0", "rootHash": b64(root_hash), "treeSize": "1", "hashes": [],
                "checkpoint": {"envelope": checkpoint},
            },
            "canonicalizedBody": b64(body),
        }
    bundle = json.dumps({
        "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "verificationMaterial": {**material, "tlogEntries": [entry]},
        "dsseEnvelope": envelope,
    }).encode()
    bundle_type = "application/vnd.dev.sigstore.bundle.v0.3+json"
    manifest_type = "application/vnd.oci.image.manifest.v1+json"
    index_type = "application/vnd.oci.image.index.v1+json"
    # The subject's descriptor, as the registry serves it (cosign HEADs it).
    target = digest
    if mode == "other-subject":
        # Another manifest in the same repository: the empty config's
        # artifact, pushed here.
        other_config = push_blob(base, registry, b"{}")
        other = json.dumps({
            "schemaVersion": 2, "mediaType": manifest_type,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "size": 2, "digest": other_config},
            "layers": [],
        }).encode()
        with urllib.request.urlopen(urllib.request.Request(
            f"{base}/manifests/other", data=other, method="PUT", headers={"Content-Type": manifest_type},
        )) as r:
            target = r.headers["Docker-Content-Digest"]
    with urllib.request.urlopen(urllib.request.Request(
        f"{base}/manifests/{target}", method="HEAD", headers={"Accept": manifest_type},
    )) as r:
        subject = {"mediaType": manifest_type, "digest": target, "size": int(r.headers["Content-Length"])}
    bundle_digest = push_blob(base, registry, bundle)
    config_digest = push_blob(base, registry, b"{}")
    referrer = json.dumps({
        "schemaVersion": 2,
        "mediaType": manifest_type,
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "size": 2, "digest": config_digest},
        "layers": [{"mediaType": bundle_type, "size": len(bundle), "digest": bundle_digest}],
        "subject": subject,
        "annotations": {
            "dev.sigstore.bundle.content": "dsse-envelope",
            "dev.sigstore.bundle.predicateType": "https://sigstore.dev/cosign/sign/v1",
            "org.opencontainers.image.created": ts(now).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        "artifactType": bundle_type,
    }).encode()
    referrer_digest = "sha256:" + hashlib.sha256(referrer).hexdigest()
    with urllib.request.urlopen(urllib.request.Request(
        f"{base}/manifests/{referrer_digest}", data=referrer, method="PUT",
        headers={"Content-Type": manifest_type},
    )) as r:
        has_api = r.headers.get("OCI-Subject") is not None
    how = "api"
    if not has_api:
        # The referrers tag schema: the index under sha256-HEX of the
        # digest signed lists the referrer (added to what it lists).
        how = "tag"
        tag = digest.replace(":", "-", 1)
        manifests = []
        try:
            with urllib.request.urlopen(urllib.request.Request(
                f"{base}/manifests/{tag}", headers={"Accept": index_type},
            )) as r:
                manifests = json.load(r).get("manifests", [])
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise
        manifests.append({
            "mediaType": manifest_type, "digest": referrer_digest, "size": len(referrer),
            "artifactType": bundle_type,
        })
        index = json.dumps({"schemaVersion": 2, "mediaType": index_type, "manifests": manifests}).encode()
        urllib.request.urlopen(urllib.request.Request(
            f"{base}/manifests/{tag}", data=index, method="PUT", headers={"Content-Type": index_type},
        )).close()
    write_root(root_out)
    if keyed:
        with open(root_out + ".pub", "wb") as f:
            f.write(key_pem)
    print(f"{ISSUER} {SUBJECT}")
    print(how)
    sys.exit(0)
elif command == "bundle":
    path, bundle_out, root_out = sys.argv[2:5]
    artifact = open(path, "rb").read()
    signature = leaf_key.sign(artifact, ec.ECDSA(hashes.SHA256()))
    body, set_ = log_entry(artifact, signature)
    root_hash, checkpoint = one_entry_proof(body)
    bundle = {
        "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "verificationMaterial": {
            "certificate": {"rawBytes": b64(leaf.public_bytes(serialization.Encoding.DER))},
            "tlogEntries": [
                {
                    "logIndex": str(log_index),
                    "logId": {"keyId": b64(log_id)},
                    "kindVersion": {"kind": "hashedrekord", "version": "0.0.1"},
                    "integratedTime": str(integrated_time),
                    "inclusionPromise": {"signedEntryTimestamp": b64(set_)},
                    "inclusionProof": {
                        "logIndex": "0",
                        "rootHash": b64(root_hash),
                        "treeSize": "1",
                        "hashes": [],
                        "checkpoint": {"envelope": checkpoint},
                    },
                    "canonicalizedBody": b64(body),
                }
            ],
        },
        "messageSignature": {
            "messageDigest": {"algorithm": "SHA2_256", "digest": b64(hashlib.sha256(artifact).digest())},
            "signature": b64(signature),
        },
    }
    with open(bundle_out, "w") as f:
        json.dump(bundle, f)
    write_root(root_out)
else:
    sys.exit(f"unknown command {command!r}")
print(f"{ISSUER} {SUBJECT}")
