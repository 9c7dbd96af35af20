/**
 * The security groups (docs/deploy.md "The topology"): the entry takes HTTPS from anywhere and
 * reaches only the Node workers' port and the agents' `/v2` port; the agents' internal port admits
 * the function and the workers only, their `/v2` port the entry and the other agents only; nothing
 * admits the engines' loopback ports or the metrics port. Rules between groups are resources of their
 * own (two groups naming each other would be a cycle); every group states its way out, so none keeps
 * EC2's default allow-all.
 */
import { ifCondition, nameTag, ref, type Section } from './cfn.ts';
import { PORTS } from './params.ts';

/** The groups, by logical id, and what each guards. */
export const GROUPS = {
  EntrySecurityGroup: 'the load balancer',
  FunctionSecurityGroup: 'the handlers function',
  WorkerSecurityGroup: 'the Node workers',
  AgentSecurityGroup: 'the engine machines (host agents)',
  EndpointSecurityGroup: 'the interface endpoints',
} as const;
type Group = keyof typeof GROUPS;

/** One TCP rule between two groups: `from` may open a connection to `to` on `port`. */
interface Link {
  from: Group;
  to: Group;
  port: number;
  why: string;
}

/** Every connection allowed between groups: each becomes an ingress rule of `to` and an egress rule of `from`. */
export const LINKS: readonly Link[] = [
  { from: 'EntrySecurityGroup', to: 'WorkerSecurityGroup', port: PORTS.worker, why: '/v0 routes with bytes, streams or event streams' },
  { from: 'EntrySecurityGroup', to: 'AgentSecurityGroup', port: PORTS.dataplane, why: '/v2' },
  { from: 'FunctionSecurityGroup', to: 'AgentSecurityGroup', port: PORTS.agentInternal, why: 'internal API' },
  { from: 'WorkerSecurityGroup', to: 'AgentSecurityGroup', port: PORTS.agentInternal, why: 'internal API' },
  { from: 'AgentSecurityGroup', to: 'AgentSecurityGroup', port: PORTS.dataplane, why: '/v2 forwarded to the owning agent' },
  { from: 'WorkerSecurityGroup', to: 'EndpointSecurityGroup', port: 443, why: 'Secrets Manager at boot' },
  { from: 'AgentSecurityGroup', to: 'EndpointSecurityGroup', port: 443, why: 'Secrets Manager at boot, Auto Scaling when drained' },
];

const tcp = (port: number) => ({ IpProtocol: 'tcp', FromPort: port, ToPort: port });
const anywhere = (port: number, why: string) => ({ ...tcp(port), CidrIp: '0.0.0.0/0', Description: why });
/** A rule that matches nothing: a group whose only ways out are to other groups (or none) says so with it. */
export const NOTHING_OUT = { IpProtocol: 'icmp', FromPort: 252, ToPort: 86, CidrIp: '255.255.255.255/32', Description: 'no other way out' };
/** AWS's APIs: DynamoDB and S3 through the gateway endpoints, the rest through the interface endpoints (or the NAT gateway). */
const AWS_APIS = anywhere(443, 'AWS APIs (DynamoDB and S3 through the gateway endpoints)');

/** Each group's own rules to and from addresses (not groups). */
function groupResource(group: Group): Record<string, unknown> {
  const ingress: Record<Group, unknown[]> = {
    EntrySecurityGroup: [anywhere(443, 'HTTPS from clients'), anywhere(80, 'HTTP, redirected to HTTPS')],
    FunctionSecurityGroup: [],
    WorkerSecurityGroup: [],
    AgentSecurityGroup: [],
    EndpointSecurityGroup: [],
  };
  const egress: Record<Group, unknown> = {
    EntrySecurityGroup: [NOTHING_OUT],
    FunctionSecurityGroup: [AWS_APIS],
    WorkerSecurityGroup: [AWS_APIS],
    // Functions' fetch may reach any public address and port (SVCD_FUNCTION_EGRESS; docs/functions.md "Egress").
    AgentSecurityGroup: ifCondition('FunctionsReachOut', [{ IpProtocol: '-1', CidrIp: '0.0.0.0/0', Description: 'AWS APIs and functions\' fetch' }], [AWS_APIS]),
    EndpointSecurityGroup: [NOTHING_OUT],
  };
  return {
    Type: 'AWS::EC2::SecurityGroup',
    Properties: {
      GroupDescription: `svc-cloud: ${GROUPS[group]}`,
      VpcId: ref('Vpc'),
      ...(ingress[group].length > 0 ? { SecurityGroupIngress: ingress[group] } : {}),
      SecurityGroupEgress: egress[group],
      Tags: nameTag(group.replace('SecurityGroup', '').toLowerCase()),
    },
  };
}

/** The security groups and the rules between them. */
export function securityResources(): Section {
  const out: Section = {};
  for (const group of Object.keys(GROUPS) as Group[]) out[group] = groupResource(group);
  for (const link of LINKS) {
    const name = `${link.from.replace('SecurityGroup', '')}To${link.to.replace('SecurityGroup', '')}${link.port}`;
    out[`${name}In`] = {
      Type: 'AWS::EC2::SecurityGroupIngress',
      Properties: { GroupId: ref(link.to), SourceSecurityGroupId: ref(link.from), ...tcp(link.port), Description: link.why },
    };
    out[`${name}Out`] = {
      Type: 'AWS::EC2::SecurityGroupEgress',
      Properties: { GroupId: ref(link.from), DestinationSecurityGroupId: ref(link.to), ...tcp(link.port), Description: link.why },
    };
  }
  return out;
}
