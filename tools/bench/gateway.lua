-- wrk script of tools/bench/gateway.py: POST the bench's tool with the bench tenant's
-- token, and count the answers.
--
--   wrk -s gateway.lua URL -- MODE TOKEN NONCE NKEYS
--
-- MODE new: a fresh Idempotency-Key per request (gw-NONCE-THREAD-N); MODE replay: one of
-- the keys gateway-replay-0 .. gateway-replay-(NKEYS-1), already created; MODE healthz:
-- GET /healthz, the HTTP exchange alone (no call). At the end one line
-- "gateway-bench-result {JSON}" on stdout: requests sent and answered, 201s without and
-- with Idempotent-Replayed, 200s of /healthz, other answers (and the first of them),
-- latency.

local threads = {}

function setup(thread)
    thread:set("id", #threads + 1)
    table.insert(threads, thread)
end

function init(args)
    mode, nonce, nkeys = args[1], args[3], tonumber(args[4])
    sent, created, replayed, healthy, other, first_other = 0, 0, 0, 0, 0, ""
    headers = {
        ["Authorization"] = "Bearer " .. args[2],
        ["Content-Type"] = "application/json",
    }
    body = '{"subject":"Benchmark task"}'
    math.randomseed(id * 7919 + os.time())
end

function request()
    sent = sent + 1
    if mode == "healthz" then
        return wrk.format("GET", "/healthz")
    elseif mode == "new" then
        headers["Idempotency-Key"] = string.format("gw-%s-%d-%d", nonce, id, sent)
    else
        headers["Idempotency-Key"] = "gateway-replay-" .. math.random(0, nkeys - 1)
    end
    return wrk.format("POST", nil, headers, body)
end

function response(status, hdrs, answer)
    if mode == "healthz" and status == 200 then
        healthy = healthy + 1
    elseif status == 201 and hdrs["Idempotent-Replayed"] == "true" then
        replayed = replayed + 1
    elseif status == 201 then
        created = created + 1
    else
        other = other + 1
        if first_other == "" then
            first_other = status .. " " .. string.sub(answer or "", 1, 200)
        end
    end
end

local function quoted(s)
    return '"' .. string.gsub(s, '[%c"\\]', function(c)
        return string.format("\\u%04x", string.byte(c))
    end) .. '"'
end

function done(summary, latency, requests)
    local n = {sent = 0, created = 0, replayed = 0, healthy = 0, other = 0}
    local first = ""
    for _, t in ipairs(threads) do
        for k in pairs(n) do
            n[k] = n[k] + t:get(k)
        end
        if first == "" then
            first = t:get("first_other")
        end
    end
    local e = summary.errors
    io.write(string.format(
        'gateway-bench-result {"duration_us": %d, "answered": %d, "sent": %d, "created": %d,' ..
        ' "replayed": %d, "healthy": %d, "other": %d, "first_other": %s, "socket_errors": %d,' ..
        ' "p50_us": %d, "p99_us": %d, "max_us": %d}\n',
        summary.duration, summary.requests, n.sent, n.created, n.replayed, n.healthy, n.other,
        quoted(first), e.connect + e.read + e.write + e.timeout,
        latency:percentile(50), latency:percentile(99), latency.max))
end
