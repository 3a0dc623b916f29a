"""The README's trip2g-style receiver check, run as written against our signatures."""

from __future__ import annotations

import re
from pathlib import Path

from cronhooks_common.signing import SecretKeys, generate_secret, signature_headers

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_receiver_check_accepts_ours_and_refuses_tampering() -> None:
    section = README.read_text().split("## Verifying a delivery without the SDK", 1)[1]
    [code] = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.S)
    namespace: dict[str, object] = {}
    exec(re.sub(r"(?m)^  ", "", code), namespace)  # the block is indented in a list item
    verified = namespace["verified"]
    for secret in (generate_secret(), "an admin's plain secret, 24+ chars"):
        body = b'{"version":1,"id":42}'
        header = signature_headers(
            SecretKeys.of(secret), delivery_id="42", timestamp=1738000000, body=body, attempt=1
        )["X-Webhook-Signature"]
        assert verified(secret, body, header)  # type: ignore[operator]
        assert not verified(secret, body + b" ", header)  # type: ignore[operator]
        assert not verified(generate_secret(), body, header)  # type: ignore[operator]
