/**
 * The machines' boot scripts (infra/aws/template/boot.ts) run for real, as CloudFormation would hand
 * them over, in a mount namespace of their own whose /opt, /etc and /var/lib are overlays (nothing
 * of this machine's changes), against stand-ins for the AWS CLI, the instance metadata and systemctl:
 * they install the release, write the settings the units read — which load — and start the units.
 * Skipped with a message where the run cannot make a mount namespace (not root, no unshare).
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadSettings } from '../../shared/config.ts';
import { REPO } from './iam-usage.ts';
import { agentBootScript, workerBootScript } from './template/boot.ts';

const dir = mkdtempSync(join(tmpdir(), 'svc-boot-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Whether this machine lets the run make a mount namespace with an overlay in it. */
function canOverlay(): boolean {
  if (process.platform !== 'linux') return false;
  for (const d of ['probe-up', 'probe-work']) mkdirSync(join(dir, d));
  const mount = `mount -t overlay overlay -o lowerdir=/opt,upperdir=${dir}/probe-up,workdir=${dir}/probe-work /opt`;
  return spawnSync('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', mount], { stdio: 'ignore' }).status === 0;
}
const canRun = canOverlay();
const SKIPPED = 'skipped: the boot scripts need a mount namespace of their own with overlays (root, unshare) to run here';
if (!canRun) console.warn(SKIPPED);

const STACK: Record<string, string> = {
  'AWS::Region': 'eu-west-1',
  'AWS::StackName': 'svc-prod',
  ReleaseBucket: 'svc-releases',
  ReleaseKey: 'svc-cloud-1.tar.gz',
  Settings: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:svc-prod-settings',
  Table: 'svc-prod-svc',
  BlobBucket: 'svc-prod-blobs',
  FunctionEgress: 'public',
};
const SECRETS = { SVCD_SESSION_SECRET: 's'.repeat(64), SVCD_KEY_PEPPER: 'p'.repeat(64), SVCD_INTERNAL_SECRET: 'i'.repeat(64), SVCD_SECRETS_KEYS: `k1:${Buffer.alloc(32, 7).toString('base64')}` };

/** A release archive with what the boot scripts touch: the pinned Node and the units. */
function release(): string {
  const tree = join(dir, 'release');
  for (const d of ['node_modules/.bin', 'infra/host-agent', 'infra/node-worker']) mkdirSync(join(tree, d), { recursive: true });
  symlinkSync(process.execPath, join(tree, 'node_modules/.bin/node'));
  for (const unit of ['infra/host-agent/svc-agent.service', 'infra/host-agent/svc-agent-drain.service', 'infra/node-worker/svc-worker.service']) {
    copyFileSync(join(REPO, unit), join(tree, unit));
  }
  const archive = join(dir, 'release.tar.gz');
  expect(spawnSync('tar', ['-czf', archive, '-C', tree, '.']).status).toBe(0);
  return archive;
}

/** Runs `script` (a CloudFormation `Fn::Sub` text) with the stack's values; answers where its writes went. */
function boot(name: string, script: string): { status: number | null; stderr: string; root: (path: string) => string; calls: string[] } {
  const run = join(dir, name);
  const bin = join(run, 'bin');
  mkdirSync(bin, { recursive: true });
  const archive = existsSync(join(dir, 'release.tar.gz')) ? join(dir, 'release.tar.gz') : release();
  const calls = join(run, 'calls');
  writeFileSync(calls, '');
  const stub = (file: string, body: string) => {
    writeFileSync(join(bin, file), `#!/bin/sh\necho "${file} $*" >> ${calls}\n${body}\n`);
    chmodSync(join(bin, file), 0o755);
  };
  stub('aws', `case "$1 $2" in\n  "s3 cp") for a in "$@"; do last=$a; done; cp ${archive} "$last" ;;\n  "secretsmanager get-secret-value") echo '${JSON.stringify(SECRETS)}' ;;\n  *) exit 1 ;;\nesac`);
  stub('curl', 'for a in "$@"; do url=$a; done\ncase $url in */api/token) echo token ;; */local-ipv4) echo 10.0.64.10 ;; *) exit 22 ;; esac');
  stub('systemctl', 'true');
  const filled = script.replace(/\$\{([\w:]+)\}/g, (whole, key: string) => STACK[key] ?? whole);
  // Every `${…}` is the stack's: the shell's own variables are written `$name`, which Fn::Sub leaves alone.
  expect(filled).not.toContain('${');
  writeFileSync(join(run, 'user-data'), filled);
  // /opt, /etc and /var/lib as overlays: the script's writes land in <run>/<dir>-up.
  const mounts = ['opt', 'etc', 'var/lib']
    .map((d) => {
      const key = d.replace('/', '-');
      mkdirSync(join(run, `${key}-up`), { recursive: true });
      mkdirSync(join(run, `${key}-work`), { recursive: true });
      return `mount -t overlay overlay -o lowerdir=/${d},upperdir=${run}/${key}-up,workdir=${run}/${key}-work /${d}`;
    })
    .join(' && ');
  const r = spawnSync('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', `${mounts} && PATH=${bin}:$PATH bash ${run}/user-data`], { encoding: 'utf8', timeout: 60_000 });
  const root = (path: string) => {
    const [top, ...rest] = path.split('/').filter(Boolean);
    const key = top === 'var' ? 'var-lib' : top!;
    return join(run, `${key}-up`, ...(top === 'var' ? rest.slice(1) : rest));
  };
  return { status: r.status, stderr: r.stderr, root, calls: readFileSync(calls, 'utf8').trim().split('\n') };
}

