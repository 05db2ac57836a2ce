#!/usr/bin/env bash
# Back up Tidal's PostgreSQL database (DATABASE_URL) with pg_dump in custom format, restorable with
# scripts/restore.sh. Usage: scripts/backup.sh [FILE]   (default: var/backups/tidal-<db>-<UTC time>.dump)
# Prints the file written. Everything Tidal keeps is in this database; Redis holds nothing that needs a backup
# (docs/reliability.md).
set -euo pipefail

url=${DATABASE_URL:-}
case "$url" in
  postgres://*|postgresql://*) ;;
  *) echo "backup.sh: DATABASE_URL must be a postgres:// URL (SQLite: copy var/tidal.sqlite3 instead)" >&2; exit 2 ;;
esac

db=${url##*/}
db=${db%%\?*}
file=${1:-var/backups/tidal-${db}-$(date -u +%Y%m%dT%H%M%SZ).dump}
mkdir -p "$(dirname "$file")"

# Dump next to the target and rename when complete: an interrupted backup never looks like a finished one.
partial="$file.partial"
trap 'rm -f "$partial"' EXIT
# --no-owner/--no-privileges: the dump restores into a database owned by whoever restores it.
pg_dump --format=custom --compress=6 --no-owner --no-privileges --file="$partial" --dbname="$url"
mv "$partial" "$file"
echo "$file"
