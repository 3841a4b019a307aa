#!/bin/sh
# Prepares Temporal for Spindle, run by docker-compose.yml with the
# temporalio/admin-tools image. Every step is idempotent, so `docker compose up`
# may run it again on an existing database.
#   temporal-setup.sh schema     create/upgrade the PostgreSQL schemas
#   temporal-setup.sh namespace  create the namespace and Spindle's search attributes
set -eu

: "${POSTGRES_SEEDS:=postgresql}" "${DB_PORT:=5432}" "${POSTGRES_USER:=temporal}"
: "${TEMPORAL_ADDRESS:=temporal:7233}" "${TEMPORAL_NAMESPACE:=default}"
SCHEMA_DIR=/etc/temporal/schema/postgresql/v12

sql() {
  temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$DB_PORT" \
    -u "$POSTGRES_USER" "$@" # password from SQL_PASSWORD
}

case "${1:-}" in
  schema)
    for db in temporal temporal_visibility; do
      case "$db" in temporal) dir=temporal ;; *) dir=visibility ;; esac
      sql --db "$db" create || true # already there on a second run
      sql --db "$db" setup-schema -v 0.0
      sql --db "$db" update-schema -d "$SCHEMA_DIR/$dir/versioned"
    done
    ;;
  namespace)
    until temporal operator cluster health --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1; do
      echo "waiting for Temporal at $TEMPORAL_ADDRESS"
      sleep 2
    done
    temporal operator namespace describe -n "$TEMPORAL_NAMESPACE" --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1 \
      || temporal operator namespace create -n "$TEMPORAL_NAMESPACE" --retention 7d --address "$TEMPORAL_ADDRESS"
    # A new namespace becomes usable once the server's namespace cache refreshes.
    attempt=0
    until attributes=$(temporal operator search-attribute list -n "$TEMPORAL_NAMESPACE" \
      --address "$TEMPORAL_ADDRESS" 2>/dev/null); do
      attempt=$((attempt + 1))
      if [ "$attempt" -ge 120 ]; then
        echo "namespace $TEMPORAL_NAMESPACE did not become usable" >&2
        exit 1
      fi
      sleep 1
    done
    for attribute in SpindleTenant SpindleGraph; do
      if ! printf '%s\n' "$attributes" | grep -qw "$attribute"; then
        temporal operator search-attribute create -n "$TEMPORAL_NAMESPACE" \
          --address "$TEMPORAL_ADDRESS" --name "$attribute" --type Keyword
      fi
    done
    echo "namespace $TEMPORAL_NAMESPACE ready"
    ;;
  *)
    echo "usage: $0 schema|namespace" >&2
    exit 2
    ;;
esac
