import { defineConfig } from 'vitest/config';

// Unit tests sit beside the code they check; integration and end-to-end suites live in test/.
// One DynamoDB Local (and later s3rver) is started per run in the global setup; each test file
// uses its own table, so files run in parallel safely.
export default defineConfig({
  test: {
    include: ['shared/**/*.test.ts', 'handlers/**/*.test.ts', 'host-agent/**/*.test.ts', 'engine/**/*.test.ts', 'infra/**/*.test.ts', 'client/**/*.test.ts', 'test/**/*.test.ts'],
    globalSetup: ['test/setup/global.ts', 'test/setup/statuses.ts'],
    // Every (route, status) the suites observe must be in the OpenAPI document (test/helpers/observed.ts).
    setupFiles: ['test/setup/record-fetch.ts'],
    reporters: ['default', './test/setup/summary-reporter.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 90_000,
    teardownTimeout: 30_000,
  },
});
