# bench/reach.sh — the reach rows of `make bench`, sourced by bench/run (it uses run_load,
# start_daemon, stop_daemon, cpu_ticks, us_per_op, field, fmt, lat, ratio and log from there).
#
# (1) create with two channels and email configured: the benchmark's note delivered by email (an
#     email webhook and a directory file) and on two webhook channels, all three answered by a
#     fake receiver (slow_hook with no delay) — so each create queues three outbox rows that the
#     daemon's outbox sends while the creates go on. Measured against the create row of the same
#     run (the note with no channels), with the daemon's CPU per create beside both.
# (2) 10,000 deliveries drained by the outbox (bench/outbox_drain): the rate at which the outbox
#     empties a backlog against the fake receiver's own rate, measured first by the same client.
#
# reach_bench_all CREATE_RATE CREATE_CPU_US sets REACH_ROWS (Markdown table rows).

REACH_ROWS=

reach_bench_all() {
    local base_rate=$1 base_cpu=$2 recv_pid port
    "$BIN/slow_hook" --delay-ms 0 >"$DATA/receiver.port" 2>"$DATA/receiver.log" &
    recv_pid=$!
    RECEIVER_PID=$recv_pid # bench/run's cleanup stops it if the run ends early
    for _ in $(seq 50); do [ -s "$DATA/receiver.port" ] && break; sleep 0.1; done
    port=$(sed -n 's/.*"port": *\([0-9]*\).*/\1/p' "$DATA/receiver.port")
    local hook="http://127.0.0.1:$port"
    sed -e 's/"templateCd": "bench-note"/"templateCd": "bench-reach"/' \
        -e 's/"uiTemplate": "note",/"uiTemplate": "note", "channels": {"email": true, "sms": {"title": "SMS: note {{n}} from {{from}}"}, "chat": true},/' \
        "$DATA/templates/bench-note.json" >"$DATA/templates/bench-reach.json"
    echo '{"ana": "ana@example.com"}' >"$DATA/reach-users.json"
    local users
    users="$(cd "$DATA" && pwd)/reach-users.json"
    start_daemon reach '{}' ", \"email\": {\"webhook\": \"$hook/email\", \"directory\": {\"file\": \"$users\"}}, \"channels\": {\"sms\": {\"webhook\": \"$hook/sms\"}, \"chat\": {\"webhook\": \"$hook/chat\"}}"
    log "create with two channels and email: $CLIENTS clients, $SHORT s"
    local t0 out cpu
    t0=$(cpu_ticks "$DPID")
    out=$(run_load --mode create --template bench-reach --threads "$CLIENTS" --seconds "$SHORT" --label create-reach)
    cpu=$(us_per_op $(( $(cpu_ticks "$DPID") - t0 )) "$(field "$out" ops)")
    stop_daemon
    # the daemons started after this one have no channels: a template naming them would stop them
    rm -f "$DATA/templates/bench-reach.json"
    local rate
    rate=$(field "$out" rate)
    log "outbox drain: 10000 deliveries"
    local drain
    drain=$("$BIN/outbox_drain" "sqlite:$DATA/drain.db" "$hook/sms" 10000) || { FAILED=1; log "outbox drain failed"; }
    log "$drain"
    kill "$recv_pid" 2>/dev/null
    wait "$recv_pid" 2>/dev/null
    REACH_ROWS="| create with two channels and email configured ($CLIENTS clients, ${SHORT} s; 3 deliveries per create sent meanwhile) | $(fmt "$rate") msg/s, $(lat "$out"); CPU $cpu µs per create | create: $(fmt "$base_rate") msg/s, CPU $base_cpu µs per create; target ≥ 0.8× | $(ratio "$rate" "$base_rate") |
| 10,000 deliveries drained by the outbox (SQLite, fake receiver) | $(fmt "$(field "$drain" rate)") deliveries/s ($(field "$drain" seconds) s); CPU $(field "$drain" cpu_us_per_delivery) µs per delivery | the receiver's own rate: $(fmt "$(field "$drain" receiver_rate)") req/s | $(ratio "$(field "$drain" rate)" "$(field "$drain" receiver_rate)") |"
}
