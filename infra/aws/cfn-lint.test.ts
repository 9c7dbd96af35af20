/**
 * The committed template passes cfn-lint, the CloudFormation linter this repository uses
 * (docs/deploy.md "The template and its checks"): no error, no warning. cfn-lint is a Python tool,
 * not an npm package; where it is not installed the check is skipped and says so.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const TEMPLATE = join(import.meta.dirname, 'template.json');
const probe = spawnSync('cfn-lint', ['--version'], { encoding: 'utf8' });
const installed = probe.status === 0;
const SKIPPED = 'skipped: cfn-lint is not installed, so infra/aws/template.json is not linted (pip install cfn-lint; docs/deploy.md "The template and its checks")';
if (!installed) console.warn(SKIPPED);

describe('the deployment template', () => {
  it.skipIf(!installed)(`passes cfn-lint with no error, no warning and no informational finding${installed ? '' : ` (${SKIPPED})`}`, () => {
    // Informational findings too (`--include-checks I`). Exit status: 0 clean; 2 errors, 4 warnings,
    // 8 informational findings (bits, or-ed).
    const run = spawnSync('cfn-lint', ['--include-checks', 'I', '--', TEMPLATE], { encoding: 'utf8' });
    expect(`${run.stdout}${run.stderr}`.trim(), (run.stdout || run.stderr || `${run.error ?? ''}`).trim()).toBe('');
    expect(run.status).toBe(0);
  }, 60_000);
});
