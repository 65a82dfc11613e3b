# bench/pg.sh — the PostgreSQL rows of `make bench`, sourced by bench/run (it uses run_load,
# start_daemon, stop_daemon, field, fmt, ratio, lat and log from there).
#
# Why a cluster of its own: the test cluster (scripts/pg-test-cluster) runs with fsync=off, which
# measures nothing durable. This one lives in $DATA/pg (the same filesystem as the SQLite files),
# listens only on its own unix socket, and runs with fsync=on, synchronous_commit=on and
# full_page_writes=on — every commit waits for its WAL flush, as in production. It is stopped when
# bench/run exits (its files stay until the next run clears data/, like the SQLite files).
# pg_stat_statements is loaded to count statements per operation.
#
# pg_bench_all sets PG_ROWS (Markdown table rows) and PG_TARGETS (a sentence); with no PostgreSQL
# server binaries (or pgbench) every row says SKIP and the run does not fail for it.
# Environment: PG_BINDIR — the server binaries (default: the newest /usr/lib/postgresql/*/bin,
# else the PATH).

PG_DIR=
PG_BINDIR_USED=
PG_ROWS=
PG_TARGETS=

pg_find_bindir() {
    if [ -n "${PG_BINDIR:-}" ]; then echo "$PG_BINDIR"; return; fi
    local d
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    if [ -n "$d" ]; then echo "$d"; return; fi
    d=$(command -v postgres 2>/dev/null) && dirname "$d"
}

