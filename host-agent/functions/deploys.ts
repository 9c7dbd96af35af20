/**
 * Deploys and deletes of functions (docs/functions.md "Deploy", "Delete"): a deploy's module is
 * received, loaded in a runtime of its own (the deploy's check), stored in the blob store, then
 * recorded; a delete removes the head, then the versions with their blobs and the logs. Deploys and
 * deletes of one function run one at a time, in arrival order; checks one at a time per project.
 */
import type { Settings } from '../../shared/config.ts';
import type { Db } from '../../shared/db/client.ts';
import { allVersions, deleteHead, deleteVersions, moduleReferences, putVersion, type FunctionRecord, type FunctionVersionRecord } from '../../shared/db/functions.ts';
import { errors } from '../../shared/errors.ts';
import { randomHex } from '../../shared/ids.ts';
import type { FunctionSettings } from '../../shared/schemas/functions.ts';
import { nowIso } from '../../shared/time.ts';
import { ProjectQueue } from '../tenants/queue.ts';
import { invocationEnv, type SecretSet, type SecretSets } from './env.ts';
import type { FunctionHeads } from './heads.ts';
import { describeExit, exitWithin } from './invocation.ts';
import { Redactor, type FunctionLogStore } from './logs.ts';
import { newModuleBlobName, type ModuleFiles } from './modules.ts';
import type { ProjectRuntime } from './project-runtime.ts';

/** A deploy as the internal route hands it over. */
export interface DeployInput {
  projectId: string;
  name: string;
  settings: FunctionSettings;
  body: ReadableStream<Uint8Array>;
  length: number | null;
  maxBytes: number;
  /** `CLOUD_ORIGIN` for the module's check. */
  origin: string;
  actor: string;
  requestId: string;
}

/** A function's delete as the internal route hands it over. */
export interface RemoveInput {
  projectId: string;
  name: string;
  actor: string;
  requestId: string;
}

/** What deploys and deletes need of the agent's functions. */
export interface DeploysDeps {
  settings: Pick<Settings, 'SVCD_FUNCTION_START_TIMEOUT_MS'>;
  db: Db;
  log: (line: string) => void;
  now: () => number;
  heads: FunctionHeads;
  modules: ModuleFiles;
  secretSets: SecretSets;
  logs: FunctionLogStore;
  /** Throws 503 `function_runtime_missing` when functions cannot run here. */
  launch(): Promise<unknown>;
  /** A throwaway runtime of the project for a deploy's check (503 `function_runtime_missing` when it cannot start). */
  startCheckRuntime(projectId: string, memoryMb: number): Promise<ProjectRuntime>;
}

/** The deploys and deletes of the agent's functions. */
export class FunctionDeploys {
  readonly #deps: DeploysDeps;
  /** Deploys and deletes of one function, one at a time (keyed `<project>/<name>`). */
  readonly #serial = new ProjectQueue();
  /** Deploy checks, one at a time per project: a project deploying many functions at once starts one throwaway runtime at a time. */
  readonly #checks = new ProjectQueue();

  constructor(deps: DeploysDeps) {
    this.#deps = deps;
  }

