"""Where the compiled scheduler core lives, and whether it was compiled from these very sources.

scripts/compile_core.py compiles every module of this package but INTERPRETED_ONLY with mypyc into
.build/core/ and writes the hash of the sources it compiled. `__init__` puts the compiled modules first on the
package's path only when that hash is the sources' own: a source edited since runs interpreted, never a stale
build. TIDAL_COMPILED_CORE=0 runs the sources whatever is built (tests/scheduling/test_compiled.py compares both).
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
BUILD_DIR = PACKAGE_DIR.parents[1] / ".build" / "core"
LIBRARY_DIR = BUILD_DIR / "lib"
COMPILED_PACKAGE_DIR = LIBRARY_DIR / "jobs" / "scheduling"
# The compiled modules' shared library, a top-level module of LIBRARY_DIR (mypyc places a compiled package's path
# relative to it).
GROUP = "tidal_scheduler_core"
HASH_FILE = BUILD_DIR / "SOURCES_HASH"
# Never compiled: the two that choose which modules load. The plain data the core reads and returns (model.py) is
# compiled with the rest: the core reads its fields on every line, natively then, which takes about a tenth off a
# cycle. It still pickles and copies as plain data (model.Record) and keeps the numbers it is given.
INTERPRETED_ONLY = ("__init__.py", "compiled.py")


def compiled_sources() -> list[Path]:
    """The core's modules that are compiled, in a stable order."""
    return sorted(path for path in PACKAGE_DIR.rglob("*.py")
                  if path.parent != PACKAGE_DIR or path.name not in INTERPRETED_ONLY)


def sources_hash() -> str:
    """SHA-256 over the compiled modules' paths and contents."""
    digest = hashlib.sha256()
    for path in compiled_sources():
        digest.update(str(path.relative_to(PACKAGE_DIR)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def compiled_dir() -> str | None:
    """The directory of compiled modules to load instead of the sources, with their shared library made
    importable, or None: not built, built from other sources, or turned off (TIDAL_COMPILED_CORE=0)."""
    if os.environ.get("TIDAL_COMPILED_CORE", "1") == "0" or not HASH_FILE.exists():
        return None
    if HASH_FILE.read_text().strip() != sources_hash():
        return None
    if str(LIBRARY_DIR) not in sys.path:
        sys.path.append(str(LIBRARY_DIR))  # last: it holds nothing but GROUP and the compiled modules
    return str(COMPILED_PACKAGE_DIR)
