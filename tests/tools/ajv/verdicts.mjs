// verdicts.mjs CORPUS: ajv's verdict on each line of CORPUS ({"schema", "instance"}), one
// per line: "valid" or "invalid". JSON Schema 2020-12; an unknown keyword throws (strictSchema),
// while combinations that are valid JSON Schema but that ajv's strict mode frowns on (minLength
// without "type": "string", say) are allowed, as the standard allows them.
import { readFileSync } from "node:fs";
import Ajv2020 from "ajv/dist/2020.js";

const ajv = new Ajv2020({
  strictSchema: true,
  strictNumbers: true,
  strictTypes: false,
  strictTuples: false,
  strictRequired: false,
  allowUnionTypes: true,
});
const out = [];
for (const line of readFileSync(process.argv[2], "utf8").split("\n")) {
  if (line === "") continue;
  const { schema, instance } = JSON.parse(line);
  out.push(ajv.validate(schema, instance) ? "valid" : "invalid");
}
process.stdout.write(out.join("\n") + "\n");
