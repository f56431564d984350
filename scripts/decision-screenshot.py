"""Render a decision document to a PNG, as a reviewer's browser shows it (for the README).

    python scripts/decision-screenshot.py DECISION.md OUT.png [--height 1400]

Markdown to HTML with the `markdown` package, then a headless Chromium screenshot. Neither is a
dependency of qualify: `pip install markdown` and Debian's `chromium` package.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

import markdown

CSS = """
body { font: 14px/1.45 -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 24px 32px;
       color: #1f2328; max-width: 1180px; }
h1 { font-size: 24px; border-bottom: 1px solid #d0d7de; padding-bottom: 6px; }
h2 { font-size: 19px; border-bottom: 1px solid #d0d7de; padding-bottom: 4px; margin-top: 26px; }
code { background: #f3f4f6; padding: 1px 4px; border-radius: 4px; font-size: 12.5px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #d0d7de; padding: 4px 9px; font-size: 13px; }
th { background: #f6f8fa; }
li { margin: 2px 0; }
img { max-width: 560px; }
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("document", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--height", type=int, default=1400)
    args = ap.parse_args()
    body = markdown.markdown(args.document.read_text(), extensions=["tables", "fenced_code"])
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("chromium is not installed (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as tmp:
        page = args.document.parent / ".decision-screenshot.html"  # beside it: images resolve
        page.write_text(
            f"<html><head><meta charset='utf-8'><style>{CSS}</style></head>"
            f"<body>{body}</body></html>"
        )
        try:
            subprocess.run(
                [
                    browser,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-quic",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    f"--user-data-dir={tmp}",
                    "--hide-scrollbars",
                    f"--window-size=1240,{args.height}",
                    f"--screenshot={args.out.resolve()}",
                    page.resolve().as_uri(),
                ],
                check=True,
                capture_output=True,
                timeout=120,
            )
        finally:
            page.unlink(missing_ok=True)
    print(f"{args.out}: {args.document} as a browser shows it")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
