#!/usr/bin/env bash
# `make chaos`: inject faults into the whole stack (docs/reliability.md#faults). Starts its own PostgreSQL on port
# 55432 and Redis on 56379 (never the shared ones), stops and removes them at the end. Arguments: fault names
# (default: all of them). Exits 1 on any violated invariant.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m chaos "$@"
