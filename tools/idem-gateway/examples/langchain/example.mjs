// An idem-gateway tool called through LangChain JS's MCP adapters
// (@langchain/mcp-adapters), as LangChain's agent loop calls it: the tool's
// invoke(toolCall). One operation ID per approved action, sent in the tool's operation_id
// argument (the gateway's operation_id_argument) on every attempt, so that a retry after a
// lost answer or a restarted gateway replays the first result instead of acting twice.
// The adapters turn an error result (isError) into a ToolException whose message carries
// the gateway's text, "[status] ..." and the next step: the status is read from it.
//
//   IDEM_MCP_URL=http://127.0.0.1:8080/mcp IDEM_TOKEN=my-secret-token \
//   IDEM_TOOL=create_note IDEM_ARGUMENTS='{"text": "call the customer back"}' node example.mjs
//
// IDEM_OPERATION_ID resumes an action whose ID was stored before (without it, a new action
// gets a new UUID). Prints one JSON line per attempt; exits 0 once the action is done
// (created or replayed), 1 when the gateway refused it for good, 2 when the retry time
// (IDEM_RETRY_S, default 120 s) ran out.
import { randomUUID } from "node:crypto";
import { MultiServerMCPClient } from "@langchain/mcp-adapters";

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
const say = (line) => console.log(JSON.stringify({ framework: "langchain", operation_id: operationId, ...line }));

let client = null;

// The gateway's text in the ToolMessage's content: a string, content blocks, or (a text
// with structuredContent) that block written as JSON.
function textOf(content) {
  if (typeof content !== "string") return [content].flat().map((c) => c.text ?? "").join("\n");
  try {
    const block = JSON.parse(content);
    return typeof block?.text === "string" ? block.text : content;
  } catch {
    return content;
  }
}

// One attempt through the adapters' own tool object; a failed connection drops the client,
// and the next attempt connects again (the gateway keeps no session).
async function attempt(n) {
  try {
    client ??= new MultiServerMCPClient({
      mcpServers: {
        idem: { transport: "http", url, headers: { Authorization: `Bearer ${token}` } },
      },
    });
    const tool = (await client.getTools()).find((t) => t.name === toolName);
    const message = await tool.invoke({
      type: "tool_call",
      id: `call-${operationId}-${n}`,
      name: toolName,
      args: { ...args, operation_id: operationId },
    });
    const text = textOf(message.content);
    const structured = message.artifact?.find((a) => a.type === "mcp_structured_content");
    return { status: structured?.data?.status ?? statusOf(text), text, result: structured?.data ?? null };
  } catch (error) {
    const text = String(error?.message ?? error);
    if (statusOf(text) !== null) return { status: statusOf(text), text, raised: true }; // isError
    await client?.close().catch(() => {});
    client = null;
    return { status: null, error: text };
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
await client?.close().catch(() => {});
process.exit(code);
