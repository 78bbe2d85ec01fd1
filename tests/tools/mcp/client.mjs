// The official MCP TypeScript SDK's client against idem-gateway, over one transport:
//   node client.mjs http URL TOKEN   |   node client.mjs stdio GATEWAY CONFIG
// with DB (the test's database) and OU_KEY (an operation ID whose record the test left
// pending past the deadline: outcome_unknown) in the environment. Prints "ok NAME" or
// "FAIL NAME: why" per check, then "N of M checks passed"; exits 1 on a failure.
import { spawn, execFileSync } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [mode, a1, a2] = process.argv.slice(2);
const db = process.env.DB;
const T = mode; // key prefix: each transport's operations are its own
let n = 0, failed = 0;
const transcript = [];

function check(name, cond, detail) {
    n++;
    if (cond) {
        console.log(`ok ${mode}_${name}`);
    } else {
        failed++;
        console.log(`FAIL ${mode}_${name}: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
    }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const sql = (q) => execFileSync("psql", ["-Atq", "-d", db, "-c", q]).toString().trim();
const META = "idem/operation_id";

async function connect() {
    const client = new Client({ name: "idem-test-client", version: "1.0.0" });
    const transport = mode === "http"
        ? new StreamableHTTPClientTransport(new URL(a1), {
            requestInit: { headers: { Authorization: `Bearer ${a2}` } } })
        : new StdioClientTransport({ command: a1, args: ["--stdio", "--config", a2],
            env: process.env, stderr: "inherit" });
    await client.connect(transport);
    return { client, transport };
}

// A tools/call with the operation ID in _meta, kept for the README's transcript.
async function call(client, name, args, key, options) {
    const params = { name, arguments: args };
    if (key !== undefined) params._meta = { [META]: key };
    const result = await client.callTool(params, undefined, options);
    transcript.push({ request: params, result });
    return result;
}
const sc = (r) => r.structuredContent || {};

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
async function waitForLockWait() {
    for (let i = 0; i < 600; i++) {
        if (sql("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND usename = 'idem_test_gateway' AND wait_event_type = 'Lock'") === "1") return true;
        await sleep(100);
    }
    return false;
}
// Wait until the counter shows the effect (committed with its record).
async function waitForCounter(counter, want) {
    for (let i = 0; i < 600 && counter() !== want; i++) await sleep(100);
    return counter() === want;
}
// Retry with the same operation ID while it is in progress.
async function retry(client, name, args, key) {
    let r;
    for (let i = 0; i < 600; i++) {
        r = await call(client, name, args, key);
        if (sc(r).status !== "in_progress") return r;
        await sleep(100);
    }
    return r;
}

async function main() {
    const { client, transport } = await connect();

    // initialize: the server, its revision, its instructions.
    check("initialize_server", client.getServerVersion()?.name === "idem-gateway", client.getServerVersion());
    check("initialize_tools_capability", client.getServerCapabilities()?.tools?.listChanged === false,
        client.getServerCapabilities());
    if (mode === "http")
        check("initialize_revision", transport.protocolVersion === "2025-11-25", transport.protocolVersion);
    check("initialize_instructions", /operation ID/.test(client.getInstructions() || ""), client.getInstructions());
    await client.ping();
    check("ping", true);

    // tools/list: from the configuration.
    const { tools } = await client.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    check("list_names", ["add_note", "bump", "create_note", "divide"].every((x) => byName[x]), tools.map((t) => t.name));
    const note = byName.create_note;
    check("list_title_description", note.title === "Create a note" && /note/.test(note.description), note);
    check("list_annotations", note.annotations.idempotentHint === true && note.annotations.destructiveHint === false
        && byName.bump.annotations.destructiveHint === true, note.annotations);
    check("list_input_schema", note.inputSchema.type === "object" && note.inputSchema.required[0] === "text", note.inputSchema);
    const add = byName.add_note.inputSchema;
    check("list_operation_id_argument", add.properties.operation_id?.type === "string"
        && add.required.includes("operation_id"), add);

    // The allocate flow: a UUIDv7 in _meta, nothing run or stored.
    const before = sql("SELECT count(*) FROM idem.operations");
    const alloc = await client.callTool({ name: "create_note", arguments: {},
        _meta: { "idem/allocate_operation_id": true } });
    transcript.push({ request: { name: "create_note", arguments: {}, _meta: { "idem/allocate_operation_id": true } }, result: alloc });
    const id = alloc._meta?.[META];
    check("allocate_uuidv7", /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id || ""), alloc);
    check("allocate_ran_nothing", sql("SELECT count(*) FROM idem.operations") === before && !alloc.isError, alloc);

    // The same operation ID twice: created, then replayed with the same receipt.
    const first = await call(client, "create_note", { text: "call the customer back" }, id);
    check("created", sc(first).status === "created" && first.isError === false && sc(first).replayed === false, first);
    check("created_text", first.content?.[0]?.type === "text" && first.content[0].text.includes(id), first.content);
    const second = await call(client, "create_note", { text: "call the customer back" }, id);
    check("replayed", sc(second).status === "replayed" && second.isError === false && sc(second).replayed === true, second);
    check("replayed_same_receipt", JSON.stringify(sc(second).receipt) === JSON.stringify(sc(first).receipt)
        && sc(first).receipt?.note_id > 0, [sc(first).receipt, sc(second).receipt]);
    check("effect_once", sql(`SELECT count(*) FROM app.notes WHERE operation_id = '${id}'`) === "1");

    // Changed arguments under the same operation ID: conflict.
    const conflict = await call(client, "create_note", { text: "something else" }, id);
    check("conflict", sc(conflict).status === "conflict" && conflict.isError === true
        && sc(conflict).field === "arguments" && /new operation ID/.test(conflict.content[0].text), conflict);

    // No operation ID: refused, telling the host to allocate one; nothing stored.
    const missing = await call(client, "create_note", { text: "x" });
    check("missing_operation_id", missing.isError === true && sc(missing).status === "operation_id_required"
        && /[Aa]llocate/.test(missing.content[0].text), missing);

    // Invalid arguments: status invalid, the field as a JSON Pointer; nothing stored.
    const invalid = await call(client, "create_note", { text: "x", tags: ["a", 1] }, `${T}-bad-1`);
    check("invalid_arguments", invalid.isError === true && sc(invalid).status === "invalid"
        && sc(invalid).pointer === "/tags/1", invalid);
    const badKey = await call(client, "create_note", { text: "x" }, "with space");
    check("invalid_operation_id", badKey.isError === true && sc(badKey).status === "invalid"
        && sc(badKey).field === "operation_id", badKey);
    check("invalid_stored_nothing", sql(`SELECT count(*) FROM idem.operations WHERE operation_id = '${T}-bad-1'`) === "0");

    // An unknown tool: a JSON-RPC error -32602.
    let code;
    try { await call(client, "no_such_tool", {}, `${T}-k`); } catch (e) { code = e.code; }
    check("unknown_tool_32602", code === -32602, code);

    // The operation ID as a configured argument: removed before validation and
    // fingerprinting (the same call with the ID in _meta replays it), given to the SQL.
    const argKey = `${T}-arg-1`;
    const viaArg = await call(client, "add_note", { text: "by argument", operation_id: argKey });
    check("argument_created", sc(viaArg).status === "created" && sc(viaArg).operation_id === argKey, viaArg);
    check("argument_reached_sql", sql(`SELECT count(*) FROM app.notes WHERE operation_id = '${argKey}'`) === "1");
    const viaMeta = await call(client, "add_note", { text: "by argument" }, argKey);
    check("argument_not_fingerprinted", sc(viaMeta).status === "replayed", viaMeta);

    // Concurrent duplicates: 16 calls at once, one effect.
    const together = `${T}-together-1`;
    const results = await Promise.all(Array.from({ length: 16 }, () =>
        client.callTool({ name: "create_note", arguments: { text: "together" }, _meta: { [META]: together } })));
    const statuses = results.map((r) => sc(r).status);
    check("concurrent_one_created", statuses.filter((s) => s === "created").length === 1, statuses);
    check("concurrent_rest_replayed_or_in_progress", statuses.every((s) => ["created", "replayed", "in_progress"].includes(s)), statuses);
    check("concurrent_one_effect", sql(`SELECT count(*) FROM app.notes WHERE operation_id = '${together}'`) === "1");

    // outcome_unknown: a record left pending past the deadline (as an interrupted effect
    // leaves it); never a new key.
    const ou = await call(client, "bump", { by: 1 }, process.env.OU_KEY);
    check("outcome_unknown", ou.isError === true && sc(ou).status === "outcome_unknown"
        && sc(ou).reconciliation?.show === `idem-reconcile show acme ${process.env.OU_KEY}`
        && /Do not retry under a new operation ID/.test(ou.content[0].text), ou);

    // expired: a UUIDv7 older than the tool's key memory; never run, a person reconciles.
    const old = "016e0000-0000-7000-8000-00000000000" + (mode === "http" ? "1" : "2");
    const expired = await call(client, "create_note", { text: "late" }, old);
    check("expired", expired.isError === true && sc(expired).status === "expired"
        && sc(expired).reconciliation?.operation_id === old && /a person must reconcile/.test(expired.content[0].text), expired);
    check("expired_ran_nothing", sql(`SELECT count(*) FROM app.notes WHERE operation_id = '${old}'`) === "0");

    // effect_failed: the statement fails; nothing stored, the SQLSTATE given.
    const failedCall = await call(client, "divide", { d: 0 }, `${T}-div-1`);
    check("effect_failed", failedCall.isError === true && sc(failedCall).status === "effect_failed"
        && sc(failedCall).sqlstate === "22012", failedCall);

    // notifications/cancelled does not abort the effect: it finishes and is stored, and
    // the retry replays it.
    const counter = () => Number(sql("SELECT n FROM app.counters WHERE id = 1"));
    const c0 = counter();
    let lock = await holdRow();
    const ac = new AbortController();
    const cancelled = call(client, "bump", { by: 2 }, `${T}-cancel-1`, { signal: ac.signal }).catch((e) => e);
    check("cancel_waits_on_lock", await waitForLockWait());
    ac.abort("the user changed their mind");
    await cancelled;
    await sleep(300);
    await lock.release();
    // The cancelled call commits by itself (no retry made it run); then the retry replays.
    check("cancel_effect_committed", await waitForCounter(counter, c0 + 2), [counter(), c0]);
    const afterCancel = await retry(client, "bump", { by: 2 }, `${T}-cancel-1`);
    check("cancel_effect_stored_and_replayed", sc(afterCancel).status === "replayed" && counter() === c0 + 2,
        [afterCancel, counter(), c0]);

    // The lost reply: the effect parked on a row lock the test holds, the client gone,
    // then the retry from a new client gets the first receipt.
    lock = await holdRow();
    const lostKey = `${T}-lost-1`;
    const lost = call(client, "bump", { by: 3 }, lostKey).catch((e) => e);
    check("lost_waits_on_lock", await waitForLockWait());
    const closing = client.close();
    await lost;
    await sleep(300);
    await lock.release();
    await closing;
    check("lost_effect_committed", await waitForCounter(counter, c0 + 5), [counter(), c0]);
    const again = await connect();
    const replay = await retry(again.client, "bump", { by: 3 }, lostKey);
    check("lost_reply_replayed", sc(replay).status === "replayed" && counter() === c0 + 5, [replay, counter(), c0]);
    check("lost_reply_first_receipt", JSON.stringify(sc(replay).receipt) === JSON.stringify(
        JSON.parse(sql(`SELECT convert_from(response, 'UTF8') FROM idem.operations WHERE tenant = 'acme' AND operation_id = '${lostKey}'`))), replay);
    await again.client.close();

    if (process.env.TRANSCRIPT)
        (await import("node:fs")).writeFileSync(process.env.TRANSCRIPT, JSON.stringify(transcript.slice(0, 6), null, 2));
}

main().catch((e) => { failed++; console.log(`FAIL ${mode}: ${e.stack || e}`); }).finally(() => {
    console.log(`${n - failed} of ${n} checks passed`);
    process.exit(failed === 0 ? 0 : 1);
});
