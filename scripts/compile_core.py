"""Compile the scheduler core (jobs/scheduling/) to C with mypyc, into .build/core/: `make install` runs it.

The core is plain, fully annotated Python with no I/O; mypyc turns each of its modules but the loader
(jobs/scheduling/compiled.py: INTERPRETED_ONLY) into a C extension that runs the same code in about half the CPU
time (docs/performance.md). jobs/scheduling/__init__.py puts .build/core/
first on the package's path only while the sources hash to what was compiled (SOURCES_HASH), so an edited source
runs interpreted until it is compiled again, never a stale build. TIDAL_COMPILED_CORE=0 runs the sources anyway.

Usage: python scripts/compile_core.py   (from the repository root; needs a C compiler and requirements-build.txt)
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jobs.scheduling.compiled import BUILD_DIR, GROUP, HASH_FILE, compiled_sources, sources_hash  # noqa: E402


def main() -> None:
    from mypyc.build import mypycify  # the build's dependencies only; the core needs neither to run
    from setuptools import setup

    os.chdir(ROOT)
    shutil.rmtree(BUILD_DIR, ignore_errors=True)
    sources = [str(path.relative_to(ROOT)) for path in compiled_sources()]
    setup(name="tidal-scheduler-core", packages=[], py_modules=[],
          # One shared library for the whole core (calls between its modules stay native), GROUP_LIBRARY.
          ext_modules=mypycify(sources, group_name=GROUP, target_dir=str(BUILD_DIR / "c")),
          script_args=["--quiet", "build_ext", "--build-lib", str(BUILD_DIR / "lib"),
                       "--build-temp", str(BUILD_DIR / "temp")])
    HASH_FILE.write_text(sources_hash() + "\n")
    print(f"compiled {len(sources)} modules of the scheduler core into {BUILD_DIR.relative_to(ROOT)}/")


if __name__ == "__main__":
    main()
