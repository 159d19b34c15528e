"""The verdicts of sigstore-python (PyPI `sigstore`, an independent Sigstore
implementation) on the conformance bundles in conformance/, offline, with
the same trusted roots, identities and artifacts toolgate's tests use.

Prints one line per case: `NAME ok` or `NAME refused: WHY`. The test
`keyless::python_sigstore_agrees` compares these with toolgate's.
Usage: python python_verdicts.py DIR  (DIR = tests/sigstore)
"""

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
        verifier.verify_artifact(
            artifact.read_bytes(), bundle, policy.Identity(identity=identity, issuer=issuer)
        )
        print(f"{case.name} ok")
    except Exception as e:  # every refusal, whatever its type
        print(f"{case.name} refused: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
