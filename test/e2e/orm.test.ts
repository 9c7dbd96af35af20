/**
 * The ORM adapters as they ship (dist/client/drizzle.mjs and kysely.mjs, built by `npm test`) with
 * the real drizzle-orm and kysely, against the local stack (docs/sdk.md "ORMs"): a schema made
 * through each library (Drizzle's migrator, Kysely's schema builder and Migrator), inserts, selects with joins,
 * a batch in one transaction (all or nothing), and errors carrying the engine's code.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { DrizzleQueryError, eq, relations, sql } from 'drizzle-orm';
import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import type { SqliteRemoteDatabase } from 'drizzle-orm/sqlite-proxy';
import { migrate } from 'drizzle-orm/sqlite-proxy/migrator';
import { Kysely, Migrator, sql as ksql, type Generated } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../infra/local/stack.ts';
import { startSuiteStack } from '../helpers/stack.ts';
import { REPO, tempDir } from '../helpers/env.ts';

type Sdk = typeof import('../../client/index.ts');
type DrizzleAdapter = typeof import('../../client/drizzle.ts');
type KyselyAdapter = typeof import('../../client/kysely.ts');
type Client = import('../../client/index.ts').SvcClient;

const dir = tempDir('svc-orm-e2e-');
let stack: Stack;
let sdk: Sdk;
let client: Client;
const dist = (file: string) => import(pathToFileURL(join(REPO, 'dist/client', file)).href);

beforeAll(async () => {
  sdk = (await dist('index.mjs')) as Sdk;
  stack = await startSuiteStack(dir.dir);
  const anonymous = sdk.createClient({ baseUrl: stack.url });
  const { token } = await anonymous.signup({ name: 'orm' });
  const account = anonymous.withCredentials({ token });
  const project = account.project((await account.projects.create({ name: 'orm' })).id);
  await project.wakeup();
  client = sdk.createClient({ baseUrl: stack.url, key: (await project.keys.create({ label: 'orm' })).key });
}, 120_000);
afterAll(async () => {
  await stack?.stop();
  dir.cleanup();
});

/** The engine's refusal of a statement, as the SDK throws it. */
const engineError = (message: RegExp) => ({ status: 400, code: 'sql_error', source: 'engine', message: expect.stringMatching(message) });

