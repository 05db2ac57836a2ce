"""Artifact paths as clients send them, checked before anything is stored: relative, '/'-separated, no '.' or '..'
segment (nothing outside the run's folder: a path is a store key and, on the filesystem store, a file name), no
control character, bounded. Pure: no framework."""

from __future__ import annotations

import re

MAX_PATH_BYTES = 1024  # Artifact.path's column; also far within every store's key limit with Tidal's prefix
MAX_SEGMENT_BYTES = 255  # a file name on common filesystems
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class PathError(ValueError):
    """A path refused: `field` names the request field it came in, the message says why."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"Parameter '{field}' {reason}")
        self.field = field


def clean(raw: str, field: str = "path", *, allow_empty: bool = False) -> str:
    """The path, checked; '' only when `allow_empty` (a listing of the root). A trailing '/' is dropped."""
    path = raw[:-1] if raw.endswith("/") and len(raw) > 1 else raw
    if not path:
        if allow_empty:
            return ""
        raise PathError(field, "is empty; an artifact needs a file name.")
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise PathError(field, f"is {len(path.encode('utf-8', 'surrogatepass')):,} bytes long; at most "
                               f"{MAX_PATH_BYTES:,}.")
    if CONTROL.search(path):
        raise PathError(field, f"holds a control character ({_shown(CONTROL.search(path))}).")
    if any("\ud800" <= c <= "\udfff" for c in path):
        raise PathError(field, "holds a lone surrogate, which is no character.")
    if path.startswith("/"):
        raise PathError(field, "is absolute; an artifact path is relative to the run's artifacts.")
    if "\\" in path:
        raise PathError(field, "holds a backslash; separate folders with '/'.")
    for segment in path.split("/"):
        if segment in ("", ".", ".."):
            shown = "an empty segment ('//')" if not segment else f"a {segment!r} segment"
            raise PathError(field, f"holds {shown}; an artifact path stays inside the run's artifacts.")
        if len(segment.encode("utf-8")) > MAX_SEGMENT_BYTES:
            raise PathError(field, f"has a name over {MAX_SEGMENT_BYTES} bytes ({segment[:40]!r}...).")
    return path


def _shown(found: re.Match | None) -> str:
    return f"U+{ord(found.group()):04X}" if found else "?"


def join(*parts: str) -> str:
    return "/".join(part for part in parts if part)
