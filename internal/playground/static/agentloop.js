// @ts-check
// AgentLoop's adapter (WebSocket /agentloop).

import { view } from "./view.js";
import { dial, sendFrame } from "./wire.js";

/** @typedef {import("../../../generated/ts/src/agentloop.js").ServerMessage} AgentloopIn */
/** @typedef {import("../../../generated/ts/src/agentloop.js").ClientMessage} AgentloopOut */
/** @typedef {import("../../../generated/ts/src/agentloop.js").ResponseItemMessage["payload"]} AgentloopItem */
/** @typedef {import("../../../generated/ts/src/agentloop.js").ApprovalResponseMessage["payload"]["review"]} AgentloopReview */
/** @typedef {import("./state.js").Connection} Connection */

/**
 * AgentLoop (ws /agentloop?thread_id=): the server replays the thread's
 * conversation to a socket that joins it, then live frames follow; an
 * approval_request waits for an approval_response.
 * @param {string} thread
 * @returns {Connection & {ws?: WebSocket}}
 */
export function agentloop(thread) {
  /** @param {AgentloopItem} it */
  function item(it) {
    switch (it.type) {
      case "message": {
        const text = it.content.map((p) => p.text).join("");
        if (it.role === "user") view.user(text);
        else if (it.role === "system") view.notice(text);
        else view.agent(text);
        break;
      }
      case "reasoning":
        view.thinking(it.content.map((p) => p.text).join(""));
        break;
      case "function_call":
        view.tool(it.name, it.arguments);
        break;
      case "function_call_output":
        view.result("tool", it.output, true);
        break;
      case "local_shell_call":
        view.tool("shell", it.action.command.join(" "));
        break;
      case "local_shell_call_output":
        view.result("shell", it.output, true);
        break;
    }
  }
  let asked = 0;
  /** @type {Connection & {ws?: WebSocket}} */
  const c = {
    async open() {
      c.ws = await dial("/agentloop?thread_id=" + encodeURIComponent(thread), "agentloop", (/** @type {AgentloopIn} */ f) => {
        switch (f.type) {
          case "response_item":
            item(f.payload);
            break;
          case "approval_request": {
            const key = "approval-" + ++asked;
            const ws = c.ws;
            view.ask({
              key,
              kind: "approval",
              prompt: "Approve? " + (f.payload.applyPatch ? f.payload.applyPatch.patch : f.payload.command.join(" ")),
              choices: [
                { label: "yes", value: "yes" },
                { label: "always", value: "always" },
                { label: "no, continue", value: "no-continue" },
                { label: "no, stop", value: "no-exit" },
                { label: "explain", value: "explain" },
              ],
              answer(a) {
                if (!ws) return;
                /** @type {AgentloopOut} */
                const r = { type: "approval_response", id: crypto.randomUUID(), payload: { review: /** @type {AgentloopReview} */ (a) } };
                sendFrame(ws, "agentloop", r);
              },
            });
            break;
          }
          case "error":
            view.error(f.payload.message);
            break;
          case "agent_finished":
            view.cut();
            break;
        }
      });
    },
    send(text) {
      if (!c.ws) return;
      view.user(text);
      /** @type {AgentloopOut} */
      const f = {
        type: "user_input",
        id: crypto.randomUUID(),
        payload: { input: [{ type: "message", role: "user", content: [{ type: "input_text", text }] }] },
      };
      sendFrame(c.ws, "agentloop", f);
    },
    close() {
      c.ws?.close(1000);
    },
  };
  return c;
}
