/**
 * The template's parameters and conditions, and the fixed choices every part shares: the network's
 * address plan and the ports each machine listens on (docs/deploy.md "The topology").
 */
import type { Section } from './cfn.ts';

/** The secret settings: a NoEcho parameter each, kept in the stack's secret (./data.ts). */
export const SECRET_PARAMETERS = {
  SessionSecret: 'SVCD_SESSION_SECRET',
  KeyPepper: 'SVCD_KEY_PEPPER',
  InternalSecret: 'SVCD_INTERNAL_SECRET',
  SecretsKeys: 'SVCD_SECRETS_KEYS',
} as const;

/** Where each machine listens (the settings the boot scripts write, ./boot.ts). */
export const PORTS = {
  /** The Node workers' `SVCD_PORT` (the balancer's `/v0` routes the function cannot carry). */
  worker: 8787,
  /** The agents' internal API, `SVCD_AGENT_PORT`: the function and the Node workers only. */
  agentInternal: 8788,
  /** The agents' `/v2` listeners, `SVCD_DATAPLANE_PORT`: the balancer and the other agents. */
  dataplane: 8789,
  /** The agents' Prometheus listener, `SVCD_METRICS_PORT`: reachable from nothing (docs/observability.md "Metrics"). */
  metrics: 8791,
} as const;

/** The loopback ports engines take on an agent (`SVCD_ENGINE_PORTS`): no rule ever admits them. */
export const ENGINE_PORTS = '20000-20999';

/** The VPC's address plan: two zones, a public and a private subnet in each. */
export const NETWORK = {
  cidr: '10.0.0.0/16',
  zones: [
    { suffix: 'A', public: '10.0.0.0/20', private: '10.0.64.0/20' },
    { suffix: 'B', public: '10.0.16.0/20', private: '10.0.80.0/20' },
  ],
} as const;

/** The stack's parameters. */
export function parameters(): Section {
  const count = (description: string, value: number) => ({ Type: 'Number', MinValue: 1, Default: value, Description: description });
  return {
    CodeBucket: { Type: 'String', Description: 'S3 bucket holding the zipped dist/gateway.mjs' },
    CodeKey: { Type: 'String', Description: 'S3 key of the zipped dist/gateway.mjs (a new key publishes a new function version)' },
    ReleaseBucket: { Type: 'String', Description: 'S3 bucket holding the release archive (infra/aws/release.sh) the machines install' },
    ReleaseKey: { Type: 'String', Description: 'S3 key of the release archive (.tar.gz)' },
    CertificateArn: { Type: 'String', Description: 'ACM certificate of the service\'s host name, for the entry\'s HTTPS listener' },
    ...Object.fromEntries(
      Object.entries(SECRET_PARAMETERS).map(([param, setting]) => [
        param,
        // Letters, digits and base64's, the key ring's and hex's punctuation: the value goes into JSON (the stack's secret) and an environment file as it is.
        { Type: 'String', NoEcho: true, MinLength: 32, AllowedPattern: '^[A-Za-z0-9+/=:,._-]+$', Description: setting },
      ]),
    ),
    FunctionEgress: {
      Type: 'String',
      Default: 'public',
      Description: 'SVCD_FUNCTION_EGRESS of the agents: public, none, or host names; anything but none adds a NAT gateway',
    },
    ImageId: {
      Type: 'AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>',
      Default: '/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-arm64',
      Description: 'Amazon Linux 2023 image of the machines (its architecture must match the release archive)',
    },
    AgentInstanceType: { Type: 'String', Default: 'm7g.large', Description: 'engine machines' },
    AgentDiskGiB: { Type: 'Number', MinValue: 20, Default: 100, Description: 'root volume of an engine machine (SVCD_ROOT: tenants, snapshots)' },
    AgentCount: count('engine machines (scale out by raising it; a machine leaving is drained first)', 2),
    AgentMaxCount: count('most engine machines; above AgentCount so that a rolling replacement starts the new machine before draining the old', 3),
    WorkerInstanceType: { Type: 'String', Default: 'c7g.large', Description: 'Node workers' },
    WorkerMinCount: count('least Node workers', 2),
    WorkerMaxCount: count('most Node workers (scaled on CPU between the two)', 4),
  };
}

/** The template's conditions. */
export function conditions(): Section {
  return { FunctionsReachOut: { 'Fn::Not': [{ 'Fn::Equals': [{ Ref: 'FunctionEgress' }, 'none'] }] } };
}
