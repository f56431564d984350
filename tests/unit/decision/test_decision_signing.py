"""DSSE over ed25519: PAE bytes, signature before parsing, keys kept private."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest

from qualify.errors import BadInput, Refused
from qualify.evidence.signing import (
    PAYLOAD_TYPE,
    generate,
    load_private,
    load_public,
    open_envelope,
    pae,
    seal_envelope,
)


def test_pae_matches_the_dsse_specification() -> None:
    """PAE is `DSSEv1 SP len(type) SP type SP len(body) SP body`, lengths in bytes."""
    got = pae("http://example.com/HelloWorld", b"hello world")
    assert got == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    assert pae("t", "é".encode()) == b"DSSEv1 1 t 2 \xc3\xa9"


def test_keygen_writes_private_key_0600_and_refuses_to_overwrite(tmp_path: Path) -> None:
    """The private key is mode 0600; a second keygen on the same path needs --force."""
    key, pub = generate(tmp_path / "k")
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert key.name == "k.key" and pub.name == "k.pub"
    before = key.read_bytes()
    with pytest.raises(BadInput, match="already exists"):
        generate(tmp_path / "k")
    assert key.read_bytes() == before
    generate(tmp_path / "k", force=True)
    assert key.read_bytes() != before and stat.S_IMODE(key.stat().st_mode) == 0o600


def test_private_key_readable_by_others_is_refused(tmp_path: Path) -> None:
    """A private key with group or world read bits is bad input, naming the mode."""
    key, _ = generate(tmp_path / "k")
    key.chmod(0o644)
    with pytest.raises(BadInput, match="0644"):
        load_private(key)


def test_roundtrip_and_exact_payload(tmp_path: Path) -> None:
    """open_envelope returns exactly the signed bytes (never a re-serialization)."""
    key, pub = generate(tmp_path / "k")
    body = b'{"b": 1,   "a": 2}\n'
    env = seal_envelope(body, load_private(key), PAYLOAD_TYPE)
    assert open_envelope(env, load_public(pub)) == body


def _flip_payload(env: dict[str, str]) -> dict[str, str]:
    raw = bytearray(base64.b64decode(env["payload"]))
    raw[len(raw) // 2] ^= 0x01
    return {**env, "payload": base64.b64encode(bytes(raw)).decode()}


def test_one_changed_payload_byte_is_refused(tmp_path: Path) -> None:
    """Changing one byte of the payload makes the signature fail."""
    key, pub = generate(tmp_path / "k")
    env = seal_envelope(b'{"decision": "no-promote"}', load_private(key), PAYLOAD_TYPE)
    with pytest.raises(Refused, match="does not verify"):
        open_envelope(_flip_payload(env), load_public(pub))


def test_signature_is_checked_before_the_payload_is_parsed(tmp_path: Path) -> None:
    """An unsigned payload that is not even JSON fails on the signature, never on parsing."""
    key, pub = generate(tmp_path / "k")
    env = seal_envelope(b"{}", load_private(key), PAYLOAD_TYPE)
    env["payload"] = base64.b64encode(b"\x00not json").decode()
    with pytest.raises(Refused, match="signature does not verify"):
        open_envelope(env, load_public(pub))


def test_another_key_and_another_type_are_refused(tmp_path: Path) -> None:
    """A signature by another key, or a changed payloadType, does not verify."""
    key, _ = generate(tmp_path / "a")
    _, other = generate(tmp_path / "b")
    env = seal_envelope(b"{}", load_private(key), PAYLOAD_TYPE)
    with pytest.raises(Refused, match="another key"):
        open_envelope(env, load_public(other))
    with pytest.raises(Refused, match="payloadType"):
        open_envelope({**env, "payloadType": "text/plain"}, load_public(other))
    assert json.loads(json.dumps(env)) == env
