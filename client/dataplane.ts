/**
 * The data plane (`/v2`; the interface contract "DELETE /v2/{path}", "Versioning" 2; docs/dataplane.md;
 * docs/engine.md "HTTP surface"): requests with a project key and `X-Svc-Protocol-Minor: 3`; the
 * engine's answers decoded from the product envelope, its errors thrown as `SvcError`s with the
 * engine's code. A refusal of the service itself (401, 403, 409 `tenant_not_running`, …) is its JSON
 * envelope, thrown the same way.
 */
import { decodeEnvelope, isProductType } from './envelope.ts';
import { type CallOptions, type Transport } from './http.ts';
import * as R from './routes.gen.ts';
import { withMethod } from './site.ts';
import { resultSetsOf, wireStatement, type EngineSqlAnswer, type InArgs, type InStatement, type ResultSet } from './results.ts';
import type { Capabilities, SearchHit } from './types.ts';

/** The protocol minor this SDK speaks (the interface contract "Versioning" 2). */
export const PROTOCOL_MINOR = '3';

/** Options of `search`. */
export interface SearchOptions extends CallOptions {
  /** 1 to 100 (default 10). */
  limit?: number;
}

/** The data-plane methods; they need the client's project key. */
export class DataPlane {
  readonly #t: Transport;

  constructor(transport: Transport) {
    this.#t = transport;
  }

  /** One `/v2` request; answers the decoded envelope. */
  async request<T>(method: string, path: string, body: unknown, call?: CallOptions): Promise<T> {
    const answer = await this.#t.open(
      withMethod(R.dataplane.routes, method),
      { params: { path }, ...(body === undefined ? {} : { json: body }), headers: { 'x-svc-protocol-minor': PROTOCOL_MINOR } },
      call,
    );
    try {
      const { response } = answer;
      const raw = new Uint8Array(await response.arrayBuffer());
      if (!isProductType(response.headers.get('content-type'))) {
        throw new TypeError(`/v2/${path} answered ${response.headers.get('content-type') ?? 'no content type'}, not the product envelope`);
      }
      return decodeEnvelope(raw) as T;
    } finally {
      answer.done();
    }
  }

  /** `POST /v2/sql` with one statement: its result set. */
  async sql(statement: InStatement, args?: InArgs, call?: CallOptions): Promise<ResultSet> {
    const answer = await this.request<EngineSqlAnswer>('POST', 'sql', wireStatement(statement, args), call);
    return resultSetsOf(answer)[0]!;
  }

  /** `POST /v2/sql` with several statements, in one transaction: one result set each. */
  async batch(statements: readonly InStatement[], call?: CallOptions): Promise<ResultSet[]> {
    const answer = await this.request<EngineSqlAnswer>('POST', 'sql', { statements: statements.map((s) => wireStatement(s)), transaction: true }, call);
    return resultSetsOf(answer);
  }

  /** `POST /v2/search`: full-text search over an FTS5 table, best first. */
  async search(table: string, query: string, options: SearchOptions = {}): Promise<SearchHit[]> {
    const { limit, ...call } = options;
    const answer = await this.request<{ hits: SearchHit[] }>('POST', 'search', { table, query, ...(limit === undefined ? {} : { limit }) }, call);
    return answer.hits;
  }

  /** `GET /v2/capabilities`: what the project's engine supports. */
  capabilities(call?: CallOptions): Promise<Capabilities> {
    return this.request('GET', 'capabilities', undefined, call);
  }

  /** `DELETE /v2/tables/{name}`: drops a table (the contract's `DELETE /v2/{path}`). */
  dropTable(name: string, call?: CallOptions): Promise<{ dropped: string; visible_csn: number; catalog_version: number }> {
    return this.request('DELETE', `tables/${encodeURIComponent(name)}`, undefined, call);
  }
}
