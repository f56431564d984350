"""Write the gate-file JSON Schema: `python -m qualify.gates.export [PATH]`.

The committed copy, `gates/schemas/gate-file.schema.json`, is checked against this by a test, so
regenerate it whenever a check's params change.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from qualify.gates.files import gate_file_schema


def render() -> str:
    return json.dumps(gate_file_schema(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if argv:
        Path(argv[0]).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
