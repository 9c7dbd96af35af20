/**
 * A function from source (client/cli/functions/bundle.ts, stack-map.ts): TypeScript and an npm
 * package (htm, pure ESM) bundled into one module importing only `node:` built-ins, whose stacks
 * name the TypeScript source. V8 honours `Error.prepareStackTrace` in Node as in workerd, so Node
 * runs the bundle here; the runtime itself is checked end to end (test/e2e/cli-first-hour.test.ts).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO } from '../../../test/helpers/deployment-env.ts';
import { bundleFunction, needsBundle } from './bundle.ts';

const dir = mkdtempSync(join(tmpdir(), 'svc-cli-bundle-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
mkdirSync(join(dir, 'src'));
symlinkSync(join(REPO, 'node_modules'), join(dir, 'node_modules'));
writeFileSync(
  join(dir, 'src/index.ts'),
  `import htm from 'htm';
import { Buffer } from 'buffer';
import { shout } from './shout.ts';

type Tree = { type: string; children: unknown[] };
const html = htm.bind((type: string, _props: unknown, ...children: unknown[]): Tree => ({ type, children }));

export default {
  async fetch(request: Request): Promise<Response> {
    if (new URL(request.url).pathname === '/boom') shout('');
    return Response.json({ tree: html\`<b>\${shout('hi')}</b>\`, b64: Buffer.from('x').toString('base64') });
  },
};
`,
);
writeFileSync(join(dir, 'src/shout.ts'), `export function shout(text: string): string {\n  if (!text) throw new Error('nothing to shout');\n  return text.toUpperCase();\n}\n`);

describe('bundleFunction', () => {
  it('bundles TypeScript and npm imports into one module importing only node: built-ins', async () => {
    const bundle = await bundleFunction('src/index.ts', dir);
    expect([...bundle.code.matchAll(/^import .* from "([^"]+)";$/gm)].map((m) => m[1])).toEqual(['node:buffer']);
    expect(bundle.inputs).toEqual(expect.arrayContaining([join(dir, 'src/index.ts'), join(dir, 'src/shout.ts'), expect.stringContaining('htm')]));
    writeFileSync(join(dir, 'out.mjs'), bundle.code);
    const run = spawnSync(process.execPath, [
      '--input-type=module',
      '-e',
      `const { default: fn } = await import(${JSON.stringify(join(dir, 'out.mjs'))});
       console.log(await (await fn.fetch(new Request('http://x/'))).text());
       try { await fn.fetch(new Request('http://x/boom')); } catch (err) { console.log(err.stack); }`,
    ], { encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    const [answer, ...stack] = run.stdout.trim().split('\n');
    expect(JSON.parse(answer!)).toEqual({ tree: { type: 'b', children: ['HI'] }, b64: 'eA==' });
    expect(stack[0]).toBe('Error: nothing to shout');
    expect(stack[1]).toMatch(/^ {4}at shout \(src\/shout\.ts:2:20\)$/);
    expect(stack[2]).toMatch(/^ {4}at Object\.fetch \(src\/index\.ts:10:\d+\)$/);
  });

  it('names the file and line of a source that does not build', async () => {
    writeFileSync(join(dir, 'src/bad.ts'), 'export default {\n  fetch( {\n};\n');
    await expect(bundleFunction('src/bad.ts', dir)).rejects.toThrow(/src\/bad\.ts did not bundle:\n {2}src\/bad\.ts:3:\d+: /);
    await expect(bundleFunction('src/missing-import.ts', dir)).rejects.toThrow(/did not bundle/);
  });

  it('bundles sources, and a .js or .mjs only when asked', () => {
    expect(needsBundle('src/index.ts', undefined)).toBe(true);
    expect(needsBundle('src/app.tsx', undefined)).toBe(true);
    expect(needsBundle('dist/fn.js', undefined)).toBe(false);
    expect(needsBundle('dist/fn.mjs', true)).toBe(true);
    expect(needsBundle('src/index.ts', false)).toBe(false);
    expect(needsBundle('-', undefined)).toBe(false);
  });
});
