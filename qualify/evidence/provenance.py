"""Where a candidate came from: the git commit and dirty flag of the repository holding it."""

from __future__ import annotations

from pathlib import Path

import git


def git_state(path: Path) -> dict[str, object]:
    """The repository holding `path` (as GitPython names it), its commit, whether it is dirty and
    whether the file itself is committed unchanged (`file_dirty`); each None outside git."""
    try:
        repo = git.Repo(path.resolve().parent, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return {"repository": None, "commit": None, "dirty": None, "file_dirty": None}
    with repo:  # closed: no git process outlives the answer
        try:
            commit = repo.head.commit.hexsha
        except ValueError:
            commit = None
        rel = str(path.resolve().relative_to(Path(repo.working_tree_dir or ".").resolve()))
        file_dirty = bool(repo.git.status("--porcelain", "--", rel).strip())
        return {
            "repository": repo.working_tree_dir,
            "commit": commit,
            "dirty": repo.is_dirty(untracked_files=True),
            "file_dirty": file_dirty,
        }
