"""ed25519 keys, DSSE envelopes and in-toto Statement v1.

The signature covers the PAE of the exact payload bytes; `open_envelope` checks it before the
payload is parsed, so nothing unsigned is ever interpreted.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from qualify.errors import BadInput, Refused

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
DEFAULT_KEY = Path("~/.config/qualify/keys/qualify")


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE pre-authentication encoding: `DSSEv1 SP len(type) SP type SP len(body) SP body`."""
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(body), body)


def keyid(pub: Ed25519PublicKey) -> str:
    """The sha256 of the raw 32-byte public key: a hint for which key signed, not a proof."""
    raw = pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def pem(pub: Ed25519PublicKey) -> str:
    """A public key as PEM (SubjectPublicKeyInfo), as a `.pub` file and the trust log hold it."""
    return pub.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()


def generate(out: Path, force: bool = False) -> tuple[Path, Path]:
    """A new key pair at `out.key` (mode 0600) and `out.pub`; refuses to replace without force."""
    key = Ed25519PrivateKey.generate()
    priv = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    pub = pem(key.public_key()).encode()
    key_path, pub_path = out.with_name(out.name + ".key"), out.with_name(out.name + ".pub")
    taken = ["--out: expected a new path (or --force to replace it)"]
    for p in (key_path, pub_path):
        if p.exists() and not force:
            raise BadInput(f"{p} already exists", taken)
    for p, data, mode in ((key_path, priv, 0o600), (pub_path, pub, 0o644)):
        p.parent.mkdir(parents=True, exist_ok=True)
        if force:
            p.unlink(missing_ok=True)
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        except FileExistsError:
            raise BadInput(f"{p} already exists", taken) from None
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(p, mode)  # the umask may have narrowed or widened nothing; be exact
    return key_path, pub_path


def _read(path: Path) -> bytes:
    try:
        return path.expanduser().read_bytes()
    except OSError as exc:
        raise BadInput(
            f"{path} cannot be read", [f"key: {exc.strerror or exc} (expected a PEM file)"]
        ) from None


def load_private(path: Path) -> Ed25519PrivateKey:
    """An ed25519 private key; refused if others may read it (mode wider than 0600)."""
    data = _read(path)
    mode = stat.S_IMODE(path.expanduser().stat().st_mode)
    if mode & 0o077:
        raise BadInput(
            f"{path} is readable by others",
            [f"key: file mode {mode:04o} (expected 0600 for a private key)"],
        )
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise BadInput(f"{path} is not a private key", [f"key: {exc}"]) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise BadInput(f"{path} is not an ed25519 key", ["key: expected an ed25519 private key"])
    return key


def load_public(path: Path) -> Ed25519PublicKey:
    """An ed25519 public key (a private key file is accepted too: its public half is used)."""
    data = _read(path)
    try:
        pub = serialization.load_pem_public_key(data)
    except ValueError:
        try:
            priv = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError):
            raise BadInput(
                f"{path} is not a PEM key", ["key: expected an ed25519 public key"]
            ) from None
        pub = priv.public_key()
    if not isinstance(pub, Ed25519PublicKey):
        raise BadInput(f"{path} is not an ed25519 key", ["key: expected an ed25519 public key"])
    return pub


class Subject(TypedDict):
    """An in-toto subject: a file, its digest and its role."""

    name: str
    digest: dict[str, str]
    annotations: dict[str, str]


def seal_envelope(payload: bytes, key: Ed25519PrivateKey, payload_type: str) -> dict[str, object]:
    """A DSSE envelope signing the exact payload bytes."""
    sig = key.sign(pae(payload_type, payload))
    return {
        "payload": base64.b64encode(payload).decode(),
        "payloadType": payload_type,
        "signatures": [{"keyid": keyid(key.public_key()), "sig": base64.b64encode(sig).decode()}],
    }


def envelope_bytes(envelope: Mapping[str, object]) -> bytes:
    return (json.dumps(envelope, indent=1) + "\n").encode()


def read_envelope(path: Path) -> dict[str, Any]:  # raw JSON of the file being checked
    try:
        env = json.loads(path.read_bytes())
    except OSError as exc:
        raise BadInput(f"{path} cannot be read", [f"{exc.strerror or exc}"]) from None
    except ValueError as exc:
        raise Refused(f"{path} is not a DSSE envelope: not JSON ({exc})") from None
    if not isinstance(env, dict) or not {"payload", "payloadType", "signatures"} <= env.keys():
        raise Refused(f"{path} is not a DSSE envelope: expected payload, payloadType, signatures")
    return env


def open_envelope(
    envelope: dict[str, Any],  # raw envelope JSON, as read_envelope read it
    pub: Ed25519PublicKey,
    payload_type: str = PAYLOAD_TYPE,
) -> bytes:
    """The payload bytes, once a signature by `pub` over their PAE verifies; Refused otherwise."""
    if envelope.get("payloadType") != payload_type:
        raise Refused(f"payloadType is {envelope.get('payloadType')!r}, expected {payload_type!r}")
    try:
        payload = base64.b64decode(envelope["payload"], validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise Refused("the payload is not valid base64; the envelope was altered") from None
    message = pae(payload_type, payload)
    sigs = envelope.get("signatures")
    for entry in sigs if isinstance(sigs, list) else []:
        try:
            pub.verify(base64.b64decode(entry["sig"], validate=True), message)
            return payload
        except (InvalidSignature, binascii.Error, KeyError, TypeError, ValueError):
            continue
    raise Refused(
        f"the signature does not verify with key {keyid(pub)[:16]}: "
        "the payload was altered or another key signed it"
    )


def statement(
    subjects: list[Subject], predicate_type: str, predicate: dict[str, object]
) -> dict[str, object]:
    """An in-toto Statement v1."""
    return {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": predicate_type,
        "predicate": predicate,
    }


def canonical(obj: object) -> bytes:
    """Stable bytes of a JSON value, for digests of structured things (e.g. the policy)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
