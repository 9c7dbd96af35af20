/** The message of the 400 `invalid_request` that `fn` throws; fails the test when it throws anything else. */
import { expect } from 'vitest';
import { ServiceError } from '../../shared/errors.ts';

/** Runs `fn`, expects a ServiceError `invalid_request`, answers its message. */
export function invalidMessage(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ServiceError);
    expect((err as ServiceError).code).toBe('invalid_request');
    return (err as ServiceError).message;
  }
  throw new Error('expected invalid_request');
}
