/** Which operand is PROJECT, names and links (client/cli/project-ref.ts). */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { afterAll, describe, expect, it } from 'vitest';
import { findLink, placeOperands, projectFirst, projectRefArg, takesProject, writeLink, type OperandShape } from './project-ref.ts';

const dir = mkdtempSync(join(tmpdir(), 'svc-cli-link-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ID = 'prj_0123456789abcdef';
const linked = { project_id: 'prj_fedcba9876543210', name: 'my app', base_url: 'http://x' };

describe('projectFirst', () => {
  const deploy: OperandShape = { rest: ['<name>', '<file>'], required: 2, optional: 0 };
  const sql: OperandShape = { rest: ['[statement]'], required: 0, optional: 1 };
  const tail: OperandShape = { rest: ['<channels...>'], required: 1, optional: Infinity };

  it('decides by count when the count leaves no doubt', () => {
    expect(projectFirst(deploy, ['hello', 'a.ts'], false, null)).toBe(false);
    expect(projectFirst(deploy, ['my app', 'hello', 'a.ts'], false, null)).toBe(true);
    expect(() => projectFirst(deploy, ['hello'], false, linked)).toThrow(/missing required argument 'file'/);
    expect(() => projectFirst(deploy, ['a', 'b', 'c', 'd'], false, linked)).toThrow(/too many arguments/);
  });

  it('takes no operand as the project when --project names it', () => {
    expect(projectFirst(sql, ['SELECT 1'], true, null)).toBe(false);
    expect(projectFirst(tail, ['chat', 'system'], true, null)).toBe(false);
  });

  it('when optional arguments follow: an id, the linked project, else the link decides', () => {
    expect(projectFirst(sql, [ID], false, linked)).toBe(true);
    expect(projectFirst(sql, ['my app'], false, linked)).toBe(true);
    expect(projectFirst(sql, ['SELECT 1'], false, linked)).toBe(false);
    expect(projectFirst(sql, ['other'], false, null)).toBe(true);
    expect(projectFirst(tail, ['chat', 'system'], false, linked)).toBe(false);
    expect(projectFirst(tail, ['chat', 'system'], false, null)).toBe(true);
  });
});

describe('takesProject and placeOperands', () => {
  it('shows the real usage and places operands with defaults and a variadic last', () => {
    const invoke = takesProject(new Command('invoke').argument('<project>').argument('<name>').argument('[path]', 'the path', ''));
    expect(invoke.usage()).toBe('[options] [project] <name> [path]');
    expect(invoke.registeredArguments.every((a) => !a.required)).toBe(true);
    const shape = { rest: ['<name>', '[path]'], required: 1, optional: 1 };
    expect(placeOperands(invoke, shape, ['hello'], false, linked)).toEqual([undefined, 'hello', '']);
    expect(placeOperands(invoke, shape, ['my app', 'hello'], false, linked)).toEqual(['my app', 'hello', '']);
    expect(placeOperands(invoke, shape, ['hello', '/x'], false, linked)).toEqual([undefined, 'hello', '/x']);
    const tail = takesProject(new Command('tail').argument('<project>').argument('<channels...>'));
    expect(placeOperands(tail, { rest: ['<channels...>'], required: 1, optional: Infinity }, [ID, 'a', 'b'], false, linked)).toEqual([ID, ['a', 'b']]);
  });
});

describe('projectRefArg', () => {
  it('takes an id or a name of 1 to 64 characters', () => {
    expect(projectRefArg(ID)).toBe(ID);
    expect(projectRefArg('my app')).toBe('my app');
    expect(() => projectRefArg('x'.repeat(65))).toThrow(/PROJECT must be a project id/);
    expect(() => projectRefArg('prj_nope')).toThrow(/PROJECT must be a project id/);
  });
});

describe('links', () => {
  it('are found from the directory up, kept out of git, and a broken one is named', () => {
    const root = join(dir, 'app');
    const deep = join(root, 'src', 'deep');
    mkdirSync(deep, { recursive: true });
    expect(findLink(deep)).toBeNull();
    const file = writeLink(root, linked);
    expect(findLink(deep)).toEqual({ file, link: linked });
    expect(findLink(root)?.link.project_id).toBe(linked.project_id);
    writeFileSync(file, '{"project_id": 7}');
    expect(() => findLink(deep)).toThrow(/names no project id/);
  });
});
