// Runs every benchmark in test/bench/ one after another, each in its own Node 24 process, so one
// benchmark's heap and sockets never colour the next one's figures. Each prints its own figures.
// Usage: npm run bench [-- name-filter]
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const filter = process.argv[2] ?? '';
const files = readdirSync(here).filter((f) => f.endsWith('.bench.ts') && f.includes(filter)).sort();
let failed = 0;
for (const file of files) {
  console.log(`\n=== ${file} ===`);
  const r = spawnSync(process.execPath, [join(here, file)], { stdio: 'inherit' });
  if (r.status !== 0) {
    failed++;
    console.log(`!!! ${file} exited ${r.status ?? r.signal}`);
  }
}
process.exit(failed ? 1 : 0);
