// MCP revision 2026-07-28 against idem-gateway, with the official TypeScript SDK's v2 client
// (@modelcontextprotocol/client), which probes with server/discover before any initialize:
//   node modern.mjs URL TOKEN GATEWAY CONFIG
// with DB (the test's database) and GATEWAY_LOG (the HTTP gateway's standard error) in the
// environment. Over Streamable HTTP and stdio: the negotiated revision, calls without a
// session under both spellings of the operation ID's _meta key, a call whose connection
// is closed while its effect waits (the retry replays it: one effect); raw requests for
// the revision's refusals and W3C trace context in the log line. Prints "ok NAME" or
// "FAIL NAME: why" per check, then "N of M checks passed"; exits 1 on a failure.
import { spawn, execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const [url, token, gateway, config] = process.argv.slice(2);
const db = process.env.DB;
const META = "dev.idem/operation_id";
const OLD_META = "idem/operation_id";
const MODERN = "2026-07-28";
let n = 0, failed = 0;

function check(name, cond, detail) {
    n++;
    if (cond) {
        console.log(`ok modern_${name}`);
    } else {
        failed++;
        console.log(`FAIL modern_${name}: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
    }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const sql = (q) => execFileSync("psql", ["-Atq", "-d", db, "-c", q]).toString().trim();
const sc = (r) => r.structuredContent || {};
const counter = () => Number(sql("SELECT n FROM app.counters WHERE id = 1"));

async function connect(kind, mode) {
    const client = new Client({ name: "idem-modern-client", version: "1.0.0" },
        { versionNegotiation: { mode } });
    const transport = kind === "http"
        ? new StreamableHTTPClientTransport(new URL(url), {
            requestInit: { headers: { Authorization: `Bearer ${token}` } } })
        : new StdioClientTransport({ command: gateway, args: ["--stdio", "--config", config],
            env: process.env, stderr: "inherit" });
    await client.connect(transport);
    return client;
}

// A psql session holding the counter's row until release().
async function holdRow() {
    const p = spawn("psql", ["-Atq", "-d", db], { stdio: ["pipe", "ignore", "ignore"] });
    p.stdin.write("BEGIN; SELECT 1 FROM app.counters WHERE id = 1 FOR UPDATE;\n");
    for (let i = 0; i < 300; i++) {
        if (sql("SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'counters' AND l.mode = 'RowShareLock' AND l.granted") === "1") break;
        await sleep(100);
    }
    return { release: () => new Promise((r) => { p.on("exit", r); p.stdin.end(); }) };
}
async function waitFor(cond) {
    for (let i = 0; i < 600 && !cond(); i++) await sleep(100);
    return cond();
}
const lockWaiters = () => sql("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND usename = 'idem_test_gateway' AND wait_event_type = 'Lock'");

async function call(client, name, args, meta, options) {
    return client.callTool({ name, arguments: args, _meta: meta }, options);
}
// Retry with the same operation ID while it is in progress.
async function retry(client, name, args, meta) {
    let r;
    for (let i = 0; i < 600; i++) {
        r = await call(client, name, args, meta);
        if (sc(r).status !== "in_progress") return r;
        await sleep(100);
    }
    return r;
}

// The calls every transport makes in 2026-07-28.
async function calls(client, kind) {
    const { tools } = await client.listTools();
    check(`${kind}_list`, tools.some((t) => t.name === "create_note"), tools.map((t) => t.name));
    const key = `modern-${kind}-1`;
    const first = await call(client, "create_note", { text: "modern" }, { [META]: key });
    check(`${kind}_created`, sc(first).status === "created" && first.isError === false, first);
    const again = await call(client, "create_note", { text: "modern" }, { [OLD_META]: key });
    check(`${kind}_replayed_under_the_older_key`, sc(again).status === "replayed", again);
    const both = await call(client, "create_note", { text: "modern" }, { [META]: key, [OLD_META]: key });
    check(`${kind}_both_keys_same_value`, sc(both).status === "replayed", both);
    check(`${kind}_effect_once`, sql(`SELECT count(*) FROM app.notes WHERE operation_id = '${key}'`) === "1");
    let error;
    try {
        await call(client, "create_note", { text: "modern" }, { [META]: key, [OLD_META]: `${key}-other` });
    } catch (e) { error = e; }
    check(`${kind}_both_keys_differ_refused`, error?.code === -32602 && /hold different values/.test(error.message),
        String(error));
    check(`${kind}_differ_ran_nothing`, sql(`SELECT count(*) FROM app.notes WHERE operation_id = '${key}-other'`) === "0");
}

// A call whose connection closes while its effect waits on a row lock: the effect still
// commits once, and the retry with the same operation ID replays it.
async function closedStream(client) {
    const key = "modern-closed-1";
    const c0 = counter();
    const lock = await holdRow();
    const ac = new AbortController();
    const closed = call(client, "bump", { by: 4 }, { [META]: key }, { signal: ac.signal }).then(
        (r) => ({ answered: r }), (e) => ({ error: e }));
    check("closed_waits_on_lock", await waitFor(() => lockWaiters() === "1"));
    ac.abort("the connection is closed");
    const outcome = await closed;
    check("closed_call_got_no_answer", outcome.error !== undefined, outcome);
    await lock.release();
    check("closed_effect_committed", await waitFor(() => counter() === c0 + 4), [counter(), c0]);
    const replay = await retry(client, "bump", { by: 4 }, { [META]: key });
    check("closed_retry_replayed", sc(replay).status === "replayed", replay);
    check("closed_one_effect", counter() === c0 + 4 && sql(`SELECT count(*) FROM idem.operations WHERE operation_id = '${key}'`) === "1",
        [counter(), c0]);
}

// One raw POST to /mcp: {status, headers, json}.
async function post(body, headers = {}) {
    const r = await fetch(url, { method: "POST", body: JSON.stringify(body), headers: {
        Authorization: `Bearer ${token}`, "Content-Type": "application/json",
        Accept: "application/json, text/event-stream", ...headers } });
    const text = await r.text();
    let json;
    try { json = JSON.parse(text); } catch { json = undefined; }
    return { status: r.status, headers: r.headers, json, text };
}
const envelope = (v = MODERN) => ({ "io.modelcontextprotocol/protocolVersion": v,
    "io.modelcontextprotocol/clientCapabilities": {} });

async function raw() {
    const h = { "MCP-Protocol-Version": MODERN, "Mcp-Method": "server/discover" };
    const d = await post({ jsonrpc: "2.0", id: 1, method: "server/discover", params: { _meta: envelope() } }, h);
    check("raw_discover", d.status === 200 && d.json?.result?.supportedVersions?.includes(MODERN)
        && d.json.result.supportedVersions.includes("2025-11-25"), d.text);
    check("raw_no_session", d.headers.get("mcp-session-id") === null, [...d.headers.keys()]);
    const mismatch = await post({ jsonrpc: "2.0", id: 2, method: "tools/list", params: { _meta: envelope() } },
        { "MCP-Protocol-Version": "2025-11-25" });
    check("raw_header_mismatch_400", mismatch.status === 400 && mismatch.json?.error?.code === -32020, mismatch.text);
    const bare = await post({ jsonrpc: "2.0", id: 3, method: "tools/list" }, { "MCP-Protocol-Version": MODERN });
    check("raw_envelope_missing_400", bare.status === 400 && bare.json?.error?.code === -32602, bare.text);
    const later = await post({ jsonrpc: "2.0", id: 4, method: "tools/list", params: { _meta: envelope("2099-01-01") } });
    check("raw_unsupported_revision", later.status === 400 && later.json?.error?.code === -32022
        && later.json.error.data?.supported?.[0] === MODERN, later.text);
    const init = await post({ jsonrpc: "2.0", id: 5, method: "initialize", params: { protocolVersion: "2025-11-25",
        capabilities: {}, clientInfo: { name: "raw", version: "1" } } });
    check("raw_initialize_2025_kept", init.status === 200 && init.json?.result?.protocolVersion === "2025-11-25", init.text);
}

// The log line of request ID @id (written once its answer is sent): its fields.
async function logLine(id) {
    const find = () => readFileSync(process.env.GATEWAY_LOG, "utf8").split("\n")
        .find((l) => l.includes(`request id=${id} `));
    await waitFor(() => find() !== undefined);
    const line = find() || "";
    return Object.fromEntries(line.split(" ").filter((w) => w.includes("=")).map((w) => w.split("=")));
}

async function trace() {
    const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const ping = { jsonrpc: "2.0", id: 6, method: "ping" };
    await post(ping, { traceparent: tp, "X-Request-Id": "modern-trace-header" });
    let f = await logLine("modern-trace-header");
    check("trace_header_logged", f.trace === "4bf92f3577b34da6a3ce929d0e0e4736" && /^[0-9a-f]{16}$/.test(f.span)
        && f.span !== "00f067aa0ba902b7", f);
    await post({ ...ping, params: { _meta: { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" } } },
        { traceparent: tp, "X-Request-Id": "modern-trace-meta" });
    f = await logLine("modern-trace-meta");
    check("trace_meta_wins", f.trace === "0af7651916cd43dd8448eb211c80319c", f);
    await post(ping, { "X-Request-Id": "modern-trace-none" });
    f = await logLine("modern-trace-none");
    check("trace_new_when_none", /^[0-9a-f]{32}$/.test(f.trace) && !/^0+$/.test(f.trace), f);
    const bad = await post(ping, { traceparent: "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "X-Request-Id": "modern-trace-invalid" });
    f = await logLine("modern-trace-invalid");
    check("trace_invalid_ignored", bad.status === 200 && /^[0-9a-f]{32}$/.test(f.trace) && !/^0+$/.test(f.trace), [bad.status, f]);
}

async function main() {
    const http = await connect("http", "auto");
    check("http_negotiated", http.getNegotiatedProtocolVersion() === MODERN, http.getNegotiatedProtocolVersion());
    check("http_server", http.getServerVersion()?.name === "idem-gateway", http.getServerVersion());
    check("http_instructions", (http.getInstructions() || "").includes(META), http.getInstructions());
    await calls(http, "http");
    await closedStream(http);
    await http.close();
    const pinned = await connect("http", { pin: MODERN });
    check("http_pinned", pinned.getNegotiatedProtocolVersion() === MODERN, pinned.getNegotiatedProtocolVersion());
    await pinned.close();
    const stdio = await connect("stdio", "auto");
    check("stdio_negotiated", stdio.getNegotiatedProtocolVersion() === MODERN, stdio.getNegotiatedProtocolVersion());
    await calls(stdio, "stdio");
    await stdio.close();
    await raw();
    await trace();
}

main().catch((e) => { failed++; console.log(`FAIL modern: ${e.stack || e}`); }).finally(() => {
    console.log(`${n - failed} of ${n} checks passed`);
    process.exit(failed === 0 ? 0 : 1);
});
