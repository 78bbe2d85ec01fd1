// Raw JSON-RPC against idem-gateway's MCP transports, as no well-behaved client sends it:
//   node raw.mjs URL TOKEN GATEWAY CONFIG    (DB in the environment)
// Hostile messages over HTTP and stdio get the right errors and the server goes on serving;
// the HTTP checks before a message (Origin, method, token, revision, media type, size); a
// raw initialize asking for 2025-06-18; stdout carrying nothing but JSON-RPC; the end of
// stdin and SIGTERM letting a call under way finish, then exit 0. Prints "ok NAME" / "FAIL NAME: why".
import { spawn, execFileSync } from "node:child_process";
import { createInterface } from "node:readline";

const [url, token, gateway, config] = process.argv.slice(2);
const db = process.env.DB;
let n = 0, failed = 0;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const sql = (q) => execFileSync("psql", ["-Atq", "-d", db, "-c", q]).toString().trim();
const MAX = 65536; // the test configuration's max_body_bytes

function check(name, cond, detail) {
    n++;
    if (cond) console.log(`ok ${name}`);
    else { failed++; console.log(`FAIL ${name}: ${JSON.stringify(detail)}`); }
}

async function post(body, headers = {}) {
    const res = await fetch(url, { method: "POST", body, headers: {
        Authorization: `Bearer ${token}`, "Content-Type": "application/json",
        Accept: "application/json, text/event-stream", ...headers } });
    const text = await res.text();
    let json = null;
    try { json = JSON.parse(text); } catch { /* not JSON */ }
    return { status: res.status, headers: res.headers, text, json };
}
const msg = (o) => JSON.stringify({ jsonrpc: "2.0", ...o });
const errorOf = (r) => r.json?.error?.code;

// Each hostile message, the error code it must get and the id it must carry (undefined:
// no answer is due). The same table runs over HTTP and over stdio.
const big = msg({ id: 1, method: "ping", params: { pad: "x".repeat(MAX) } });
const hostile = [
    ["not_json", "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ", -32700, null],
    ["not_json_garbage", "\u0001\u0002 hello", -32700, null],
    ["wrong_jsonrpc", JSON.stringify({ jsonrpc: "1.0", id: 7, method: "ping" }), -32600, 7],
    ["no_jsonrpc", JSON.stringify({ id: 8, method: "ping" }), -32600, 8],
    ["not_an_object", "42", -32600, null],
    ["batch", JSON.stringify([{ jsonrpc: "2.0", id: 1, method: "ping" }, { jsonrpc: "2.0", id: 2, method: "ping" }]), -32600, null],
    ["empty_batch", "[]", -32600, null],
    ["method_not_string", msg({ id: 9, method: 5 }), -32600, 9],
    ["unknown_method", msg({ id: 10, method: "resources/list" }), -32601, 10],
    ["id_float", msg({ id: 1.5, method: "ping" }), -32600, null],
    ["id_null", msg({ id: null, method: "ping" }), -32600, null],
    ["id_bool", msg({ id: true, method: "ping" }), -32600, null],
    ["id_object", msg({ id: { a: 1 }, method: "ping" }), -32600, null],
    ["id_array", msg({ id: [1], method: "ping" }), -32600, null],
    ["params_not_object", msg({ id: 11, method: "tools/call", params: [1] }), -32602, 11],
    ["call_without_name", msg({ id: 12, method: "tools/call", params: { arguments: {} } }), -32602, 12],
    ["call_arguments_array", msg({ id: 13, method: "tools/call", params: { name: "create_note", arguments: [] } }), -32602, 13],
    ["call_unknown_tool", msg({ id: 14, method: "tools/call", params: { name: "nope", arguments: {} } }), -32602, 14],
    ["call_operation_id_number", msg({ id: 15, method: "tools/call", params: { name: "create_note", arguments: { text: "x" }, _meta: { "idem/operation_id": 5 } } }), null, 15],
    ["duplicate_members", "{\"jsonrpc\": \"2.0\", \"id\": 16, \"id\": 17, \"method\": \"ping\"}", -32700, null],
];
// Ids of every type that are valid come back as they were sent.
const ids = [["id_string", "abc"], ["id_empty_string", ""], ["id_zero", 0], ["id_negative", -5],
    ["id_large", 9007199254740991]];

