"""A stand-in `nvidia-smi` that prints the CSV lines recorded on the H200, stamped now.

Without `-lms` it prints the first line; with `-lms N` every line, N ms apart. With
FAKE_SMI_LOST set it ends with the message nvidia-smi prints for a GPU that fell off the bus.
"""

from __future__ import annotations

import datetime
import os
import sys
import time
from pathlib import Path

LINES = (Path(__file__).parent / "data" / "smi-stream.csv").read_text().splitlines()


def stamped(line: str) -> str:
    parts = line.split(", ")
    parts[2] = datetime.datetime.now().strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
    return ", ".join(parts)


def main() -> None:
    if "-lms" not in sys.argv:
        print(stamped(LINES[0]), flush=True)
        return
    ms = int(sys.argv[sys.argv.index("-lms") + 1])
    for line in LINES[: int(os.environ.get("FAKE_SMI_LINES", len(LINES)))]:
        print(stamped(line), flush=True)
        time.sleep(ms / 1000)
    if os.environ.get("FAKE_SMI_LOST"):
        bus = LINES[0].split(", ")[1]
        print(f"Unable to determine the device handle for GPU{bus}: GPU is lost.", flush=True)
        sys.exit(15)
    time.sleep(30)


if __name__ == "__main__":
    main()
