// @ts-check
// Loom's adapter (WebSocket /loom).

import { view } from "./view.js";
import { dial, sendFrame } from "./wire.js";

/** @typedef {import("../../../generated/ts/src/loom.js").ServerMessage} LoomIn */
/** @typedef {import("../../../generated/ts/src/loom.js").ClientMessage} LoomOut */
/** @typedef {import("../../../generated/ts/src/loom.js").RunStreamEventResponse["event"]} LoomEvent */
/** @typedef {import("../../../generated/ts/src/loom.js").ToolApprovalResponseRequest["decision"]} LoomDecision */
/** @typedef {import("./state.js").Connection} Connection */

/**
 * Loom (ws /loom): each turn is a `run` on the thread (thread_id); opening
 * lists the thread's messages (user_messages). tool_approval events wait
 * for tool_approval_response; an ask_user question is a custom
 * input_requested event, answered with input_response.
 * @param {string} thread
 * @returns {Connection & {ws?: WebSocket}}
 */
export function loom(thread) {
  /** @param {LoomOut} f */
  const send = (f) => {
    if (c.ws) sendFrame(c.ws, "loom", f);
  };
  const historyID = crypto.randomUUID();
  /**
   * @param {LoomEvent} ev
   * @param {string} run
   */
  function event(ev, run) {
    switch (ev.type) {
      case "message_chunk":
        view.agent(ev.content, run + "/text");
        break;
      case "thought_chunk":
        view.thinking(ev.content, run + "/thought");
        break;
      case "tool_call":
        view.cut();
        view.tool(ev.name, ev.arguments);
        break;
      case "tool_approval": {
        view.cut();
        const callId = ev.call_id ?? "";
        view.ask({
          key: run + "/" + callId,
          kind: "approval",
          prompt: `Approve ${ev.name} ${JSON.stringify(ev.arguments)}?`,
          choices: [
            { label: "approve", value: "approve" },
            { label: "approve always", value: "approve_always" },
            { label: "deny", value: "deny" },
            { label: "deny and stop", value: "deny_stop" },
          ],
          answer(a) {
            send({ type: "tool_approval_response", id: run, call_id: callId, decision: /** @type {LoomDecision} */ (a), thread_id: thread });
          },
        });
        break;
      }
      case "tool_end":
        view.cut();
        view.result(ev.name, ev.result, !ev.is_error);
        break;
      case "custom": {
        const v = /** @type {{kind?: unknown, request_id?: unknown, prompt?: unknown, secret?: unknown, message?: unknown}} */ (ev.value ?? {});
        if (v.kind === "input_requested" && typeof v.request_id === "string") {
          const requestId = v.request_id;
          view.cut();
          view.ask({
            key: requestId,
            kind: "input",
            prompt: String(v.prompt ?? ""),
            text: true,
            secret: v.secret === true,
            answer(a) {
              send({ type: "input_response", id: run, request_id: requestId, text: a, thread_id: thread });
            },
          });
        } else if ((v.kind === "input_provided" || v.kind === "input_timed_out") && typeof v.request_id === "string") {
          view.resolved(v.request_id);
        } else if (v.kind === "ui_requested") {
          view.notice("The agent asks for a UI component, which Loom cannot show: answer it over AG2 on this thread, or it times out.");
        } else if (v.kind === "system_message" && typeof v.message === "string") {
          view.notice(v.message);
        }
        break;
      }
    }
  }
  /** @type {Connection & {ws?: WebSocket}} */
  const c = {
    async open() {
      c.ws = await dial("/loom", "loom", (/** @type {LoomIn} */ f) => {
        switch (f.type) {
          case "run_stream_event":
            event(f.event, f.id);
            break;
          case "run_end":
            view.cut();
            break;
          case "user_messages":
            if (f.id !== historyID) break;
            for (const m of f.messages) {
              if (m.role === "user") view.user(m.content);
              else if (m.role === "assistant") view.agent(m.content);
              else view.notice(m.content);
            }
            break;
          case "error":
            view.error(f.error);
            break;
        }
      });
      send({ type: "user_messages", id: historyID, thread_id: thread });
    },
    send(text) {
      view.user(text);
      send({ type: "run", id: "run-" + crypto.randomUUID(), agent: "react", message: text, thread_id: thread });
    },
    close() {
      c.ws?.close(1000);
    },
  };
  return c;
}
