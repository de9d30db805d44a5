// A typed Loom client (ws://HOST/loom; docs/PROTOCOLS.md, Loom).

import type * as loom from "../loom.js";
import { type ConnectOptions, Socket, endpoint } from "./socket.js";

/** One event of a run's stream (the `event` of a run_stream_event). */
export type RunEvent = loom.RunStreamEventResponse["event"];

/** Options of LoomClient.run. */
export interface RunOptions {
  /** The strategy; "react" when absent. */
  agent?: loom.RunRequest["agent"];
  /** The run id; the client makes one when absent. */
  id?: string;
  /** The thread to continue; the client's threadId when absent (a new thread when that is unset too). */
  threadId?: string;
  /** The folder the run works in, inside the server's --workdir. */
  workingFolder?: string;
}

/**
 * A Loom socket. The client keeps the thread of its runs in threadId (the
 * option, else the session_id of its first run's events), and every run
 * continues it: a later run, on this socket or a new one, has the
 * conversation so far as its context.
 */
export class LoomClient extends Socket<loom.ClientMessage, loom.ServerMessage> {
  threadId: string | undefined;

  private constructor(url: string, opts: ConnectOptions & { threadId?: string }) {
    super(url, opts.token);
    this.threadId = opts.threadId;
    this.on("run_stream_event", (f) => {
      if (this.threadId === undefined && f.event.session_id) this.threadId = f.event.session_id;
    });
    this.on("run_end", (f) => {
      if (this.threadId === undefined && f.session_id) this.threadId = f.session_id;
    });
  }

  /** Connects to base (the server's address); opts.threadId continues that thread. */
  static async connect(base: string, opts: ConnectOptions & { threadId?: string } = {}): Promise<LoomClient> {
    const c = new LoomClient(endpoint(base, opts.path ?? "/loom"), opts);
    await c.open();
    return c;
  }

  /**
   * Calls handler with every run event of that type, narrowed to it, and
   * the run's id.
   */
  onEvent<T extends RunEvent["type"]>(type: T, handler: (event: Extract<RunEvent, { type: T }>, runId: string) => void): () => void {
    return this.on("run_stream_event", (f) => {
      if (f.event.type === type) handler(f.event as Extract<RunEvent, { type: T }>, f.id);
    });
  }

  /** Starts a run and returns its id; its events, then its run_end (or an error), follow. */
  run(message: string, opts: RunOptions = {}): string {
    const id = opts.id ?? "run-" + crypto.randomUUID();
    const req: loom.RunRequest = { type: "run", id, agent: opts.agent ?? "react", message };
    const thread = opts.threadId ?? this.threadId;
    if (thread !== undefined) req.thread_id = thread;
    if (opts.workingFolder !== undefined) req.working_folder = opts.workingFolder;
    this.send(req);
    return id;
  }

  /** Resolves with the run's run_end; rejects with the run's error. */
  finished(runId: string, timeoutMs = 60_000): Promise<loom.RunEndResponse> {
    return new Promise((resolve, reject) => {
      const offErr = this.on("error", (f) => {
        if (f.id !== runId) return;
        offErr();
        reject(new Error(`run ${runId} failed: ${f.error}`));
      });
      this.next("run_end", (f) => f.id === runId, timeoutMs).then(
        (f) => {
          offErr();
          resolve(f);
        },
        (err: unknown) => {
          offErr();
          reject(err);
        },
      );
    });
  }

  /** Answers a tool_approval event of a run. */
  approve(runId: string, callId: string, decision: loom.ToolApprovalResponseRequest["decision"], message?: string): void {
    const req: loom.ToolApprovalResponseRequest = { type: "tool_approval_response", id: runId, call_id: callId, decision };
    if (message !== undefined) req.message = message;
    if (this.threadId !== undefined) req.thread_id = this.threadId;
    this.send(req);
  }

  /** Answers an input_requested question of a run. */
  answer(runId: string, requestId: string, text: string): void {
    this.send({ type: "input_response", id: runId, request_id: requestId, text });
  }

  /** Cancels a running run. */
  cancel(runId: string): void {
    this.send({ type: "cancel", id: runId });
  }

  /** Pings; resolves with the pong. */
  ping(): Promise<loom.PongResponse> {
    const id = crypto.randomUUID();
    const pong = this.next("pong", (f) => f.id === id);
    this.send({ type: "ping", id });
    return pong;
  }

  /** Lists the tools a run gets. */
  toolsList(): Promise<loom.ToolsListResponse> {
    const id = crypto.randomUUID();
    const r = this.next("tools_list", (f) => f.id === id);
    this.send({ type: "tools_list", id });
    return r;
  }

  /** A page of a thread's messages (the client's thread by default), oldest first. */
  userMessages(opts: { threadId?: string; before?: number; limit?: number } = {}): Promise<loom.UserMessagesResponse> {
    const thread = opts.threadId ?? this.threadId;
    if (thread === undefined) return Promise.reject(new Error("userMessages: no thread"));
    const id = crypto.randomUUID();
    const r = this.next("user_messages", (f) => f.id === id);
    const req: loom.UserMessagesRequest = { type: "user_messages", id, thread_id: thread };
    if (opts.before !== undefined) req.before = opts.before;
    if (opts.limit !== undefined) req.limit = opts.limit;
    this.send(req);
    return r;
  }
}
