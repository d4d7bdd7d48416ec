// Validates Kubernetes objects against the official schemas, with no unknown field anywhere.
//
//   node tests/manifests/validate_k8s.mjs [--crd FILE]... [FILE|-]...
//
// Reads YAML or JSON (several documents, `List` kinds expanded; `-` or no file: stdin) and checks
// every object:
// - built-in kinds and the Prometheus Operator's against the npm packages `kubernetes-models` and
//   `@kubernetes-models/prometheus-operator` (pinned in tests/oracle/npm);
// - kinds defined by a CustomResourceDefinition (given with --crd, or among the inputs) against
//   that CRD's openAPIV3Schema as the API server would: structural (unknown fields are errors,
//   where the API server would prune them), defaults applied, then its CEL rules
//   (x-kubernetes-validations) evaluated with `@marcbachmann/cel-js`.
// The packages' validators do not reject unknown fields, so each object is validated through a
// Proxy that records which keys the validator reads: a key it never read in an object whose
// other keys it did read is a field the schema does not know.
// Prints one line per object (`ok KIND NAMESPACE/NAME` or `error KIND NAMESPACE/NAME: PATH:
// MESSAGE`) and a summary; exits 1 when any object is invalid, 2 on unusable input.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const modulesDir =
  process.env.NIBBLE_NPM_MODULES || join(here, "..", "oracle", "npm", "node_modules");
const load = (path) => import(pathToFileURL(join(modulesDir, path)).href);

const YAML = await load("yaml/dist/index.js");
const { default: Ajv } = await load("ajv/dist/ajv.js");
const cel = await load("@marcbachmann/cel-js/lib/index.js");

// ---- reading -------------------------------------------------------------------------------

export function parseObjects(text, source) {
  const objects = [];
  for (const doc of YAML.parseAllDocuments(text)) {
    if (doc.errors.length) throw new Error(`${source}: ${doc.errors[0].message}`);
    const value = doc.toJS();
    if (value === null || value === undefined) continue;
    if (typeof value !== "object" || Array.isArray(value))
      throw new Error(`${source}: a document is not an object`);
    if (typeof value.kind === "string" && value.kind.endsWith("List") && Array.isArray(value.items))
      objects.push(...value.items);
    else objects.push(value);
  }
  return objects;
}

// ---- built-in and Prometheus Operator kinds --------------------------------------------------

function modulePath(apiVersion, kind) {
  const slash = apiVersion.indexOf("/");
  if (slash < 0) return `kubernetes-models/${apiVersion}/${kind}.js`;
  const group = apiVersion.slice(0, slash);
  const version = apiVersion.slice(slash + 1);
  if (group === "monitoring.coreos.com")
    return `@kubernetes-models/prometheus-operator/${group}/${version}/${kind}.js`;
  return `kubernetes-models/${group}/${version}/${kind}.js`;
}

const modelCache = new Map();
async function modelFor(apiVersion, kind) {
  const path = modulePath(apiVersion, kind);
  if (!modelCache.has(path)) {
    modelCache.set(
      path,
      load(path).then(
        (m) => m[kind],
        () => undefined,
      ),
    );
  }
  return modelCache.get(path);
}

// Wraps `value` so that every key read on it (and below it) is recorded in `reads`.
function tracked(value, reads) {
  if (value === null || typeof value !== "object") return value;
  return new Proxy(value, {
    get(target, key, receiver) {
      if (typeof key === "string") {
        if (!reads.has(target)) reads.set(target, new Set());
        reads.get(target).add(key);
      }
      return tracked(Reflect.get(target, key, receiver), reads);
    },
  });
}

// kubernetes-models' generator drops the properties named `description` and `x-kubernetes-*`
// from its validators (they are declared in its typings); checkSchemaExtensions covers them.
const droppedByGenerator = (key) => key === "description" || key.startsWith("x-kubernetes-");

// Keys of objects the validator looked into but never read: fields the schema does not have.
function unknownFields(value, reads, path, out) {
  if (value === null || typeof value !== "object") return out;
  if (Array.isArray(value)) {
    value.forEach((v, i) => unknownFields(v, reads, `${path}/${i}`, out));
    return out;
  }
  const read = reads.get(value);
  for (const [key, child] of Object.entries(value)) {
    if (read && !read.has(key) && !droppedByGenerator(key)) out.push(`${path}/${key}: unknown field`);
    else unknownFields(child, reads, `${path}/${key}`, out);
  }
  return out;
}

const ruleKeys = new Set(["rule", "message", "messageExpression", "reason", "fieldPath", "optionalOldSelf"]);
const ruleReasons = ["FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate"];

