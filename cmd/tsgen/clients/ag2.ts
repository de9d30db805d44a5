// A typed AG2 chat.* client
// (ws://HOST/ws/{workflow}/{enterprise_id}/{chat_id}/{user_id};
// docs/PROTOCOLS.md, AG2).

import type * as ag2 from "../ag2.js";
import { type ConnectOptions, Socket, endpoint } from "./socket.js";

/** Where an AG2 socket connects: the path's four segments. */
export interface Ag2Options extends ConnectOptions {
  /** The workflow (docs/WORKFLOWS.md); "default" when absent. */
  workflow?: string;
  enterpriseId: string;
  /** The chat, which is the thread id shared with the other protocols. */
  chatId: string;
  userId: string;
  /**
   * The seq of the last frame already held (from an earlier session):
   * the first connection then resumes from it.
   */
  lastSeq?: number;
}

/**
 * An AG2 socket. The client keeps the seq of the last frame it received
 * (lastSeq); reconnect opens a new socket and sends client.resume with
 * it, and the handlers get exactly the frames missed (marked
 * replay: true), then chat.resume_boundary, then live frames. (A server
 * that replays the whole transcript on a socket's first resume, as
 * agentwire does by default for ChatUI, sends the frames already held
 * first, each with its seq: the client leaves them out.)
 */
export class Ag2Client extends Socket<ag2.ClientMessage, ag2.ServerMessage> {
  /** The seq of the last frame received (0: none). */
  lastSeq: number;
  readonly chatId: string;
  /** While a replay runs, the lastClientIndex it was asked from: replayed frames up to it are already held. */
  private held = -1;

  private constructor(url: string, opts: Ag2Options) {
    super(url, opts.token);
    this.chatId = opts.chatId;
    this.lastSeq = opts.lastSeq ?? 0;
    this.onAny((f) => {
      const seq = (f.data as { seq?: unknown }).seq;
      if (typeof seq === "number" && seq > this.lastSeq) this.lastSeq = seq;
    });
  }

  /** Connects to base (the server's address); with opts.lastSeq it resumes from there at once. */
  static async connect(base: string, opts: Ag2Options): Promise<Ag2Client> {
    const seg = [opts.workflow ?? "default", opts.enterpriseId, opts.chatId, opts.userId].map(encodeURIComponent);
    const c = new Ag2Client(endpoint(base, opts.path ?? "/ws/" + seg.join("/")), opts);
    await c.open();
    if (opts.lastSeq !== undefined) c.resume();
    return c;
  }

  /**
   * Reconnects and resumes: the promise resolves with the
   * chat.resume_boundary that ends the replay.
   */
  override async reconnect(): Promise<ag2.ResumeBoundary> {
    const boundary = this.next("chat.resume_boundary");
    try {
      await super.reconnect();
    } catch (err) {
      boundary.catch(() => undefined);
      throw err;
    }
    this.resume();
    return boundary;
  }

  /** Sends client.resume: replay every frame after lastClientIndex (the client's lastSeq by default). */
  resume(lastClientIndex = this.lastSeq): void {
    this.held = lastClientIndex;
    this.send({ type: "client.resume", chat_id: this.chatId, lastClientIndex });
  }

  protected override accept(f: ag2.ServerMessage): boolean {
    if (f.type === "chat.resume_boundary") {
      this.held = -1;
      return true;
    }
    const seq = (f.data as { seq?: unknown }).seq;
    return !(f.replay === true && typeof seq === "number" && seq <= this.held);
  }

  /** A new user turn. */
  submit(text: string): void {
    this.send({ type: "user.input.submit", chat_id: this.chatId, text });
  }

  /** Answers a chat.input_request (for an approval: approve, approve always, deny, deny and stop). */
  answer(requestId: string, text: string): void {
    this.send({ type: "user.input.submit", chat_id: this.chatId, request_id: requestId, text });
  }

  /** Answers a UI component (a chat.tool_call awaiting a response) with its data. */
  componentResult(corr: string, data: unknown): void {
    this.send({ type: "inline_component.result", chat_id: this.chatId, corr, data });
  }

  /** Applies an RFC 6902 JSON Patch to an artifact. */
  patchArtifact(corr: string, patch: unknown[]): void {
    this.send({ type: "artifact_patch", chat_id: this.chatId, corr, patch });
  }
}
