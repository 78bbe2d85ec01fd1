// An idem-gateway tool called through the OpenAI Agents SDK (@openai/agents): the
// function tool the SDK builds from an MCPServerStreamableHttp for its agents, invoked as
// the SDK's run loop invokes it, tool.invoke(runContext, argumentsJSON). One operation ID
// per approved action, sent in the tool's operation_id argument (the gateway's
// operation_id_argument) on every attempt, so that a retry after a lost answer or a
// restarted gateway replays the first result instead of acting twice.
//
//   IDEM_MCP_URL=http://127.0.0.1:8080/mcp IDEM_TOKEN=my-secret-token \
//   IDEM_TOOL=create_note IDEM_ARGUMENTS='{"text": "call the customer back"}' node example.mjs
//
// IDEM_OPERATION_ID resumes an action whose ID was stored before (without it, a new action
// gets a new UUID). Prints one JSON line per attempt; exits 0 once the action is done
// (created or replayed), 1 when the gateway refused it for good, 2 when the retry time
// (IDEM_RETRY_S, default 120 s) ran out.
import { randomUUID } from "node:crypto";
import { MCPServerStreamableHttp, RunContext, getAllMcpTools } from "@openai/agents";

const url = process.env.IDEM_MCP_URL ?? "http://127.0.0.1:8080/mcp";
const token = process.env.IDEM_TOKEN;
const toolName = process.env.IDEM_TOOL ?? "create_note";
const args = JSON.parse(process.env.IDEM_ARGUMENTS ?? '{"text": "call the customer back"}');
const retryUntil = Date.now() + 1000 * Number(process.env.IDEM_RETRY_S ?? 120);

// Allocated once, when the action is approved; store it with the action so that a
// restarted agent resumes with it.
const operationId = process.env.IDEM_OPERATION_ID ?? randomUUID();

// What to do with an answer: every text of the gateway begins with "[status] ".
const DONE = new Set(["created", "replayed"]);
const LATER = new Set(["in_progress", "unavailable"]);
const statusOf = (text) => /\[([a-z_]+)\] /.exec(text ?? "")?.[1] ?? null;
const retryAfter = (text) => Number(/Retry in (\d+) seconds/.exec(text ?? "")?.[1] ?? 1);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const say = (line) => console.log(JSON.stringify({ framework: "openai-agents", operation_id: operationId, ...line }));

let server = null;

// The tool's output as text: one content item, several, or a string.
const textOf = (output) =>
  typeof output === "string"
    ? output
    : [output].flat().map((c) => c.text ?? "").join("\n");

// One attempt through the SDK's own function tool. errorFunction: null makes a failed
// connection an exception (by default the SDK hands the model a message instead); it drops
// the server, and the next attempt connects again (the gateway keeps no session).
async function attempt(n) {
  try {
    if (server === null) {
      server = new MCPServerStreamableHttp({
        name: "idem",
        url,
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
        errorFunction: null,
      });
      await server.connect();
    }
    const runContext = new RunContext();
    const tools = await getAllMcpTools({ mcpServers: [server], runContext });
    const tool = tools.find((t) => t.name === toolName);
    const output = await tool.invoke(runContext, JSON.stringify({ ...args, operation_id: operationId }), {
      toolCall: { type: "function_call", callId: `call-${operationId}-${n}`, name: toolName },
    });
    const text = textOf(output);
    return { status: statusOf(text), text };
  } catch (error) {
    await server?.close().catch(() => {});
    server = null;
    return { status: null, error: String(error?.message ?? error) };
  }
}

async function main() {
  let backoff = 200;
  for (let n = 1; ; n++) {
    const got = await attempt(n);
    say({ attempt: n, ...got });
    if (DONE.has(got.status)) return 0;
    if (got.status !== null && !LATER.has(got.status)) return 1; // the text says what to do
    if (Date.now() >= retryUntil) return 2;
    // The same operation ID again: after the gateway's Retry-After, or a short backoff
    // while it cannot be reached.
    const wait = got.status !== null ? 1000 * retryAfter(got.text) : backoff;
    backoff = Math.min(2 * backoff, 2000);
    await sleep(wait);
  }
}

const code = await main();
await server?.close().catch(() => {});
process.exit(code);
