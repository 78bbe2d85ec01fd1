// Drives Debian's Chromium (headless, through playwright-core) against the gateway's
// reconciliation console: sign-in, the list and its filters, a key's page, resolving it with
// a note, an item whose operation ID and receipt hold markup, forms without their CSRF token,
// a tenant's token at the sign-in, sign-out. One line per check ("ok NAME" or "FAIL NAME:
// why"); exits 1 when one failed. A PNG per page in SHOTS.
//
// Environment: BASE (http://127.0.0.1:PORT), PREFIX (/console/), OPERATOR_TOKEN,
// TENANT_TOKEN, SHOTS (a directory), EXPIRED_OP (an acme item to resolve), CSRF_OP (an acme
// item the refused forms name), SCRIPT_OP (the item with markup), NOTE (the note to write).
import { chromium } from "playwright-core";

const env = (name) => {
  const v = process.env[name];
  if (v === undefined) throw new Error(`${name} is not set`);
  return v;
};
const base = env("BASE"), prefix = env("PREFIX"), shots = env("SHOTS");
const console_url = base + prefix;
let failures = 0;
const check = (name, ok, why) => {
  console.log(ok ? `ok ${name}` : `FAIL ${name}: ${why}`);
  if (!ok) failures++;
};

const dialogs = [], messages = [], errors = [];
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  // As root (the suite's containers) Chromium runs only without its sandbox.
  args: process.getuid && process.getuid() === 0 ? ["--no-sandbox"] : [],
});
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 720 } });
  // A loaded machine is slow, never wrong: waits for a page are long, none is a measure.
  context.setDefaultTimeout(90000);
  context.setDefaultNavigationTimeout(90000);
  const page = await context.newPage();
  page.on("dialog", async (d) => { dialogs.push(d.message()); await d.dismiss(); });
  // Every message but the refusals this script asks for on purpose (401, 400): a CSP
  // violation or a script that ran would be one.
  page.on("console", (m) => {
    if (!m.text().startsWith("Failed to load resource: the server responded with a status of 4"))
      messages.push(`${m.type()}: ${m.text()}`);
  });
  page.on("pageerror", (e) => errors.push(String(e)));
  const shot = (name) => page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
  const count = async () => (await page.textContent("#count")) ?? "";

  // Not signed in: the list sends the browser to the sign-in page.
  let res = await page.goto(console_url);
  check("unsigned_redirected", page.url() === console_url + "sign-in", page.url());
  const h = res.headers();
  check("csp", h["content-security-policy"] ===
        "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        h["content-security-policy"]);
  check("nosniff", h["x-content-type-options"] === "nosniff", h["x-content-type-options"]);
  check("no_store", h["cache-control"] === "no-store", h["cache-control"]);
  const styled = await page.evaluate(() => getComputedStyle(document.querySelector("header")).display);
  check("stylesheet_loads_under_csp", styled === "flex", styled);
  await shot("sign-in");

  // A tenant's token is no operator's.
  await page.fill("input[name=token]", env("TENANT_TOKEN"));
  res = await Promise.all([page.waitForNavigation(), page.click("button[type=submit]")]).then((r) => r[0]);
  check("tenant_token_refused", res.status() === 401, res.status());
  check("tenant_token_no_cookie", (await context.cookies()).length === 0,
        JSON.stringify(await context.cookies()));

  // The operator signs in: the list of open items.
  await page.fill("input[name=token]", env("OPERATOR_TOKEN"));
  await Promise.all([page.waitForNavigation(), page.click("button[type=submit]")]);
  check("signed_in_list", page.url() === console_url, page.url());
  check("operator_named", (await page.textContent("#operator")) === "alice",
        await page.textContent("#operator"));
  const [cookie] = await context.cookies();
  check("cookie_attributes", cookie && cookie.name === "idem_console" && cookie.httpOnly &&
        cookie.sameSite === "Strict" && cookie.path === prefix, JSON.stringify(cookie));
  check("list_counts_open", (await count()) === "6 items", await count());
  await shot("list");

  // Filters: a GET form; by tenant, kind, age.
  await page.fill("input[name=tenant]", "globex");
  await Promise.all([page.waitForNavigation(), page.click("form.filters button")]);
  check("filter_tenant", (await count()) === "1 item", await count());
  check("filter_in_url", page.url().includes("tenant=globex"), page.url());
  await page.fill("input[name=tenant]", "");
  await page.selectOption("select[name=kind]", "outcome_unknown");
  await Promise.all([page.waitForNavigation(), page.click("form.filters button")]);
  check("filter_kind", (await count()) === "2 items", await count());
  await page.selectOption("select[name=kind]", "");
  await page.fill("input[name=age]", "24h");
  await Promise.all([page.waitForNavigation(), page.click("form.filters button")]);
  check("filter_age", (await count()) === "5 items", await count());
  await shot("list-filtered");
  await page.fill("input[name=age]", "yesterday");
  res = await Promise.all([page.waitForNavigation(), page.click("form.filters button")]).then((r) => r[0]);
  check("filter_age_refused", res.status() === 400 &&
        (await page.textContent("#error")).includes("not an age"), res.status());

  // The item whose operation ID, tool and receipt hold markup: shown as text, never run.
  await page.goto(console_url);
  await Promise.all([page.waitForNavigation(),
                     page.click(`#items a:text-is(${JSON.stringify(env("SCRIPT_OP"))})`)]);
  check("script_item_opened", page.url().includes("item?tenant=acme"), page.url());
  check("script_op_as_text", (await page.textContent("#operation-id")) === env("SCRIPT_OP"),
        await page.textContent("#operation-id"));
  const body = await page.textContent("body");
  check("script_receipt_as_text", body.includes("<script>alert('receipt')</script>"), body.slice(0, 300));
  check("script_tool_as_text", body.includes("<img src=x onerror=alert(2)>"), body.slice(0, 300));
  const elements = await page.evaluate(() => document.querySelectorAll("script, img").length);
  check("script_no_elements", elements === 0, elements);
  await shot("item-markup");

  // A key's page, then resolving it with a note.
  await page.goto(console_url);
  await Promise.all([page.waitForNavigation(),
                     page.click(`#items a:text-is(${JSON.stringify(env("EXPIRED_OP"))})`)]);
  // A late retry of a key never seen (a UUIDv7 from long ago): no record, one item.
  check("item_no_record", (await page.textContent("#record")).endsWith("none"),
        await page.textContent("#record"));
  const items_text = await page.textContent("#items");
  check("item_items_shown", items_text.includes("expired") && items_text.includes("create_note"),
        items_text);
  await shot("item");
  await page.fill("textarea[name=note]", env("NOTE"));
  res = await Promise.all([page.waitForNavigation(), page.click("form.resolve button")]).then((r) => r[0]);
  check("resolved_ok", res.status() === 200, res.status());
  check("resolved_notice", (await page.textContent("#notice")) === "Resolved 1 item.",
        await page.textContent("#notice"));
  check("resolved_by_shown", (await page.textContent("#items")).includes("alice"),
        await page.textContent("#items"));
  check("resolved_form_gone", (await page.$("form.resolve")) === null, "the form is still there");
  await shot("resolved");

  // An external operation: downstream key, attempts and the resolver's answer; resolved
  // with an outcome, its reference and a note.
  await page.goto(console_url);
  await Promise.all([page.waitForNavigation(),
                     page.click(`#items a:text-is(${JSON.stringify(env("EXTERNAL_OP"))})`)]);
  const external = await page.textContent("#external");
  check("external_downstream_key", external.includes("downstream_key"), external);
  check("external_attempts", external.includes("attempts") && external.includes("unknown"), external);
  check("external_resolver_answer", external.includes("HTTP 500"), external);
  await shot("external");
  await page.fill("textarea[name=note]", "Found at the provider: sent.");
  await page.selectOption("select[name=as]", "completed");
  await page.fill("input[name=reference]", "msg-123");
  res = await Promise.all([page.waitForNavigation(), page.click("form.resolve button")]).then((r) => r[0]);
  check("external_resolved", res.status() === 200 &&
        (await page.textContent("#notice")) === "Resolved the operation as completed.",
        `${res.status()} ${await page.textContent("main")}`);
  check("external_record_completed", (await page.textContent("#record")).includes("completed"),
        await page.textContent("#record"));
  await shot("external-resolved");

  // Forms posted without the session's CSRF token, or with a wrong one: 403, nothing changed.
  const form = { tenant: "acme", operation_id: env("CSRF_OP"), note: "forged" };
  res = await page.request.post(console_url + "resolve", { form, maxRedirects: 0 });
  check("no_csrf_refused", res.status() === 403, res.status());
  check("no_csrf_headers", res.headers()["content-security-policy"]?.startsWith("default-src 'none'"),
        JSON.stringify(res.headers()));
  res = await page.request.post(console_url + "resolve",
                                { form: { ...form, csrf: "0".repeat(64) }, maxRedirects: 0 });
  check("wrong_csrf_refused", res.status() === 403, res.status());
  res = await page.request.post(console_url + "sign-out", { form: {}, maxRedirects: 0 });
  check("sign_out_without_csrf_refused", res.status() === 403, res.status());
  // With the token but no note: refused, as the form's required attribute says.
  const csrf = await page.getAttribute("header input[name=csrf]", "value");
  res = await page.request.post(console_url + "resolve",
                                { form: { ...form, csrf, note: "  " }, maxRedirects: 0 });
  check("empty_note_refused", res.status() === 400, res.status());

  // Sign-out ends the session in the browser.
  await Promise.all([page.waitForNavigation(), page.click("header button")]);
  check("signed_out", page.url() === console_url + "sign-in", page.url());
  check("signed_out_cookie_gone", (await context.cookies()).length === 0,
        JSON.stringify(await context.cookies()));
  await page.goto(console_url);
  check("signed_out_list_closed", page.url() === console_url + "sign-in", page.url());

  check("no_dialog", dialogs.length === 0, JSON.stringify(dialogs));
  check("no_console_message", messages.length === 0, JSON.stringify(messages));
  check("no_page_error", errors.length === 0, JSON.stringify(errors));
} catch (e) {
  check("browser_run", false, e.stack);
} finally {
  await browser.close();
}
process.exit(failures === 0 ? 0 : 1);
