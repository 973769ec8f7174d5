"""Age-style hybrid encryption of a held-out set's grader-only payload to one X25519 key.

Format `trustbench-seal-v1` (a JSON envelope, every binary member base64):

- a fresh ephemeral X25519 key pair per sealing; shared = X25519(ephemeral, recipient);
- key = HKDF-SHA256(shared, salt = ephemeral_public || recipient_public,
  info = b"trustbench-seal-v1", 32 bytes);
- ciphertext = ChaCha20-Poly1305(key, random 96-bit nonce, payload, aad = the envelope's
  `aad` text, which names the set id), so a sealed file moved to another set fails to open.

Keys are written as text: `tbx25519-public:<base64 raw 32 bytes>` and
`tbx25519-private:<base64 raw 32 bytes>`. An X25519 key is not an Ed25519 signing key: the two
are kept as separate types on purpose.

The exposure key of a set (`tbexposure:<set id>:<base64 32 bytes>`) = HKDF-SHA256(the owner's
raw private key, salt = the set id, info = `trustbench-exposure-v1`): only the owner's side can
derive it, and it opens nothing. The owner hands it to whoever runs evaluations (`rtb heldout
exposure-key`); it authenticates the set's exposure log (`_pipeline.py`), which the folder's
custodian cannot forge.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from trustbench.errors import InputError

SEAL_FORMAT = "trustbench-seal-v1"
PUBLIC_PREFIX = "tbx25519-public:"
PRIVATE_PREFIX = "tbx25519-private:"
KEY_ENV = "TRUSTBENCH_HELDOUT_KEY"
"""Environment variable that may hold the owner's private key text (or a path to its file)."""
EXPOSURE_PREFIX = "tbexposure:"
EXPOSURE_FORMAT = "trustbench-exposure-v1"

_RAW = serialization.Encoding.Raw


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError) as exc:
        raise InputError(f"{what} is not valid base64") from exc


def new_key_pair() -> tuple[str, str]:
    """A fresh (private key text, public key text) pair for a set owner."""
    private = X25519PrivateKey.generate()
    raw = private.private_bytes(_RAW, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    public = private.public_key().public_bytes(_RAW, serialization.PublicFormat.Raw)
    return PRIVATE_PREFIX + _b64(raw), PUBLIC_PREFIX + _b64(public)


def public_key_of(private_text: str) -> str:
    """The public key text that belongs to a private key text."""
    public = (
        parse_private(private_text).public_key().public_bytes(_RAW, serialization.PublicFormat.Raw)
    )
    return PUBLIC_PREFIX + _b64(public)


def _raw_key(text: str, prefix: str, wrong_kind: str, what: str) -> bytes:
    """The 32 raw key bytes of `PREFIX + base64` text; `wrong_kind` names the refusal."""
    text = text.strip()
    if not text.startswith(prefix):
        raise InputError(f"{wrong_kind} ({prefix}...)")
    raw = _unb64(text.removeprefix(prefix), what)
    if len(raw) != 32:
        raise InputError(f"{what} is not 32 bytes")
    return raw


def parse_public(text: str) -> X25519PublicKey:
    """Read `tbx25519-public:...` (refusing anything else, e.g. an Ed25519 key)."""
    wrong = "--recipient must be an X25519 public key"
    return X25519PublicKey.from_public_bytes(
        _raw_key(text, PUBLIC_PREFIX, wrong, "the recipient key")
    )


def parse_private(text: str) -> X25519PrivateKey:
    """Read `tbx25519-private:...`."""
    wrong = "the held-out key must be an X25519 private key"
    return X25519PrivateKey.from_private_bytes(
        _raw_key(text, PRIVATE_PREFIX, wrong, "the private key")
    )


def read_private_key(key_file: Path | None) -> str:
    """The owner's private key text from `--key FILE`, else `$TRUSTBENCH_HELDOUT_KEY`.

    Raises:
        InputError: Neither is given: the grader-only parts cannot be opened without the key.
    """
    if key_file is not None:
        try:
            return key_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise InputError(f"cannot read the key file: {exc}", location=str(key_file)) from exc
    env = os.environ.get(KEY_ENV, "").strip()
    if env.startswith(PRIVATE_PREFIX):
        return env
    if env:
        return read_private_key(Path(env))
    raise InputError(
        "this is a sealed held-out set: its answer key is encrypted and needs the owner's "
        f"private key (--key FILE or ${KEY_ENV}); refusing to grade or report without it"
    )


def _derive(shared: bytes, ephemeral: bytes, recipient: bytes) -> bytes:
    hkdf = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=ephemeral + recipient, info=SEAL_FORMAT.encode()
    )
    return hkdf.derive(shared)


