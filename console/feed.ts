/**
 * A project's live realtime feed, held by the project's frame rather than by the realtime page, so
 * the subscription stays open while the user wakes the project up on another page and its
 * `project.running` shows up when they come back (docs/console.md "Realtime").
 */
import { useEffect, useState } from 'preact/hooks';
import type { ProjectClient, RealtimeEvent } from '../client/index.ts';

const KEPT_EVENTS = 200;

/** Where the feed stands. */
export type FeedStatus = 'off' | 'connecting' | 'live' | 'reconnecting';

/** The feed of one project. */
export interface Feed {
  channels: string[] | null;
  status: FeedStatus;
  /** Newest first, at most 200. */
  events: RealtimeEvent[];
  error: unknown;
  connect(channels: string[]): void;
  disconnect(): void;
}

/** Subscribes (through the SDK, which reconnects by itself) while `channels` is set. */
export function useRealtimeFeed(project: ProjectClient): Feed {
  const [channels, setChannels] = useState<string[] | null>(null);
  const [status, setStatus] = useState<FeedStatus>('off');
  const [events, setEvents] = useState<RealtimeEvent[]>([]);
  const [error, setError] = useState<unknown>(null);

  useEffect(() => {
    if (!channels) return;
    const controller = new AbortController();
    setStatus('connecting');
    setError(null);
    void (async () => {
      try {
        const stream = project.realtime.subscribe(channels, {
          signal: controller.signal,
          onOpen: () => setStatus('live'),
          onReconnect: () => setStatus('reconnecting'),
        });
        for await (const event of stream) setEvents((list) => [event, ...list].slice(0, KEPT_EVENTS));
      } catch (err) {
        if (!controller.signal.aborted) setError(err);
      } finally {
        if (!controller.signal.aborted) setChannels(null);
        setStatus('off');
      }
    })();
    return () => controller.abort();
  }, [channels, project.id]);

  return {
    channels,
    status,
    events,
    error,
    connect: (list) => setChannels(list.length ? list : null),
    disconnect: () => setChannels(null),
  };
}
