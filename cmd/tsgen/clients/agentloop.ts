// A typed AgentLoop client (ws://HOST/agentloop; docs/PROTOCOLS.md, AgentLoop).

import type * as agentloop from "../agentloop.js";
import { type ConnectOptions, Socket, endpoint } from "./socket.js";

/** Options of AgentLoopClient.connect. */
export interface AgentLoopOptions extends ConnectOptions {
  /** Joins this thread (?thread_id=); the server then replays its conversation so far. */
  threadId?: string;
}

/** A review of a pending approval_request. */
export type Review = agentloop.ApprovalResponseMessage["payload"]["review"];

/**
 * An AgentLoop socket. The first frame of each connection is a
 * context_info naming its thread, which the client keeps in threadId:
 * reconnect rejoins that thread (?thread_id=), and the server replays its
 * conversation before the live frames.
 */
export class AgentLoopClient extends Socket<agentloop.ClientMessage, agentloop.ServerMessage> {
  /** The thread this client follows: the option, else the one the server named. */
  threadId: string | undefined;

  private constructor(base: string, opts: AgentLoopOptions) {
    super(endpoint(base, opts.path ?? "/agentloop"), opts.token);
    this.threadId = opts.threadId;
    this.on("context_info", (f) => {
      if (f.payload.threadId) this.threadId = f.payload.threadId;
    });
  }

  protected override currentURL(): string {
    const u = new URL(super.currentURL());
    if (this.threadId !== undefined) u.searchParams.set("thread_id", this.threadId);
    return u.toString();
  }

  /** Connects to base (the server's address) and waits for the first context_info, which names the thread. */
  static async connect(base: string, opts: AgentLoopOptions = {}): Promise<AgentLoopClient> {
    const c = new AgentLoopClient(base, opts);
    await c.openAndJoin();
    return c;
  }

  /** Reconnects to the same thread: the server replays the conversation, then live frames follow. */
  override async reconnect(): Promise<void> {
    const first = this.next("context_info", (f) => f.payload.threadId !== undefined);
    try {
      await super.reconnect();
    } catch (err) {
      first.catch(() => undefined);
      throw err;
    }
    await first;
  }

  private async openAndJoin(): Promise<void> {
    const first = this.next("context_info", (f) => f.payload.threadId !== undefined);
    try {
      await this.open();
    } catch (err) {
      first.catch(() => undefined);
      throw err;
    }
    await first;
  }

  /** Starts a turn with one user message of text. */
  userInput(text: string): void {
    this.send({
      type: "user_input",
      id: crypto.randomUUID(),
      payload: { input: [{ type: "message", role: "user", content: [{ type: "input_text", text }] }] },
    });
  }

  /** Answers the pending approval_request. */
  review(review: Review, opts: { customDenyMessage?: string; applyPatch?: agentloop.ApplyPatchCommand } = {}): void {
    this.send({ type: "approval_response", id: crypto.randomUUID(), payload: { review, ...opts } });
  }

  /** Asks for a context_info. */
  contextInfo(): void {
    this.send({ type: "get_context_info", id: crypto.randomUUID() });
  }

  /** Asks the server to compact the conversation (answered with context_compacted). */
  compact(): void {
    this.send({ type: "manual_compact", id: crypto.randomUUID() });
  }
}
