// One line per check for the client oracles; the first failure ends the process non-zero.
let passed = 0;

export function check(name, condition, detail) {
  if (!condition) {
    console.error(`FAIL ${name}: ${detail}`);
    process.exit(1);
  }
  passed += 1;
  console.log(`ok   ${name}`);
}

export function summary() {
  console.log(`${passed} passed, 0 failed`);
}
