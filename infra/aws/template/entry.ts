/**
 * The HTTP entry (docs/deploy.md "The routing split"): one internet-facing Application Load
 * Balancer. A function gateway (API Gateway) cannot be the entry: it buffers answers (no event
 * stream), gives up after 30 s and caps bodies at 10 MB; a balancer does none of that and invokes a
 * function itself. Its rules come from the route declarations (shared/api/): `/v2` goes to the
 * agents, the `/v0` routes whose bodies are bytes or streams or whose answer is an event stream
 * (`isLongLived`) and every preflight go to the Node workers, and everything else to the function.
 * A balancer pattern's `*` also spans slashes, so where a worker pattern would take a route of the
 * function's, a rule of higher priority gives that route back to the function.
 */
import { HANDLER_ROUTES, isLongLived, ROUTES, type RouteDecl } from '../../../shared/api/index.ts';
import { getAtt, ref, type Section } from './cfn.ts';
import { PORTS } from './params.ts';
import { PUBLIC_SUBNETS } from './network.ts';

/** The entry's three destinations, as target group logical ids. */
export const TARGETS = { agents: 'AgentTargets', workers: 'WorkerTargets', function: 'FunctionTargets' } as const;
export type Target = keyof typeof TARGETS;

/** One listener rule: the request's path matches one of `paths` (balancer patterns) and, when given, its method is one of `methods`. */
export interface EntryRule {
  paths: string[];
  methods?: string[];
  target: Target;
}

/** Whether the function serves a route (not when its bodies are bytes or streams or its answer an event stream). */
export function isGatewayRoute(route: RouteDecl): boolean {
  return route.servedBy === 'handlers' && !isLongLived(route);
}

/** A route pattern as a balancer path pattern: each parameter (`:id`, `:key+`) is `*`. */
export function entryPattern(path: string): string {
  return path.replace(/:\w+\+?/g, '*');
}

/** Whether a balancer path pattern matches a path (`*` any run of characters, `?` one; case-sensitive). */
export function patternMatches(pattern: string, path: string): boolean {
  const source = pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.');
  return new RegExp(`^${source}$`).test(path);
}

/** Whether `rule` takes `method path`. */
export function ruleTakes(rule: EntryRule, method: string, path: string): boolean {
  return (!rule.methods || rule.methods.includes(method)) && rule.paths.some((p) => patternMatches(p, path));
}

/** A path a route's pattern matches, each parameter given `value`. */
export function samplePath(route: RouteDecl, value = 'x1'): string {
  return route.path.replace(/:\w+\+?/g, value);
}

/** Literal characters of a pattern: the more, the more specific (tried first). */
const specificity = (rule: EntryRule) => Math.max(...rule.paths.map((p) => p.replace(/\*/g, '').length));

/** The worker rules: one per pattern of the long-lived routes, with their methods unless every route of that pattern is long-lived. */
function workerRules(): EntryRule[] {
  const byPattern = new Map<string, RouteDecl[]>();
  for (const route of HANDLER_ROUTES) byPattern.set(entryPattern(route.path), [...(byPattern.get(entryPattern(route.path)) ?? []), route]);
  const rules: EntryRule[] = [];
  for (const [pattern, routes] of byPattern) {
    const long = routes.filter(isLongLived);
    if (long.length === 0) continue;
    const methods = [...new Set(long.map((r) => r.method))].sort();
    rules.push(long.length === routes.length ? { paths: [pattern], target: 'workers' } : { paths: [pattern], methods, target: 'workers' });
  }
  return rules.sort((a, b) => specificity(b) - specificity(a) || a.paths[0]!.localeCompare(b.paths[0]!));
}

/**
 * The listener's rules in priority order; what none takes goes to the function. First the agents'
 * `/v2`; then the worker rules, most specific first, each preceded by a rule giving back to the
 * function any of its routes that the worker rule would take; last every preflight (`OPTIONS`) to
 * the workers (the function's routes have no `OPTIONS`).
 */
export function entryRules(): EntryRule[] {
  const agentPatterns = [...new Set(ROUTES.filter((r) => r.servedBy === 'agent').map((r) => entryPattern(r.path)))];
  const rules: EntryRule[] = [{ paths: [...new Set(agentPatterns.flatMap((p) => (p.endsWith('/*') ? [p.slice(0, -2), p] : [p])))], target: 'agents' }];
  for (const rule of workerRules()) {
    for (const route of HANDLER_ROUTES.filter(isGatewayRoute)) {
      const path = samplePath(route);
      if (ruleTakes(rule, route.method, path) && !rules.some((r) => ruleTakes(r, route.method, path))) {
        rules.push({ paths: [entryPattern(route.path)], methods: [route.method], target: 'function' });
      }
    }
    rules.push(rule);
  }
  rules.push({ paths: ['/*'], methods: ['OPTIONS'], target: 'workers' });
  return rules;
}

