# free-port.sh: sourced by tools/with-postgres and tools/with-citus.
#
# free_port [TAKEN...]: print a TCP port on 127.0.0.1 that nobody listens on and that is
# none of TAKEN. It is chosen below the kernel's range for outgoing connections: a port in
# that range can be taken by a client's socket between this probe and the server's bind
# (the suite opens thousands of connections while a nested cluster starts). The caller
# still retries its start on "Address already in use", since another program may bind
# the port first.
free_port() {
    local port low=32768 high
    if [ -r /proc/sys/net/ipv4/ip_local_port_range ]; then
        read -r low high </proc/sys/net/ipv4/ip_local_port_range || true
    fi
    [ "$low" -gt 12000 ] 2>/dev/null || low=32768
    for _ in $(seq 1 50); do
        port=$(( 10000 + RANDOM % (low - 10000) ))
        case " $* " in *" $port "*) continue ;; esac
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return
        fi
    done
    echo "${0##*/}: no free TCP port found" >&2
    exit 69
}
