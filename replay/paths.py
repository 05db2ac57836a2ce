"""Where the shared public traces live: `../shared/data/traces/` beside the repo, or $TIDAL_TRACES_DIR."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def traces_dir() -> Path:
    env = os.environ.get("TIDAL_TRACES_DIR")
    if env:
        return Path(env)
    return (REPO_ROOT / ".." / "shared" / "data" / "traces").resolve()


def trace_path(name: str) -> Path:
    """A file of the shared trace directory (read in place, never copied into the repo)."""
    return traces_dir() / name
