/**
 * The deployment's topology, read from the generated template (docs/deploy.md "The topology"): the
 * entry's routing split against the route declarations, every security-group rule against the
 * design, where each part runs in the network, and the boot scripts' settings against shared/config.ts.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isLongLived, matchRoute, ROUTES, type RouteDecl } from '../../shared/api/index.ts';
import { loadSettings, settingsSchema } from '../../shared/config.ts';
import { openApiJson } from '../../shared/openapi/document.ts';
import { REPO } from './iam-usage.ts';
import { generateTemplate } from './template.ts';
import { agentBootScript, workerBootScript } from './template/boot.ts';
import { patternMatches, samplePath } from './template/entry.ts';

const T = generateTemplate() as any;
const resources = Object.entries(T.Resources) as [string, any][];
const ofType = (type: string) => resources.filter(([, r]) => r.Type === type);

/** The entry's listener rules in priority order: conditions and the target group each forwards to. */
const RULES = ofType('AWS::ElasticLoadBalancingV2::ListenerRule')
  .map(([, r]) => r.Properties)
  .sort((a, b) => a.Priority - b.Priority)
  .map((p) => ({
    paths: p.Conditions.find((c: any) => c.Field === 'path-pattern').PathPatternConfig.Values as string[],
    methods: p.Conditions.find((c: any) => c.Field === 'http-request-method')?.HttpRequestMethodConfig.Values as string[] | undefined,
    target: p.Actions[0].TargetGroupArn.Ref as string,
    conditionValues: p.Conditions.reduce((n: number, c: any) => n + (c.PathPatternConfig ?? c.HttpRequestMethodConfig).Values.length, 0),
  }));
const DEFAULT = T.Resources.HttpsListener.Properties.DefaultActions[0].TargetGroupArn.Ref as string;

/** Where the balancer sends `method path`: the first rule that takes it, else the listener's default. */
function destination(method: string, path: string): string {
  return RULES.find((r) => (!r.methods || r.methods.includes(method)) && r.paths.some((p) => patternMatches(p, path)))?.target ?? DEFAULT;
}

/** Where a route must go: `/v2` to the agents, long-lived `/v0` routes and every `OPTIONS` (preflights) to the Node workers, the rest to the function. */
const expected = (route: RouteDecl) =>
  route.servedBy === 'agent' ? 'AgentTargets' : isLongLived(route) || route.method === 'OPTIONS' ? 'WorkerTargets' : 'FunctionTargets';

/** Every literal segment of the declared paths: parameter values that look like another route's path. */
const LITERALS = [...new Set(ROUTES.flatMap((r) => r.path.split('/')).filter((s) => s && !s.startsWith(':')))];