/** The settings file as the unit's environment. */
function envOf(file: string): Record<string, string> {
  return Object.fromEntries(readFileSync(file, 'utf8').trim().split('\n').map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
}

describe('the boot scripts, run', () => {
  it.skipIf(!canRun)(`of an engine machine: installs the release, writes the agent's settings (secret ones from the secret), starts the agent and the drain watcher${canRun ? '' : ` (${SKIPPED})`}`, () => {
    const r = boot('agent', agentBootScript());
    expect(r.status, r.stderr).toBe(0);
    const envFile = r.root('/etc/svc-cloud/agent.env');
    expect(statSync(envFile).mode & 0o777).toBe(0o600);
    const env = envOf(envFile);
    expect(env).toMatchObject({ ...SECRETS, SVCD_TABLE: 'svc-prod-svc', SVCD_S3_BUCKET: 'svc-prod-blobs', SVCD_AGENT_URL: 'http://10.0.64.10:8788', SVCD_DATAPLANE_URL: 'http://10.0.64.10:8789' });
    const settings = loadSettings(env);
    expect([settings.SVCD_AGENT_HOST, settings.SVCD_ROOT, settings.SVCD_DYNAMODB_REGION]).toEqual(['10.0.64.10', '/var/lib/svc-cloud', 'eu-west-1']);
    expect(envOf(r.root('/etc/svc-cloud/drain.env'))).toEqual({ SVC_AGENT_GROUP: 'svc-prod-agents', SVC_DRAIN_HOOK: 'drain' });
    expect(existsSync(r.root('/opt/svc-cloud/node_modules/.bin/node'))).toBe(true);
    expect(existsSync(r.root('/opt/svc-release.tar.gz'))).toBe(false);
    expect(existsSync(r.root('/var/lib/svc-cloud'))).toBe(true);
    for (const unit of ['svc-agent.service', 'svc-agent-drain.service']) expect(existsSync(r.root(`/etc/systemd/system/${unit}`)), unit).toBe(true);
    expect(r.calls).toEqual([
      'aws s3 cp --only-show-errors --region eu-west-1 s3://svc-releases/svc-cloud-1.tar.gz /opt/svc-release.tar.gz',
      `aws secretsmanager get-secret-value --region eu-west-1 --secret-id ${STACK.Settings} --query SecretString --output text`,
      'curl -sSf -X PUT -H X-aws-ec2-metadata-token-ttl-seconds: 60 http://169.254.169.254/latest/api/token',
      'curl -sSf -H X-aws-ec2-metadata-token: token http://169.254.169.254/latest/meta-data/local-ipv4',
      'systemctl daemon-reload',
      'systemctl enable --now svc-agent.service svc-agent-drain.service',
    ]);
  });

  it.skipIf(!canRun)(`of a Node worker: installs the release, writes the workers' settings, starts the worker${canRun ? '' : ` (${SKIPPED})`}`, () => {
    const r = boot('worker', workerBootScript());
    expect(r.status, r.stderr).toBe(0);
    const env = envOf(r.root('/etc/svc-cloud/worker.env'));
    expect(loadSettings(env)).toMatchObject({ SVCD_HOST: '0.0.0.0', SVCD_PORT: 8787, SVCD_TABLE: 'svc-prod-svc', SVCD_BLOB_BACKEND: 's3' });
    expect(existsSync(r.root('/etc/systemd/system/svc-worker.service'))).toBe(true);
    expect(r.calls.at(-1)).toBe('systemctl enable --now svc-worker.service');
  });
});
