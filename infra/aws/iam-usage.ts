/**
 * The IAM actions the code needs, read from its source (docs/deploy.md "Permissions"): every
 * DynamoDB and S3 request a deployed entry can send, found by parsing the modules it imports (with
 * oxc-parser) — `new XCommand(…)` of the AWS SDK, the items of a transaction (`Put`, `Update`,
 * `Delete`, `ConditionCheck`: a transaction is authorised item by item), the requests the wire sends
 * by hand (`db.wire('BatchGetItem', …)`, shared/db/wire.ts) and @aws-sdk/lib-storage's `Upload` —
 * each mapped to the IAM action AWS checks for it. The template's roles are compared with this.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { parseSync } from 'oxc-parser';

export const REPO = resolve(import.meta.dirname, '../..');

/** The IAM action(s) AWS checks for each operation (the SDK's command name without `Command`). */
const OPERATION_ACTIONS: Record<string, string[]> = {
  // @aws-sdk/lib-dynamodb's document commands and @aws-sdk/client-dynamodb's own.
  Get: ['dynamodb:GetItem'],
  GetItem: ['dynamodb:GetItem'],
  Put: ['dynamodb:PutItem'],
  PutItem: ['dynamodb:PutItem'],
  Update: ['dynamodb:UpdateItem'],
  UpdateItem: ['dynamodb:UpdateItem'],
  Delete: ['dynamodb:DeleteItem'],
  DeleteItem: ['dynamodb:DeleteItem'],
  ConditionCheck: ['dynamodb:ConditionCheckItem'],
  Query: ['dynamodb:Query'],
  Scan: ['dynamodb:Scan'],
  BatchGet: ['dynamodb:BatchGetItem'],
  BatchGetItem: ['dynamodb:BatchGetItem'],
  BatchWrite: ['dynamodb:BatchWriteItem'],
  BatchWriteItem: ['dynamodb:BatchWriteItem'],
  TransactGet: ['dynamodb:GetItem'],
  TransactGetItems: ['dynamodb:GetItem'],
  // A transaction needs no action of its own: its items' actions (collected from the items).
  TransactWrite: [],
  TransactWriteItems: [],
  DescribeTable: ['dynamodb:DescribeTable'],
  CreateTable: ['dynamodb:CreateTable'],
  // @aws-sdk/client-s3.
  PutObject: ['s3:PutObject'],
  // A read of a missing key answers 404 only to a caller allowed s3:ListBucket (403 otherwise), and
  // the blob store reads 404 as "no such blob" (shared/blobs/s3.ts `isMissing`).
  GetObject: ['s3:GetObject', 's3:ListBucket'],
  HeadObject: ['s3:GetObject', 's3:ListBucket'],
  DeleteObject: ['s3:DeleteObject'],
  DeleteObjects: ['s3:DeleteObject'],
  CopyObject: ['s3:GetObject', 's3:PutObject'],
  ListObjectsV2: ['s3:ListBucket'],
  ListObjects: ['s3:ListBucket'],
  CreateMultipartUpload: ['s3:PutObject'],
  UploadPart: ['s3:PutObject'],
  CompleteMultipartUpload: ['s3:PutObject'],
  AbortMultipartUpload: ['s3:AbortMultipartUpload'],
  // @aws-sdk/lib-storage's Upload: one PutObject, or a multipart upload it aborts on failure.
  Upload: ['s3:PutObject', 's3:AbortMultipartUpload'],
};

/** Transaction item kinds (TransactWriteItems), authorised as the single-item operation of that kind. */
const TRANSACTION_ITEM_KINDS = new Set(['Put', 'Update', 'Delete', 'ConditionCheck']);

/**
 * Functions of deployed modules that only the local stack calls (infra/local): the table is the
 * template's on AWS, never created by the code. The check `localOnlyCallers` keeps this true.
 */
export const LOCAL_ONLY: Record<string, string[]> = { 'shared/db/client.ts': ['ensureTable'] };

/** One request the source sends. */
export interface Operation {
  file: string;
  line: number;
  /** The innermost named function around it. */
  fn: string;
  operation: string;
}

type Node = { type: string; start: number; end: number; [key: string]: unknown };

