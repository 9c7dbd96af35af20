/** Arguments every command group checks the same way, refused with exit 2 before any request. */
import { ID_PATTERNS } from '../../../shared/ids.ts';
import { UsageError } from '../errors.ts';

/** A project id argument. */
export function projectArg(value: string): string {
  if (!ID_PATTERNS.prj.test(value)) throw new UsageError(`PROJECT must be a project id such as prj_0123456789abcdef (got ${JSON.stringify(value)})`);
  return value;
}

/** A `--limit` option: a whole number from 1 to 1000. */
export function limitArg(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > 1000) throw new UsageError(`--limit must be a whole number from 1 to 1000 (got ${JSON.stringify(value)})`);
  return Number(value);
}

/** A JSON argument (a payload, parameters), named in the refusal. */
export function jsonArg(value: string, name: string): unknown {
  try {
    return JSON.parse(value) as unknown;
  } catch {
    throw new UsageError(`${name} must be JSON (got ${JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value)})`);
  }
}

/** How PROJECT is described in every command's help (docs/cli.md "Projects by name, and linked directories"). */
export const PROJECT_HELP = 'the project: a name or an id (default: --project, $SVC_PROJECT, or the linked one)';