// The CRD fields the generated validators skip, checked as apiextensions.k8s.io/v1 defines them.
function checkSchemaExtensions(node, path, out) {
  if (node === null || typeof node !== "object") return out;
  if (Array.isArray(node)) {
    node.forEach((v, i) => checkSchemaExtensions(v, `${path}/${i}`, out));
    return out;
  }
  for (const [key, v] of Object.entries(node)) {
    const at = `${path}/${key}`;
    if (key === "description" && typeof v !== "string") out.push(`${at}: must be a string`);
    else if (key === "x-kubernetes-validations") {
      if (!Array.isArray(v)) out.push(`${at}: must be a list`);
      else
        v.forEach((r, i) => {
          if (typeof r?.rule !== "string" || r.rule === "") out.push(`${at}/${i}/rule: is required`);
          for (const k of Object.keys(r || {})) if (!ruleKeys.has(k)) out.push(`${at}/${i}/${k}: unknown field`);
          if (r?.reason !== undefined && !ruleReasons.includes(r.reason))
            out.push(`${at}/${i}/reason: must be one of ${ruleReasons.join(", ")}`);
        });
    } else if (key === "x-kubernetes-list-type" && !["atomic", "set", "map"].includes(v))
      out.push(`${at}: must be atomic, set or map`);
    else if (key === "x-kubernetes-map-type" && !["atomic", "granular"].includes(v))
      out.push(`${at}: must be atomic or granular`);
    else if (key === "x-kubernetes-list-map-keys" && !(Array.isArray(v) && v.every((k) => typeof k === "string")))
      out.push(`${at}: must be a list of strings`);
    else if (
      ["x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string"].includes(key) &&
      typeof v !== "boolean"
    )
      out.push(`${at}: must be true or false`);
    else if (key.startsWith("x-kubernetes-") && ![
      "x-kubernetes-validations", "x-kubernetes-list-type", "x-kubernetes-map-type", "x-kubernetes-list-map-keys",
      "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string"].includes(key))
      out.push(`${at}: unknown field`);
    else checkSchemaExtensions(v, at, out);
  }
  return out;
}

async function validateBuiltin(obj) {
  const Model = await modelFor(obj.apiVersion, obj.kind);
  if (!Model) return [`no schema for ${obj.apiVersion} ${obj.kind} (unknown kind or apiVersion)`];
  const reads = new Map();
  const errors = [];
  try {
    Model.prototype.validate.call(tracked(obj, reads));
  } catch (e) {
    for (const d of e.errors || [{ instancePath: "", message: e.message }])
      errors.push(`${d.instancePath || "/"}: ${d.message}`);
  }
  unknownFields(obj, reads, "", errors);
  if (obj.kind === "CustomResourceDefinition") checkSchemaExtensions(obj.spec, "/spec", errors);
  return errors;
}

// ---- custom resources ----------------------------------------------------------------------

const ajv = new Ajv({ strict: false, allErrors: true });
ajv.addFormat("int32", { type: "number", validate: (n) => Number.isInteger(n) && Math.abs(n) < 2 ** 31 });
ajv.addFormat("int64", { type: "number", validate: Number.isInteger });
ajv.addFormat("date-time", (s) => !Number.isNaN(Date.parse(s)));

// The API server prunes fields a structural schema does not declare; here they are errors.
// metadata is checked by the ObjectMeta schema instead.
function structural(schema, atRoot) {
  if (!schema || typeof schema !== "object") return schema;
  const out = { ...schema };
  if (out.properties) {
    out.properties = Object.fromEntries(
      Object.entries(out.properties).map(([k, v]) => [
        k,
        atRoot && k === "metadata" ? {} : structural(v, false),
      ]),
    );
    if (out.additionalProperties === undefined && !out["x-kubernetes-preserve-unknown-fields"])
      out.additionalProperties = false;
  }
  if (out.items) out.items = structural(out.items, false);
  if (typeof out.additionalProperties === "object")
    out.additionalProperties = structural(out.additionalProperties, false);
  return out;
}

// Defaults as the API server applies them: for each absent property with a default, inside
// objects that are present.
export function applyDefaults(value, schema) {
  if (!schema || value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) {
    value.forEach((v) => applyDefaults(v, schema.items));
    return value;
  }
  for (const [key, sub] of Object.entries(schema.properties || {})) {
    if (value[key] === undefined && sub.default !== undefined)
      value[key] = structuredClone(sub.default);
    applyDefaults(value[key], sub);
  }
  return value;
}

// CEL sees integers as int (BigInt in cel-js) and `number` fields as double.
function celValue(value, schema) {
  if (value === null || value === undefined) return value;
  if (schema?.type === "integer" && typeof value === "number") return BigInt(value);
  if (Array.isArray(value)) return value.map((v) => celValue(v, schema?.items));
  if (typeof value === "object") {
    const out = {};
    for (const [k, v] of Object.entries(value))
      out[k] = celValue(v, schema?.properties?.[k] ?? schema?.additionalProperties);
    return out;
  }
  return value;
}

