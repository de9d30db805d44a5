// A typed client of the threads REST + SSE API
// (http://HOST/api/v1/threads/{threadId}; docs/PROTOCOLS.md, threads).
// It uses the platform's fetch and reads the event stream itself, so that
// it can send the Authorization header and Last-Event-ID.

import type * as threads from "../threads.js";

/** Options of ThreadsClient. */
export interface ThreadsOptions {
  /** The credential (an API key or a JWT), sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** The API's path prefix; "/api/v1/threads" when absent. */
  path?: string;
}

/** An answer that is not a success: status and the server's error text. */
export class ThreadsError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(`${status}: ${message}`);
  }
}

const known = new Set(["agent_text", "tool_call", "tool_result", "done", "error"]);

/**
 * A threads client. Every stream it reads records the id of the last
 * event in lastEventId (per thread), so that resume continues after it
 * with Last-Event-ID.
 */
export class ThreadsClient {
  private readonly base: string;
  private readonly token: string | undefined;
  /** The id of the last event read from each thread's streams. */
  readonly lastEventId = new Map<string, string>();

  /** base is the server's address (http or https; ws and wss are read as those). */
  constructor(base: string, opts: ThreadsOptions = {}) {
    const u = new URL(base);
    if (u.protocol === "ws:") u.protocol = "http:";
    if (u.protocol === "wss:") u.protocol = "https:";
    u.pathname = u.pathname.replace(/\/+$/, "") + (opts.path ?? "/api/v1/threads");
    this.base = u.toString();
    this.token = opts.token;
  }

  /** Posts a message (creating the thread if it is new) and yields the run's events up to done or error. */
  async *post(threadId: string, text: string, signal?: AbortSignal): AsyncGenerator<threads.StreamEvent> {
    const body: threads.SendMessageRequest = { text };
    const res = await this.request(this.url(threadId), {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify(body),
      signal: signal ?? null,
    });
    yield* this.read(threadId, res);
  }

  /**
   * Resumes a thread's stream after lastEventId (the client's last id for
   * the thread by default; from the start when there is none): what the
   * thread logged after it, then the live tail, up to done or error.
   */
  async *events(threadId: string, lastEventId = this.lastEventId.get(threadId), signal?: AbortSignal): AsyncGenerator<threads.StreamEvent> {
    const headers: Record<string, string> = { Accept: "text/event-stream" };
    if (lastEventId !== undefined) headers["Last-Event-ID"] = lastEventId;
    const res = await this.request(this.url(threadId) + "/events", { headers, signal: signal ?? null });
    yield* this.read(threadId, res);
  }

  /** The thread's history, oldest first. */
  async history(threadId: string): Promise<threads.ThreadResponse> {
    const res = await this.request(this.url(threadId), { headers: { Accept: "application/json" } });
    return (await res.json()) as threads.ThreadResponse;
  }

  private url(threadId: string): string {
    return this.base + "/" + encodeURIComponent(threadId);
  }

  private async request(url: string, init: RequestInit): Promise<Response> {
    const headers = new Headers(init.headers);
    if (this.token) headers.set("Authorization", "Bearer " + this.token);
    const res = await fetch(url, { ...init, headers });
    if (!res.ok) {
      let msg = res.statusText;
      try {
        const e = (await res.json()) as threads.Error;
        msg = e.error;
      } catch {
        // not a JSON error body: the status text says it
      }
      throw new ThreadsError(res.status, msg);
    }
    return res;
  }

  private async *read(threadId: string, res: Response): AsyncGenerator<threads.StreamEvent> {
    for await (const ev of parseSSE(res)) {
      if (ev.id !== undefined && ev.id !== "") this.lastEventId.set(threadId, ev.id);
      if (!known.has(ev.event)) continue; // later versions may add events
      const out = { event: ev.event, data: JSON.parse(ev.data) as unknown, id: ev.id } as threads.StreamEvent;
      yield out;
      if (out.event === "done" || out.event === "error") return;
    }
  }
}

/** One Server-Sent Event as the stream carries it. */
export interface RawEvent {
  event: string;
  data: string;
  id?: string | undefined;
}

/** Reads a text/event-stream body (the WHATWG rules: fields, comments, CRLF, multi-line data). */
export async function* parseSSE(res: Response): AsyncGenerator<RawEvent> {
  if (!res.body) return;
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  let event = "";
  let data: string[] = [];
  let id: string | undefined;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let nl: number;
      while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
        if (buf[nl] === "\r" && nl === buf.length - 1) break; // perhaps the first half of a CRLF
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf.startsWith("\r\n", nl) ? 2 : 1));
        if (line === "") {
          if (data.length > 0) yield { event: event || "message", data: data.join("\n"), id };
          event = "";
          data = [];
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? "" : line.slice(colon + 1);
        if (val.startsWith(" ")) val = val.slice(1);
        if (field === "event") event = val;
        else if (field === "data") data.push(val);
        else if (field === "id" && !val.includes("\0")) id = val;
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
