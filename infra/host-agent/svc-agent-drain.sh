#!/bin/sh
# Drains this engine machine before its Auto Scaling group ends it (docs/deploy.md "Rolling out"); run
# by svc-agent-drain.service on every engine machine of the AWS template (infra/aws/template/agents.ts).
# The group's lifecycle hook ($SVC_DRAIN_HOOK) holds a leaving machine in Terminating:Wait, and the
# instance metadata's target lifecycle state then reads Terminated. This waits for that, runs
# `svc-agent drain` (every project relocated to another live agent, this agent marked draining so that
# placement skips it) until it succeeds, keeping the hook alive meanwhile, then lets the termination go
# on. A drain that keeps failing holds the machine, saying so in the journal, rather than strand a project.
set -u
# The agent's command and the pauses (the unit sets none: these defaults; tests shorten them).
agent=${SVC_AGENT_COMMAND:-/opt/svc-cloud/bin/svc-agent}
poll=${SVC_DRAIN_POLL_SECONDS:-5}
retry=${SVC_DRAIN_RETRY_SECONDS:-30}

imds() {
  token=$(curl -sSf -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' http://169.254.169.254/latest/api/token) &&
    curl -sSf -H "X-aws-ec2-metadata-token: $token" "http://169.254.169.254/latest/meta-data/$1"
}

while [ "$(imds autoscaling/target-lifecycle-state 2>/dev/null)" != Terminated ]; do sleep "$poll"; done
instance=$(imds instance-id)
region=$(imds placement/region)

echo "leaving the group: draining"
until "$agent" drain; do
  echo "drain failed: holding the machine, trying again in $retry s" >&2
  aws autoscaling record-lifecycle-action-heartbeat --region "$region" --auto-scaling-group-name "$SVC_AGENT_GROUP" \
    --lifecycle-hook-name "$SVC_DRAIN_HOOK" --instance-id "$instance" || true
  sleep "$retry"
done
echo "drained: letting the termination go on"
aws autoscaling complete-lifecycle-action --region "$region" --auto-scaling-group-name "$SVC_AGENT_GROUP" \
  --lifecycle-hook-name "$SVC_DRAIN_HOOK" --instance-id "$instance" --lifecycle-action-result CONTINUE
