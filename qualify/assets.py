"""The files a run reads beside the code, and the code's own provenance.

Gate files, the decision templates and the example house policy live at the top of the
repository, where people edit them (`gates/`, `templates/`, `examples/house/`). A built wheel
carries copies inside the package, `qualify/_assets/`, and the commit it was built from,
`qualify/_build.json` (setup.py writes both), so the installed tool needs no checkout. Run from
a checkout, the same names resolve to the checkout and the commit is read from its git.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from qualify._version import __version__

PACKAGE = Path(__file__).resolve().parent
# Where `gates/`, `templates/` and `examples/house/` are: the package's shipped copies, else the
# checkout around the package.
ROOT = PACKAGE / "_assets" if (PACKAGE / "_assets").is_dir() else PACKAGE.parent


class BuildInfo(BaseModel):
    """The code that ran: qualify's version, the commit it was built from (None where unknown)
    and whether that tree had uncommitted changes, and whether it ran from a built package or
    from a source checkout."""

    model_config = ConfigDict(frozen=True)
    version: str
    commit: str | None = None
    dirty: bool | None = None
    installed: str  # "wheel" | "checkout"


def gates_dir() -> Path:
    return ROOT / "gates"


def templates_dir() -> Path:
    return ROOT / "templates"


def example_house_policy() -> Path:
    return ROOT / "examples" / "house" / "house-policy.toml"


@functools.cache
def build_info() -> BuildInfo:
    """What `qualify/_build.json` says, or, in a checkout, its HEAD and dirty flag now."""
    built = PACKAGE / "_build.json"
    if built.is_file():
        return BuildInfo(installed="wheel", **json.loads(built.read_text()))
    if not (PACKAGE.parent / ".git").exists():
        return BuildInfo(version=__version__, installed="checkout")
    import git  # only a checkout reads its git: an installed package needs none

    try:
        with git.Repo(PACKAGE.parent) as repo:  # closed: no git process outlives the answer
            commit, dirty = repo.head.commit.hexsha, repo.is_dirty()  # untracked not counted
    except (git.GitError, ValueError, OSError):
        return BuildInfo(version=__version__, installed="checkout")
    return BuildInfo(version=__version__, commit=commit, dirty=dirty, installed="checkout")
