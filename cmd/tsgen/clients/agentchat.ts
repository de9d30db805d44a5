// A typed agentchat client (ws://HOST/ws; docs/PROTOCOLS.md, agentchat).

import type * as agentchat from "../agentchat.js";
import { type ConnectOptions, Socket, endpoint } from "./socket.js";

/** Options of AgentChatClient.connect. */
export interface AgentChatOptions extends ConnectOptions {
  /** "chunks" asks for one agent_message per text chunk (?stream=chunks); "message" (the server's default) for whole messages. */
  stream?: "chunks" | "message";
}

/**
 * An agentchat socket. A `session_id` names the conversation (the thread
 * shared with the other protocols): chatting again with the same id, on
 * this socket or a new one, continues it.
 */
export class AgentChatClient extends Socket<agentchat.ClientMessage, agentchat.ServerMessage> {
  /** Connects to base (the server's address, e.g. ws://127.0.0.1:8080). */
  static async connect(base: string, opts: AgentChatOptions = {}): Promise<AgentChatClient> {
    const c = new AgentChatClient(endpoint(base, opts.path ?? "/ws", { stream: opts.stream }), opts.token);
    await c.open();
    return c;
  }

  /** Sends a chat message; without session_id the socket's own thread is used. */
  chat(message: string, session_id?: string): void {
    this.send(session_id === undefined ? { type: "chat", message } : { type: "chat", message, session_id });
  }
}
