// sse.ts — a Server-Sent Events parser over a fetch body (text/event-stream, WHATWG rules): lines
// split on CR, LF or CRLF; `event:`, `data:` (joined by newlines), `id:` and `retry:` fields; a
// blank line dispatches; comment lines (`: ping`) are ignored.

export interface RawEvent {
  event: string;
  data: string;
  id: string | undefined;
}

export interface ParsedStream {
  /** The retry delay the server asked for, when it did. */
  retryMs: number | undefined;
}

export async function* parseEventStream(
  body: ReadableStream<Uint8Array>,
  state: ParsedStream,
): AsyncGenerator<RawEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let event = '';
  let data: string[] = [];
  let id: string | undefined;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      for (;;) {
        const m = /\r\n|\r|\n/.exec(buffer);
        if (!m) break;
        // a lone CR at the very end may be the first half of CRLF: wait for more
        if (m[0] === '\r' && m.index === buffer.length - 1) break;
        const line = buffer.slice(0, m.index);
        buffer = buffer.slice(m.index + m[0].length);
        if (line === '') {
          if (data.length > 0) yield { event: event || 'message', data: data.join('\n'), id };
          event = '';
          data = [];
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? '' : line.slice(colon + 1);
        if (value.startsWith(' ')) value = value.slice(1);
        if (field === 'event') event = value;
        else if (field === 'data') data.push(value);
        else if (field === 'id' && !value.includes('\0')) id = value;
        else if (field === 'retry' && /^\d+$/.test(value)) state.retryMs = Number(value);
      }
    }
  } finally {
    reader.releaseLock();
  }
}
