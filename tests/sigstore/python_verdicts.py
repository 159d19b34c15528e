"""The verdicts of sigstore-python (PyPI `sigstore`, an independent Sigstore
implementation) on the conformance bundles in conformance/, offline, with
the same trusted roots, identities and artifacts toolgate's tests use.

Prints one line per case: `NAME ok` or `NAME refused: WHY`. The test
`keyless::python_sigstore_agrees` compares these with toolgate's.
Usage: python python_verdicts.py DIR  (DIR = tests/sigstore)
"""

import hashlib
import json
import sys
from pathlib import Path

from sigstore.models import Bundle, TrustedRoot
from sigstore.verify import Verifier, policy

IDENTITY = "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main"
ISSUER = "https://token.actions.githubusercontent.com"

root = Path(sys.argv[1])
production = root / "roots" / "production.json"
for case in sorted(p for p in (root / "conformance").iterdir() if p.is_dir()):
    artifact = case / "artifact"
    artifact = artifact if artifact.exists() else root / "conformance" / "a.txt"
    trusted = case / "trusted_root.json"
    trusted = trusted if trusted.exists() else production
    identity = (case / "identity").read_text().strip() if (case / "identity").exists() else IDENTITY
    issuer = (case / "issuer").read_text().strip() if (case / "issuer").exists() else ISSUER
    try:
        verifier = Verifier(trusted_root=TrustedRoot.from_file(str(trusted)))
        bundle = Bundle.from_json((case / "bundle.sigstore.json").read_bytes())
        identity_policy = policy.Identity(identity=identity, issuer=issuer)
        if bundle._dsse_envelope is not None:
            # A DSSE bundle: sigstore-python checks the envelope, its log
            # entry and signer; that the statement names the artifact is
            # the caller's check (as in sigstore-python's conformance client).
            payload_type, payload = verifier.verify_dsse(bundle, identity_policy)
            digest = hashlib.sha256(artifact.read_bytes()).hexdigest()
            subjects = json.loads(payload).get("subject", [])
            if not any(s.get("digest", {}).get("sha256") == digest for s in subjects):
                raise ValueError("the in-toto statement does not name the artifact")
        else:
            verifier.verify_artifact(artifact.read_bytes(), bundle, identity_policy)
        print(f"{case.name} ok")
    except Exception as e:  # every refusal, whatever its type
        print(f"{case.name} refused: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
