/** Recorded-state corrections on plain values: what the processes and the disk say wins. */
import { describe, expect, it } from 'vitest';
import { eventOfState, truthOf } from './state.ts';

describe('truthOf', () => {
  it('is running whenever an engine of the project runs, whatever is recorded', () => {
    for (const recorded of ['stopped', 'sleeping', 'running'] as const) {
      expect(truthOf(recorded, { running: true, hasData: true })).toBe('running');
    }
  });

  it('corrects a recorded running without an engine to sleeping when the data directory exists', () => {
    expect(truthOf('running', { running: false, hasData: true })).toBe('sleeping');
  });

  it('corrects a recorded running without an engine or data directory to stopped (the first start never finished)', () => {
    expect(truthOf('running', { running: false, hasData: false })).toBe('stopped');
  });

  it('corrects a recorded stopped to sleeping once a data directory exists (a crash between init and the state write)', () => {
    expect(truthOf('stopped', { running: false, hasData: true })).toBe('sleeping');
    expect(truthOf('stopped', { running: false, hasData: false })).toBe('stopped');
  });

  it('keeps a recorded sleeping without a data directory (sleep of a never-started tenant answers it)', () => {
    expect(truthOf('sleeping', { running: false, hasData: false })).toBe('sleeping');
    expect(truthOf('sleeping', { running: false, hasData: true })).toBe('sleeping');
  });
});

describe('eventOfState', () => {
  it('announces corrections to running and sleeping, and none to stopped', () => {
    expect(eventOfState('running')).toBe('project.running');
    expect(eventOfState('sleeping')).toBe('project.sleeping');
    expect(eventOfState('stopped')).toBeNull();
  });
});
