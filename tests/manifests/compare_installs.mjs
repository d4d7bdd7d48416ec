// Checks that two renderings of the install hold the same objects with the same content:
//
//   node tests/manifests/compare_installs.mjs KUSTOMIZE_OUTPUT HELM_OUTPUT
//
// Objects are matched by kind, namespace and name. Before comparing, the labels only Helm adds
// (helm.sh/chart, app.kubernetes.io/managed-by, app.kubernetes.io/instance) are removed from
// both sides wherever they appear (metadata, pod templates, selectors). The kustomize tree's
// Namespace is the one object Helm leaves out (`helm install --create-namespace` makes it).
// Prints every missing object and every differing field; exits 1 on any difference.
import { readFileSync } from "node:fs";
import { isDeepStrictEqual } from "node:util";
import { describe, parseObjects } from "./validate_k8s.mjs";

const helmOnlyLabels = ["helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance"];

function normalise(value) {
  if (Array.isArray(value)) return value.map(normalise);
  if (value === null || typeof value !== "object") return value;
  const out = {};
  for (const [k, v] of Object.entries(value)) if (!helmOnlyLabels.includes(k)) out[k] = normalise(v);
  return out;
}

function differences(a, b, path, out) {
  if (isDeepStrictEqual(a, b)) return out;
  const objects = (v) => v !== null && typeof v === "object";
  if (!objects(a) || !objects(b) || Array.isArray(a) !== Array.isArray(b)) {
    out.push(`${path || "/"}: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
    return out;
  }
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)]))
    differences(a[k], b[k], `${path}/${k}`, out);
  return out;
}

const [kustomizeFile, helmFile] = process.argv.slice(2);
if (!helmFile) {
  console.log("usage: compare_installs.mjs KUSTOMIZE_OUTPUT HELM_OUTPUT");
  process.exit(2);
}
// Helm hooks (the `helm test` pod) are not installed objects: kustomize has no counterpart.
const isHook = (o) => Boolean(o.metadata?.annotations?.["helm.sh/hook"]);
const index = (file) =>
  new Map(
    parseObjects(readFileSync(file, "utf8"), file)
      .filter((o) => !isHook(o))
      .map((o) => [describe(o), normalise(o)]),
  );
const kustomize = index(kustomizeFile);
const helm = index(helmFile);

let problems = 0;
for (const [key, obj] of kustomize) {
  if (obj.kind === "Namespace") continue;
  if (!helm.has(key)) {
    ++problems;
    console.log(`only in kustomize: ${key}`);
    continue;
  }
  const diff = differences(obj, helm.get(key), "", []);
  problems += diff.length;
  for (const d of diff) console.log(`differs ${key}: ${d}`);
  if (diff.length === 0) console.log(`same ${key}`);
}
for (const key of helm.keys()) {
  if (!kustomize.has(key)) {
    ++problems;
    console.log(`only in helm: ${key}`);
  }
}
console.log(problems === 0 ? "installs match" : `${problems} differences`);
process.exitCode = problems === 0 ? 0 : 1;