def seal(payload: bytes, recipient_text: str, aad: str) -> bytes:
    """Encrypt `payload` to the recipient; returns the JSON envelope's bytes."""
    recipient = parse_public(recipient_text)
    recipient_raw = recipient.public_bytes(_RAW, serialization.PublicFormat.Raw)
    ephemeral = X25519PrivateKey.generate()
    ephemeral_raw = ephemeral.public_key().public_bytes(_RAW, serialization.PublicFormat.Raw)
    key = _derive(ephemeral.exchange(recipient), ephemeral_raw, recipient_raw)
    nonce = os.urandom(12)
    ciphertext = ChaCha20Poly1305(key).encrypt(nonce, payload, aad.encode("utf-8"))
    envelope = {
        "format": SEAL_FORMAT,
        "kem": "X25519",
        "kdf": "HKDF-SHA256",
        "aead": "ChaCha20-Poly1305",
        "aad": aad,
        "recipient": PUBLIC_PREFIX + _b64(recipient_raw),
        "ephemeral_public": _b64(ephemeral_raw),
        "nonce": _b64(nonce),
        "ciphertext": _b64(ciphertext),
    }
    return json.dumps(envelope, indent=2).encode("utf-8") + b"\n"


def unseal(envelope_bytes: bytes, private_text: str, aad: str) -> bytes:
    """Decrypt an envelope written by `seal`.

    Raises:
        InputError: Not an envelope, another set's, the wrong key, or altered bytes.
    """
    try:
        envelope = json.loads(envelope_bytes)
        if envelope.get("format") != SEAL_FORMAT:
            raise InputError(f"the sealed answer key is not in format {SEAL_FORMAT}")
        if envelope.get("aad") != aad:
            raise InputError("the sealed answer key belongs to another held-out set")
        ephemeral_raw = _unb64(envelope["ephemeral_public"], "ephemeral_public")
        nonce = _unb64(envelope["nonce"], "nonce")
        ciphertext = _unb64(envelope["ciphertext"], "ciphertext")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(f"the sealed answer key is malformed: {exc}") from exc
    private = parse_private(private_text)
    recipient_raw = private.public_key().public_bytes(_RAW, serialization.PublicFormat.Raw)
    try:
        shared = private.exchange(X25519PublicKey.from_public_bytes(ephemeral_raw))
        key = _derive(shared, ephemeral_raw, recipient_raw)
        return ChaCha20Poly1305(key).decrypt(nonce, ciphertext, aad.encode("utf-8"))
    except (InvalidTag, ValueError) as exc:
        raise InputError(
            "cannot open the sealed answer key: wrong private key or altered sealed bytes"
        ) from exc


def exposure_key(private_text: str, set_id: str) -> str:
    """The set's exposure key text, derived from the owner's private key and the set id.

    HKDF rather than the private key itself: the evaluation operator who holds it can
    authenticate exposure entries but can open no answer key.
    """
    raw = _raw_key(private_text, PRIVATE_PREFIX, "the held-out key must be an X25519 private key",
                   "the private key")  # fmt: skip
    hkdf = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=set_id.encode("utf-8"),
        info=EXPOSURE_FORMAT.encode("ascii"),
    )  # fmt: skip
    return f"{EXPOSURE_PREFIX}{set_id}:{_b64(hkdf.derive(raw))}"
