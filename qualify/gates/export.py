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


if __name__ == "__main__":
    if sys.argv[1:]:
        Path(sys.argv[1]).write_text(render())
    else:
        sys.stdout.write(render())
