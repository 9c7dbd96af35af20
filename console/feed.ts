/**
 * A project's live realtime feed, held by the project's frame rather than by the realtime page, so
 * the subscription stays open while the user wakes the project up on another page and its
 * `project.running` shows up when they come back (docs/console.md "Realtime").
 */
import { useEffect, useRef, useState } from 'preact/hooks';
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
  /**
   * Resolves once the feed is live on `channel`: at once when it already is, else after
   * subscribing again with the channel added (so what is published next is seen here).
   */
  listen(channel: string): Promise<void>;
}

/** How long `listen` waits for the subscription to open. */
const LISTEN_TIMEOUT_MS = 15_000;

interface Waiter {
  channel: string;
  resolve: () => void;
  reject: (err: Error) => void;
}

/** Subscribes (through the SDK, which reconnects by itself) while `channels` is set. */
export function useRealtimeFeed(project: ProjectClient): Feed {
  const [channels, setChannels] = useState<string[] | null>(null);
  const [status, setStatus] = useState<FeedStatus>('off');
  const [events, setEvents] = useState<RealtimeEvent[]>([]);
  const [error, setError] = useState<unknown>(null);
  const waiters = useRef<Waiter[]>([]);
  const current = useRef<{ channels: string[] | null; live: boolean }>({ channels: null, live: false });
  current.current.channels = channels;

  useEffect(() => {
    if (!channels) {
      setStatus('off');
      return;
    }
    const controller = new AbortController();
    setStatus('connecting');
    setError(null);
    void (async () => {
      try {
        const stream = project.realtime.subscribe(channels, {
          signal: controller.signal,
          onOpen: () => {
            setStatus('live');
            current.current.live = true;
            const ready = waiters.current.filter((w) => channels.includes(w.channel));
            waiters.current = waiters.current.filter((w) => !channels.includes(w.channel));
            for (const w of ready) w.resolve();
          },
          onReconnect: () => {
            current.current.live = false;
            setStatus('reconnecting');
          },
        });
        for await (const event of stream) setEvents((list) => [event, ...list].slice(0, KEPT_EVENTS));
      } catch (err) {
        if (!controller.signal.aborted) {
          setError(err);
          for (const w of waiters.current.splice(0)) w.reject(err instanceof Error ? err : new Error(String(err)));
        }
      } finally {
        // An aborted subscription was replaced (or ended on purpose): the next one says its status.
        if (!controller.signal.aborted) {
          setChannels(null);
          setStatus('off');
        }
      }
    })();
    return () => {
      current.current.live = false;
      controller.abort();
    };
  }, [channels, project.id]);

  return {
    channels,
    status,
    events,
    error,
    connect: (list) => setChannels(list.length ? list : null),
    disconnect: () => setChannels(null),
    listen: (channel) => {
      const { channels: now, live } = current.current;
      if (live && now?.includes(channel)) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const waiter: Waiter = { channel, resolve, reject };
        waiters.current.push(waiter);
        setTimeout(() => {
          if (!waiters.current.includes(waiter)) return;
          waiters.current = waiters.current.filter((w) => w !== waiter);
          reject(new Error(`the feed did not open on ${channel} within ${LISTEN_TIMEOUT_MS / 1000} s`));
        }, LISTEN_TIMEOUT_MS);
        if (!now?.includes(channel)) setChannels([...(now ?? ['system']), channel]);
      });
    },
  };
}
