/**
 * The operator's commands of `bin/svc-agent` (docs/deploy.md "Rolling out"; docs/durability.md):
 *
 *   svc-agent drain           move every project of this machine's agent to other live agents
 *   svc-agent undrain         let this machine's agent take projects again
 *   svc-agent lost AGENT_ID   declare a silent agent lost; its projects come back from off-machine copies
 *
 * Run on an engine machine with the agent's settings (the same environment file): the command calls
 * the agent's internal API (`SVCD_AGENT_URL`, else its port on loopback), signed with
 * `SVCD_INTERNAL_SECRET`, and prints the progress lines as they come. Exit 0 when every project
 * moved, 1 when one failed, 2 on a usage or settings error.
 */
import { createAgentClient } from '../shared/agent-client.ts';
import { ConfigError, loadSettings, type Settings } from '../shared/config.ts';
import { ServiceError } from '../shared/errors.ts';
import { ID_PATTERNS } from '../shared/ids.ts';
import { internalPaths } from '../shared/internal-paths.ts';

/** The commands this module runs. */
export const ADMIN_COMMANDS = ['drain', 'undrain', 'lost'] as const;

const USAGE = 'usage: svc-agent drain | svc-agent undrain | svc-agent lost AGENT_ID';

/** Runs one operator command; answers the exit code. */
export async function runAdminCommand(args: string[], env: NodeJS.ProcessEnv, print: (line: string) => void): Promise<number> {
  const [command, ...rest] = args;
  let settings: Settings;
  try {
    settings = loadSettings(env);
  } catch (err) {
    if (err instanceof ConfigError) return usage(print, `svc-agent: ${err.message}`);
    throw err;
  }
  const agent = { agent_id: 'local', internal_url: settings.SVCD_AGENT_URL ?? `http://127.0.0.1:${settings.SVCD_AGENT_PORT}` };
  const client = createAgentClient(settings.SVCD_INTERNAL_SECRET);
  try {
    if (command === 'undrain' && rest.length === 0) {
      const answer = await client.json<{ agent_id: string }>(agent, 'DELETE', internalPaths.drain());
      print(`agent ${answer.agent_id} takes projects again`);
      return 0;
    }
    if (command === 'drain' && rest.length === 0) return await follow(await client.fetch(agent, 'POST', internalPaths.drain()), print);
    if (command === 'lost' && rest.length === 1 && ID_PATTERNS.agt.test(rest[0]!)) {
      return await follow(await client.fetch(agent, 'POST', internalPaths.agentLost(rest[0]!)), print);
    }
    return usage(print, USAGE);
  } catch (err) {
    print(`svc-agent ${command}: ${err instanceof ServiceError ? `${err.code}: ${err.message}` : (err as Error).message}`);
    return 1;
  }
}

function usage(print: (line: string) => void, message: string): number {
  print(message);
  return 2;
}

/** Prints each NDJSON progress line as a sentence; answers 1 when a project failed or the command broke off. */
async function follow(response: Response, print: (line: string) => void): Promise<number> {
  let failed = false;
  let buffered = '';
  const decoder = new TextDecoder();
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    buffered += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffered.indexOf('\n')) >= 0) {
      const line = JSON.parse(buffered.slice(0, end)) as Record<string, unknown>;
      buffered = buffered.slice(end + 1);
      if (line.event === 'failed' || line.event === 'error') failed = true;
      print(sentence(line));
    }
  }
  return failed ? 1 : 0;
}

function sentence(line: Record<string, unknown>): string {
  switch (line.event) {
    case 'start':
      return `${String(line.projects)} projects to move`;
    case 'moved':
      return `moved ${String(line.project)} to ${String(line.to)} (${String(line.state)}, snapshot ${String(line.snapshot_id ?? 'none')})`;
    case 'failed':
      return `FAILED ${String(line.project)}: ${String(line.error)}`;
    case 'done':
      return `done: ${String(line.moved)} moved, ${String(line.failed)} failed`;
    default:
      return `error: ${String(line.error)}`;
  }
}