describe('svc-cloud/drizzle', () => {
  const users = sqliteTable('users', {
    id: integer('id').primaryKey({ autoIncrement: true }),
    name: text('name').notNull().unique(),
    active: integer('active', { mode: 'boolean' }).notNull().default(true),
    joined: integer('joined', { mode: 'timestamp' }),
  });
  const posts = sqliteTable('posts', {
    id: integer('id').primaryKey({ autoIncrement: true }),
    userId: integer('user_id')
      .notNull()
      .references(() => users.id),
    title: text('title').notNull(),
  });
  const usersRelations = relations(users, ({ many }) => ({ posts: many(posts) }));
  const postsRelations = relations(posts, ({ one }) => ({ author: one(users, { fields: [posts.userId], references: [users.id] }) }));
  const schema = { users, posts, usersRelations, postsRelations };
  let adapter: DrizzleAdapter;
  let db: SqliteRemoteDatabase<typeof schema>;

  beforeAll(async () => {
    adapter = (await dist('drizzle.mjs')) as DrizzleAdapter;
    db = adapter.drizzle(client, { schema });
  });

  it('makes the schema with drizzle-orm’s migrator, its statements in one batch', async () => {
    // A migrations folder as drizzle-kit writes it.
    const folder = join(dir.dir, 'drizzle');
    mkdirSync(join(folder, 'meta'), { recursive: true });
    writeFileSync(
      join(folder, 'meta/_journal.json'),
      JSON.stringify({ version: '7', dialect: 'sqlite', entries: [{ idx: 0, version: '6', when: 1_790_000_000_000, tag: '0000_init', breakpoints: true }] }),
    );
    writeFileSync(
      join(folder, '0000_init.sql'),
      [
        'CREATE TABLE `users` (`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL, `name` text NOT NULL, `active` integer DEFAULT true NOT NULL, `joined` integer);',
        'CREATE UNIQUE INDEX `users_name_unique` ON `users` (`name`);',
        'CREATE TABLE `posts` (`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL, `user_id` integer NOT NULL, `title` text NOT NULL, FOREIGN KEY (`user_id`) REFERENCES `users`(`id`));',
      ].join('\n--> statement-breakpoint\n'),
    );
    const run = async (queries: string[]) => {
      if (queries.length > 0) await client.batch(queries);
    };
    await migrate(db, run, { migrationsFolder: folder });
    await migrate(db, run, { migrationsFolder: folder }); // applied once: the second finds it recorded
    const tables = await client.sql("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('users', 'posts', '__drizzle_migrations') ORDER BY name");
    expect(tables.rows.map((r) => r.name)).toEqual(['__drizzle_migrations', 'posts', 'users']);
    expect((await client.sql('SELECT count(*) AS n FROM __drizzle_migrations')).rows[0]!.n).toBe(1);
  });

  it('inserts with returning, and reads rows back with their modes', async () => {
    const joined = new Date('2026-01-02T03:04:05.000Z');
    const inserted = await db.insert(users).values([{ name: 'ada', joined }, { name: 'grace', active: false }]).returning();
    expect(inserted).toEqual([
      { id: 1, name: 'ada', active: true, joined },
      { id: 2, name: 'grace', active: false, joined: null },
    ]);
    const run = await db.insert(posts).values([
      { userId: 1, title: 'notes on the engine' },
      { userId: 1, title: 'a second note' },
      { userId: 2, title: 'compilers' },
    ]);
    expect(run).toMatchObject({ rowsAffected: 3, lastInsertRowid: 3n });
    expect(await db.select().from(users).where(eq(users.name, 'ada')).get()).toEqual({ id: 1, name: 'ada', active: true, joined });
    expect(await db.select().from(users).where(eq(users.name, 'nobody')).get()).toBeUndefined();
    expect(await db.select({ n: sql<number>`count(*)` }).from(posts).all()).toEqual([{ n: 3 }]);
  });

  it('selects with joins and relational queries', async () => {
    await db.insert(users).values({ name: 'linus' });
    const joined = await db
      .select({ title: posts.title, author: users.name })
      .from(posts)
      .innerJoin(users, eq(posts.userId, users.id))
      .orderBy(posts.id);
    expect(joined).toEqual([
      { title: 'notes on the engine', author: 'ada' },
      { title: 'a second note', author: 'ada' },
      { title: 'compilers', author: 'grace' },
    ]);
    const left = await db.select({ name: users.name, post: posts.title }).from(users).leftJoin(posts, eq(posts.userId, users.id)).where(eq(users.name, 'linus'));
    expect(left).toEqual([{ name: 'linus', post: null }]);
    const withPosts = await db.query.users.findMany({ with: { posts: { columns: { title: true } } }, orderBy: users.id, columns: { name: true } });
    expect(withPosts).toEqual([
      { name: 'ada', posts: [{ title: 'notes on the engine' }, { title: 'a second note' }] },
      { name: 'grace', posts: [{ title: 'compilers' }] },
      { name: 'linus', posts: [] },
    ]);
  });

  it('runs a batch in one transaction: all of it, or nothing when a statement fails', async () => {
    const [insert, update, read] = await db.batch([
      db.insert(users).values({ name: 'barbara' }).returning({ id: users.id }),
      db.update(users).set({ active: false }).where(eq(users.name, 'ada')),
      db.select({ name: users.name }).from(users).where(eq(users.active, false)).orderBy(users.name),
    ]);
    expect(insert).toEqual([{ id: 4 }]);
    expect(update).toMatchObject({ rowsAffected: 1 });
    expect(read).toEqual([{ name: 'ada' }, { name: 'grace' }]);

    const failed = await db
      .batch([db.insert(users).values({ name: 'margaret' }), db.insert(users).values({ name: 'ada' })])
      .catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(sdk.SvcError);
    expect(failed).toMatchObject(engineError(/^statements\[1\]: .*UNIQUE constraint failed: users\.name/));
    expect(await db.select().from(users).where(eq(users.name, 'margaret'))).toEqual([]);
  });

  it('throws the engine’s error as the cause of Drizzle’s, and refuses interactive transactions before sending', async () => {
    const failed = await db.insert(posts).values({ userId: 1, title: null as unknown as string }).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(DrizzleQueryError);
    expect((failed as DrizzleQueryError).cause).toBeInstanceOf(sdk.SvcError);
    expect((failed as DrizzleQueryError).cause).toMatchObject(engineError(/NOT NULL constraint failed: posts\.title/));
    const bad = await db.run(sql`SELECT * FROM nowhere`).catch((e: unknown) => e);
    expect((bad as DrizzleQueryError).cause).toMatchObject(engineError(/no such table: nowhere/));

    await expect(db.transaction(async (tx) => tx.insert(users).values({ name: 'never' }))).rejects.toThrow(adapter.TRANSACTION_REFUSED);
    expect(await db.select().from(users).where(eq(users.name, 'never'))).toEqual([]);
  });
});

