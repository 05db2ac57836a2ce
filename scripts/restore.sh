#!/usr/bin/env bash
# Restore a dump written by scripts/backup.sh into a PostgreSQL database.
# Usage: scripts/restore.sh [--force] FILE [TARGET_URL]   (TARGET_URL defaults to DATABASE_URL)
# The target database must exist (createdb it). A target that already has tables is refused unless --force, which
# drops the objects the dump contains before recreating them. The restore is one transaction: it lands whole or
# not at all. Afterwards run `manage.py migrate` (when the code is newer than the dump) and
# `manage.py check_consistency` (docs/reliability.md).
set -euo pipefail

usage() { echo "usage: scripts/restore.sh [--force] FILE [TARGET_URL]" >&2; exit 2; }

force=0
if [ "${1:-}" = "--force" ]; then force=1; shift; fi
[ $# -ge 1 ] && [ $# -le 2 ] || usage
file=$1
target=${2:-${DATABASE_URL:-}}
[ -f "$file" ] || { echo "restore.sh: no dump at $file" >&2; exit 2; }
case "$target" in
  postgres://*|postgresql://*) ;;
  *) echo "restore.sh: the target must be a postgres:// URL (argument or DATABASE_URL)" >&2; exit 2 ;;
esac

tables=$(psql --dbname="$target" --no-psqlrc --tuples-only --no-align --set=ON_ERROR_STOP=1 --command="
  SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')")
clean=()
if [ "$tables" -gt 0 ]; then
  if [ "$force" -ne 1 ]; then
    echo "restore.sh: the target database has $tables tables; refusing to restore over it (use --force)" >&2
    exit 3
  fi
  clean=(--clean --if-exists)
fi

pg_restore --no-owner --no-privileges --exit-on-error --single-transaction "${clean[@]}" --dbname="$target" "$file"
echo "restored $file ($tables tables were there before)"
