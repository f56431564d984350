"""The HTTP client knows no engine: importing it loads no engine adapter, and what differs
between engines reaches it as data (`Quirks`)."""

from __future__ import annotations

import subprocess
import sys

from qualify.httpclient.chat import ANY_ENGINE, REASONING_FIELDS, Quirks


def test_importing_the_client_loads_no_engine() -> None:
    code = (
        "import sys, qualify.httpclient.chat, qualify.httpclient.client, qualify.httpclient.load\n"
        "print(' '.join(m for m in sys.modules if m.startswith('qualify.serving.')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    engine = [
        m
        for m in loaded
        if m.startswith(("qualify.serving.engine", "qualify.serving.identity"))
        or m == "qualify.serving.sender"
    ]
    assert engine == [], engine


def test_quirks_are_data_and_the_default_reads_every_engine() -> None:
    assert ANY_ENGINE.reasoning_fields == REASONING_FIELDS
    assert ANY_ENGINE.reasoning({"reasoning_content": "r"}) == "r"
    narrow = Quirks(reasoning_fields=("reasoning_content",))
    assert narrow.reasoning({"reasoning": "r"}) == ""
    worded = Quirks(length_errors=(("over-length", r"window (?P<limit>\d+), (?P<prompt>\d+)"),))
    err = worded.error({"error": {"message": "window 8, 9", "type": "BadRequest"}})
    assert err is not None and (err.kind, err.limit, err.prompt_tokens) == ("over-length", 8, 9)
    plain = ANY_ENGINE.error({"error": {"message": "window 8, 9"}})
    assert plain is not None and plain.kind is None and plain.message == "window 8, 9"
    assert ANY_ENGINE.error({"choices": []}) is None
