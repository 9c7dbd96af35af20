/**
 * Stack traces of a bundled function in its source's terms (docs/functions.md "From source"). The
 * runtime writes a function's uncaught error to its logs with `err.stack` (host-agent/functions/
 * supervisor.js), and V8 formats a stack with `Error.prepareStackTrace` when one is set — workerd
 * honours it. So the bundle starts with `installStackMap(map)`: the bundle's own source map (without
 * the sources' text) and a formatter that turns each frame of the bundle (`main.js:3:17`) into the
 * position in the source (`src/index.ts:12:11`), frames of other files left as V8 writes them.
 *
 * `installStackMap` runs inside the function's isolate: it is written out with `Function.prototype.
 * toString`, so it uses nothing from outside its own body.
 */

/** What of a source map the prelude needs (version 3: `sources` and `mappings`). */
export interface PreludeMap {
  sources: string[];
  mappings: string;
}

/** Installs the formatter for the module it is part of; runs in the function's isolate. */
export function installStackMap(map: PreludeMap): void {
  const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  type Segment = [number, number, number, number];
  let lines: Segment[][] | null = null;
  const decode = (): Segment[][] => {
    const out: Segment[][] = [];
    let source = 0;
    let line = 0;
    let column = 0;
    for (const text of map.mappings.split(';')) {
      const segments: Segment[] = [];
      let generated = 0;
      for (const segment of text.split(',')) {
        if (!segment) continue;
        const values: number[] = [];
        let value = 0;
        let shift = 0;
        for (const ch of segment) {
          const digit = B64.indexOf(ch);
          value += (digit & 31) * 2 ** shift;
          if (digit & 32) shift += 5;
          else {
            values.push(value % 2 === 1 ? -Math.floor(value / 2) : value / 2);
            value = 0;
            shift = 0;
          }
        }
        generated += values[0] ?? 0;
        if (values.length >= 4) {
          source += values[1]!;
          line += values[2]!;
          column += values[3]!;
          segments.push([generated, source, line, column]);
        }
      }
      out.push(segments);
    }
    return out;
  };
  /** The source position of a 1-based generated line and column, or null. */
  const lookup = (line: number, column: number): string | null => {
    lines ??= decode();
    const segments = lines[line - 1];
    if (!segments) return null;
    let best: Segment | null = null;
    for (const s of segments) {
      if (s[0] <= column - 1) best = s;
      else break;
    }
    return best ? `${map.sources[best[1]]}:${best[2] + 1}:${best[3] + 1}` : null;
  };
  type Frame = { getFileName(): string | null; getLineNumber(): number | null; getColumnNumber(): number | null; toString(): string };
  const E = Error as unknown as { prepareStackTrace?: (error: Error, frames: Frame[]) => unknown };
  // The name this module has in the stack (the runtime's `main.js`): the first frame of a stack taken here.
  E.prepareStackTrace = (_error, frames) => frames;
  const self = (new Error().stack as unknown as Frame[])[0]?.getFileName() ?? null;
  E.prepareStackTrace = (error, frames) => {
    let head: string;
    try {
      head = Error.prototype.toString.call(error);
    } catch {
      head = 'Error';
    }
    const shown = frames.map((frame) => {
      const text = String(frame);
      const [file, line, column] = [frame.getFileName(), frame.getLineNumber(), frame.getColumnNumber()];
      if (self === null || file !== self || line === null || column === null) return `    at ${text}`;
      const at = lookup(line, column);
      return `    at ${at === null ? text : text.replace(`${file}:${line}:${column}`, at)}`;
    });
    return [head, ...shown].join('\n');
  };
}

/** The prelude's text for `map` (to be the bundle's first lines) and how many lines it takes. */
export function stackMapPrelude(map: PreludeMap): { text: string; lines: number } {
  const text = `(${installStackMap.toString()})(${JSON.stringify({ sources: map.sources, mappings: map.mappings })});\n`;
  return { text, lines: text.split('\n').length - 1 };
}
