"""The vendored llama.cpp's build info travels with its tree, so a GPU build reports it too."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from qualify.serving.local import BUILD_INFO, build_info_flags


def test_recorded_build_info_becomes_cmake_flags(tmp_path: Path) -> None:
    (tmp_path / BUILD_INFO).write_text(json.dumps({"commit": "0c1e570", "number": 1}))
    assert build_info_flags(tmp_path) == ["-DLLAMA_BUILD_COMMIT=0c1e570", "-DLLAMA_BUILD_NUMBER=1"]


def test_build_info_is_read_from_git_once_and_kept(tmp_path: Path) -> None:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "PATH": "/usr/bin:/bin",
    }
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, env=env)
    subprocess.run(
        ["git", "-C", str(tmp_path), "commit", "-q", "--allow-empty", "-m", "x"],
        check=True,
        env=env,
    )
    flags = build_info_flags(tmp_path)
    assert flags[1] == "-DLLAMA_BUILD_NUMBER=1" and flags[0].startswith("-DLLAMA_BUILD_COMMIT=")
    assert (tmp_path / BUILD_INFO).is_file()


def test_no_git_and_no_record_leaves_llama_cpp_fallback(tmp_path: Path) -> None:
    assert build_info_flags(tmp_path) == []