// Every CEL rule of the schema with where it applies: [{path, rule, message, schema}].
export function celRules(schema, path = "") {
  const rules = [];
  for (const r of schema["x-kubernetes-validations"] || [])
    rules.push({ path, rule: r.rule, message: r.message || `failed rule: ${r.rule}`, schema });
  for (const [k, sub] of Object.entries(schema.properties || {}))
    rules.push(...celRules(sub, `${path}/${k}`));
  if (schema.items) rules.push(...celRules(schema.items, `${path}/*`));
  return rules;
}

function valuesAt(value, path) {
  let values = [value];
  for (const part of path.split("/").slice(1)) {
    const next = [];
    for (const v of values) {
      if (v === null || typeof v !== "object") continue;
      if (part === "*" && Array.isArray(v)) next.push(...v);
      else if (v[part] !== undefined) next.push(v[part]);
    }
    values = next;
  }
  return values;
}

export function evaluateCel(obj, schema) {
  const errors = [];
  for (const r of celRules(schema)) {
    for (const self of valuesAt(obj, r.path)) {
      let ok;
      try {
        ok = cel.evaluate(r.rule, { self: celValue(self, r.schema) });
      } catch (e) {
        errors.push(`${r.path || "/"}: rule ${r.rule} could not be evaluated: ${e.message}`);
        continue;
      }
      if (ok !== true) errors.push(`${r.path || "/"}: ${r.message}`);
    }
  }
  return errors;
}

// The offending name or the allowed values, where ajv's message does not say them.
function detail(params) {
  if (params?.additionalProperty) return ` ('${params.additionalProperty}')`;
  if (params?.allowedValues) return ` (${params.allowedValues.map((v) => JSON.stringify(v)).join(", ")})`;
  return "";
}

export class CustomKinds {
  constructor() {
    this.kinds = new Map();  // "group/version Kind" -> {schema, validate}
  }
  add(crd) {
    for (const v of crd.spec?.versions || []) {
      const schema = v.schema?.openAPIV3Schema;
      if (!schema) continue;
      this.kinds.set(`${crd.spec.group}/${v.name} ${crd.spec.names.kind}`, {
        schema,
        validate: ajv.compile(structural(schema, true)),
      });
    }
  }
  get(obj) {
    return this.kinds.get(`${obj.apiVersion} ${obj.kind}`);
  }
  async validate(obj, kind) {
    const errors = [];
    if (!kind.validate(obj))
      for (const e of kind.validate.errors)
        errors.push(`${e.instancePath || "/"}: ${e.message}${detail(e.params)}`);
    const meta = await validateBuiltin({ apiVersion: "v1", kind: "ConfigMap", metadata: obj.metadata });
    errors.push(...meta);
    if (errors.length) return errors;
    return evaluateCel(applyDefaults(structuredClone(obj), kind.schema), kind.schema);
  }
}

export async function validateObject(obj, custom) {
  if (!obj || typeof obj.apiVersion !== "string" || typeof obj.kind !== "string")
    return ["/: apiVersion and kind are required"];
  if (typeof obj.metadata?.name !== "string" || obj.metadata.name === "")
    return ["/metadata/name: is required"];
  const kind = custom.get(obj);
  return kind ? custom.validate(obj, kind) : validateBuiltin(obj);
}

export function describe(obj) {
  const ns = obj?.metadata?.namespace ? `${obj.metadata.namespace}/` : "";
  return `${obj?.kind} ${ns}${obj?.metadata?.name}`;
}

// ---- command line --------------------------------------------------------------------------

async function main(argv) {
  const custom = new CustomKinds();
  const inputs = [];
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i] === "--crd") {
      const file = argv[++i];
      for (const o of parseObjects(readFileSync(file, "utf8"), file))
        if (o.kind === "CustomResourceDefinition") custom.add(o);
    } else {
      inputs.push(argv[i]);
    }
  }
  if (inputs.length === 0) inputs.push("-");
  const objects = [];
  for (const file of inputs) {
    const text = file === "-" ? readFileSync(0, "utf8") : readFileSync(file, "utf8");
    for (const o of parseObjects(text, file === "-" ? "stdin" : file)) objects.push(o);
  }
  for (const o of objects) if (o.kind === "CustomResourceDefinition") custom.add(o);
  let invalid = 0;
  for (const o of objects) {
    const errors = await validateObject(o, custom);
    if (errors.length === 0) {
      console.log(`ok ${describe(o)}`);
    } else {
      ++invalid;
      for (const e of errors) console.log(`error ${describe(o)}: ${e}`);
    }
  }
  console.log(`${objects.length - invalid} valid, ${invalid} invalid`);
  return invalid === 0 ? 0 : 1;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  try {
    process.exitCode = await main(process.argv.slice(2));
  } catch (e) {
    console.log(`error: ${e.message}`);
    process.exitCode = 2;
  }
}