/** The balancer, its listeners and rules, and its three target groups. */
export function entryResources(): Section {
  const rules = Object.fromEntries(
    entryRules().map((rule, i) => [
      `EntryRule${String(i + 1).padStart(2, '0')}`,
      {
        Type: 'AWS::ElasticLoadBalancingV2::ListenerRule',
        Properties: {
          ListenerArn: ref('HttpsListener'),
          Priority: (i + 1) * 10,
          Conditions: [
            { Field: 'path-pattern', PathPatternConfig: { Values: rule.paths } },
            ...(rule.methods ? [{ Field: 'http-request-method', HttpRequestMethodConfig: { Values: rule.methods } }] : []),
          ],
          Actions: [{ Type: 'forward', TargetGroupArn: ref(TARGETS[rule.target]) }],
        },
      },
    ]),
  );
  return { ...balancer(), ...targetGroups(), ...rules };
}

function balancer(): Section {
  return {
    Entry: {
      Type: 'AWS::ElasticLoadBalancingV2::LoadBalancer',
      Properties: {
        Type: 'application',
        Scheme: 'internet-facing',
        Subnets: PUBLIC_SUBNETS.map(ref),
        SecurityGroups: [ref('EntrySecurityGroup')],
        LoadBalancerAttributes: [
          // Above an invocation's 60 s before its first byte and the event streams' 15 s heartbeat.
          { Key: 'idle_timeout.timeout_seconds', Value: '120' },
          { Key: 'routing.http.drop_invalid_header_fields.enabled', Value: 'true' },
        ],
      },
    },
    HttpsListener: {
      Type: 'AWS::ElasticLoadBalancingV2::Listener',
      Properties: {
        LoadBalancerArn: ref('Entry'),
        Port: 443,
        Protocol: 'HTTPS',
        SslPolicy: 'ELBSecurityPolicy-TLS13-1-2-2021-06',
        Certificates: [{ CertificateArn: ref('CertificateArn') }],
        DefaultActions: [{ Type: 'forward', TargetGroupArn: ref(TARGETS.function) }],
      },
    },
    HttpListener: {
      Type: 'AWS::ElasticLoadBalancingV2::Listener',
      Properties: {
        LoadBalancerArn: ref('Entry'),
        Port: 80,
        Protocol: 'HTTP',
        DefaultActions: [{ Type: 'redirect', RedirectConfig: { Protocol: 'HTTPS', Port: '443', StatusCode: 'HTTP_301' } }],
      },
    },
  };
}

function targetGroups(): Section {
  const instances = (port: number, path: string, matcher: string) => ({
    Type: 'AWS::ElasticLoadBalancingV2::TargetGroup',
    Properties: {
      TargetType: 'instance',
      Protocol: 'HTTP',
      Port: port,
      VpcId: ref('Vpc'),
      HealthCheckPath: path,
      Matcher: { HttpCode: matcher },
    },
  });
  return {
    // `/v2` without a key is answered 401 before any lookup: the listener is up.
    AgentTargets: instances(PORTS.dataplane, '/v2/health', '401'),
    // 503 is the service degraded (no live agent, the registry unreadable), which every worker would
    // answer alike: taking them all away for it would only add an outage of the workers to it.
    WorkerTargets: instances(PORTS.worker, '/v0/health', '200,503'),
    FunctionTargets: {
      Type: 'AWS::ElasticLoadBalancingV2::TargetGroup',
      DependsOn: 'FunctionEntryPermission',
      Properties: {
        TargetType: 'lambda',
        Targets: [{ Id: ref('FunctionAlias') }],
        TargetGroupAttributes: [{ Key: 'lambda.multi_value_headers.enabled', Value: 'true' }],
      },
    },
    FunctionEntryPermission: {
      Type: 'AWS::Lambda::Permission',
      Properties: {
        Action: 'lambda:InvokeFunction',
        FunctionName: ref('FunctionAlias'),
        Principal: 'elasticloadbalancing.amazonaws.com',
        SourceAccount: ref('AWS::AccountId'),
      },
    },
  };
}

/** The entry's address, for the service's DNS name (a CNAME or alias record to it). */
export const entryDnsName = getAtt('Entry', 'DNSName');
