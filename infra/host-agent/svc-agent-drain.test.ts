/**
 * The drain watcher (svc-agent-drain.sh; docs/deploy.md "Rolling out") run against stand-ins for the
 * instance metadata (`curl`), the AWS CLI (`aws`) and `svc-agent`: it waits for the machine to be
 * leaving, drains until a drain succeeds — keeping the lifecycle hook alive meanwhile — and only
 * then lets the termination go on.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

const WATCHER = join(import.meta.dirname, 'svc-agent-drain.sh');
let dir: string;
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function stub(name: string, body: string): void {
  writeFileSync(join(dir, name), `#!/bin/sh\n${body}\n`);
  chmodSync(join(dir, name), 0o755);
}

/** Runs the watcher: the machine leaves after `inService` polls, and the drain fails `failures` times first. */
function run(inService: number, failures: number) {
  dir = mkdtempSync(join(tmpdir(), 'svc-drain-'));
  const log = join(dir, 'log');
  writeFileSync(log, '');
  // The metadata service: a token, then the answers; the lifecycle state reads InService `inService` times.
  stub(
    'curl',
    `for a in "$@"; do url=$a; done
case $url in
  */api/token) echo token ;;
  */autoscaling/target-lifecycle-state)
    n=$(cat "${dir}/polls" 2>/dev/null || echo 0); echo $((n + 1)) > "${dir}/polls"
    if [ "$n" -lt ${inService} ]; then echo InService; else echo Terminated; fi ;;
  */instance-id) echo i-0123456789abcdef0 ;;
  */placement/region) echo eu-west-1 ;;
  *) exit 22 ;;
esac`,
  );
  stub('aws', `echo "aws $*" >> "${log}"`);
  stub(
    'svc-agent',
    `n=$(cat "${dir}/drains" 2>/dev/null || echo 0); echo $((n + 1)) > "${dir}/drains"
echo "svc-agent $*" >> "${log}"
[ "$n" -ge ${failures} ]`,
  );
  const result = spawnSync('sh', [WATCHER], {
    encoding: 'utf8',
    timeout: 20_000,
    env: {
      PATH: `${dir}:${process.env.PATH}`,
      SVC_AGENT_COMMAND: join(dir, 'svc-agent'),
      SVC_AGENT_GROUP: 'svc-prod-agents',
      SVC_DRAIN_HOOK: 'drain',
      SVC_DRAIN_POLL_SECONDS: '0',
      SVC_DRAIN_RETRY_SECONDS: '0',
    },
  });
  return { ...result, log: readFileSync(log, 'utf8').trim().split('\n'), polls: Number(readFileSync(join(dir, 'polls'), 'utf8')) };
}

const HOOK = '--region eu-west-1 --auto-scaling-group-name svc-prod-agents --lifecycle-hook-name drain --instance-id i-0123456789abcdef0';

describe('the drain watcher', () => {
  it('waits until the machine is leaving, drains it, then lets the termination go on', () => {
    const r = run(3, 0);
    expect(r.status, r.stderr).toBe(0);
    expect(r.polls).toBe(4);
    expect(r.log).toEqual(['svc-agent drain', `aws autoscaling complete-lifecycle-action ${HOOK} --lifecycle-action-result CONTINUE`]);
  });

  it('holds the machine while a drain fails, keeping the hook alive, and lets it go only once one succeeds', () => {
    const r = run(0, 2);
    expect(r.status, r.stderr).toBe(0);
    expect(r.log).toEqual([
      'svc-agent drain',
      `aws autoscaling record-lifecycle-action-heartbeat ${HOOK}`,
      'svc-agent drain',
      `aws autoscaling record-lifecycle-action-heartbeat ${HOOK}`,
      'svc-agent drain',
      `aws autoscaling complete-lifecycle-action ${HOOK} --lifecycle-action-result CONTINUE`,
    ]);
    expect(r.stderr).toContain('drain failed: holding the machine');
  });
});
