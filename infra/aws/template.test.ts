import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { settingsSchema } from '../../shared/config.ts';
import { GSI1, TABLE_KEYS } from '../../shared/db/table.ts';
import { generateTemplate, templateText } from './template.ts';

const here = import.meta.dirname;

describe('the deployment template', () => {
  it('is the committed file, regenerated from the code (run `npm run infra:template` after changing routes or the table)', () => {
    expect(readFileSync(join(here, 'template.json'), 'utf8')).toBe(templateText());
  });

  it('defines the table and index the repository uses', () => {
    const t = generateTemplate() as any;
    const table = t.Resources.Table.Properties;
    expect(table.KeySchema).toEqual([
      { AttributeName: TABLE_KEYS.pk, KeyType: 'HASH' },
      { AttributeName: TABLE_KEYS.sk, KeyType: 'RANGE' },
    ]);
    expect(table.GlobalSecondaryIndexes.map((g: any) => g.IndexName)).toEqual([GSI1.name]);
    expect(table.GlobalSecondaryIndexes[0].KeySchema.map((k: any) => k.AttributeName)).toEqual([GSI1.pk, GSI1.sk]);
    expect(t.Resources.BlobBucket.Properties.PublicAccessBlockConfiguration.BlockPublicAcls).toBe(true);
    expect(t.Resources.BlobBucket.Properties.BucketEncryption).toBeDefined();
  });

  it('passes every secret as a NoEcho parameter, never a literal', () => {
    const t = generateTemplate() as any;
    for (const p of ['SessionSecret', 'KeyPepper', 'InternalSecret', 'SecretsKeys']) {
      expect(t.Parameters[p].NoEcho).toBe(true);
      // Safe as they are inside the secret's JSON and an environment file: what `openssl rand` gives passes, a quote does not.
      const allowed = new RegExp(t.Parameters[p].AllowedPattern);
      expect(allowed.test(`k1:${Buffer.alloc(32, 255).toString('base64')},k2:${'ab'.repeat(32)}`)).toBe(true);
      expect(allowed.test('a"b')).toBe(false);
    }
    const env = t.Resources.Function.Properties.Environment.Variables;
    for (const name of ['SVCD_SESSION_SECRET', 'SVCD_KEY_PEPPER', 'SVCD_INTERNAL_SECRET', 'SVCD_SECRETS_KEYS']) {
      expect(env[name]).toHaveProperty('Ref');
    }
    for (const name of Object.keys(env)) expect(Object.keys(settingsSchema.shape)).toContain(name);
    // The machines read the same values from the stack's secret, one JSON object of SVCD_* names.
    const secret = t.Resources.Settings.Properties.SecretString['Fn::Sub'] as string;
    expect(JSON.parse(secret.replace(/\$\{(\w+)\}/g, '$1'))).toEqual({
      SVCD_SESSION_SECRET: 'SessionSecret',
      SVCD_KEY_PEPPER: 'KeyPepper',
      SVCD_INTERNAL_SECRET: 'InternalSecret',
      SVCD_SECRETS_KEYS: 'SecretsKeys',
    });
  });
});

describe('docs/deploy.md', () => {
  it('lists every setting', () => {
    const doc = readFileSync(join(here, '../../docs/deploy.md'), 'utf8');
    for (const name of Object.keys(settingsSchema.shape)) expect(doc, name).toContain(`\`${name}\``);
  });
});
