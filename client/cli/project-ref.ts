/**
 * Which project a command is about (docs/cli.md "Projects by name, and linked directories"): a
 * project id, a project name (looked up among the account's projects; two projects of that name are
 * an error listing their ids), `--project`/`SVC_PROJECT`, or the project the directory is linked to
 * (`svc link`, a `.svc/project.json` in the directory or one of its parents, as `vercel link` keeps
 * `.vercel/project.json`).
 *
 * Commands declare PROJECT as their first argument; `takesProject` makes it optional. Which operand
 * is the project is decided by count (`projectFirst`), before any request; the reference is turned
 * into an id by `resolveProject` when the command runs.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Argument, Command } from 'commander';
import { ID_PATTERNS } from '../../shared/ids.ts';
import type { SvcClient } from '../client.ts';
import { CliError, UsageError } from './errors.ts';

/** What a linked directory records. */
export interface ProjectLink {
  project_id: string;
  name: string;
  base_url: string;
}

/** The link's folder and file, beside the user's code. */
export const LINK_DIR = '.svc';
export const LINK_FILE = 'project.json';

/** The longest project name (the contract's `name`: 1 to 64 characters). */
const NAME_MAX = 64;

/** The nearest link from `dir` up to the root: its file and what it says; null when none. */
export function findLink(dir: string): { file: string; link: ProjectLink } | null {
  for (let at = dir; ; at = dirname(at)) {
    const file = join(at, LINK_DIR, LINK_FILE);
    if (existsSync(file)) {
      let parsed: Partial<ProjectLink>;
      try {
        parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<ProjectLink>;
      } catch {
        throw new CliError(`${file} is not valid JSON`, 'run `svc link PROJECT` again, or remove it');
      }
      if (typeof parsed.project_id !== 'string' || !ID_PATTERNS.prj.test(parsed.project_id)) {
        throw new CliError(`${file} names no project id`, 'run `svc link PROJECT` again, or remove it');
      }
      return { file, link: { project_id: parsed.project_id, name: String(parsed.name ?? ''), base_url: String(parsed.base_url ?? '') } };
    }
    if (dirname(at) === at) return null;
  }
}

/** Writes the link of `dir` (`dir/.svc/project.json`, the folder ignored by git); answers its file. */
export function writeLink(dir: string, link: ProjectLink): string {
  const folder = join(dir, LINK_DIR);
  mkdirSync(folder, { recursive: true });
  const ignore = join(folder, '.gitignore');
  // A link is per checkout (a teammate may link their own project), as `.vercel/` is.
  if (!existsSync(ignore)) writeFileSync(ignore, '*\n');
  const file = join(folder, LINK_FILE);
  const temp = `${file}.${process.pid}.tmp`;
  writeFileSync(temp, `${JSON.stringify(link, null, 2)}\n`);
  renameSync(temp, file);
  return file;
}

/** How a command's operands are laid out after PROJECT (recorded by `takesProject`). */
export interface OperandShape {
  /** The names of the arguments after PROJECT, as help shows them (`<name>`, `[path]`, `<channels...>`). */
  rest: string[];
  /** How many of them are required. */
  required: number;
  /** How many more may be given (Infinity for a variadic last one). */
  optional: number;
}

const shapes = new WeakMap<Command, OperandShape>();

/**
 * Makes the first declared argument of `command` (PROJECT) optional: every argument is declared
 * optional to commander, the usage line shows the real shape, and the operands are placed by
 * `placeOperands` before the action runs (program.ts).
 */
export function takesProject(command: Command): Command {
  const [, ...rest] = command.registeredArguments;
  const name = (a: Argument) => {
    const inner = `${a.name()}${a.variadic ? '...' : ''}`;
    return a.required ? `<${inner}>` : `[${inner}]`;
  };
  const shape: OperandShape = {
    rest: rest.map(name),
    required: rest.filter((a) => a.required).length,
    optional: rest.some((a) => a.variadic) ? Infinity : rest.filter((a) => !a.required).length,
  };
  for (const a of command.registeredArguments) a.required = false;
  command.usage(['[options]', '[project]', ...shape.rest].join(' '));
  shapes.set(command, shape);
  return command;
}

/** The shape of a command that takes a project, or undefined. */
export function shapeOf(command: Command): OperandShape | undefined {
  return shapes.get(command);
}

/**
 * Whether the first operand is the project. Given: the command's shape, the operands, whether
 * `--project` (or `SVC_PROJECT`) names it, and the directory's link. When the count leaves a doubt
 * (optional arguments follow), the first operand is the project if it is a project id or the linked
 * project's own id or name, else if the directory is not linked.
 */
export function projectFirst(shape: OperandShape, operands: readonly string[], explicit: boolean, linked: ProjectLink | null): boolean {
  const n = operands.length;
  if (n < shape.required) throw new UsageError(`missing required argument '${shape.rest[n]!.replace(/[<>[\].]/g, '')}'`);
  if (explicit || n === shape.required) return false;
  const most = shape.required + shape.optional;
  if (n > most + 1) throw new UsageError(`too many arguments: expected ${['[project]', ...shape.rest].join(' ')}`);
  if (n === most + 1) return true;
  const first = operands[0]!;
  if (ID_PATTERNS.prj.test(first)) return true;
  if (linked) return first === linked.project_id || first === linked.name;
  return true;
}

/** The values the action gets: the project reference (undefined: the link's), then the rest in declaration order. */
export function placeOperands(command: Command, shape: OperandShape, operands: readonly string[], explicit: boolean, linked: ProjectLink | null): unknown[] {
  const first = projectFirst(shape, operands, explicit, linked);
  const rest = first ? operands.slice(1) : operands;
  const declared = command.registeredArguments.slice(1);
  const values: unknown[] = [first ? operands[0] : undefined];
  declared.forEach((arg, i) => {
    if (arg.variadic) values.push(rest.slice(i));
    else values.push(i < rest.length ? rest[i] : arg.defaultValue);
  });
  return values;
}

/** A PROJECT as typed: an id, or a name of 1 to 64 characters. */
export function projectRefArg(value: string): string {
  if (ID_PATTERNS.prj.test(value)) return value;
  if (value.length === 0 || value.length > NAME_MAX || value.startsWith('prj_')) {
    throw new UsageError(`PROJECT must be a project id such as prj_0123456789abcdef or a project name of 1 to ${NAME_MAX} characters (got ${JSON.stringify(value)})`);
  }
  return value;
}

/** The id of the project named `name` among the account's; none or several is an error naming them. */
export async function projectByName(client: SvcClient, name: string): Promise<string> {
  const all = await client.projects.list({ limit: 1000 }).all();
  const matches = all.filter((p) => p.name === name);
  if (matches.length === 1) return matches[0]!.id;
  if (matches.length === 0) {
    const near = all.filter((p) => p.name.toLowerCase() === name.toLowerCase()).map((p) => `"${p.name}" (${p.id})`);
    throw new CliError(`no project named "${name}"${near.length ? `; did you mean ${near.join(', ')}?` : ''}`, 'see `svc projects list` (PROJECT may be a name or an id)');
  }
  throw new CliError(
    `${matches.length} projects are named "${name}": ${matches.map((p) => p.id).join(', ')}`,
    'give the id instead (or rename one: `svc projects rename prj_… NEW_NAME`)',
  );
}
