// The WebSocket wrapper every WebSocket client of this folder is built on:
// it dials with the credential options of docs/SECURITY.md, sends typed
// frames and hands each frame the server sends to the handlers of its type,
// narrowed to that type. It uses the platform's WebSocket (browsers; Node 22,
// or Node 20 with --experimental-websocket).

/** How a client reaches the server. */
export interface ConnectOptions {
  /**
   * The credential (an API key or a JWT) when the server runs with
   * `--auth keys` or `--auth jwt`. It is offered as the WebSocket
   * subprotocol `bearer.<token>` beside `agentwire` (browsers cannot set
   * an Authorization header on a WebSocket); the server selects `agentwire`.
   */
  token?: string;
  /**
   * The endpoint's path, replacing the protocol's default (for a server
   * that serves the protocol at the root of its own listener, `/`).
   */
  path?: string;
}

/** A frame of a protocol: every frame has a string `type`. */
export interface Frame {
  type: string;
}

/** The frame of `In` whose `type` is T. */
export type FrameOf<In extends Frame, T extends In["type"]> = Extract<In, { type: T }>;

/** How a socket closed. */
export interface Closed {
  code: number;
  reason: string;
  /** True when this client closed it (close or reconnect). */
  byClient: boolean;
}

/**
 * The WebSocket URL of an endpoint: base is the server's address
 * (http, https, ws or wss; a path on it is kept as a prefix).
 */
export function endpoint(base: string, path: string, query?: Record<string, string | undefined>): string {
  const u = new URL(base);
  if (u.protocol === "http:") u.protocol = "ws:";
  if (u.protocol === "https:") u.protocol = "wss:";
  u.pathname = u.pathname.replace(/\/+$/, "") + path;
  for (const [k, v] of Object.entries(query ?? {})) {
    if (v !== undefined) u.searchParams.set(k, v);
  }
  return u.toString();
}

/** The subprotocols a client offers: `agentwire`, and the credential as `bearer.<token>`. */
export function subprotocols(token?: string): string[] {
  return token ? ["agentwire", "bearer." + token] : ["agentwire"];
}

type AnyHandler<In> = (frame: In) => void;

/**
 * A typed WebSocket: Out are the frames a client sends, In those the
 * server sends (a protocol's ClientMessage and ServerMessage). Handlers
 * stay registered across reconnect.
 */
export class Socket<Out extends Frame, In extends Frame> {
  private ws: WebSocket | undefined;
  private readonly handlers = new Map<string, Set<AnyHandler<In>>>();
  private readonly anyHandlers = new Set<AnyHandler<In>>();
  private readonly closeHandlers = new Set<(c: Closed) => void>();
  private readonly errorHandlers = new Set<(err: Error) => void>();
  private closing = false;

  /** url is the endpoint's WebSocket URL (see endpoint). */
  constructor(
    private readonly url: string,
    private readonly token?: string,
  ) {}

  /** The URL of the next connection; clients override it to rejoin what they followed. */
  protected currentURL(): string {
    return this.url;
  }

  /** Opens the connection; it rejects when the server refuses it (a 401, a 403, a closed port). */
  open(): Promise<void> {
    const url = this.currentURL();
    const ws = new WebSocket(url, subprotocols(this.token));
    ws.binaryType = "arraybuffer";
    this.ws = ws;
    this.closing = false;
    return new Promise<void>((resolve, reject) => {
      let opened = false;
      ws.addEventListener("open", () => {
        opened = true;
        resolve();
      });
      ws.addEventListener("message", (ev: MessageEvent) => this.dispatch(ev.data));
      ws.addEventListener("close", (ev: CloseEvent) => {
        if (!opened) {
          reject(new Error(`could not connect to ${url}: closed with ${ev.code} ${ev.reason}`.trim()));
          return;
        }
        if (this.ws !== ws) return;
        const c: Closed = { code: ev.code, reason: ev.reason, byClient: this.closing };
        for (const h of [...this.closeHandlers]) h(c);
      });
      ws.addEventListener("error", () => {
        if (!opened) reject(new Error(`could not connect to ${url}`));
      });
    });
  }

