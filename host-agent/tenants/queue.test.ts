/** The per-project queue: one operation at a time per project, projects independent, refusal at shutdown and after a deletion. */
import { describe, expect, it } from 'vitest';
import { ProjectQueue } from './queue.ts';

const A = 'prj_000000000000000a';
const B = 'prj_000000000000000b';

function gate(): { open: () => void; opened: Promise<void> } {
  let open = () => {};
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

describe('ProjectQueue', () => {
  it('runs operations on one project one after the other, in order, a failure not blocking the next', async () => {
    const queue = new ProjectQueue();
    const order: string[] = [];
    const first = gate();
    const one = queue.run(A, async () => {
      await first.opened;
      order.push('one');
      throw new Error('one failed');
    });
    const two = queue.run(A, async () => {
      order.push('two');
      return 2;
    });
    await Promise.resolve();
    expect(order).toEqual([]);
    first.open();
    await expect(one).rejects.toThrow('one failed');
    expect(await two).toBe(2);
    expect(order).toEqual(['one', 'two']);
  });

  it('never makes one project wait for another', async () => {
    const queue = new ProjectQueue();
    const blocked = gate();
    const slow = queue.run(A, () => blocked.opened);
    expect(await queue.run(B, async () => 'b')).toBe('b');
    blocked.open();
    await slow;
  });

  it('refuses every later operation on a retired (deleted) project with 404, those already queued too', async () => {
    const queue = new ProjectQueue();
    const behind = gate();
    const deletion = queue.run(A, async () => {
      await behind.opened;
      queue.retire(A);
      return 'deleted';
    });
    let ran = false;
    const queuedBehind = queue.run(A, async () => {
      ran = true;
    });
    behind.open();
    expect(await deletion).toBe('deleted');
    await expect(queuedBehind).rejects.toMatchObject({ code: 'not_found' });
    await expect(queue.run(A, async () => 'later')).rejects.toMatchObject({ code: 'not_found' });
    expect(ran).toBe(false);
    expect(await queue.run(B, async () => 'b')).toBe('b');
  });

  it('refuses new operations once closed, and the close waits for those queued before', async () => {
    const queue = new ProjectQueue();
    const blocked = gate();
    let finished = false;
    const inFlight = queue.run(A, async () => {
      await blocked.opened;
      finished = true;
    });
    const closing = queue.close();
    expect(queue.closed).toBe(true);
    await expect(queue.run(B, async () => 'b')).rejects.toMatchObject({ code: 'orchestrator_unavailable' });
    blocked.open();
    await closing;
    expect(finished).toBe(true);
    await inFlight;
  });
});