async function overHttp() {
    for (const [name, text, code, id] of hostile) {
        const r = await post(text);
        if (code === null) { // a malformed _meta member is the call's own error: -32602
            check(`http_${name}`, r.status === 200 && r.json?.id === id && errorOf(r) === -32602, r.text);
            continue;
        }
        check(`http_${name}`, errorOf(r) === code && r.json.id === id && r.json.jsonrpc === "2.0"
            && r.status === (id === null ? 400 : 200), [r.status, r.text]);
    }
    for (const [name, id] of ids) {
        const r = await post(msg({ id, method: "ping" }));
        check(`http_${name}`, r.status === 200 && r.json?.id === id && r.json.result !== undefined, r.text);
    }
    let r = await post(big);
    check("http_huge_message_413", r.status === 413 && errorOf(r) === -32600 && r.json.id === null, [r.status, r.text]);
    r = await post(msg({ method: "notifications/initialized" }));
    check("http_notification_202", r.status === 202 && r.text === "", [r.status, r.text]);
    r = await post(msg({ method: "notifications/whatever" }));
    check("http_unknown_notification_202", r.status === 202, r.status);
    r = await post(msg({ id: 99, result: {} }));
    check("http_response_202", r.status === 202, r.status);
    r = await post(msg({ id: 1, method: "ping" }), { Origin: "https://evil.example" });
    check("http_origin_403", r.status === 403, [r.status, r.text]);
    r = await post(msg({ id: 1, method: "ping" }), { Origin: "https://allowed.example" });
    check("http_origin_allowed", r.status === 200, [r.status, r.text]);
    r = await post(msg({ id: 1, method: "ping" }), { "MCP-Protocol-Version": "1999-01-01" });
    check("http_protocol_version_400", r.status === 400 && errorOf(r) === -32600, [r.status, r.text]);
    r = await post(msg({ id: 1, method: "ping" }), { "MCP-Protocol-Version": "2025-06-18" });
    check("http_protocol_version_2025_06_18", r.status === 200, [r.status, r.text]);
    r = await post(msg({ id: 1, method: "ping" }), { Authorization: "Bearer wrong" });
    check("http_unknown_token_401", r.status === 401 && /^Bearer/.test(r.headers.get("www-authenticate") || ""),
        [r.status, r.headers.get("www-authenticate")]);
    r = await post(msg({ id: 1, method: "ping" }), { "Content-Type": "text/plain" });
    check("http_media_type_415", r.status === 415, r.status);
    for (const method of ["GET", "DELETE"]) {
        const res = await fetch(url, { method, headers: { Authorization: `Bearer ${token}`, Accept: "text/event-stream" } });
        check(`http_${method.toLowerCase()}_405`, res.status === 405 && res.headers.get("allow") === "POST", res.status);
    }
    r = await post(msg({ id: 1, method: "ping" }));
    check("http_no_session_id", r.headers.get("mcp-session-id") === null
        && r.headers.get("content-type") === "application/json", [...r.headers]);

    // A raw initialize asking for 2025-06-18 gets it; another revision gets 2025-11-25.
    const init = (v) => msg({ id: "init", method: "initialize", params: { protocolVersion: v,
        capabilities: {}, clientInfo: { name: "raw", version: "0" } } });
    r = await post(init("2025-06-18"));
    check("http_initialize_2025_06_18", r.json?.result?.protocolVersion === "2025-06-18"
        && r.json.result.serverInfo.name === "idem-gateway", r.text);
    r = await post(init("2024-11-05"));
    check("http_initialize_other_gets_latest", r.json?.result?.protocolVersion === "2025-11-25", r.text);
    r = await post(msg({ id: 2, method: "tools/list" }), { "MCP-Protocol-Version": "2025-06-18" });
    check("http_list_on_2025_06_18", r.json?.result?.tools?.length === 4, r.text);
    r = await post(msg({ id: "still", method: "ping" }));
    check("http_still_serving", r.status === 200 && r.json?.id === "still", r.text);
}

