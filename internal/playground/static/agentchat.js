// @ts-check
// The agentchat protocol's adapter (WebSocket /ws).

import { dial, renderHistory, sendFrame } from "./wire.js";
import { view } from "./view.js";

/** @typedef {import("../../../generated/ts/src/agentchat.js").ServerMessage} AgentchatIn */
/** @typedef {import("../../../generated/ts/src/agentchat.js").ClientMessage} AgentchatOut */
/** @typedef {import("./state.js").Connection} Connection */

/**
 * agentchat (ws /ws): `chat` with the thread as session_id. Nothing is
 * replayed to a socket, so opening renders the history over the threads
 * API. Runs it starts cannot ask for approval (the call is refused and
 * shows as a failed tool_result).
 * @param {string} thread
 * @returns {Connection & {ws?: WebSocket}}
 */
export function agentchat(thread) {
  /** @type {Connection & {ws?: WebSocket}} */
  const c = {
    async open() {
      await renderHistory(thread, "agentchat");
      c.ws = await dial("/ws", "agentchat", (/** @type {AgentchatIn} */ f) => {
        switch (f.type) {
          case "user_message":
            view.user(f.message);
            break;
          case "agent_message":
            view.agent(f.message);
            break;
          case "agent_thinking":
            view.thinking(f.reasoning);
            break;
          case "tool_call":
            view.tool(f.tool_name, f.tool_args);
            break;
          case "tool_result":
            view.result(f.tool_name, f.result, f.success);
            break;
          case "error":
            view.error(f.error);
            break;
        }
      });
    },
    send(text) {
      if (!c.ws) return;
      /** @type {AgentchatOut} */
      const f = { type: "chat", message: text, session_id: thread };
      sendFrame(c.ws, "agentchat", f);
    },
    close() {
      c.ws?.close(1000);
    },
  };
  return c;
}
