/**
 * Setup of every test file; records for the suites under test/ (unit tests beside the code talk to
 * fakes of the service): each answer of the service a suite receives through `fetch`
 * (its own calls and the SDK's) is recorded with its route and status (test/helpers/observed.ts).
 * The answer is handed back untouched.
 */
import { expect } from 'vitest';
import { observeAnswer } from '../helpers/observed.ts';

const marked = globalThis as { __svcRecordsFetch?: true };
if (!marked.__svcRecordsFetch) {
  marked.__svcRecordsFetch = true;
  const original = globalThis.fetch;
  globalThis.fetch = async function recordingFetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response> {
    const response = await original(input, init);
    try {
      if (!/[/\\]test[/\\](e2e|integration)[/\\]/.test(expect.getState().testPath ?? '')) return response;
      const request = input instanceof Request ? input : null;
      observeAnswer(init?.method ?? request?.method ?? 'GET', request ? request.url : String(input), response);
    } catch {
      // Recording never fails a suite.
    }
    return response;
  };
}
