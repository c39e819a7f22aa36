#!/bin/sh
# pgbouncer's userlist from the environment (never a file in the image or the repository),
# then pgbouncer in the foreground: SIGTERM stops it, SIGINT lets transactions finish.
set -eu
: "${POSTGRES_USER:?POSTGRES_USER must be set (the database user ToolOps logs in as)}"
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
umask 077
# pgbouncer's file format: both fields in double quotes, a quote inside doubled.
quote() { printf '"%s"' "$(printf '%s' "$1" | sed 's/"/""/g')"; }
printf '%s %s\n' "$(quote "$POSTGRES_USER")" "$(quote "$POSTGRES_PASSWORD")" \
    > /tmp/pgbouncer-userlist.txt
exec pgbouncer /etc/pgbouncer/pgbouncer.ini
