# Sourced by the gateway's tests after common.sh: skipping when it is not built, and
# waiting for a gateway to listen.

# gateway_required NEEDS: skip (77) unless $gateway is an executable and curl is there;
# NEEDS says what building the gateway needs, for the message.
gateway_required() {
    if [ -z "$gateway" ] || [ ! -x "$gateway" ]; then
        echo "SKIPPED: idem-gateway is not built (meson option gateway; needs $1)" >&2
        exit 77
    fi
    if ! command -v curl >/dev/null; then
        echo "SKIPPED: curl is not installed" >&2
        exit 77
    fi
}

# gateway_port LOG PID [NTH]: wait until the gateway PID has said it listens NTH times
# (default 1) in LOG; set $port to the port of its latest such line. Fails the test, with
# the log, when the gateway exits or a minute passes first.
gateway_port() {
    local log=$1 pid=$2 nth=${3:-1}
    port=
    for _ in $(seq 1 600); do
        if kill -0 "$pid" 2>/dev/null && [ "$(grep -c 'listening on' "$log")" -ge "$nth" ]; then
            port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$log" | tail -1)
            [ -n "$port" ] && return 0
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    cat "$log" >&2
    echo "FAIL: the gateway did not start" >&2
    exit 1
}

# The processes a test starts in the background (gateways, upstreams), ended by
# gateway_cleanup, the EXIT trap set here, which also releases the upstream $up's held
# answers.
pids=()
gateway_cleanup() {
    local p
    [ -n "${up:-}" ] && curl -s -m 5 -X POST "http://127.0.0.1:$up/_release" >/dev/null 2>&1
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$scratch"
}
trap gateway_cleanup EXIT

# upstream NAME [CERT KEY]: upstream.py started (HTTPS with CERT and KEY); its port in
# $upstream_port.
upstream() {
    python3 "$(dirname "${BASH_SOURCE[0]}")/upstream.py" "$scratch/$1.port" "${@:2}" </dev/null >/dev/null &
    pids+=($!)
    for _ in $(seq 1 300); do
        [ -s "$scratch/$1.port" ] && break
        sleep 0.1
    done
    upstream_port=$(cat "$scratch/$1.port") || { echo "FAIL: the upstream did not start" >&2; exit 1; }
}

# http ARGS...: curl; the status in $status, the body in $scratch/body (and $body), the
# headers in $scratch/headers.
http() {
    status=$(curl -sS -o "$scratch/body" -D "$scratch/headers" -w '%{http_code}' "$@")
    body=$(tr -d '\0' <"$scratch/body") # the text, for messages
}

# edited_config FROM TO PYTHON-EDIT [PYTHON-PRELUDE]: the configuration FROM with
# PYTHON-EDIT run on it (as d; PYTHON-PRELUDE first, naming parts of it), written to TO.
edited_config() {
    python3 - "$1" "$2" "$3" "${4:-}" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
exec(sys.argv[4])
exec(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"))
PY
}