  /** Sends one frame. */
  send(frame: Out): void {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) {
      throw new Error(`cannot send ${frame.type}: the socket is not open`);
    }
    this.ws.send(JSON.stringify(frame));
  }

  /**
   * Calls handler with every frame of that type, narrowed to its type.
   * Returns a function that removes the handler.
   */
  on<T extends In["type"]>(type: T, handler: (frame: FrameOf<In, T>) => void): () => void {
    let set = this.handlers.get(type);
    if (!set) {
      set = new Set();
      this.handlers.set(type, set);
    }
    const h = handler as AnyHandler<In>;
    set.add(h);
    return () => set.delete(h);
  }

  /** Calls handler with every frame, of every type. */
  onAny(handler: (frame: In) => void): () => void {
    this.anyHandlers.add(handler);
    return () => this.anyHandlers.delete(handler);
  }

  /** Calls handler when the connection closes (not when reconnect replaces it). */
  onClose(handler: (c: Closed) => void): () => void {
    this.closeHandlers.add(handler);
    return () => this.closeHandlers.delete(handler);
  }

  /** Calls handler with a frame that is not JSON, and with an error a handler threw. */
  onError(handler: (err: Error) => void): () => void {
    this.errorHandlers.add(handler);
    return () => this.errorHandlers.delete(handler);
  }

  /**
   * Resolves with the next frame of that type for which match (if given)
   * is true; rejects when the connection closes first or timeoutMs passes
   * (0: no time limit).
   */
  next<T extends In["type"]>(
    type: T,
    match?: (frame: FrameOf<In, T>) => boolean,
    timeoutMs = 30_000,
  ): Promise<FrameOf<In, T>> {
    return new Promise((resolve, reject) => {
      const done = () => {
        off();
        offClose();
        clearTimeout(timer);
      };
      const off = this.on(type, (f) => {
        if (match && !match(f)) return;
        done();
        resolve(f);
      });
      const offClose = this.onClose((c) => {
        done();
        reject(new Error(`the socket closed (${c.code} ${c.reason}) before a ${type} frame`));
      });
      const timer =
        timeoutMs > 0
          ? setTimeout(() => {
              done();
              reject(new Error(`no ${type} frame within ${timeoutMs} ms`));
            }, timeoutMs)
          : undefined;
    });
  }

  /** Closes the connection (1000 by default). */
  close(code = 1000, reason = ""): void {
    this.closing = true;
    this.ws?.close(code, reason);
  }

  /**
   * Closes the connection if it is open and opens a new one on the URL
   * the client gives now; the handlers stay. It resolves when the new
   * connection is open (a client may resolve with what its rejoin gives
   * back: Ag2Client with the chat.resume_boundary).
   */
  async reconnect(): Promise<unknown> {
    const old = this.ws;
    this.ws = undefined;
    if (old && old.readyState !== WebSocket.CLOSED) old.close(1000, "reconnecting");
    await this.open();
    return undefined;
  }

  /** Whether a frame reaches the handlers; a protocol's client leaves out frames it already holds. */
  protected accept(_frame: In): boolean {
    return true;
  }

  private dispatch(data: unknown): void {
    let frame: In;
    try {
      const text = typeof data === "string" ? data : new TextDecoder().decode(data as ArrayBuffer);
      frame = JSON.parse(text) as In;
    } catch (err) {
      this.fail(new Error(`a frame that is not JSON: ${String(err)}`));
      return;
    }
    if (!this.accept(frame)) return;
    for (const h of [...this.anyHandlers, ...(this.handlers.get(frame.type) ?? [])]) {
      try {
        h(frame);
      } catch (err) {
        this.fail(err instanceof Error ? err : new Error(String(err)));
      }
    }
  }

  private fail(err: Error): void {
    if (this.errorHandlers.size === 0) {
      console.error("agentwire client:", err);
      return;
    }
    for (const h of [...this.errorHandlers]) h(err);
  }
}
