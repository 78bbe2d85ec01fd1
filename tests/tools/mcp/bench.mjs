// Calls per second of one tool through MCP and through the HTTP API, in the same run:
//   node bench.mjs PORT TOKEN CALLS
// Each call is a new operation (created: the effect and its record committed), made over
// the same client stack (fetch, keep-alive) one at a time and 8 at a time, the paths taking
// turns in rounds; MCP also through the SDK's client. Measured and printed, never asserted: the machine may be loaded.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [port, token, callsArg] = process.argv.slice(2);
const calls = Number(callsArg);
const base = `http://127.0.0.1:${port}`;
const run = `${Date.now()}`;
const auth = { Authorization: `Bearer ${token}` };

async function httpCall(key) {
    const res = await fetch(`${base}/v1/tools/create_note`, { method: "POST",
        headers: { ...auth, "Idempotency-Key": key, "Content-Type": "application/json" },
        body: JSON.stringify({ text: "bench" }) });
    await res.text();
    if (res.status !== 201) throw new Error(`HTTP ${res.status}`);
}
async function mcpCall(key) {
    const res = await fetch(`${base}/mcp`, { method: "POST",
        headers: { ...auth, "Content-Type": "application/json", Accept: "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: {
            name: "create_note", arguments: { text: "bench" }, _meta: { "idem/operation_id": key } } }) });
    const reply = await res.json();
    if (reply.result?.structuredContent?.status !== "created") throw new Error(JSON.stringify(reply));
}

// Rounds that take turns, so that a load that comes and goes weighs on every path alike.
const ROUNDS = 3;
const totals = {};
async function measure(name, one, parallel, round) {
    const share = Math.ceil(calls / ROUNDS);
    let next = 0;
    const start = process.hrtime.bigint();
    await Promise.all(Array.from({ length: parallel }, async () => {
        while (next < share) await one(`bench-${run}-${name}-${parallel}-${round}-${next++}`);
    }));
    const key = `${name} x${parallel}`;
    totals[key] = totals[key] || { calls: 0, s: 0 };
    totals[key].calls += share;
    totals[key].s += Number(process.hrtime.bigint() - start) / 1e9;
}

const client = new Client({ name: "bench", version: "1" });
await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: auth } }));
const sdkCall = async (key) => {
    const r = await client.callTool({ name: "create_note", arguments: { text: "bench" }, _meta: { "idem/operation_id": key } });
    if (r.structuredContent?.status !== "created") throw new Error(JSON.stringify(r));
};
// Warm up both paths first: the pool's connections are opened on first use.
for (let i = 0; i < 20; i++) {
    await httpCall(`bench-${run}-warm-http-${i}`);
    await mcpCall(`bench-${run}-warm-mcp-${i}`);
}
const paths = [["http_api", httpCall], ["mcp_fetch", mcpCall], ["mcp_sdk", sdkCall]];
for (const parallel of [1, 8]) {
    for (let round = 0; round < ROUNDS; round++) {
        for (const [name, one] of paths) await measure(name, one, parallel, round);
    }
}
for (const [key, t] of Object.entries(totals))
    console.log(`bench ${key}: ${t.calls} calls in ${t.s.toFixed(2)} s: ${(t.calls / t.s).toFixed(0)} calls/s`);
await client.close();