// The gateway on stdio, read line by line.
function startStdio() {
    const p = spawn(gateway, ["--stdio", "--config", config], { stdio: ["pipe", "pipe", "pipe"] });
    const lines = [], waiters = [];
    let stderr = "";
    p.stderr.on("data", (d) => { stderr += d; });
    createInterface({ input: p.stdout }).on("line", (l) => {
        if (waiters.length) waiters.shift()(l); else lines.push(l);
    });
    const exited = new Promise((r) => p.on("exit", (code) => r(code)));
    const next = (ms = 120000) => lines.length ? Promise.resolve(lines.shift())
        : new Promise((r) => { waiters.push(r); setTimeout(() => r(null), ms); });
    return { p, next, exited, send: (t) => p.stdin.write(t + "\n"), stderr: () => stderr };
}

// Stop a stdio gateway (@stop: the end of input, or SIGTERM) while a call waits on a row
// the test holds: the call finishes (its reply is written), then the gateway exits 0.
async function stopWithCallUnderWay(s, name, stop, reply) {
    const hold = spawn("psql", ["-Atq", "-d", db], { stdio: ["pipe", "ignore", "ignore"] });
    hold.stdin.write("BEGIN; SELECT 1 FROM app.counters WHERE id = 1 FOR UPDATE;\n");
    for (let i = 0; i < 300 && sql("SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'counters' AND l.mode = 'RowShareLock' AND l.granted") !== "1"; i++) await sleep(100);
    s.send(msg({ id: name, method: "tools/call", params: { name: "bump", arguments: { by: 1 }, _meta: { "idem/operation_id": `stdio-${name}-1` } } }));
    for (let i = 0; i < 600 && sql("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND usename = 'idem_test_gateway' AND wait_event_type = 'Lock'") !== "1"; i++) await sleep(100);
    stop();
    await sleep(500);
    check(`stdio_${name}_waits_for_call`, s.p.exitCode === null, s.p.exitCode);
    await new Promise((res) => { hold.on("exit", res); hold.stdin.end(); });
    const r = await reply();
    check(`stdio_${name}_call_finished`, r.id === name && r.result?.structuredContent?.status === "created", r);
    const code = await s.exited;
    check(`stdio_${name}_exit_0`, code === 0, [code, s.stderr()]);
}

async function overStdio() {
    const s = startStdio();
    const all = [];
    const reply = async () => { const l = await s.next(); all.push(l); try { return JSON.parse(l); } catch { return { unparsed: l }; } };
    for (const [name, text, code, id] of hostile) {
        s.send(text);
        const r = await reply();
        if (code === null) { check(`stdio_${name}`, r.id === id && r.error?.code === -32602, r); continue; }
        check(`stdio_${name}`, r.error?.code === code && r.id === id, r);
    }
    for (const [name, id] of ids) {
        s.send(msg({ id, method: "ping" }));
        const r = await reply();
        check(`stdio_${name}`, r.id === id && r.result !== undefined, r);
    }
    s.send(big);
    let r = await reply();
    check("stdio_huge_message_error", r.error?.code === -32600 && r.id === null && /too large/.test(r.error.message), r);
    // Notifications answer nothing: the next answer is the ping's.
    s.send(msg({ method: "notifications/initialized" }));
    s.send(msg({ method: "notifications/cancelled", params: { requestId: 1 } }));
    s.send("");
    s.send(msg({ id: "after", method: "ping" }));
    r = await reply();
    check("stdio_notifications_unanswered", r.id === "after", r);
    s.send(msg({ id: "init", method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } } }));
    r = await reply();
    check("stdio_initialize_2025_06_18", r.result?.protocolVersion === "2025-06-18", r);

    await stopWithCallUnderWay(s, "eof", () => s.p.stdin.end(), reply);
    check("stdio_stdout_only_json_rpc", all.every((l) => { try { return JSON.parse(l).jsonrpc === "2.0"; } catch { return false; } }), all);
    check("stdio_logs_on_stderr", /serving MCP on stdio for tenant acme/.test(s.stderr()), s.stderr());

    // SIGTERM: the same as the end of input.
    const t = startStdio();
    await stopWithCallUnderWay(t, "sigterm", () => t.p.kill("SIGTERM"), async () => JSON.parse(await t.next()));
    check("stdio_sigterm_logged", /SIGTERM: stopping after the calls under way/.test(t.stderr()), t.stderr());
}

try {
    await overHttp();
    await overStdio();
} catch (e) {
    failed++;
    console.log(`FAIL raw: ${e.stack || e}`);
}
console.log(`${n - failed} of ${n} checks passed`);
process.exit(failed === 0 ? 0 : 1);
