"""Ed25519 keys and DSSE envelopes: the public-key signature of a run's record.

A record signed with a shared secret (the HMAC mode this replaced) proves nothing to a third
party: whoever can check it can forge it. Here the signer holds an Ed25519 private key and hands
out the public key; anyone with the public key can check a record and nobody without the private
key can make one that checks.

Envelope: DSSE v1 (github.com/secure-systems-lab/dsse, `envelope.md` and `protocol.md`):
`{"payloadType", "payload": base64(body), "signatures": [{"keyid", "sig": base64(sig)}]}`, where
`sig` signs `PAE(payloadType, body)` = `"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`, the
lengths in ASCII decimal without leading zeros. The PAE binds the payload type into what is
signed. `keyid` is the SHA-256 (hex) of the raw 32-byte public key: a hint naming which key
signed, never trusted for the decision (DSSE says so too); the decision is whether a signature
verifies under the public key the verifier was given.

Key files are PEM: the private key PKCS #8 (unencrypted; `keygen` writes it readable by its
owner only), the public key SubjectPublicKeyInfo. `cryptography` is imported only here and only
when a key is used, so commands that never sign stay light.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from trustbench.errors import InputError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

_Key = TypeVar("_Key")

SCHEME = "ed25519"
"""The only signature scheme a record is checked with."""


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding of `payload` under `payload_type`."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def key_id(public_key: Ed25519PublicKey) -> str:
    """SHA-256 hex of the raw public key: the `keyid` a signature carries."""
    from cryptography.hazmat.primitives import serialization

    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def generate_key_pair(private_path: Path, public_path: Path) -> str:
    """Write a new Ed25519 key pair (private key mode 0600); return its key id.

    The caller checks the paths (`_outputs.check_output`): this only writes.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Ed25519PrivateKey.generate()
    private_pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    # The private key is created unreadable to others, never chmod-ed after being written.
    descriptor = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(private_pem)
    os.chmod(private_path, 0o600)
    public_path.write_bytes(public_pem)
    return key_id(private.public_key())


def _pem(path: Path, what: str) -> bytes:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{what} file not found", location=str(path)) from None
    except IsADirectoryError:
        raise InputError(f"{what} must be a file, not a folder", location=str(path)) from None
    if len(data) > 64 << 10:
        raise InputError(f"not an Ed25519 {what} (file too large)", location=str(path))
    return data


def _first_line(error: Exception) -> str:
    return (str(error).splitlines() or [type(error).__name__])[0]


def _pem_key(
    path: Path, what: str, kind: type[_Key], load: Callable[[bytes], object], expected: str
) -> _Key:
    """The key of type `kind` that `load` reads from the PEM file at `path` (both key files)."""
    data = _pem(path, what)
    try:
        key = load(data)
    except (ValueError, TypeError) as error:
        raise InputError(
            f"not {expected} in PEM ({_first_line(error)})",
            location=str(path),
        ) from None
    if not isinstance(key, kind):
        raise InputError(f"the {what} is not an Ed25519 key", location=str(path))
    return key


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """The Ed25519 private key in a PEM file (from `trustbench keygen`).

    Raises:
        InputError: naming the file when it is missing or not an unencrypted Ed25519 key.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return _pem_key(
        path,
        "private key",
        Ed25519PrivateKey,
        lambda data: serialization.load_pem_private_key(data, password=None),
        "an unencrypted Ed25519 private key",
    )


def load_public_key(path: Path) -> Ed25519PublicKey:
    """The Ed25519 public key in a PEM file (`KEY.pub` from `trustbench keygen`).

    Raises:
        InputError: naming the file when it is missing or not an Ed25519 public key.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    return _pem_key(
        path,
        "public key",
        Ed25519PublicKey,
        serialization.load_pem_public_key,
        "an Ed25519 public key",
    )


def sign_envelope(payload_type: str, payload: bytes, key: Ed25519PrivateKey) -> dict[str, Any]:
    """A DSSE envelope of `payload` with one Ed25519 signature and its key id."""
    signature = key.sign(pae(payload_type, payload))
    return {
        "payloadType": payload_type,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [
            {"keyid": key_id(key.public_key()), "sig": base64.b64encode(signature).decode()}
        ],
    }


def decode_base64(text: Any) -> bytes:
    """Standard or URL-safe base64 (DSSE: verifiers must accept either)."""
    if not isinstance(text, str):
        raise ValueError("not a base64 string")
    padded = text + "=" * (-len(text) % 4)
    alphabet = {"-": "+", "_": "/"}
    return base64.b64decode("".join(alphabet.get(c, c) for c in padded), validate=True)


@dataclass(frozen=True)
class Opened:
    """A DSSE envelope's payload and what its signatures say."""

    payload_type: str
    payload: bytes
    keyids: tuple[str, ...]
    """The key ids its signatures name (hints only)."""
    verified_keyid: str | None
    """The given public key's id when one of the signatures verifies under it, else None."""


ENVELOPE_FIELDS = frozenset({"payloadType", "payload", "signatures"})
"""The fields of a DSSE v1 envelope, all required; any other is refused."""
SIGNATURE_FIELDS = frozenset({"keyid", "sig"})
"""The fields of one signature (`keyid` optional); any other is refused."""


def _unknown_fields(found: dict[str, Any], known: frozenset[str], where: str) -> None:
    """Refuse a field DSSE does not define: nothing outside the signature may ride along.

    An extra field is covered by no signature, yet a reader of the file may take it for part of
    the signed record (a second `"predicate"` beside the envelope, say).
    """
    unknown = sorted(set(found) - known)
    if unknown:
        raise ValueError(f"{where} has unsigned field(s) DSSE does not define: {unknown}")


def _checked_fields(document: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The payload type and the signature list of an envelope with exactly DSSE's fields."""
    _unknown_fields(document, ENVELOPE_FIELDS, "the envelope")
    missing = sorted(ENVELOPE_FIELDS - set(document))
    if missing:
        raise ValueError(f"the envelope lacks {missing}")
    payload_type = document.get("payloadType")
    signatures = document.get("signatures")
    if not isinstance(payload_type, str) or not isinstance(signatures, list) or not signatures:
        raise ValueError("payloadType is not text or signatures not a non-empty list")
    for index, signature in enumerate(signatures):
        if not isinstance(signature, dict) or "sig" not in signature:
            raise ValueError(f"signatures[{index}] is not an object with a sig")
        _unknown_fields(signature, SIGNATURE_FIELDS, f"signatures[{index}]")
    return payload_type, signatures


def open_envelope(document: dict[str, Any], public_key: Ed25519PublicKey | None) -> Opened:
    """Decode a DSSE envelope and check its signatures under `public_key` (when given).

    Read the envelope with `loads_refusing_duplicate_keys` (`trustbench._canonical`): a second
    `"payload"` must be refused before this sees the one `json.loads` kept.

    Raises:
        ValueError: when the envelope is malformed (not base64, no signature list, a field
            DSSE does not define).
    """
    payload_type, signatures = _checked_fields(document)
    payload = decode_base64(document["payload"])
    keyids = tuple(str(s["keyid"]) for s in signatures if "keyid" in s)
    verified = None
    if public_key is not None:
        from cryptography.exceptions import InvalidSignature

        message = pae(payload_type, payload)
        for signature in signatures:
            try:
                public_key.verify(decode_base64(signature.get("sig")), message)
            except (InvalidSignature, ValueError, AttributeError, binascii.Error):
                continue
            verified = key_id(public_key)
            break
    return Opened(payload_type, payload, keyids, verified)