describe('svc-cloud/kysely', () => {
  interface Database {
    authors: { id: Generated<number>; name: string; born: number | null };
    books: { id: Generated<number>; author_id: number; title: string; pages: number | null };
  }
  let adapter: KyselyAdapter;
  let db: Kysely<Database>;

  beforeAll(async () => {
    adapter = (await dist('kysely.mjs')) as KyselyAdapter;
    db = new Kysely<Database>({ dialect: new adapter.SvcDialect({ client }) });
  });

  it('makes the schema with the schema builder, and introspects it', async () => {
    await db.schema
      .createTable('authors')
      .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
      .addColumn('name', 'text', (c) => c.notNull().unique())
      .addColumn('born', 'integer')
      .execute();
    await db.schema
      .createTable('books')
      .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
      .addColumn('author_id', 'integer', (c) => c.notNull().references('authors.id'))
      .addColumn('title', 'text', (c) => c.notNull())
      .addColumn('pages', 'integer', (c) => c.check(ksql`pages > 0`))
      .execute();
    await db.schema.createIndex('books_by_author').on('books').column('author_id').execute();
    const tables = await db.introspection.getTables();
    const books = tables.find((t) => t.name === 'books');
    expect(books?.columns.map((c) => [c.name, c.dataType, c.isNullable])).toEqual([
      ['id', 'INTEGER', true],
      ['author_id', 'INTEGER', false],
      ['title', 'TEXT', false],
      ['pages', 'INTEGER', true],
    ]);
  });

  it('runs Kysely’s Migrator, which sends no BEGIN on SQLite’s adapter', async () => {
    const migrator = new Migrator({
      db,
      provider: {
        getMigrations: async () => ({
          '0001_tags': {
            up: async (m: Kysely<unknown>) => {
              await m.schema.createTable('tags').addColumn('name', 'text', (c) => c.primaryKey()).execute();
              await m.schema.createIndex('tags_by_name').on('tags').column('name').execute();
            },
          },
        }),
      },
    });
    const first = await migrator.migrateToLatest();
    expect([first.error, first.results]).toEqual([undefined, [{ migrationName: '0001_tags', direction: 'Up', status: 'Success' }]]);
    expect(await migrator.migrateToLatest()).toEqual({ results: [] });
    expect((await client.sql("SELECT name FROM sqlite_master WHERE name = 'tags'")).rows).toHaveLength(1);
  });

  it('inserts with returning and insertId, and selects with joins', async () => {
    const ada = await db.insertInto('authors').values({ name: 'Ada', born: 1815 }).returning(['id', 'name']).executeTakeFirstOrThrow();
    expect(ada).toEqual({ id: 1, name: 'Ada' });
    const inserted = await db.insertInto('authors').values({ name: 'Mary', born: 1797 }).executeTakeFirstOrThrow();
    expect(inserted).toMatchObject({ insertId: 2n, numInsertedOrUpdatedRows: 1n });
    await db
      .insertInto('books')
      .values([
        { author_id: 1, title: 'Notes', pages: 65 },
        { author_id: 2, title: 'Frankenstein', pages: 280 },
        { author_id: 2, title: 'The Last Man', pages: null },
      ])
      .execute();
    const rows = await db
      .selectFrom('books')
      .innerJoin('authors', 'authors.id', 'books.author_id')
      .select(['books.title', 'authors.name as author', 'books.pages'])
      .orderBy('books.id')
      .execute();
    expect(rows).toEqual([
      { title: 'Notes', author: 'Ada', pages: 65 },
      { title: 'Frankenstein', author: 'Mary', pages: 280 },
      { title: 'The Last Man', author: 'Mary', pages: null },
    ]);
    const counts = await db
      .selectFrom('authors')
      .leftJoin('books', 'books.author_id', 'authors.id')
      .select(['authors.name', (eb) => eb.fn.count<number>('books.id').as('books')])
      .groupBy('authors.id')
      .orderBy('authors.id')
      .execute();
    expect(counts).toEqual([
      { name: 'Ada', books: 1 },
      { name: 'Mary', books: 2 },
    ]);
    const streamed = [];
    for await (const row of db.selectFrom('books').select('title').orderBy('id').stream(2)) streamed.push(row.title);
    expect(streamed).toEqual(['Notes', 'Frankenstein', 'The Last Man']);
  });

  it('runs a batch in one transaction: all of it, or nothing when a statement fails', async () => {
    const [insert, update, read] = await adapter.batch(client, [
      db.insertInto('authors').values({ name: 'Octavia', born: 1947 }).returning('id'),
      db.updateTable('books').set({ pages: 340 }).where('title', '=', 'The Last Man'),
      db.selectFrom('books').select(['title', 'pages']).where('author_id', '=', 2).orderBy('id'),
    ]);
    expect(insert.rows).toEqual([{ id: 3 }]);
    expect(update.numAffectedRows).toBe(1n);
    expect(read.rows).toEqual([
      { title: 'Frankenstein', pages: 280 },
      { title: 'The Last Man', pages: 340 },
    ]);

    const failed = await adapter
      .batch(client, [db.insertInto('authors').values({ name: 'Ursula', born: 1929 }), db.insertInto('books').values({ author_id: 3, title: 'Kindred', pages: 0 })])
      .catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(sdk.SvcError);
    expect(failed).toMatchObject(engineError(/^statements\[1\]: .*CHECK constraint failed/));
    expect(await db.selectFrom('authors').select('name').where('name', '=', 'Ursula').execute()).toEqual([]);
  });

  it('throws the engine’s errors as SvcErrors, and refuses interactive transactions before sending', async () => {
    const failed = await db.insertInto('authors').values({ name: 'Ada', born: null }).execute().catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(sdk.SvcError);
    expect(failed).toMatchObject(engineError(/UNIQUE constraint failed: authors\.name/));
    await expect(ksql`SELECT * FROM nowhere`.execute(db)).rejects.toMatchObject(engineError(/no such table: nowhere/));

    await expect(db.transaction().execute(async (trx) => trx.insertInto('authors').values({ name: 'never', born: null }).execute())).rejects.toThrow(
      adapter.TRANSACTION_REFUSED,
    );
    expect(await db.selectFrom('authors').select('name').where('name', '=', 'never').execute()).toEqual([]);
  });
});
