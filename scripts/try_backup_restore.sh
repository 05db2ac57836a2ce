#!/usr/bin/env bash
# Prove that a backup restores: create a scratch database, migrate it and seed the demo (plus one scheduler cycle,
# so there are attempts, usage segments and runs), back it up with scripts/backup.sh, restore it with
# scripts/restore.sh into a second scratch database, and compare the row count of every table and the position of
# every sequence. Also checks that restoring over a non-empty database is refused without --force and works with
# it, and that the copy is consistent (manage.py check_consistency). Drops both databases at the end.
# Usage: scripts/try_backup_restore.sh   (PG_SERVER_URL: the server, default postgres://postgres@127.0.0.1:5432)
# Exits non-zero on any difference.
set -euo pipefail
cd "$(dirname "$0")/.."

server=${PG_SERVER_URL:-postgres://postgres@127.0.0.1:5432}
suffix=$(date -u +%Y%m%d%H%M%S)_$$
source_db=tidal_trial_${suffix}_source
copy_db=tidal_trial_${suffix}_copy
workdir=$(mktemp -d)
dump=$workdir/trial.dump

log() { printf '== %s\n' "$*"; }
sql() { psql --dbname="$1" --no-psqlrc --quiet --tuples-only --no-align --set=ON_ERROR_STOP=1 --command="$2"; }
manage() { DATABASE_URL="$server/$1" DEBUG=1 REDIS_URL= LOG_LEVEL=ERROR .venv/bin/python manage.py "${@:2}"; }
cleanup() {
  sql "$server/postgres" "DROP DATABASE IF EXISTS $source_db" || true
  sql "$server/postgres" "DROP DATABASE IF EXISTS $copy_db" || true
  rm -rf "$workdir"
}
trap cleanup EXIT

# Row count of every table and last value of every sequence, one "name value" line each, sorted.
inventory() {
  sql "$server/$1" "
    SELECT 'table ' || table_name || ' ' || (xpath('/row/n/text()',
           query_to_xml(format('SELECT count(*) AS n FROM %I.%I', table_schema, table_name), false, true, '')))[1]
      FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'
    UNION ALL
    SELECT 'sequence ' || sequencename || ' ' || coalesce(last_value, 0) FROM pg_sequences
     WHERE schemaname = 'public'
    ORDER BY 1"
}

compare() {
  inventory "$source_db" > "$workdir/source.txt"
  inventory "$copy_db" > "$workdir/copy.txt"
  if ! diff -u "$workdir/source.txt" "$workdir/copy.txt"; then
    echo "DIFFERENT: the copy does not have the source's rows" >&2
    exit 1
  fi
  echo "identical: $(grep -c '^table ' "$workdir/source.txt") tables," \
       "$(awk '$1 == "table" {n += $3} END {print n}' "$workdir/source.txt") rows," \
       "$(grep -c '^sequence ' "$workdir/source.txt") sequences"
}

log "scratch database $source_db: migrate, seed the demo, one scheduler cycle"
sql "$server/postgres" "CREATE DATABASE $source_db"
manage "$source_db" migrate --noinput --verbosity 0
manage "$source_db" seed_demo > /dev/null
manage "$source_db" shell --no-imports --command "from jobs.loop import run_once
print(f'scheduler cycle: {len(run_once().admits)} jobs admitted')"

log "backup"
DATABASE_URL="$server/$source_db" scripts/backup.sh "$dump"
ls -l "$dump" | awk '{print $5 " bytes"}'

log "restore into the empty scratch database $copy_db"
sql "$server/postgres" "CREATE DATABASE $copy_db"
scripts/restore.sh "$dump" "$server/$copy_db"

log "row counts of every table (source vs copy)"
compare
awk '$1 == "table" && $3 > 0 {printf "  %-40s %s\n", $2, $3}' "$workdir/source.txt"

log "restore over the non-empty copy without --force is refused"
if scripts/restore.sh "$dump" "$server/$copy_db"; then
  echo "restore.sh overwrote a non-empty database without --force" >&2
  exit 1
fi

log "restore over it with --force"
scripts/restore.sh --force "$dump" "$server/$copy_db"
compare

log "the copy is consistent"
manage "$copy_db" check_consistency

log "backup and restore OK"
