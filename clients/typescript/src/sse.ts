/** One Server-Sent Event as the stream framed it. */
export interface SseMessage {
  /** The `id` field of this event, if it had one. */
  id: string | undefined;
  /** The `event` field (`message` when absent). */
  event: string;
  /** The `data` lines, joined with `\n`. */
  data: string;
}

/**
 * An incremental parser of `text/event-stream` (the WHATWG framing: `\n`, `\r\n` or `\r`
 * line ends, `:` comments, `data` lines joined, a blank line ends an event). Feed it text as
 * it arrives; it returns the events completed so far. What is left when the stream ends
 * without a blank line is no event.
 */
export class SseParser {
  private buffer = "";
  private data: string[] = [];
  private event = "";
  private id: string | undefined;
  private started = false;

  push(text: string): SseMessage[] {
    if (!this.started && text.length > 0) {
      this.started = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    this.buffer += text;
    const out: SseMessage[] = [];
    let start = 0;
    for (;;) {
      let end = -1;
      let next = -1;
      for (let i = start; i < this.buffer.length; i++) {
        const c = this.buffer.charCodeAt(i);
        if (c === 10) {
          end = i;
          next = i + 1;
          break;
        }
        if (c === 13) {
          // A `\r` at the end of what came so far may be the first half of `\r\n`.
          if (i + 1 === this.buffer.length) break;
          end = i;
          next = this.buffer.charCodeAt(i + 1) === 10 ? i + 2 : i + 1;
          break;
        }
      }
      if (end < 0) break;
      this.line(this.buffer.slice(start, end), out);
      start = next;
    }
    this.buffer = this.buffer.slice(start);
    return out;
  }

  private line(line: string, out: SseMessage[]): void {
    if (line === "") {
      if (this.data.length > 0) {
        out.push({ id: this.id, event: this.event || "message", data: this.data.join("\n") });
      }
      this.data = [];
      this.event = "";
      this.id = undefined;
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "event") this.event = value;
    else if (field === "id" && !value.includes("\0")) this.id = value;
    // `retry` and unknown fields: nothing to do (this client paces its own reconnects).
  }
}
