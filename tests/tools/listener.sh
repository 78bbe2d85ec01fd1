# Sourced by the tool tests (after $scratch is set): a server that never answers.

# silent_listener: a TCP port on 127.0.0.1 that accepts connections and never answers
# (a server that hangs, a forwarder to nowhere), in $silent_port until silent_stop.
silent_listener() {
    python3 -c 'import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(64)
print(s.getsockname()[1], flush=True)
time.sleep(600)' >"$scratch/silent_port" &
    silent_pid=$!
    for _ in $(seq 1 100); do
        silent_port=$(cat "$scratch/silent_port")
        [ -n "$silent_port" ] && break
        sleep 0.1
    done
}

silent_stop() {
    kill "$silent_pid" 2>/dev/null
    wait "$silent_pid" 2>/dev/null
}
