/**
 * The network (docs/deploy.md "The topology"): a VPC over two zones, a public subnet in each for the
 * entry (and the NAT gateway, when functions reach out), a private one in each for the function, the
 * Node workers and the agents. DynamoDB and S3 are reached through gateway endpoints and Secrets
 * Manager and Auto Scaling (boot, drain) through interface endpoints, so the platform itself needs no
 * way out; only functions' `fetch` (SVCD_FUNCTION_EGRESS other than `none`) adds a NAT gateway.
 */
import { getAtt, nameTag, ref, type Section, sub } from './cfn.ts';
import { NETWORK } from './params.ts';

/** Logical ids of the private subnets (the function, the workers, the agents) and the public ones (the entry). */
export const PRIVATE_SUBNETS = NETWORK.zones.map((z) => `PrivateSubnet${z.suffix}`);
export const PUBLIC_SUBNETS = NETWORK.zones.map((z) => `PublicSubnet${z.suffix}`);

/** The AWS services reached through interface endpoints: what the boot script and the drain watcher call. */
export const INTERFACE_ENDPOINTS = { SecretsManagerEndpoint: 'secretsmanager', AutoScalingEndpoint: 'autoscaling' } as const;

function subnets(): Section {
  const out: Section = {};
  NETWORK.zones.forEach((zone, i) => {
    const az = { 'Fn::Select': [i, { 'Fn::GetAZs': '' }] };
    out[`PublicSubnet${zone.suffix}`] = {
      Type: 'AWS::EC2::Subnet',
      Properties: { VpcId: ref('Vpc'), CidrBlock: zone.public, AvailabilityZone: az, Tags: nameTag(`public-${zone.suffix.toLowerCase()}`) },
    };
    out[`PrivateSubnet${zone.suffix}`] = {
      Type: 'AWS::EC2::Subnet',
      Properties: { VpcId: ref('Vpc'), CidrBlock: zone.private, AvailabilityZone: az, Tags: nameTag(`private-${zone.suffix.toLowerCase()}`) },
    };
    out[`PublicRoutes${zone.suffix}`] = {
      Type: 'AWS::EC2::SubnetRouteTableAssociation',
      Properties: { SubnetId: ref(`PublicSubnet${zone.suffix}`), RouteTableId: ref('PublicRouteTable') },
    };
    out[`PrivateRoutes${zone.suffix}`] = {
      Type: 'AWS::EC2::SubnetRouteTableAssociation',
      Properties: { SubnetId: ref(`PrivateSubnet${zone.suffix}`), RouteTableId: ref('PrivateRouteTable') },
    };
  });
  return out;
}

function routing(): Section {
  return {
    InternetGateway: { Type: 'AWS::EC2::InternetGateway', Properties: { Tags: nameTag('igw') } },
    InternetGatewayAttachment: { Type: 'AWS::EC2::VPCGatewayAttachment', Properties: { VpcId: ref('Vpc'), InternetGatewayId: ref('InternetGateway') } },
    PublicRouteTable: { Type: 'AWS::EC2::RouteTable', Properties: { VpcId: ref('Vpc'), Tags: nameTag('public') } },
    PublicDefaultRoute: {
      Type: 'AWS::EC2::Route',
      DependsOn: 'InternetGatewayAttachment',
      Properties: { RouteTableId: ref('PublicRouteTable'), DestinationCidrBlock: '0.0.0.0/0', GatewayId: ref('InternetGateway') },
    },
    PrivateRouteTable: { Type: 'AWS::EC2::RouteTable', Properties: { VpcId: ref('Vpc'), Tags: nameTag('private') } },
    // Functions' fetch only (SVCD_FUNCTION_EGRESS): nothing of the platform's own goes this way.
    NatAddress: { Type: 'AWS::EC2::EIP', Condition: 'FunctionsReachOut', DependsOn: 'InternetGatewayAttachment', Properties: { Domain: 'vpc' } },
    NatGateway: {
      Type: 'AWS::EC2::NatGateway',
      Condition: 'FunctionsReachOut',
      Properties: { AllocationId: getAtt('NatAddress', 'AllocationId'), SubnetId: ref(PUBLIC_SUBNETS[0]!), Tags: nameTag('nat') },
    },
    PrivateDefaultRoute: {
      Type: 'AWS::EC2::Route',
      Condition: 'FunctionsReachOut',
      Properties: { RouteTableId: ref('PrivateRouteTable'), DestinationCidrBlock: '0.0.0.0/0', NatGatewayId: ref('NatGateway') },
    },
  };
}

function endpoints(): Section {
  const gateway = (service: string) => ({
    Type: 'AWS::EC2::VPCEndpoint',
    Properties: { VpcId: ref('Vpc'), VpcEndpointType: 'Gateway', ServiceName: sub(`com.amazonaws.\${AWS::Region}.${service}`), RouteTableIds: [ref('PrivateRouteTable')] },
  });
  const iface = (service: string) => ({
    Type: 'AWS::EC2::VPCEndpoint',
    Properties: {
      VpcId: ref('Vpc'),
      VpcEndpointType: 'Interface',
      ServiceName: sub(`com.amazonaws.\${AWS::Region}.${service}`),
      PrivateDnsEnabled: true,
      SubnetIds: PRIVATE_SUBNETS.map(ref),
      SecurityGroupIds: [ref('EndpointSecurityGroup')],
    },
  });
  return {
    DynamoDbEndpoint: gateway('dynamodb'),
    S3Endpoint: gateway('s3'),
    ...Object.fromEntries(Object.entries(INTERFACE_ENDPOINTS).map(([name, service]) => [name, iface(service)])),
  };
}

/** The network's resources. */
export function networkResources(): Section {
  return {
    Vpc: { Type: 'AWS::EC2::VPC', Properties: { CidrBlock: NETWORK.cidr, EnableDnsSupport: true, EnableDnsHostnames: true, Tags: nameTag('vpc') } },
    ...subnets(),
    ...routing(),
    ...endpoints(),
  };
}