# pg_owner CMD…: runs CMD as the cluster's owner (initdb refuses root: `postgres` when we are root)
pg_owner() {
    if [ "$(id -u)" -eq 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

# pg_sql DB SQL: one psql command on the bench cluster, unaligned tuples only
pg_sql() {
    "$PG_BINDIR_USED/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$PG_DIR" -p 5432 -U postgres -d "$1" -c "$2"
}

pg_url() { echo "postgresql:///$1?host=$PG_DIR&port=5432&user=postgres"; }

# pg_start: a fresh durable cluster in $DATA/pg; returns 1 (with a log line) when it cannot
pg_start() {
    local bindir
    bindir=$(pg_find_bindir)
    for b in initdb pg_ctl psql pgbench; do
        [ -n "$bindir" ] && [ -x "$bindir/$b" ] || { log "PostgreSQL: no $b (PG_BINDIR or apt-get install postgresql)"; return 1; }
    done
    if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
        log "PostgreSQL: running as root needs a 'postgres' user"; return 1
    fi
    PG_BINDIR_USED=$bindir
    PG_DIR=$(cd "$DATA" && pwd)/pg
    mkdir -p "$PG_DIR"
    [ "$(id -u)" -eq 0 ] && chown postgres "$PG_DIR"
    pg_owner "$bindir/initdb" -D "$PG_DIR/data" -U postgres -A trust -E UTF8 --locale=C \
        >"$PG_DIR/initdb.log" 2>&1 || { log "PostgreSQL: initdb failed: $(tail -3 "$PG_DIR/initdb.log")"; return 1; }
    local opts="-c listen_addresses= -c port=5432 -c unix_socket_directories=$PG_DIR"
    opts="$opts -c fsync=on -c synchronous_commit=on -c full_page_writes=on -c max_connections=120"
    opts="$opts -c shared_buffers=64MB -c log_min_messages=warning"
    local libdir
    libdir=$("$bindir/pg_config" --pkglibdir 2>/dev/null) || libdir=$(dirname "$bindir")/lib
    if [ -e "$libdir/pg_stat_statements.so" ]; then
        opts="$opts -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
    else
        log "PostgreSQL: no pg_stat_statements in $libdir: statements per operation not counted"
    fi
    if ! pg_owner "$bindir/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -o "$opts" -w -t 60 start \
        >"$PG_DIR/pg_ctl.log" 2>&1; then
        log "PostgreSQL: the server did not start: $(tail -3 "$PG_DIR/server.log" 2>/dev/null)"
        return 1
    fi
    log "PostgreSQL $("$bindir/postgres" --version | awk '{ print $3 }') in $PG_DIR: $(pg_sql postgres \
        "select string_agg(name || '=' || setting, ', ') from pg_settings where name in ('fsync', 'synchronous_commit', 'full_page_writes', 'wal_sync_method')")"
}

pg_stop() {
    [ -n "$PG_DIR" ] && [ -d "$PG_DIR/data" ] || return 0
    pg_waits_stop "interrupted"
    pg_owner "$PG_BINDIR_USED/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null 2>&1
    PG_DIR=
}

# pg_insert_baseline CLIENTS SECONDS: pgbench, one prepared 1-row INSERT per transaction
# (autocommit); echoes a JSON line like loadgen's (rate, p50_ms, p99_ms from the per-transaction log)
pg_insert_baseline() {
    local c=$1 s=$2 out logp="$PG_DIR/pgbench-c$1"
    rm -f "$logp".*
    out=$(cd "$PG_DIR" && pg_owner "$PG_BINDIR_USED/pgbench" -n -M prepared -f "$PG_DIR/insert.sql" \
          -c "$c" -j "$(( c < 2 ? 1 : 2 ))" -T "$s" -l --log-prefix="$logp" \
          -h "$PG_DIR" -p 5432 -U postgres postgres 2>&1) || { log "pgbench failed: $out"; return 1; }
    local tps
    tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out" | tail -1)
    cat "$logp".* | awk '{ print $3 }' | sort -n | awk -v c="$c" -v tps="$tps" \
        '{ v[NR] = $1 } END { if (!NR) exit 1;
           printf "{\"bench\": \"pg-insert\", \"clients\": %d, \"ops\": %d, \"errors\": 0, \"rate\": %.1f, \"p50_ms\": %.3f, \"p99_ms\": %.3f}\n",
                  c, NR, tps, v[int(NR * 0.5) + 1] / 1000, v[int((NR - 1) * 0.99) + 1] / 1000 }'
}

# pg_statements DB: statements per operation since the last reset, and the top ones, to the log
pg_statements() {
    pg_sql postgres "select calls, rows, left(regexp_replace(query, '\s+', ' ', 'g'), 110)
                     from pg_stat_statements s join pg_database d on d.oid = s.dbid
                     where d.datname = '$1' order by calls desc limit 14" >&2
    pg_sql postgres "select coalesce(sum(calls), 0) from pg_stat_statements s
                     join pg_database d on d.oid = s.dbid where d.datname = '$1'"
}
# pg_waits_start DB / pg_waits_stop: samples what the database's active backends wait on (every
# 0.1 s, one psql session) while a run goes on; pg_waits_stop logs the counts, most frequent first
# ("CPU" = running, not waiting). Where a create spends its time without a profiler.
PG_WAITS_PID=
pg_waits_start() {
    printf '%s\n' "select coalesce(wait_event_type || ':' || wait_event, 'CPU') from pg_stat_activity
                   where datname = '$1' and state <> 'idle' and pid <> pg_backend_pid()" '\watch 0.1' >"$PG_DIR/waits.sql"
    "$PG_BINDIR_USED/psql" -X -q -At -h "$PG_DIR" -p 5432 -U postgres -d postgres -f "$PG_DIR/waits.sql" \
        >"$PG_DIR/waits.out" 2>/dev/null &
    PG_WAITS_PID=$!
}
pg_waits_stop() {
    [ -n "$PG_WAITS_PID" ] || return 0
    kill "$PG_WAITS_PID" 2>/dev/null
    wait "$PG_WAITS_PID" 2>/dev/null
    PG_WAITS_PID=
    log "backend states sampled every 0.1 s ($1): $(grep -v '^$' "$PG_DIR/waits.out" | sort | uniq -c | sort -rn | awk '{ printf "%s%s %d", (NR > 1 ? ", " : ""), $2, $1 }')"
}

# pg_log_statements all|none: log_statement for every session, changed with a reload
pg_log_statements() {
    pg_sql postgres "alter system set log_statement = '$1'" && pg_sql postgres "select pg_reload_conf()" >/dev/null
    sleep 0.2
}

# pg_one_transaction N: the statements of the Nth logged transaction from BEGIN through COMMIT
pg_one_transaction() {
    grep -E 'LOG:  (statement|execute [^:]*): ' "$PG_DIR/server.log" |
        sed -E 's/.*LOG:  (statement|execute [^:]*): //' |
        awk -v n="$1" '/^BEGIN$/ { k++ } k == n { print "    " substr($0, 1, 150) } k == n && /^COMMIT$/ { exit }'
}

# pg_server_ticks: CPU clock ticks (user + system) of the cluster's postmaster and every process
# it started (backends, WAL writer, checkpointer …) so far; pg_commits DB: COMMITs so far
pg_server_ticks() {
    local pm t=0 p
    pm=$(head -1 "$PG_DIR/data/postmaster.pid")
    for p in $pm $(pgrep -P "$pm"); do
        t=$(( t + $(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0) ))
    done
    echo "$t"
}
# (pg_stat_statements' count of COMMIT: written when each one ends, unlike pg_stat_database's)
pg_commits() {
    pg_sql postgres "select coalesce(sum(calls), 0) from pg_stat_statements s join pg_database d
                     on d.oid = s.dbid where d.datname = '$1' and s.query = 'COMMIT'" 2>/dev/null || echo 0
}

pg_reset_statements() { pg_sql postgres "select pg_stat_statements_reset()" >/dev/null; }

pg_skip_rows() {
    local why=$1
    PG_ROWS="| PostgreSQL: 1-row INSERT autocommit, 1 / $CLIENTS clients | SKIP ($why) | — | — |
| PostgreSQL: create ($CLIENTS clients) | SKIP | — | — |
| PostgreSQL: saga3 (library, $CLIENTS in flight) | SKIP | — | — |
| PostgreSQL: saga3 (library, sequential) | SKIP | — | — |
| PostgreSQL: saga3 over HTTP | SKIP | — | — |"
    PG_TARGETS="PostgreSQL rows skipped ($why)."
}

pg_bench_all() {
    if ! pg_start; then
        pg_skip_rows "no usable PostgreSQL server binaries"
        return 0
    fi
    local stats=0
    pg_sql postgres "create extension if not exists pg_stat_statements" 2>/dev/null && stats=1
    pg_sql postgres "create table bench_commit (id bigserial primary key, v bigint not null,
                     at timestamptz not null default now())" || { FAILED=1; pg_skip_rows "setup failed"; return 0; }
    pg_sql postgres "create database missive_http" && pg_sql postgres "create database missive_saga" &&
        pg_sql postgres "create database missive_timers" && pg_sql postgres "create database missive_timers_base" &&
        pg_sql postgres "create database missive_gc" ||
        { FAILED=1; pg_skip_rows "setup failed"; return 0; }
    printf '%s\n' '\set v random(1, 1000000000)' 'INSERT INTO bench_commit (v) VALUES (:v);' >"$PG_DIR/insert.sql"
    chmod 644 "$PG_DIR/insert.sql"

    log "PostgreSQL: 1-row INSERT autocommit, 1 client, $SHORT s"
    local B1 B32 CR SEQ S32 STMT_CREATE="n/a" STMT_SAGA="n/a" PG_CREATE PG_SAGA PG_SAGA1
    B1=$(pg_insert_baseline 1 "$SHORT") || FAILED=1
    log "$B1"
    log "PostgreSQL: 1-row INSERT autocommit, $CLIENTS clients, $SHORT s"
    pg_waits_start postgres
    B32=$(pg_insert_baseline "$CLIENTS" "$SHORT") || FAILED=1
    pg_waits_stop "INSERT, $CLIENTS clients"
    log "$B32"
    local BR1 BR32
    BR1=$(field "$B1" rate)
    BR32=$(field "$B32" rate)

    local PG_C1= PG_CREATE= PG_CREATE_CPU=0 PG_SERVER_CPU=0 PG_COMMITS=0 PG_LAT= PG_CWS= PG_HSAGA=
    local PG_STREAMS=${BENCH_PG_STREAMS:-100} CR=
    if [ "${BENCH_ONLY:-}" != pg-saga ]; then
    # create over HTTP: missived on the cluster, one pooled connection per client
    STORE=$(pg_url missive_http) start_daemon pg "{\"poolSize\": $CLIENTS}"
    sleep 1
    if [ "$stats" = 1 ]; then
        log "PostgreSQL: statements per create (1 client, 2 s)"
        pg_reset_statements
        pg_log_statements all
        PG_ONE=$(run_load --mode create --threads 1 --seconds 2 --label pg-create-1)
        pg_log_statements none
        local calls
        calls=$(pg_statements missive_http)
        log "one create's transaction, in order (log_statement=all, the 100th create of the run):"
        pg_one_transaction 100 >&2
        STMT_CREATE=$(awk -v c="$calls" -v n="$(field "$PG_ONE" ops)" 'BEGIN { if (n > 0) printf "%.1f", c / n; else print "n/a" }')
        log "statements per create: $STMT_CREATE"
    fi
    # one client, no statement log: the latency of one create's round trips
    log "PostgreSQL: create, 1 client, $SHORT s"
    PG_C1=$(run_load --mode create --threads 1 --seconds "$SHORT" --label pg-create-c1)
    log "$PG_C1"
    log "PostgreSQL: create, $CLIENTS clients, $SHORT s"
    T0=$(cpu_ticks "$DPID")
    local S0 X0
    S0=$(pg_server_ticks)
    X0=$(pg_commits missive_http)
    pg_waits_start missive_http
    PG_CREATE=$(run_load --mode create --threads "$CLIENTS" --seconds "$SHORT" --label pg-create)
    PG_CREATE_CPU=$(( $(cpu_ticks "$DPID") - T0 ))
    PG_SERVER_CPU=$(( $(pg_server_ticks) - S0 )); PG_COMMITS=$(( $(pg_commits missive_http) - X0 ))
    pg_waits_stop "create, $CLIENTS clients"
    stop_daemon

    # live updates on PostgreSQL: the latency from a create's request to its message.created event
    # on a stream (the change log's NOTIFY, the hub's read and the sequencer of message/changes.c on
    # the way), then creates while PG_STREAMS idle streams are open (the hub reads and numbers the
    # log all the time)
    local PG_HOLD
    STORE=$(pg_url missive_http) start_daemon pg-streams "{\"poolSize\": $CLIENTS}" \
        ", \"maxConnections\": $(( PG_STREAMS + 256 )), \"maxConnectionsPerIp\": 0, \"stream\": {\"maxConnections\": $(( PG_STREAMS + 16 ))}"
    sleep 1
    log "PostgreSQL: stream latency, 200 creates each awaited on a stream"
    PG_LAT=$("$BIN/streams" latency "$PORT" 200) || { FAILED=1; log "stream latency failed"; }
    log "$PG_LAT"
    "$BIN/streams" hold "$PORT" "$PG_STREAMS" >"$DATA/pg-streams.out" 2>"$DATA/pg-streams.err" &
    PG_HOLD=$!
    for _ in $(seq 300); do grep -q opened "$DATA/pg-streams.out" && break; sleep 0.1; done
    grep -q opened "$DATA/pg-streams.out" || { FAILED=1; log "streams did not open: $(cat "$DATA/pg-streams.err")"; }
    log "PostgreSQL: create with $PG_STREAMS idle streams, $CLIENTS clients, $SHORT s"
    pg_waits_start missive_http
    PG_CWS=$(run_load --mode create --threads "$CLIENTS" --seconds "$SHORT" --label pg-create-with-streams)
    pg_waits_stop "create with $PG_STREAMS streams, $CLIENTS clients"
    kill -TERM "$PG_HOLD" 2>/dev/null; wait "$PG_HOLD" 2>/dev/null
    stop_daemon

    # saga3 over HTTP: POST /sagas/bench-saga3, three webhook steps against a receiver that
    # answers 200 at once (bench/slow_hook --delay-ms 0)
    local HOOK0 HOOK0_PORT
    "$BIN/slow_hook" --delay-ms 0 >"$DATA/hook0.port" &
    HOOK0=$!
    for _ in $(seq 50); do [ -s "$DATA/hook0.port" ] && break; sleep 0.1; done
    HOOK0_PORT=$(sed -n 's/.*"port": \([0-9]*\).*/\1/p' "$DATA/hook0.port")
    mkdir -p "$DATA/sagas"
    local u="http://127.0.0.1:$HOOK0_PORT"
    cat >"$DATA/sagas/bench-saga3.json" <<EOF
{"name": "bench-saga3", "capability": "bench.saga3",
 "steps": [{"name": "reserve", "run": {"webhook": "$u/reserve"}, "compensate": {"webhook": "$u/release"}},
           {"name": "charge", "run": {"webhook": "$u/charge"}, "compensate": {"webhook": "$u/refund"}},
           {"name": "confirm", "run": {"webhook": "$u/confirm"}, "compensate": {"webhook": "$u/unconfirm"}}]}
EOF
    STORE=$(pg_url missive_http) start_daemon pg-saga "{\"poolSize\": $CLIENTS}" ', "sagas": "sagas/"'
    log "PostgreSQL: saga3 over HTTP, $CLIENTS clients, $SHORT s"
    PG_HSAGA=$(run_load --mode saga --template bench-saga3 --user bench-admin --threads "$CLIENTS" \
               --seconds "$SHORT" --label pg-saga3-http)
    stop_daemon
    kill "$HOOK0" 2>/dev/null
    wait "$HOOK0" 2>/dev/null

    fi

    # saga3 through the library: sequential (latency) and CLIENTS in flight (throughput)
    log "PostgreSQL: saga3 sequential, $SHORT s"
    [ "$stats" = 1 ] && pg_reset_statements
    PG_SAGA1=$("$BIN/saga3" "$(pg_url missive_saga)" "$SHORT" 1 1) || { FAILED=1; log "saga3 failed"; }
    log "$PG_SAGA1"
    if [ "$stats" = 1 ]; then
        calls=$(pg_statements missive_saga)
        STMT_SAGA=$(awk -v c="$calls" -v n="$(field "$PG_SAGA1" ops)" 'BEGIN { if (n > 0) printf "%.1f", c / n; else print "n/a" }')
        log "statements per saga3 (incl. migration check at start): $STMT_SAGA"
    fi
    log "PostgreSQL: saga3, $CLIENTS in flight, $SHORT s"
    pg_waits_start missive_saga
    local SX0=$(pg_commits missive_saga)
    PG_SAGA=$("$BIN/saga3" "$(pg_url missive_saga)" "$SHORT" "$CLIENTS" "$CLIENTS") || { FAILED=1; log "saga3 failed"; }
    local SAGA_COMMITS=$(awk -v c="$(( $(pg_commits missive_saga) - SX0 ))" -v n="$(field "$PG_SAGA" ops)" 'BEGIN { if (n > 0 && c > 0) printf "%.2f", c / n; else print "n/a" }')
    pg_waits_stop "saga3, $CLIENTS in flight"
    log "$PG_SAGA"
    log "COMMITs per saga3 ($CLIENTS in flight): $SAGA_COMMITS"
    # BENCH_SAGA3_B=PATH: another build's saga3 (e.g. the branch point's) on the same cluster, right
    # after this one, for an A/B in one run
    local PG_SAGA_B= PG_SAGA1_B= SAGA_COMMITS_B=n/a
    if [ -n "${BENCH_SAGA3_B:-}" ]; then
        pg_sql postgres "create database missive_saga_b" || FAILED=1
        log "PostgreSQL: saga3 (B: $BENCH_SAGA3_B) sequential, $SHORT s"
        PG_SAGA1_B=$("$BENCH_SAGA3_B" "$(pg_url missive_saga_b)" "$SHORT" 1 1) || { FAILED=1; log "saga3 B failed"; }
        log "$PG_SAGA1_B"
        log "PostgreSQL: saga3 (B), $CLIENTS in flight, $SHORT s"
        local SXB=$(pg_commits missive_saga_b)
        PG_SAGA_B=$("$BENCH_SAGA3_B" "$(pg_url missive_saga_b)" "$SHORT" "$CLIENTS" "$CLIENTS") || { FAILED=1; log "saga3 B failed"; }
        SAGA_COMMITS_B=$(awk -v c="$(( $(pg_commits missive_saga_b) - SXB ))" -v n="$(field "$PG_SAGA_B" ops)" 'BEGIN { if (n > 0 && c > 0) printf "%.2f", c / n; else print "n/a" }')
        log "$PG_SAGA_B"
    fi
    local PG_TIMERS= PG_TIMERS_BASE= PG_GC=
    if [ "${BENCH_ONLY:-}" != pg-saga ]; then
    # the timer engine on PostgreSQL (bench/timers.c; SKIP LOCKED claims by two engines), and the
    # group-commit engine alone through the library (1-row asynchronous jobs: bench/group_commit.c)
    log "PostgreSQL: timers, 100000 pending, 10000 due in one second"
    PG_TIMERS=$("$BIN/timers" "$(pg_url missive_timers)" 100000 10000 2) || { FAILED=1; log "timers failed"; }
    log "$PG_TIMERS"
    PG_TIMERS_BASE=$("$BIN/timers" "$(pg_url missive_timers_base)" 10000 10000 2) || { FAILED=1; log "timers (baseline) failed"; }
    log "$PG_TIMERS_BASE"
    log "PostgreSQL: group commit alone, 1-row asynchronous jobs, $CLIENTS threads, $SHORT s"
    PG_GC=$("$BIN/group_commit" "$(pg_url missive_gc)" async "$SHORT" "$CLIENTS") || { FAILED=1; log "group_commit failed"; }
    log "$PG_GC"
    fi
    pg_stop

    [ -n "$PG_CREATE" ] && CR=$(field "$PG_CREATE" rate)
    S32=$(field "$PG_SAGA" rate)
    SEQ=$(field "$PG_SAGA1" p50_ms)
    PG_ROWS="| PostgreSQL: 1-row INSERT autocommit (pgbench, prepared), 1 client, ${SHORT} s | $(fmt "$BR1") tx/s, $(lat "$B1") | — | — |
| PostgreSQL: 1-row INSERT autocommit (pgbench, prepared), $CLIENTS clients, ${SHORT} s | $(fmt "$BR32") tx/s, $(lat "$B32") | — | 1.00 |
| PostgreSQL: create ($CLIENTS keep-alive clients, poolSize $CLIENTS, ${SHORT} s) | $(fmt "$CR") msg/s, $(lat "$PG_CREATE"); daemon CPU $(us_per_op "$PG_CREATE_CPU" "$(field "$PG_CREATE" ops)") µs per create; PostgreSQL CPU $(us_per_op "$PG_SERVER_CPU" "$(field "$PG_CREATE" ops)") µs per create; $(awk -v c="$PG_COMMITS" -v n="$(field "$PG_CREATE" ops)" 'BEGIN { if (c > 0) printf "%.1f", n / c; else print "n/a" }') creates per commit; $STMT_CREATE statements per create (1 client) | INSERT c$CLIENTS $(fmt "$BR32") tx/s (target ≥ 0.5×) | $(ratio "$CR" "$BR32") |
| PostgreSQL: stream latency (create → its message.created event, 200 sequential) | p50 $(fmt "$(field "$PG_LAT" p50_ms)") ms, p99 $(fmt "$(field "$PG_LAT" p99_ms)") ms | — | — |
| PostgreSQL: create with $PG_STREAMS idle streams ($CLIENTS clients, ${SHORT} s) | $(fmt "$(field "$PG_CWS" rate)") msg/s, $(lat "$PG_CWS") | without streams $(fmt "$CR") msg/s | $(ratio "$(field "$PG_CWS" rate)" "$CR") |
| PostgreSQL: saga3 (3 no-op steps, library, $CLIENTS threads, pool $CLIENTS, ${SHORT} s) | $(fmt "$S32") sagas/s, $(lat "$PG_SAGA"); library CPU $(field "$PG_SAGA" cpu_us_per_op) µs per saga; $SAGA_COMMITS COMMITs per saga | INSERT c$CLIENTS $(fmt "$BR32") tx/s (target ≥ 0.2×) | $(ratio "$S32" "$BR32") |
| PostgreSQL: saga3 over HTTP (POST /sagas, 3 webhook steps to a no-op receiver, $CLIENTS clients, ${SHORT} s) | $(fmt "$(field "$PG_HSAGA" rate)") sagas/s, $(lat "$PG_HSAGA") | INSERT c$CLIENTS $(fmt "$BR32") tx/s | $(ratio "$(field "$PG_HSAGA" rate)" "$BR32") |
| PostgreSQL: saga3 sequential (library, 1 thread, ${SHORT} s) | $(fmt "$(field "$PG_SAGA1" rate)") sagas/s, $(lat "$PG_SAGA1"); $STMT_SAGA statements per saga; library CPU $(field "$PG_SAGA1" cpu_us_per_op) µs per saga | target p50 ≤ 1.5 ms; INSERT c1 p50 $(fmt "$(field "$B1" p50_ms)") ms | $(ratio "$SEQ" 1.5) |"
    PG_TARGETS="PostgreSQL: create ≥ 0.5× INSERT c$CLIENTS: $(met "$CR >= 0.5 * $BR32");" 
    PG_TARGETS="$PG_TARGETS saga3 c$CLIENTS ≥ 0.2×: $(met "$S32 >= 0.2 * $BR32"); saga3 sequential p50 ≤ 1.5 ms: $(met "$SEQ <= 1.5")."
    PG_ROWS="$PG_ROWS
| PostgreSQL: timers: $(field "$PG_TIMERS" pending) pending, $(field "$PG_TIMERS" due) due in one second (2 engines), each fired once: $(field "$PG_TIMERS" once) | fire lag $(lat "$PG_TIMERS"); CPU $(field "$PG_TIMERS" cpu_us_per_fire) µs per fire | $(field "$PG_TIMERS_BASE" pending) pending: p99 $(fmt "$(field "$PG_TIMERS_BASE" p99_ms)") ms; target p99 ≤ 1000 ms | $(ratio "$(field "$PG_TIMERS" p99_ms)" "$(field "$PG_TIMERS_BASE" p99_ms)") |
| PostgreSQL: group commit alone (1-row asynchronous jobs, $CLIENTS threads, library, ${SHORT} s) | $(fmt "$(field "$PG_GC" rate)") writes/s, $(lat "$PG_GC"); CPU $(field "$PG_GC" cpu_us_per_op) µs per write | INSERT c$CLIENTS $(fmt "$BR32") tx/s | $(ratio "$(field "$PG_GC" rate)" "$BR32") |
| PostgreSQL: create (1 keep-alive client, ${SHORT} s) | $(fmt "$(field "$PG_C1" rate)") msg/s, $(lat "$PG_C1") | INSERT c1 p50 $(fmt "$(field "$B1" p50_ms)") ms | $(ratio "$(field "$PG_C1" p50_ms)" "$(field "$B1" p50_ms)") |"
    if [ "${BENCH_ONLY:-}" = pg-saga ]; then # only the INSERT baselines and the library saga3 rows
        PG_ROWS=$(grep -E '1-row INSERT|saga3 \(3 no-op|saga3 sequential' <<<"$PG_ROWS")
        PG_TARGETS="saga3 c$CLIENTS ≥ 0.2×: $(met "$S32 >= 0.2 * $BR32"); saga3 sequential p50 ≤ 1.5 ms: $(met "$SEQ <= 1.5")."
    fi
    if [ -n "$PG_SAGA_B" ]; then
        PG_ROWS="$PG_ROWS
| PostgreSQL: saga3 B (3 no-op steps, library, $CLIENTS threads, pool $CLIENTS, ${SHORT} s) | $(fmt "$(field "$PG_SAGA_B" rate)") sagas/s, $(lat "$PG_SAGA_B"); library CPU $(field "$PG_SAGA_B" cpu_us_per_op) µs per saga; $SAGA_COMMITS_B COMMITs per saga | INSERT c$CLIENTS $(fmt "$BR32") tx/s; A $(fmt "$S32") sagas/s | $(ratio "$(field "$PG_SAGA_B" rate)" "$BR32") (A/B $(ratio "$S32" "$(field "$PG_SAGA_B" rate)")) |
| PostgreSQL: saga3 B sequential (library, 1 thread, ${SHORT} s) | $(fmt "$(field "$PG_SAGA1_B" rate)") sagas/s, $(lat "$PG_SAGA1_B") | A p50 $(fmt "$SEQ") ms | $(ratio "$(field "$PG_SAGA1_B" p50_ms)" 1.5) |"
    fi
}
