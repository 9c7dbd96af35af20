/**
 * The two groups of machines (docs/deploy.md "The topology"), each a launch template and an Auto
 * Scaling group over the private subnets, registered with the entry's target group:
 * - the engine machines: one host agent each, their count set by `AgentCount`; a machine that leaves
 *   the group (a scale-in, an instance refresh, a replacement) is held by the `drain` lifecycle hook
 *   until its agent has relocated every project (infra/host-agent/svc-agent-drain.sh). They are
 *   replaced only when asked to (EC2 health checks): a `/v2` check that fails is not a reason to
 *   take a machine and its engines away.
 * - the Node workers: stateless, replaced when the entry finds them unhealthy, scaled on CPU.
 */
import { agentBootScript, AGENT_GROUP_NAME, DRAIN_HOOK, workerBootScript } from './boot.ts';
import { getAtt, ref, type Section, sub } from './cfn.ts';
import { PRIVATE_SUBNETS } from './network.ts';

interface Machine {
  instanceType: string;
  profile: string;
  securityGroup: string;
  boot: string;
  diskGiB: unknown;
  name: string;
}

function launchTemplate(m: Machine): Record<string, unknown> {
  return {
    Type: 'AWS::EC2::LaunchTemplate',
    Properties: {
      LaunchTemplateData: {
        ImageId: ref('ImageId'),
        InstanceType: ref(m.instanceType),
        IamInstanceProfile: { Arn: getAtt(m.profile, 'Arn') },
        SecurityGroupIds: [ref(m.securityGroup)],
        // IMDSv2 only, one hop: nothing the machine runs in a namespace of its own reaches the role's credentials.
        MetadataOptions: { HttpTokens: 'required', HttpPutResponseHopLimit: 1, InstanceMetadataTags: 'disabled' },
        BlockDeviceMappings: [{ DeviceName: '/dev/xvda', Ebs: { VolumeType: 'gp3', VolumeSize: m.diskGiB, Encrypted: true, DeleteOnTermination: true } }],
        UserData: { 'Fn::Base64': sub(m.boot) },
        TagSpecifications: [{ ResourceType: 'instance', Tags: [{ Key: 'Name', Value: sub(`\${AWS::StackName}-${m.name}`) }] }],
      },
    },
  };
}

/** The engine machines. */
function agentResources(): Section {
  return {
    AgentLaunchTemplate: launchTemplate({
      instanceType: 'AgentInstanceType',
      profile: 'AgentInstanceProfile',
      securityGroup: 'AgentSecurityGroup',
      boot: agentBootScript(),
      diskGiB: ref('AgentDiskGiB'),
      name: 'agent',
    }),
    AgentGroup: {
      Type: 'AWS::AutoScaling::AutoScalingGroup',
      Properties: {
        AutoScalingGroupName: sub(AGENT_GROUP_NAME),
        LaunchTemplate: { LaunchTemplateId: ref('AgentLaunchTemplate'), Version: getAtt('AgentLaunchTemplate', 'LatestVersionNumber') },
        MinSize: ref('AgentCount'),
        DesiredCapacity: ref('AgentCount'),
        MaxSize: ref('AgentMaxCount'),
        VPCZoneIdentifier: PRIVATE_SUBNETS.map(ref),
        TargetGroupARNs: [ref('AgentTargets')],
        HealthCheckType: 'EC2',
        // In the group from the start: no machine ever leaves without being drained.
        LifecycleHookSpecificationList: [
          { LifecycleHookName: DRAIN_HOOK, LifecycleTransition: 'autoscaling:EC2_INSTANCE_TERMINATING', HeartbeatTimeout: 900, DefaultResult: 'CONTINUE' },
        ],
      },
    },
  };
}

/** The Node workers. */
function workerResources(): Section {
  return {
    WorkerLaunchTemplate: launchTemplate({
      instanceType: 'WorkerInstanceType',
      profile: 'WorkerInstanceProfile',
      securityGroup: 'WorkerSecurityGroup',
      boot: workerBootScript(),
      diskGiB: 20,
      name: 'worker',
    }),
    WorkerGroup: {
      Type: 'AWS::AutoScaling::AutoScalingGroup',
      Properties: {
        LaunchTemplate: { LaunchTemplateId: ref('WorkerLaunchTemplate'), Version: getAtt('WorkerLaunchTemplate', 'LatestVersionNumber') },
        MinSize: ref('WorkerMinCount'),
        MaxSize: ref('WorkerMaxCount'),
        VPCZoneIdentifier: PRIVATE_SUBNETS.map(ref),
        TargetGroupARNs: [ref('WorkerTargets')],
        HealthCheckType: 'ELB',
        HealthCheckGracePeriod: 300,
      },
    },
    WorkerScaling: {
      Type: 'AWS::AutoScaling::ScalingPolicy',
      Properties: {
        AutoScalingGroupName: ref('WorkerGroup'),
        PolicyType: 'TargetTrackingScaling',
        TargetTrackingConfiguration: { PredefinedMetricSpecification: { PredefinedMetricType: 'ASGAverageCPUUtilization' }, TargetValue: 60 },
      },
    },
  };
}

/** Both groups of machines. */
export function machineResources(): Section {
  return { ...agentResources(), ...workerResources() };
}
