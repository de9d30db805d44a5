// @ts-check
// AG2 chat.*'s adapter (WebSocket /ws/…).

import { save, saved } from "./state.js";
import { view } from "./view.js";
import { dial, sendFrame } from "./wire.js";

/** @typedef {import("../../../generated/ts/src/ag2.js").ServerMessage} Ag2In */
/** @typedef {import("../../../generated/ts/src/ag2.js").ClientMessage} Ag2Out */
/** @typedef {import("./state.js").Connection} Connection */

/**
 * AG2 chat.* (ws /ws/default/playground/{thread}/playground): the chat id
 * is the thread. Opening sends client.resume from seq 0, so the server
 * replays every frame of the chat (replay: true) up to chat.resume_boundary;
 * questions and approvals are chat.input_request, UI components are
 * chat.tool_call awaiting a response.
 * @param {string} thread
 * @returns {Connection & {ws?: WebSocket}}
 */
export function ag2(thread) {
  /** @param {Ag2Out} f */
  const send = (f) => {
    if (c.ws) sendFrame(c.ws, "ag2", f);
  };
  /** @type {Connection & {ws?: WebSocket}} */
  const c = {
    async open() {
      const path = "/ws/default/playground/" + encodeURIComponent(thread) + "/playground";
      const seen = saved.ag2Seq[thread] ?? 0;
      c.ws = await dial(path, "ag2", (/** @type {Ag2In} */ f) => {
        const seq = /** @type {{seq?: unknown}} */ (f.data).seq;
        if (typeof seq === "number" && seq > (saved.ag2Seq[thread] ?? 0)) {
          saved.ag2Seq[thread] = seq;
          save();
        }
        switch (f.type) {
          case "chat.text":
            view.cut();
            if (f.data.agent === "user") view.user(f.data.content);
            else view.agent(f.data.content, undefined, f.data.agent);
            break;
          case "chat.tool_call": {
            const d = f.data;
            if (!d.awaiting_response) {
              view.tool(d.tool_name, d.payload);
              break;
            }
            const p = /** @type {{title?: unknown, options?: unknown}} */ (d.payload ?? {});
            const options = Array.isArray(p.options) ? p.options.map(String) : [];
            view.ask({
              key: d.corr,
              kind: "ui",
              prompt: `${d.component_type}: ${typeof p.title === "string" ? p.title : JSON.stringify(d.payload)}`,
              choices: options.map((o) => ({ label: o, value: o })),
              text: options.length === 0,
              answer(a) {
                send({ type: "inline_component.result", chat_id: thread, corr: d.corr, data: a });
              },
            });
            break;
          }
          case "chat.tool_response":
            view.result(f.data.tool_name, f.data.content, f.data.success);
            break;
          case "chat.input_request": {
            const d = f.data;
            const approval = /Answer approve/.test(d.prompt);
            view.ask({
              key: d.request_id,
              kind: approval ? "approval" : "input",
              prompt: d.prompt,
              choices: approval
                ? [
                    { label: "approve", value: "approve" },
                    { label: "approve always", value: "approve always" },
                    { label: "deny", value: "deny" },
                    { label: "deny and stop", value: "deny and stop" },
                  ]
                : [],
              text: !approval,
              secret: d.password === true,
              answer(a) {
                send({ type: "user.input.submit", chat_id: thread, request_id: d.request_id, text: a });
              },
            });
            break;
          }
          case "chat.input_ack":
          case "chat.input_timeout":
            view.resolved(f.data.request_id);
            break;
          case "chat.select_speaker":
            view.notice(`next speaker: ${f.data.agent}`);
            break;
          case "chat.resume_boundary":
            view.notice(
              `replayed ${f.data.replayed_messages ?? 0} frames of this chat` +
                (seen > 0 ? ` (this browser had seen it up to seq ${seen}; the page keeps no copy, so it asks for all of it)` : ""),
            );
            break;
          case "chat.error":
            view.error(f.data.message);
            break;
          case "chat.run_complete":
            view.cut();
            break;
        }
      });
      send({ type: "client.resume", chat_id: thread, lastClientIndex: 0 });
    },
    send(text) {
      view.user(text);
      send({ type: "user.input.submit", chat_id: thread, text });
    },
    close() {
      c.ws?.close(1000);
    },
  };
  return c;
}