  /**
   * Deploys a new version: the module is received, loaded in a runtime of its own (with the
   * project's environment, inside the sandbox), stored in the blob store, then recorded. Answers the
   * new head and whether the function was created.
   */
  deploy(input: DeployInput): Promise<{ head: FunctionRecord; created: boolean }> {
    const { projectId, name } = input;
    const { modules, db } = this.#deps;
    return this.#serial.run(`${projectId}/${name}`, async () => {
      if (this.#deps.heads.gone(projectId)) throw errors.notFound(`project ${projectId} not found`);
      await this.#deps.launch();
      const received = await modules.receive(projectId, input.body, input.maxBytes, input.length);
      try {
        const set = await this.#deps.secretSets.get(projectId);
        await this.#checks.run(projectId, () => this.#check(projectId, name, received.path, input.settings.memory_mb, input.origin, set));
        const kept = { ...received, path: await modules.keep(projectId, received) };
        const blob = await modules.store(projectId, await newModuleBlobName(projectId, name), kept);
        let result: { head: FunctionRecord; created: boolean };
        try {
          result = await putVersion(
            db,
            { project: projectId, name, sha256: received.sha256, size: received.size, ...input.settings, ...blob },
            { actor: input.actor, requestId: input.requestId, at: nowIso(this.#deps.now()) },
            () => randomHex(8),
          );
        } catch (err) {
          await modules.discard(projectId, blob).catch((e: unknown) => this.#logBlobLeft(projectId, blob.blob, e));
          throw err;
        }
        this.#deps.heads.remember(result.head);
        this.#deps.logs.append(projectId, name, result.head.version, 'agent', [`deployed version ${result.head.version} (${received.size} bytes, sha256 ${received.sha256})`]);
        return result;
      } finally {
        await modules.drop(received);
      }
    });
  }

  /**
   * Deletes a function: from the answer on it is 404 to every route; invocations in flight finish.
   * Its versions, their blobs and its logs are removed after the head. Answers the head as it was.
   */
  remove(input: RemoveInput): Promise<FunctionRecord> {
    const { projectId, name } = input;
    const { db, heads } = this.#deps;
    return this.#serial.run(`${projectId}/${name}`, async () => {
      let head: FunctionRecord | null = null;
      for (let attempt = 0; ; attempt++) {
        head = await heads.read(projectId, name);
        if (!head) throw errors.notFound(`function ${name} not found`);
        if (await deleteHead(db, head, { actor: input.actor, requestId: input.requestId, at: nowIso(this.#deps.now()) })) break;
        if (attempt === 20) throw errors.conflict(`function ${name} is being changed concurrently, retry`);
      }
      heads.forget(projectId, name);
      try {
        await this.removeVersions(projectId, await allVersions(db, projectId, name, head.generation), `delete of ${name}`);
      } catch (err) {
        this.#deps.log(`agent: functions: removing the versions of ${projectId}/${name} failed: ${(err as Error).message}; removed at the next start`);
      }
      this.#deps.logs.remove(projectId, name);
      return head;
    });
  }

  /**
   * Removes version items with their blobs, then the local copies no remaining version refers to. A
   * running isolate keeps the module it has loaded; a copy needed again is fetched again.
   */
  async removeVersions(projectId: string, versions: FunctionVersionRecord[], why: string): Promise<void> {
    const { modules, db } = this.#deps;
    for (const v of versions) await modules.discard(projectId, v).catch((err: unknown) => this.#logBlobLeft(projectId, v.blob, err));
    await deleteVersions(db, versions);
    if (versions.length > 0) this.#deps.log(`agent: functions: ${why}: ${versions.length} versions of ${projectId} removed`);
    await modules.prune(projectId, (await moduleReferences(db, projectId)).sha256s);
  }

  /** Refuses new deploys and deletes and lets those under way finish. */
  async stop(): Promise<void> {
    await this.#serial.close();
    await this.#checks.close();
  }

  /** Loads the module in a runtime of its own and ends it; 400 naming the problem when it fails. */
  async #check(projectId: string, name: string, modulePath: string, memoryMb: number, origin: string, set: SecretSet): Promise<void> {
    const runtime = await this.#deps.startCheckRuntime(projectId, memoryMb);
    const startTimeoutMs = this.#deps.settings.SVCD_FUNCTION_START_TIMEOUT_MS;
    try {
      const target = 'check';
      runtime.register(target, name, { modulePath, env: invocationEnv(set, { projectId, functionName: name, cloudOrigin: origin }), origin });
      let problem: string | null;
      try {
        problem = await runtime.check(target, startTimeoutMs);
      } catch {
        const exit = await exitWithin(runtime, 200);
        problem = exit ? `the module's runtime ended while loading it (${describeExit(exit, memoryMb)})` : `the module did not finish loading within ${startTimeoutMs} ms`;
      }
      if (problem !== null) throw errors.invalid(`body: ${new Redactor(set.secrets).redact(problem)}`);
    } finally {
      await runtime.kill();
    }
  }

  #logBlobLeft(projectId: string, blob: string, err: unknown): void {
    this.#deps.log(`agent: functions: module blob ${projectId}/${blob} could not be removed (${(err as Error).message}); it is left unreferenced`);
  }
}
