// check.mjs URL TOKEN CONFIG ANSWERS: the gateway at URL, as the tenant of TOKEN, serving
// the configuration file CONFIG; ANSWERS is its answer table (gateway-answers). Checks that
// GET /v1/openapi.json is a valid OpenAPI 3.1 document (@seriousme/openapi-schema-validator,
// and a broken copy of it is not), whose every $ref resolves; that each configured tool has
// its call path with the configured argument schema as its request body (a schema ajv
// compiles as JSON Schema 2020-12), the Idempotency-Key header as its contract requires it,
// and a response for every status of the answer table and of the answers before a call,
// each problem type named; that each tool's contract is the same in the document, in GET
// /v1/tools and in MCP's tools/list _meta["dev.idem/contract"], holds the configured windows,
// the store's identity policy and the tool's operation ID argument, and validates against
// the document's own schemas; and that live answers carry the problem types the document
// names. Prints what it checked; exits 1 at the first failure.
import { Validator } from "@seriousme/openapi-schema-validator";
import Ajv2020 from "ajv/dist/2020.js";
import { readFileSync } from "node:fs";
import { isDeepStrictEqual } from "node:util";

const [url, token, configPath, answersPath] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const answers = JSON.parse(readFileSync(answersPath, "utf8"));
const auth = { Authorization: `Bearer ${token}` };
const PROBLEM = "urn:idem:problem:";
const RETENTION_DEFAULT = 604800, KEY_MEMORY_DEFAULT = 2592000;
let checks = 0;

function check(ok, what, detail) {
    checks++;
    if (!ok) {
        console.error(`FAIL: ${what}${detail !== undefined ? ": " + JSON.stringify(detail) : ""}`);
        process.exit(1);
    }
}

async function get(path) {
    const r = await fetch(url + path, { headers: auth });
    check(r.status === 200, `GET ${path} answers 200`, r.status);
    return r.json();
}

async function call(tool, key, body) {
    const headers = { ...auth, "Content-Type": "application/json" };
    if (key !== null) headers["Idempotency-Key"] = key;
    const r = await fetch(`${url}/v1/tools/${tool}`, { method: "POST", headers, body });
    return { status: r.status, type: r.headers.get("content-type"), body: await r.json() };
}