/** Parsed modules of the tree, by repository-relative path. */
const parsed = new Map<string, { program: Node; text: string }>();

function parse(file: string, source?: string): { program: Node; text: string } {
  const cached = source === undefined ? parsed.get(file) : undefined;
  if (cached) return cached;
  const text = source ?? readFileSync(join(REPO, file), 'utf8');
  const { program, errors } = parseSync(file, text, { lang: 'ts' });
  if (errors.length > 0) throw new Error(`${file}: ${errors[0]!.message}`);
  const result = { program: program as unknown as Node, text };
  if (source === undefined) parsed.set(file, result);
  return result;
}

/** Calls `fn` on every node below `node` with the innermost named function around it. */
function walk(node: unknown, fn: (n: Node, enclosing: string) => void, enclosing = '<module>'): void {
  if (!node || typeof node !== 'object') return;
  if (Array.isArray(node)) {
    for (const child of node) walk(child, fn, enclosing);
    return;
  }
  const n = node as Node;
  let inner = enclosing;
  const init = (n.init as Node | null | undefined)?.type;
  const namedFunction = n.type === 'VariableDeclarator' ? init === 'ArrowFunctionExpression' || init === 'FunctionExpression' : n.type === 'FunctionDeclaration' || n.type === 'MethodDefinition';
  if (namedFunction) inner = ((n.id ?? n.key) as { name?: string } | undefined)?.name ?? enclosing;
  fn(n, enclosing);
  for (const [key, value] of Object.entries(n)) {
    if (key !== 'type' && key !== 'start' && key !== 'end' && value && typeof value === 'object') walk(value, fn, inner);
  }
}

function nameOf(node: unknown): string | undefined {
  const n = node as { type?: string; name?: string; value?: unknown } | null;
  if (n?.type === 'Identifier') return n.name;
  if (n?.type === 'Literal' && typeof n.value === 'string') return n.value;
  return undefined;
}

function isTableItem(value: unknown): boolean {
  const v = value as { type?: string; properties?: { type: string; key?: unknown }[] } | null;
  return v?.type === 'ObjectExpression' && (v.properties ?? []).some((p) => p.type === 'Property' && nameOf(p.key) === 'TableName');
}

/** The operations a module's source (`source`, or the file's) sends. */
export function operationsIn(file: string, source?: string): Operation[] {
  const { program, text } = parse(file, source);
  const found: Operation[] = [];
  const at = (n: Node, fn: string, operation: string) =>
    found.push({ file, line: text.slice(0, n.start).split('\n').length, fn, operation });
  walk(program, (n, fn) => {
    if (n.type === 'NewExpression') {
      const name = nameOf(n.callee);
      if (name === 'Upload') at(n, fn, 'Upload');
      else if (name?.endsWith('Command') && name !== 'Command') at(n, fn, name.slice(0, -'Command'.length));
    } else if (n.type === 'CallExpression') {
      const callee = n.callee as Node;
      const method = callee.type === 'MemberExpression' ? nameOf(callee.property) : nameOf(callee);
      const first = (n.arguments as Node[])[0];
      if (method === 'wire' && first?.type === 'Literal') at(n, fn, String(first.value));
    } else if (n.type === 'Property') {
      const key = nameOf(n.key);
      if (key && TRANSACTION_ITEM_KINDS.has(key) && isTableItem(n.value)) at(n, fn, key);
    }
  });
  return found;
}

/** The relative modules `file` imports at run time (type-only imports left out), repository-relative. */
export function importsOf(file: string): string[] {
  const { program } = parse(file);
  const specifiers: string[] = [];
  walk(program, (n) => {
    const kind = (n.importKind ?? n.exportKind) as string | undefined;
    if ((n.type === 'ImportDeclaration' || n.type === 'ExportNamedDeclaration' || n.type === 'ExportAllDeclaration') && kind !== 'type') {
      const source = nameOf(n.source);
      if (source) specifiers.push(source);
    } else if (n.type === 'ImportExpression') {
      const source = nameOf(n.source);
      if (source) specifiers.push(source);
    }
  });
  return specifiers
    .filter((s) => s.startsWith('.'))
    .map((s) => {
      const path = join(dirname(join(REPO, file)), s);
      const hit = [path, `${path}.ts`, join(path, 'index.ts')].find((p) => existsSync(p) && p.endsWith('.ts'));
      return hit ? relative(REPO, hit) : undefined;
    })
    .filter((p): p is string => p !== undefined);
}