describe('the entry\'s routing split (docs/deploy.md "The routing split")', () => {
  it('sends every declared route where it belongs: /v2 to the agents, bytes, streams and event streams to the Node workers, the rest to the function', () => {
    const wrong = ROUTES.filter((r) => destination(r.method, samplePath(r)) !== expected(r)).map((r) => `${r.key} → ${destination(r.method, samplePath(r))}`);
    expect(wrong).toEqual([]);
    expect(DEFAULT).toBe('FunctionTargets');
  });

  it('never sends a long-lived route to the function, nor /v0 to the agents, whatever its parameters say (a balancer\'s * spans slashes)', () => {
    const wrong: string[] = [];
    for (const route of ROUTES) {
      for (const value of [...LITERALS, 'a/b', 'x/invoke', 'x/logs']) {
        const path = samplePath(route, value);
        // The route the handlers (or the agents) would serve this path as.
        const served = matchRoute(route.method, path)?.route ?? route;
        const to = destination(route.method, path);
        const ok = served.servedBy === 'agent' ? to === 'AgentTargets' : to !== 'AgentTargets' && (to === 'WorkerTargets' || !isLongLived(served));
        if (!ok) wrong.push(`${route.method} ${path} (${served.key}) → ${to}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('sends every preflight to the workers, or to the agents under /v2', () => {
    for (const route of ROUTES) {
      expect(destination('OPTIONS', samplePath(route)), route.key).toBe(route.servedBy === 'agent' ? 'AgentTargets' : 'WorkerTargets');
    }
  });

  it('docs/deploy.md "The routing split" names every route the Node workers take', () => {
    const doc = readFileSync(join(REPO, 'docs/deploy.md'), 'utf8');
    const section = doc.slice(doc.indexOf('## The routing split'), doc.indexOf('### Event streams'));
    for (const route of ROUTES.filter((r) => r.servedBy === 'handlers' && isLongLived(r))) {
      const path = route.path.replace(/:(\w+\+?)/g, '{$1}');
      expect(section.includes(path) || section.includes(path.replace(/\/\{rest\+\}$/, '[/{rest+}]')), path).toBe(true);
    }
  });

  it('stays within a listener\'s limits: at most 100 rules, five condition values each, distinct priorities', () => {
    expect(RULES.length).toBeLessThanOrEqual(100);
    for (const rule of RULES) expect(rule.conditionValues).toBeLessThanOrEqual(5);
    const priorities = ofType('AWS::ElasticLoadBalancingV2::ListenerRule').map(([, r]) => r.Properties.Priority);
    expect(new Set(priorities).size).toBe(priorities.length);
  });

  it('sends the function no body over the balancer\'s 1 MB, and gets none back: JSON requests within their limit, the largest fixed answer (the OpenAPI document) well under it', () => {
    const MB = 1024 * 1024;
    expect(settingsSchema.shape.SVCD_JSON_MAX_BYTES.parse(undefined)).toBeLessThan(MB);
    expect(Buffer.byteLength(openApiJson())).toBeLessThan(MB / 2);
    for (const route of ROUTES.filter((r) => destination(r.method, samplePath(r)) === 'FunctionTargets')) {
      expect(['none', 'json'], route.key).toContain(route.body.flow);
    }
  });

  it('invokes the function\'s live alias, with multi-value headers, and keeps connections longer than an invocation and a heartbeat', () => {
    const fn = T.Resources.FunctionTargets.Properties;
    expect(fn.Targets).toEqual([{ Id: { Ref: 'FunctionAlias' } }]);
    expect(fn.TargetGroupAttributes).toContainEqual({ Key: 'lambda.multi_value_headers.enabled', Value: 'true' });
    const idle = T.Resources.Entry.Properties.LoadBalancerAttributes.find((a: any) => a.Key === 'idle_timeout.timeout_seconds');
    expect(Number(idle.Value)).toBeGreaterThan(60);
    expect(Number(idle.Value) * 1000).toBeGreaterThan(settingsSchema.shape.SVCD_REALTIME_HEARTBEAT_MS.parse(undefined));
  });
});

/** Every rule of every security group, inline or a resource of its own, as `<group> in|out <proto> <ports> <peer>`. */
function securityRules(whenFunctionsReachOut: boolean): string[] {
  const peer = (r: any) => r.SourceSecurityGroupId?.Ref ?? r.DestinationSecurityGroupId?.Ref ?? r.CidrIp;
  const line = (group: string, dir: string, r: any) => `${group} ${dir} ${r.IpProtocol} ${r.FromPort ?? 'all'}-${r.ToPort ?? 'all'} ${peer(r)}`;
  const branch = (v: any) => (v?.['Fn::If'] ? v['Fn::If'][whenFunctionsReachOut ? 1 : 2] : v);
  const out: string[] = [];
  for (const [name, r] of ofType('AWS::EC2::SecurityGroup')) {
    for (const rule of r.Properties.SecurityGroupIngress ?? []) out.push(line(name, 'in', rule));
    for (const rule of branch(r.Properties.SecurityGroupEgress)) out.push(line(name, 'out', rule));
  }
  for (const [, r] of ofType('AWS::EC2::SecurityGroupIngress')) out.push(line(r.Properties.GroupId.Ref, 'in', r.Properties));
  for (const [, r] of ofType('AWS::EC2::SecurityGroupEgress')) out.push(line(r.Properties.GroupId.Ref, 'out', r.Properties));
  return out.sort();
}

describe('the security groups (docs/deploy.md "The topology")', () => {
  const design = [
    'EntrySecurityGroup in tcp 443-443 0.0.0.0/0',
    'EntrySecurityGroup in tcp 80-80 0.0.0.0/0',
    'EntrySecurityGroup out tcp 8787-8787 WorkerSecurityGroup',
    'EntrySecurityGroup out tcp 8789-8789 AgentSecurityGroup',
    'EntrySecurityGroup out icmp 252-86 255.255.255.255/32',
    'WorkerSecurityGroup in tcp 8787-8787 EntrySecurityGroup',
    'WorkerSecurityGroup out tcp 8788-8788 AgentSecurityGroup',
    'WorkerSecurityGroup out tcp 443-443 0.0.0.0/0',
    'WorkerSecurityGroup out tcp 443-443 EndpointSecurityGroup',
    'FunctionSecurityGroup out tcp 8788-8788 AgentSecurityGroup',
    'FunctionSecurityGroup out tcp 443-443 0.0.0.0/0',
    'AgentSecurityGroup in tcp 8788-8788 FunctionSecurityGroup',
    'AgentSecurityGroup in tcp 8788-8788 WorkerSecurityGroup',
    'AgentSecurityGroup in tcp 8789-8789 EntrySecurityGroup',
    'AgentSecurityGroup in tcp 8789-8789 AgentSecurityGroup',
    'AgentSecurityGroup out tcp 8789-8789 AgentSecurityGroup',
    'AgentSecurityGroup out tcp 443-443 EndpointSecurityGroup',
    'EndpointSecurityGroup in tcp 443-443 AgentSecurityGroup',
    'EndpointSecurityGroup in tcp 443-443 WorkerSecurityGroup',
    'EndpointSecurityGroup out icmp 252-86 255.255.255.255/32',
  ];

  it('has exactly the rules of the design, functions reaching out or not', () => {
    expect(securityRules(false)).toEqual([...design, 'AgentSecurityGroup out tcp 443-443 0.0.0.0/0'].sort());
    expect(securityRules(true)).toEqual([...design, 'AgentSecurityGroup out -1 all-all 0.0.0.0/0'].sort());
  });

  it('admits the agents\' internal port from the function and the workers only, /v2 from the entry and the agents only, and nothing to the engines or metrics', () => {
    const env = bootEnv(agentBootScript());
    const [low, high] = env.SVCD_ENGINE_PORTS!.split('-').map(Number) as [number, number];
    for (const when of [false, true]) {
      const ingress = securityRules(when).filter((l) => l.split(' ')[1] === 'in');
      const from = (port: string) => ingress.filter((l) => l.startsWith('AgentSecurityGroup') && l.includes(` ${port}-${port} `)).map((l) => l.split(' ').pop()).sort();
      expect(from(env.SVCD_AGENT_PORT!)).toEqual(['FunctionSecurityGroup', 'WorkerSecurityGroup']);
      expect(from(env.SVCD_DATAPLANE_PORT!)).toEqual(['AgentSecurityGroup', 'EntrySecurityGroup']);
      for (const l of ingress) {
        const [a, b] = l.split(' ')[3]!.split('-').map(Number) as [number, number];
        expect(b < low || a > high, `${l} reaches the engines' ports`).toBe(true);
        expect(a <= Number(env.SVCD_METRICS_PORT) && Number(env.SVCD_METRICS_PORT) <= b, `${l} reaches the metrics port`).toBe(false);
        if (l.endsWith('0.0.0.0/0')) expect(l).toMatch(/^EntrySecurityGroup in tcp (443|80)-/);
      }
    }
  });

  it('puts each part where the design says: the entry in the public subnets, the function, workers and agents in the private ones', () => {
    const priv = [{ Ref: 'PrivateSubnetA' }, { Ref: 'PrivateSubnetB' }];
    expect(T.Resources.Entry.Properties.Subnets).toEqual([{ Ref: 'PublicSubnetA' }, { Ref: 'PublicSubnetB' }]);
    expect(T.Resources.Function.Properties.VpcConfig).toEqual({ SubnetIds: priv, SecurityGroupIds: [{ Ref: 'FunctionSecurityGroup' }] });
    expect(T.Resources.AgentGroup.Properties.VPCZoneIdentifier).toEqual(priv);
    expect(T.Resources.WorkerGroup.Properties.VPCZoneIdentifier).toEqual(priv);
    expect(T.Resources.AgentLaunchTemplate.Properties.LaunchTemplateData.SecurityGroupIds).toEqual([{ Ref: 'AgentSecurityGroup' }]);
    expect(T.Resources.WorkerLaunchTemplate.Properties.LaunchTemplateData.SecurityGroupIds).toEqual([{ Ref: 'WorkerSecurityGroup' }]);
    // The private subnets' way out: gateway endpoints for DynamoDB and S3, a NAT gateway only when functions reach out.
    for (const service of ['dynamodb', 's3']) {
      const endpoint = resources.find(([, r]) => r.Type === 'AWS::EC2::VPCEndpoint' && r.Properties.ServiceName['Fn::Sub'].endsWith(`.${service}`))![1];
      expect(endpoint.Properties).toMatchObject({ VpcEndpointType: 'Gateway', RouteTableIds: [{ Ref: 'PrivateRouteTable' }] });
    }
    const privateRoutes = ofType('AWS::EC2::Route').filter(([, r]) => r.Properties.RouteTableId.Ref === 'PrivateRouteTable');
    expect(privateRoutes.map(([, r]) => [r.Condition, r.Properties.NatGatewayId])).toEqual([['FunctionsReachOut', { Ref: 'NatGateway' }]]);
  });

  it('holds every engine machine leaving its group for the drain watcher, and publishes each function version behind an alias', () => {
    const hooks = T.Resources.AgentGroup.Properties.LifecycleHookSpecificationList;
    expect(hooks).toEqual([expect.objectContaining({ LifecycleTransition: 'autoscaling:EC2_INSTANCE_TERMINATING' })]);
    const watcher = readFileSync(join(REPO, 'infra/host-agent/svc-agent-drain.sh'), 'utf8');
    expect(watcher).toContain('agent=${SVC_AGENT_COMMAND:-/opt/svc-cloud/bin/svc-agent}');
    expect(watcher).toContain('"$agent" drain');
    expect(agentBootScript()).toContain(`SVC_DRAIN_HOOK=${hooks[0].LifecycleHookName}`);
    expect(T.Resources.FunctionVersion.Properties.Description['Fn::Sub']).toContain('${CodeKey}');
    expect(T.Resources.FunctionAlias.Properties.FunctionVersion).toEqual({ 'Fn::GetAtt': ['FunctionVersion', 'Version'] });
  });
});

/** The settings a boot script writes, with the stack's values and the machine's address filled in. */
function bootEnv(script: string): Record<string, string> {
  const filled = script
    .replace(/\$\{AWS::Region\}/g, 'eu-west-1')
    .replace(/\$\{AWS::StackName\}/g, 'svc-prod')
    .replace(/\$\{(\w+)\}/g, (_, name: string) => ({ Table: 'svc-prod-svc', BlobBucket: 'svc-prod-blobs', FunctionEgress: 'public' })[name] ?? name)
    .replace(/\$ip/g, '10.0.64.10');
  return Object.fromEntries([...filled.matchAll(/^(SVCD_\w+)=(.*)$/gm)].map((m) => [m[1]!, m[2]!]));
}

/** The secret settings, as the stack's secret holds them. */
const SECRETS = { SVCD_SESSION_SECRET: 's'.repeat(32), SVCD_KEY_PEPPER: 'p'.repeat(32), SVCD_INTERNAL_SECRET: 'i'.repeat(32), SVCD_SECRETS_KEYS: `k1:${Buffer.alloc(32, 1).toString('base64')}` };

describe('the boot scripts (docs/deploy.md "The topology")', () => {
  it.each([
    ['engine machines', agentBootScript, '/etc/svc-cloud/agent.env', 'infra/host-agent/svc-agent.service'],
    ['Node workers', workerBootScript, '/etc/svc-cloud/worker.env', 'infra/node-worker/svc-worker.service'],
  ])('the %s\' settings are settings of shared/config.ts that load, in the file their unit reads', (_, script, file, unit) => {
    const env = bootEnv(script());
    for (const name of Object.keys(env)) expect(Object.keys(settingsSchema.shape), name).toContain(name);
    expect(() => loadSettings({ ...env, ...SECRETS })).not.toThrow();
    expect(readFileSync(join(REPO, unit), 'utf8')).toContain(`EnvironmentFile=${file}`);
    expect(script()).toContain(`> ${file}`);
    expect(script()).toContain(unit.split('/').pop());
  });

  it('starts each listener on the port its security group admits, and the agent advertises the address it listens on', () => {
    const agent = loadSettings({ ...bootEnv(agentBootScript()), ...SECRETS });
    expect([agent.SVCD_AGENT_PORT, agent.SVCD_DATAPLANE_PORT]).toEqual([8788, 8789]);
    expect(agent.SVCD_AGENT_URL).toBe(`http://${agent.SVCD_AGENT_HOST}:${agent.SVCD_AGENT_PORT}`);
    expect(agent.SVCD_DATAPLANE_URL).toBe(`http://${agent.SVCD_AGENT_HOST}:${agent.SVCD_DATAPLANE_PORT}`);
    expect(agent.SVCD_BLOB_BACKEND).toBe('s3');
    const worker = loadSettings({ ...bootEnv(workerBootScript()), ...SECRETS });
    expect(worker.SVCD_PORT).toBe(T.Resources.WorkerTargets.Properties.Port);
    expect(agent.SVCD_DATAPLANE_PORT).toBe(T.Resources.AgentTargets.Properties.Port);
  });

  it('installs the release the stack names and reads the secret settings from the stack\'s secret', () => {
    for (const script of [agentBootScript(), workerBootScript()]) {
      expect(script).toContain('s3://${ReleaseBucket}/${ReleaseKey}');
      // Root's files, whoever built the archive (root runs them).
      expect(script).toContain('tar --no-same-owner -xzf');
      expect(script).toContain('--secret-id ${Settings}');
      expect(script).not.toMatch(/SVCD_(SESSION_SECRET|KEY_PEPPER|INTERNAL_SECRET|SECRETS_KEYS)=/);
    }
  });
});
