from __future__ import annotations

from datetime import UTC, datetime, timedelta

import jwt
import pytest

from cronhooks_common.tokens import ApiTokens, TokenError

NOW = datetime(2026, 2, 9, 9, 0, tzinfo=UTC)
TOKENS = ApiTokens(master_key="m" * 40, issuer="http://127.0.0.1:8080", ttl_seconds=3600)


def mint(**overrides: object) -> str:
    args: dict[str, object] = {
        "webhook_id": 7,
        "delivery_id": 42,
        "depth": 1,
        "read_patterns": ["*"],
        "write_patterns": ["digests/*"],
        "now": NOW,
    }
    args.update(overrides)
    return TOKENS.mint(**args)  # type: ignore[arg-type]


def test_claims_round_trip() -> None:
    token = mint()
    claims = TOKENS.verify(token, now=NOW + timedelta(minutes=1))
    assert claims.subject == "webhook:7"
    assert claims.delivery_id == 42
    assert claims.depth == 1
    assert claims.write_patterns == ("digests/*",)
    raw = jwt.decode(token, options={"verify_signature": False})
    assert raw["aud"] == "cronhooks-api"
    assert raw["iss"] == "http://127.0.0.1:8080"
    assert raw["exp"] - raw["iat"] == 3600
    assert jwt.get_unverified_header(token)["alg"] == "HS256"


def test_expired_token_is_rejected() -> None:
    with pytest.raises(TokenError, match="expired"):
        TOKENS.verify(mint(), now=NOW + timedelta(hours=1, seconds=1))


def test_forged_token_is_rejected() -> None:
    other = ApiTokens(master_key="o" * 40, issuer="http://127.0.0.1:8080", ttl_seconds=3600)
    forged = other.mint(
        webhook_id=7, delivery_id=42, depth=1, read_patterns=["*"], write_patterns=["*"], now=NOW
    )
    with pytest.raises(TokenError):
        TOKENS.verify(forged, now=NOW)


def test_other_issuer_is_rejected() -> None:
    other = ApiTokens(master_key="m" * 40, issuer="http://elsewhere", ttl_seconds=3600)
    with pytest.raises(TokenError):
        TOKENS.verify(
            other.mint(
                webhook_id=1, delivery_id=1, depth=1, read_patterns=[], write_patterns=[], now=NOW
            ),
            now=NOW,
        )


def test_garbage_is_rejected() -> None:
    with pytest.raises(TokenError):
        TOKENS.verify("not.a.jwt", now=NOW)


def _resigned(**claims: object) -> str:
    """A token signed with the real key whose claims we chose (an attacker cannot, but a
    buggy issuer could: verification must still answer TokenError, never crash)."""
    from cronhooks_common.crypto import derive_key

    base = jwt.decode(mint(), options={"verify_signature": False})
    return jwt.encode({**base, **claims}, derive_key("m" * 40, "api-token/v1"), algorithm="HS256")


@pytest.mark.parametrize(
    "claims",
    [{"exp": 10**12}, {"exp": 1e300}, {"iat": 10**12}, {"exp": "tomorrow"}, {"exp": True}],
)
def test_absurd_time_claims_are_refused_not_crashed(claims: dict[str, object]) -> None:
    with pytest.raises(TokenError):
        TOKENS.verify(_resigned(**claims), now=NOW)


def test_times_are_judged_by_the_injected_clock_not_the_wall_clock() -> None:
    # Issued and verified a year ahead of the machine's clock (a test's ManualClock): valid.
    ahead = datetime.now(UTC) + timedelta(days=365)
    assert TOKENS.verify(mint(now=ahead), now=ahead + timedelta(seconds=1)).token_id
    # Issued in the future of the verifier's now (beyond the allowed skew): refused.
    with pytest.raises(TokenError, match="not yet valid"):
        TOKENS.verify(mint(now=NOW + timedelta(minutes=5)), now=NOW)


def test_an_expired_token_passes_only_when_allowed_and_only_if_genuine() -> None:
    """The run endpoints (CONTRACT §16.2) take an expired token while its run is RUNNING:
    the signature and every claim are still checked; only the expiry is let through."""
    later = NOW + timedelta(hours=5)
    claims = TOKENS.verify(mint(), now=later, allow_expired=True)
    assert claims.delivery_id == 42 and claims.expires_at <= later
    other = ApiTokens(master_key="o" * 40, issuer="http://127.0.0.1:8080", ttl_seconds=3600)
    forged = other.mint(
        webhook_id=7, delivery_id=42, depth=1, read_patterns=["*"], write_patterns=["*"], now=NOW
    )
    header, body, signature = mint().split(".")
    tampered = f"{header}.{body[:-2]}AA.{signature}"
    for bad in (forged, tampered, _resigned(exp=1e300), _resigned(iat=10**12), "not.a.jwt"):
        with pytest.raises(TokenError):
            TOKENS.verify(bad, now=later, allow_expired=True)
