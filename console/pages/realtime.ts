/**
 * `#/projects/<id>/realtime`: the live events of chosen channels (`system` carries the service's
 * lifecycle events) and a publish form (docs/realtime.md). The subscription is the project frame's
 * (console/feed.ts): it stays open on the other pages of the project. Publishing goes to a channel
 * the feed listens to: one it does not listen to yet is added to the feed first, so what is
 * published shows up here (docs/console.md "Realtime").
 */
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { ProjectClient } from '../../client/index.ts';
import type { Feed } from '../feed.ts';
import { ErrorBox, useAction } from '../ui.ts';

const splitChannels = (text: string) => [...new Set(text.split(/[\s,]+/).filter(Boolean))];

/** The realtime page. */
export function Realtime({ project, feed }: { project: ProjectClient; feed: Feed }): VNode {
  const [channelsText, setChannelsText] = useState(() => feed.channels?.join(', ') ?? 'system, chat');
  // The field follows the subscription when publishing added a channel to it.
  useEffect(() => {
    if (feed.channels) setChannelsText(feed.channels.join(', '));
  }, [feed.channels?.join(',')]);
  const connect = () => feed.connect(splitChannels(channelsText));

  return html`<div data-test="page-realtime">
    <h1>Realtime</h1>
    <div class="panel stack">
      <form class="row" onSubmit=${(e: Event) => (e.preventDefault(), connect())}>
        <label style=${{ flex: 1, minWidth: '0' }}>Channels (comma separated; <code>system</code> carries the service's lifecycle events)
          <input name="channels" value=${channelsText} onInput=${(e: Event) => setChannelsText((e.target as HTMLInputElement).value)} data-test="rt-channels" />
        </label>
        ${feed.channels
          ? html`<button type="button" onClick=${() => feed.disconnect()} data-test="rt-disconnect">Disconnect</button>`
          : html`<button class="primary" type="submit" data-test="rt-connect">Connect</button>`}
      </form>
      <div data-test="rt-status" class="wrap"><span class=${`dot ${feed.status === 'live' ? 'on' : ''}`}></span>${feed.status === 'live' ? `live on ${feed.channels?.join(', ')}` : feed.status}</div>
      <p class="muted">The subscription stays open while you use the project's other pages.</p>
      <${ErrorBox} error=${feed.error} />
    </div>
    <ul class="events" data-test="rt-events">
      ${feed.events.length === 0 ? html`<li class="muted">No event yet: events published while connected appear here, newest first.</li>` : null}
      ${feed.events.map(
        (e) => html`<li key=${e.id} data-test="rt-event" class="wrap">
          <span class="muted">#${e.id} ${new Date(e.ts).toLocaleTimeString()}</span>
          <span class="ch"> [${e.channel}] </span><span class="ev" data-test="rt-event-name">${e.event}</span>
          <span> ${JSON.stringify(e.payload)}</span>
        </li>`,
      )}
    </ul>
    <${PublishForm} project=${project} feed=${feed} />
  </div>`;
}

/** The publish form: what it sends goes to a channel the feed listens to (`feed.listen`). */
function PublishForm({ project, feed }: { project: ProjectClient; feed: Feed }): VNode {
  const [channel, setChannel] = useState(() => feed.channels?.find((c) => c !== 'system') ?? 'chat');
  const [eventName, setEventName] = useState('message');
  const [payload, setPayload] = useState('{"text": "hello"}');
  const [publishing, setPublishing] = useState<string | null>(null);
  const publish = useAction(async () => {
    let value: unknown = null;
    if (payload.trim() !== '') {
      try {
        value = JSON.parse(payload);
      } catch {
        throw new Error('payload: is not JSON');
      }
    }
    const target = channel.trim();
    if (!target) throw new Error('channel: name the channel to publish to');
    try {
      if (!(feed.status === 'live' && feed.channels?.includes(target))) setPublishing(`Subscribing the feed to ${target}…`);
      await feed.listen(target);
      setPublishing(`Publishing to ${target}…`);
      await project.realtime.publish(target, eventName.trim(), value);
    } finally {
      setPublishing(null);
    }
  });
  const listening = feed.channels ?? [];
  return html`<div class="panel" style=${{ marginTop: '16px' }}>
    <h2 style=${{ marginTop: 0 }}>Publish</h2>
    <form class="stack" onSubmit=${(e: Event) => (e.preventDefault(), void publish.run())}>
      <div class="row">
        <input name="publish_channel" placeholder="channel" list="rt-listened" value=${channel} onInput=${(e: Event) => setChannel((e.target as HTMLInputElement).value)} data-test="rt-publish-channel" />
        <datalist id="rt-listened">${listening.map((c) => html`<option value=${c} />`)}</datalist>
        <input name="publish_event" placeholder="event" value=${eventName} onInput=${(e: Event) => setEventName((e.target as HTMLInputElement).value)} />
      </div>
      <textarea name="publish_payload" rows="3" style=${{ width: '100%' }} value=${payload} onInput=${(e: Event) => setPayload((e.target as HTMLTextAreaElement).value)}></textarea>
      <p class="muted" data-test="rt-publish-note">
        ${listening.includes(channel.trim())
          ? html`The feed above listens to <code>${channel.trim()}</code>: what you publish shows up there.`
          : html`The feed does not listen to <code>${channel.trim() || '…'}</code> yet: publishing subscribes it first, so the event shows up above.`}
      </p>
      <div class="row">
        <button class="primary" type="submit" disabled=${publish.busy} data-test="rt-publish">Publish</button>
        ${publishing ? html`<span class="busy">${publishing}</span>` : null}
      </div>
    </form>
    <${ErrorBox} error=${publish.error} />
  </div>`;
}
