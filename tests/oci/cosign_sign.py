"""Sign an OCI manifest as `cosign sign --key` does, independently of
toolgate: the key, the payload, the signature (Python's `cryptography`) and
the push (plain HTTP requests of the OCI distribution API) are all made
here, following cosign's signature specification
(https://github.com/sigstore/cosign/blob/main/specs/SIGNATURE_SPEC.md):
a simple-signing JSON payload, layer media type
application/vnd.dev.cosign.simplesigning.v1+json, the base64 ECDSA P-256
(SHA-256, ASN.1 DER) signature in the layer annotation
dev.cosignproject.cosign/signature, the manifest under the tag
sha256-<hex>.sig.

usage: cosign_sign.py REGISTRY REPOSITORY DIGEST PUBLIC_KEY_OUT
Prints the key's fingerprint: sha256 of its SubjectPublicKeyInfo DER.
"""

import base64
import hashlib
import json
import sys
import urllib.request

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

registry, repository, digest, public_out = sys.argv[1:5]
base = f"http://{registry}/v2/{repository}"

key = ec.generate_private_key(ec.SECP256R1())
public = key.public_key()
with open(public_out, "wb") as f:
    f.write(
        public.public_bytes(
            serialization.Encoding.PEM,
            serialization.PublicFormat.SubjectPublicKeyInfo,
        )
    )
spki = public.public_bytes(
    serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
)

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
signature = base64.b64encode(key.sign(payload, ec.ECDSA(hashes.SHA256()))).decode()


def push_blob(data: bytes) -> str:
    d = "sha256:" + hashlib.sha256(data).hexdigest()
    with urllib.request.urlopen(
        urllib.request.Request(f"{base}/blobs/uploads/", method="POST")
    ) as r:
        location = r.headers["Location"]
    if location.startswith("/"):
        location = f"http://{registry}{location}"
    sep = "&" if "?" in location else "?"
    urllib.request.urlopen(
        urllib.request.Request(
            f"{location}{sep}digest={d}",
            data=data,
            method="PUT",
            headers={"Content-Type": "application/octet-stream"},
        )
    ).close()
    return d


payload_digest = push_blob(payload)
config = json.dumps(
    {
        "architecture": "",
        "config": {},
        "created": "0001-01-01T00:00:00Z",
        "history": [{"created": "0001-01-01T00:00:00Z"}],
        "os": "",
        "rootfs": {"type": "layers", "diff_ids": [payload_digest]},
    },
    separators=(",", ":"),
).encode()
config_digest = push_blob(config)
manifest = json.dumps(
    {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "size": len(config),
            "digest": config_digest,
        },
        "layers": [
            {
                "mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
                "size": len(payload),
                "digest": payload_digest,
                "annotations": {"dev.cosignproject.cosign/signature": signature},
            }
        ],
    }
).encode()
tag = digest.replace(":", "-", 1) + ".sig"
urllib.request.urlopen(
    urllib.request.Request(
        f"{base}/manifests/{tag}",
        data=manifest,
        method="PUT",
        headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"},
    )
).close()
print("sha256:" + hashlib.sha256(spki).hexdigest())
