/** Declaration: the engine's recent log lines (docs/observability.md "Engine logs"). */
import { logsAnswerSchema, logsQuerySchema } from '../schemas/logs.ts';
import { project } from './projects.ts';
import { route } from './route.ts';

export const engineLogs = route({
  method: 'GET',
  path: '/v0/projects/:id/logs',
  tag: 'logs',
  summary: 'The engine\'s recent log lines',
  description:
    'Owner session only. `tail` lines (default 100, at most 10000) of the tenant\'s engine log on its host agent, oldest first. ' +
    'With `follow=1` the answer is a Server-Sent Events stream instead: the tail, then each new line as it is written (docs/observability.md "Engine logs").',
  access: 'session',
  params: project,
  query: logsQuerySchema,
  answers: {
    200: {
      description: 'the lines, or with `follow=1` the stream',
      json: logsAnswerSchema,
      content: { type: 'text/event-stream', description: 'with `follow=1`: `event: line`, `data:` the line as a JSON string; a comment heartbeat' },
    },
  },
  answerFlow: 'events',
  errors: [503],
});

/** In the order they are matched. */
export const routes = [engineLogs] as const;
