"""Render a decision document to a PNG, as a reviewer's browser shows it (for the README).

    python scripts/decision-screenshot.py DECISION.md OUT.png [--height 1400] [--plain]

Markdown to HTML with the `markdown` package, then a headless Chromium screenshot. Neither is a
dependency of qualify: `pip install markdown` and Debian's `chromium` package. `--plain` (or
either missing) draws the first screen (everything before the first `##`) as wrapped text with
matplotlib instead, bold and links reduced to their words: what a reader of the raw file sees.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

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


def _words(line: str) -> str:
    """A markdown line as a reader sees it: links to their text, bold and code marks gone."""
    line = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", line)
    return line.replace("**", "").replace("`", "")


def plain(document: Path, out: Path, width: int = 150) -> None:
    """The first screen of `document` drawn as wrapped text (matplotlib, Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    first = document.read_text().split("\n## ", 1)[0]
    lines: list[tuple[str, bool]] = []
    for raw in first.splitlines():
        bold = raw.startswith("# ")
        text = _words(raw.removeprefix("# "))
        indent = "   " if re.match(r"^(\d+\.|-) ", text) else ""
        wrapped = textwrap.wrap(text, width, subsequent_indent=indent) or [""]
        lines += [(w, bold) for w in wrapped]
    fig = plt.figure(figsize=(13.5, 0.19 * len(lines) + 0.4), dpi=110)
    for i, (text, bold) in enumerate(lines):
        fig.text(
            0.012,
            1 - (i + 1) / (len(lines) + 1),
            text,
            family="monospace",
            fontsize=8.6,
            weight="bold" if bold else "normal",
            va="center",
        )
    fig.savefig(out, format="png", metadata={"Software": None}, facecolor="white")
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("document", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--height", type=int, default=1400)
    ap.add_argument("--plain", action="store_true", help="draw the first screen as text")
    args = ap.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        import markdown  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError:
        markdown = None
    if args.plain or browser is None or markdown is None:
        plain(args.document, args.out)
        print(f"{args.out}: the first screen of {args.document}, as text")
        return 0
    body = markdown.markdown(args.document.read_text(), extensions=["tables", "fenced_code"])
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