/** Every module reachable from `entry` (repository-relative), the entry included. */
export function modulesFrom(entry: string): string[] {
  const seen = new Set<string>([entry]);
  const queue = [entry];
  while (queue.length > 0) {
    for (const next of importsOf(queue.shift()!)) {
      if (!seen.has(next)) {
        seen.add(next);
        queue.push(next);
      }
    }
  }
  return [...seen].sort();
}

/** The operations `entry`'s modules send, less those of the local-only functions (`LOCAL_ONLY`). */
export function operationsFrom(entry: string): Operation[] {
  return modulesFrom(entry)
    .flatMap((file) => operationsIn(file))
    .filter((op) => !(LOCAL_ONLY[op.file] ?? []).includes(op.fn));
}

/** The IAM actions of `operations`, sorted; throws on an operation with no known action. */
export function actionsOf(operations: Operation[]): string[] {
  const actions = new Set<string>();
  for (const op of operations) {
    const mapped = OPERATION_ACTIONS[op.operation];
    if (!mapped) throw new Error(`${op.file}:${op.line}: no IAM action known for ${op.operation} (infra/aws/iam-usage.ts)`);
    for (const a of mapped) actions.add(a);
  }
  return [...actions].sort();
}

/** Where `entry`'s modules import a local-only function (`LOCAL_ONLY`): should be nowhere. */
export function localOnlyCallers(entry: string): string[] {
  const names = new Set(Object.values(LOCAL_ONLY).flat());
  const found: string[] = [];
  for (const file of modulesFrom(entry)) {
    walk(parse(file).program, (n, fn) => {
      if (n.type === 'ImportSpecifier' && names.has(nameOf(n.imported) ?? '')) found.push(`${file} imports ${nameOf(n.imported)}`);
      if (n.type === 'CallExpression' && names.has(nameOf(n.callee) ?? '') && !names.has(fn)) found.push(`${file} calls ${nameOf(n.callee)} in ${fn}`);
    });
  }
  return found;
}

/** The high-level `aws s3` commands a script may run, as the IAM actions they need. */
function s3CommandActions(command: string, positional: string[]): string[] {
  const [source, destination] = positional;
  if (command !== 'cp') throw new Error(`no IAM action known for aws s3 ${command} (infra/aws/iam-usage.ts)`);
  return [...(source?.startsWith('s3://') ? ['s3:GetObject'] : []), ...(destination?.startsWith('s3://') ? ['s3:PutObject'] : [])];
}

/**
 * The IAM actions a shell script's AWS CLI calls need (the machines' boot scripts and the drain
 * watcher): `aws <service> <command>` is the API operation named by the command in PascalCase
 * (`secretsmanager get-secret-value` → `secretsmanager:GetSecretValue`); `aws s3 cp` reads an object
 * when its source is `s3://…` and writes one when its destination is. Comment lines are skipped.
 */
export function scriptActions(script: string): string[] {
  const text = script
    .split('\n')
    .filter((line) => !line.trim().startsWith('#'))
    .join('\n')
    .replace(/\\\n/g, ' ');
  const actions = new Set<string>();
  for (const line of text.split('\n')) {
    for (const m of line.matchAll(/(?:^|[\s;&|(])aws\s+([a-z0-9-]+)\s+([a-z0-9-]+)([^|;&)]*)/g)) {
      const [, service, command, rest] = m as unknown as [string, string, string, string];
      if (service === 's3') {
        const positional = rest.split(/\s+/).filter((t) => /^(s3:\/\/|\/|\.)/.test(t));
        for (const a of s3CommandActions(command, positional)) actions.add(a);
      } else {
        actions.add(`${service}:${command.replace(/(^|-)([a-z0-9])/g, (_, __, c: string) => c.toUpperCase())}`);
      }
    }
  }
  return [...actions].sort();
}