const doc = await get("/v1/openapi.json");
const list = await get("/v1/tools");
const mcp = await fetch(url + "/mcp", {
    method: "POST",
    headers: { ...auth, "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
}).then((r) => r.json());
const mcpTools = mcp.result.tools;

// The document against OpenAPI 3.1's own schema; a broken copy must be refused, so that a
// validator that accepts everything fails this test.
const validator = new Validator();
const verdict = await validator.validate(doc);
check(verdict.valid, "the document is valid OpenAPI", verdict.errors);
check(validator.version === "3.1", "the document is OpenAPI 3.1", validator.version);
// resolveRefs() works on the specification its validator last read, in place: a copy's.
const resolver = new Validator();
await resolver.validate(structuredClone(doc));
const resolved = resolver.resolveRefs();
check(JSON.stringify(resolved).indexOf('"$ref"') < 0, "every $ref resolves");
const broken = structuredClone(doc);
Object.values(Object.values(broken.paths)[0])[0].parameters[0].in = "body"; // OpenAPI 2's
check(!(await new Validator().validate(broken)).valid, "a parameter in the body (OpenAPI 2) is refused");
const noInfo = structuredClone(doc);
delete noInfo.info;
check(!(await new Validator().validate(noInfo)).valid, "a document without info is refused");

// The document's own schemas, for the tool list and each contract.
const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addSchema(doc, "openapi");
const schema = (name) => ajv.getSchema(`openapi#/components/schemas/${name}`);
check(schema("ToolList")(list), "GET /v1/tools matches the ToolList schema", schema("ToolList").errors);

const names = Object.keys(config.tools).sort();
check(isDeepStrictEqual(list.tools.map((t) => t.name).sort(), names), "/v1/tools lists the configured tools");
check(isDeepStrictEqual(mcpTools.map((t) => t.name).sort(), names), "tools/list lists the configured tools");

// The upstream statuses an http tool stores as its refusal (README.md, "HTTP tools").
function finalStatuses(http) {
    const finals = new Set();
    for (let s = 300; s < 500; s++) if (![408, 409, 429].includes(s)) finals.add(s);
    for (const [code, cls] of Object.entries(http.statuses ?? {}))
        cls === "final" ? finals.add(Number(code)) : finals.delete(Number(code));
    return [...finals].sort((a, b) => a - b);
}

// The problem types a response names: its problem document is the Problem schema with the
// type narrowed to them.
function problemTypes(r) {
    const schema = r?.content?.["application/problem+json"]?.schema;
    const problem = schema?.allOf?.some((s) => s.$ref === "#/components/schemas/Problem");
    return problem ? schema.allOf.flatMap((s) => s.properties?.type?.enum ?? []) : [];
}

// The answers before a call, as the manual's table lists them.
const early = [
    [401, "unauthorized", "WWW-Authenticate"], [404, "unknown-tool"], [405, "method-not-allowed", "Allow"],
    [415, "unsupported-media-type"], [413, "body-too-large"], [400, "invalid-framing", "Connection"],
    [501, "transfer-encoding-not-implemented", "Connection"], [400, "invalid-request-line", "Connection"],
];

function checkResponses(name, tool, responses) {
    for (const row of answers) {
        if (row.http === 0 || (row.status === "rejected" && tool.http)) continue;
        const r = responses[String(row.http)];
        check(r !== undefined, `${name}: a response for ${row.name} (${row.http})`);
        if (row.problem !== null) {
            const types = problemTypes(r);
            check(types.includes(PROBLEM + row.problem), `${name}: ${row.http} names ${row.problem}`, types);
        } else {
            check(r.content["application/json"] !== undefined, `${name}: ${row.http} carries the receipt`);
        }
        if (row.replayed) check(r.headers["Idempotent-Replayed"] !== undefined, `${name}: ${row.name}: Idempotent-Replayed`);
    }
    for (const [code, r] of Object.entries(responses)) {
        if (!/^[0-9]+$/.test(code)) continue;
        const retry = answers.some((row) => String(row.http) === code && row.retry_after);
        check((r.headers["Retry-After"] !== undefined) === retry, `${name}: ${code}: Retry-After ${retry ? "" : "not "}listed`);
    }
    for (const [code, type, header] of early) {
        const r = responses[String(code)];
        check(problemTypes(r).includes(PROBLEM + type),
            `${name}: ${code} names ${type}`);
        if (header) check(r.headers[header] !== undefined, `${name}: ${code} lists ${header}`);
    }
    const upstream = Object.values(responses).flatMap((r) => r["x-idem-upstream-statuses"] ?? []).sort((a, b) => a - b);
    check(isDeepStrictEqual(upstream, tool.http ? finalStatuses(tool.http) : []),
        `${name}: the stored refusals listed are the upstream statuses classed final`, upstream);
}

for (const name of names) {
    const tool = config.tools[name];
    const op = doc.paths[`/v1/tools/${name}`]?.post;
    check(op !== undefined, `${name}: POST /v1/tools/${name} is in the document`);
    const bodySchema = op.requestBody.content["application/json"].schema;
    check(op.requestBody.required === true, `${name}: the request body is required`);
    check(isDeepStrictEqual(bodySchema, tool.arguments), `${name}: the request body's schema is the configured one`, bodySchema);
    check(typeof new Ajv2020({ strict: false }).compile(bodySchema) === "function", `${name}: the request schema compiles`);

    const contract = op["x-idem-contract"];
    const listed = list.tools.find((t) => t.name === name);
    const meta = mcpTools.find((t) => t.name === name)._meta?.["dev.idem/contract"];
    check(isDeepStrictEqual(contract, listed.contract), `${name}: the document's contract is /v1/tools's`, [contract, listed.contract]);
    check(isDeepStrictEqual(contract, meta), `${name}: the document's contract is tools/list's _meta`, [contract, meta]);
    check(schema("Contract")(contract), `${name}: the contract matches the Contract schema`, schema("Contract").errors);

    const retention = tool.retention_s ?? RETENTION_DEFAULT;
    const keyMemory = tool.key_memory_s ?? Math.max(KEY_MEMORY_DEFAULT, retention);
    check(contract.retention.seconds === retention && listed.retention_s === retention,
        `${name}: retention ${retention} s`, [contract.retention, listed.retention_s]);
    check(contract.key_memory.seconds === keyMemory && listed.key_memory_s === keyMemory,
        `${name}: key memory ${keyMemory} s`, [contract.key_memory, listed.key_memory_s]);
    check(isDeepStrictEqual(contract.identity, listed.identity), `${name}: the identity is the store's policy`, [contract.identity, listed.identity]);
    const wanted = tool.identity ? { mode: Object.keys(tool.identity)[0], fields: Object.values(tool.identity)[0] } : { mode: "all" };
    check(isDeepStrictEqual(contract.identity, wanted), `${name}: the identity is the configured one`, contract.identity);
    const argument = contract.key.mcp.find((s) => s.argument !== undefined)?.argument;
    check(argument === tool.operation_id_argument, `${name}: the operation ID argument`, contract.key.mcp);
    check(isDeepStrictEqual(contract.key.http, [{ header: "Idempotency-Key" }]), `${name}: the key's header`, contract.key.http);

    const key = op.parameters.find((p) => p.in === "header" && p.name === "Idempotency-Key");
    check(key !== undefined && key.required === (contract.key.requirement === "required"),
        `${name}: Idempotency-Key is required as the contract says`, [key, contract.key.requirement]);
    checkResponses(name, tool, op.responses);
}

for (const [path, method, open] of [["/v1/tools", "get", false], ["/v1/openapi.json", "get", false],
    ["/mcp", "post", false], ["/healthz", "get", true], ["/readyz", "get", true], ["/metrics", "get", true]]) {
    const op = doc.paths[path]?.[method];
    check(op !== undefined, `${method.toUpperCase()} ${path} is in the document`);
    check(isDeepStrictEqual(op.security, open ? [] : undefined), `${path}: ${open ? "no token" : "the token"}`, op.security);
}

// Live answers of the first sql tool carry what its responses say.
const sqlTool = names.find((n) => config.tools[n].sql && !config.tools[n].operation_id_argument);
const responses = doc.paths[`/v1/tools/${sqlTool}`].post.responses;
const live = [[null, "{}", "idempotency-key-missing"], [`contract-${Date.now()}`, "[]", "invalid-arguments"]];
for (const [key, body, type] of live) {
    const r = await call(sqlTool, key, body);
    check(r.body.type === PROBLEM + type && r.type === "application/problem+json", `${sqlTool}: a live ${type}`, r);
    check(problemTypes(responses[String(r.status)]).includes(r.body.type),
        `${sqlTool}: the live ${r.status} ${type} is listed`);
}

const paths = Object.keys(doc.paths).length;
const codes = names.map((n) => Object.keys(doc.paths[`/v1/tools/${n}`].post.responses).length);
console.log(`openapi ${doc.openapi}: ${paths} paths, ${names.length} tools (responses per call path: ${codes.join(", ")}), ` +
    `${JSON.stringify(doc).length} bytes; ${checks} checks passed`);
