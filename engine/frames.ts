/**
 * The frames `serve` and its executor process exchange over the executor's stdin and stdout
 * (docs/engine.md "Statement time limit"): a 4-byte big-endian length N of what follows, a 1-byte
 * type, a 4-byte sequence number, then N - 5 bytes of payload. Requests carry the request id and the
 * raw body; answers carry the HTTP status and the JSON document, so nothing is parsed twice.
 */

/** Frame types: parent → executor, then executor → parent. */
export const FRAME = {
  /** `POST /v2/sql`: payload = request id frame, then the body. */
  sql: 1,
  /** `POST /v2/search`: payload = request id frame, then the body. */
  search: 2,
  /** `DELETE /v2/tables/{name}`: payload = request id frame, then the decoded name (UTF-8). */
  drop: 3,
  /** Open the database (sent once `serve` holds the directory lock). */
  open: 8,
  /** Checkpoint, close and exit 0. */
  close: 9,
  /** The answer to request `seq`: 2-byte status, then the JSON document. */
  answer: 10,
  /** Request `seq` is about to COMMIT a write (sent before SQLite starts the commit). */
  committing: 11,
  /** The executor holds the database: JSON `{"sqlite_version"}`. */
  ready: 12,
  /** The executor could not open the database: JSON `{"code","message"}`, then it exits. */
  failed: 13,
} as const;

export type FrameType = (typeof FRAME)[keyof typeof FRAME];

/** A decoded frame. */
export interface Frame {
  type: number;
  seq: number;
  payload: Buffer;
}

const HEADER = 9;

/** One frame's bytes. */
export function encodeFrame(type: FrameType, seq: number, payload: Buffer | string = Buffer.alloc(0)): Buffer {
  const body = typeof payload === 'string' ? Buffer.from(payload, 'utf8') : payload;
  const frame = Buffer.allocUnsafe(HEADER + body.length);
  frame.writeUInt32BE(body.length + 5, 0);
  frame.writeUInt8(type, 4);
  frame.writeUInt32BE(seq >>> 0, 5);
  body.copy(frame, HEADER);
  return frame;
}

/** A request's payload: the request id (1-byte length, ASCII), then the body. */
export function requestPayload(requestId: string, body: Buffer): Buffer {
  const id = Buffer.from(requestId, 'latin1');
  const payload = Buffer.allocUnsafe(1 + id.length + body.length);
  payload.writeUInt8(id.length, 0);
  id.copy(payload, 1);
  body.copy(payload, 1 + id.length);
  return payload;
}

/** The request id and body of a request payload. */
export function readRequestPayload(payload: Buffer): { requestId: string; body: Buffer } {
  const length = payload.readUInt8(0);
  return { requestId: payload.toString('latin1', 1, 1 + length), body: payload.subarray(1 + length) };
}

/** An answer's payload: the status (2 bytes), then the JSON document. */
export function answerPayload(status: number, json: string): Buffer {
  const body = Buffer.from(json, 'utf8');
  const payload = Buffer.allocUnsafe(2 + body.length);
  payload.writeUInt16BE(status, 0);
  body.copy(payload, 2);
  return payload;
}

/** The status and JSON document of an answer payload. */
export function readAnswerPayload(payload: Buffer): { status: number; json: string } {
  return { status: payload.readUInt16BE(0), json: payload.toString('utf8', 2) };
}

/** Collects frames from a byte stream cut anywhere. */
export class FrameReader {
  #buffer: Buffer = Buffer.alloc(0);

  /** Adds bytes; answers every frame they complete, in order. */
  push(chunk: Buffer): Frame[] {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    const frames: Frame[] = [];
    let offset = 0;
    while (this.#buffer.length - offset >= 4) {
      const length = this.#buffer.readUInt32BE(offset);
      if (length < 5) throw new Error(`malformed frame (length ${length})`);
      if (this.#buffer.length - offset - 4 < length) break;
      frames.push({
        type: this.#buffer.readUInt8(offset + 4),
        seq: this.#buffer.readUInt32BE(offset + 5),
        payload: this.#buffer.subarray(offset + HEADER, offset + 4 + length),
      });
      offset += 4 + length;
    }
    this.#buffer = offset === this.#buffer.length ? Buffer.alloc(0) : this.#buffer.subarray(offset);
    return frames;
  }
}
