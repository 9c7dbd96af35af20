/**
 * Global setup: the real local servers every integration suite shares, started once per run.
 * DynamoDB Local runs in memory; each test file creates its own table (test/helpers/env.ts).
 */
import type { TestProject } from 'vitest/node';
import { startDynamoLocal } from '../../infra/local/dynamodb.ts';
import { openRepositoryToEngines } from '../../infra/local/paths.ts';
import { startS3rver } from './s3rver.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    dynamoEndpoint: string;
    /** s3rver for the `s3` blob backend (test/setup/s3rver.ts). */
    s3Endpoint: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // Engines run as their own user and must reach the engine in this clone, wherever it lies.
  const opened = openRepositoryToEngines();
  if (opened.length > 0) console.log(`test setup: gave others search permission on ${opened.join(', ')} so engines reach the repository`);
  const dynamo = await startDynamoLocal();
  project.provide('dynamoEndpoint', dynamo.endpoint);
  const s3 = await startS3rver();
  project.provide('s3Endpoint', s3.endpoint);
  return async () => {
    await s3.stop();
    await dynamo.stop();
  };
}
