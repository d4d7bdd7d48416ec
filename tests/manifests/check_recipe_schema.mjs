// The ModelRecipe CRD's schema against recipes, as the API server would judge them:
//
//   node tests/manifests/check_recipe_schema.mjs CRD VALID_DIR... -- BROKEN_DIR
//
// - every recipe in the VALID_DIRs (examples/recipes, tests/manifests/recipes/valid) passes;
// - every recipe in BROKEN_DIR fails, with an error containing its `# crd: TEXT` header line;
// - every CEL rule of the CRD is the expected error of at least one broken recipe, so no rule
//   goes untested (tests/manifests/test_manifests.cpp then checks that the controller's own
//   validation rejects the same recipes).
// Prints one line per recipe and per rule; exits 1 on any failure.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { CustomKinds, celRules, parseObjects, validateObject } from "./validate_k8s.mjs";

const args = process.argv.slice(2);
const split = args.indexOf("--");
if (args.length < 3 || split < 2) {
  console.log("usage: check_recipe_schema.mjs CRD VALID_DIR... -- BROKEN_DIR");
  process.exit(2);
}
const [crdFile, ...validDirs] = args.slice(0, split);
const brokenDir = args[split + 1];

const custom = new CustomKinds();
const crds = parseObjects(readFileSync(crdFile, "utf8"), crdFile);
crds.forEach((crd) => custom.add(crd));
// Recipes marked `# local mode only` (a relative model path: examples/recipes/demo.yaml) are
// not for the API server.
const yamlFiles = (dir) =>
  readdirSync(dir)
    .filter((f) => f.endsWith(".yaml"))
    .sort()
    .map((f) => join(dir, f))
    .filter((f) => !/^# local mode only/m.test(readFileSync(f, "utf8")));

let failures = 0;
const fail = (line) => {
  ++failures;
  console.log(`FAIL ${line}`);
};

async function errorsOf(file) {
  const errors = [];
  for (const obj of parseObjects(readFileSync(file, "utf8"), file))
    errors.push(...(await validateObject(obj, custom)));
  return errors;
}

for (const dir of validDirs) {
  for (const file of yamlFiles(dir)) {
    const errors = await errorsOf(file);
    if (errors.length) fail(`${file}: rejected: ${errors.join("; ")}`);
    else console.log(`ok ${file}: accepted`);
  }
}

const caught = [];  // [expected text, errors] of each broken recipe
for (const file of yamlFiles(brokenDir)) {
  const expected = /^# crd: (.+)$/m.exec(readFileSync(file, "utf8"))?.[1];
  if (!expected) {
    fail(`${file}: no '# crd: TEXT' line`);
    continue;
  }
  const errors = await errorsOf(file);
  if (errors.length === 0) fail(`${file}: accepted, expected an error containing '${expected}'`);
  else if (!errors.some((e) => e.includes(expected)))
    fail(`${file}: rejected with '${errors.join("; ")}', expected '${expected}'`);
  else console.log(`ok ${file}: rejected (${expected})`);
  caught.push([expected, errors]);
}

for (const crd of crds) {
  for (const v of crd.spec.versions) {
    for (const rule of celRules(v.schema.openAPIV3Schema)) {
      const tested = caught.some(
        ([expected, errors]) =>
          rule.message.includes(expected) && errors.some((e) => e.includes(rule.message)),
      );
      if (tested) console.log(`ok CEL rule at ${rule.path || "/"} is tested: ${rule.rule}`);
      else fail(`CEL rule at ${rule.path || "/"} has no broken recipe: ${rule.rule}`);
    }
  }
}
console.log(failures === 0 ? "all recipe schema checks passed" : `${failures} failures`);
process.exitCode = failures === 0 ? 0 : 1;
