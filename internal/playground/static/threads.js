// @ts-check
// The threads API's adapter (REST + SSE).

import { record } from "./frames.js";
import { save, saved, setStatus } from "./state.js";
import { failed, view } from "./view.js";
import { api, renderHistory, sse } from "./wire.js";

/** @typedef {import("../../../generated/ts/src/threads.js").StreamEvent} ThreadsEvent */
/** @typedef {import("../../../generated/ts/src/threads.js").SendMessageRequest} SendMessageRequest */
/** @typedef {import("./state.js").Connection} Connection */

/**
 * threads (REST + SSE): POST a message and read the run's events from the
 * answer; GET the history on opening; a run that was still streaming when
 * the page went away is followed again from the last event id
 * (GET …/events with Last-Event-ID).
 * @param {string} thread
 * @returns {Connection}
 */
export function threads(thread) {
  const abort = new AbortController();
  const path = "/api/v1/threads/" + encodeURIComponent(thread);
  /** @param {Response} res */
  async function read(res) {
    saved.streaming[thread] = true;
    save();
    let key = "";
    for await (const ev of sse(res)) {
      if (ev.id) {
        saved.lastEventId[thread] = ev.id;
        save();
      }
      /** @type {unknown} */
      let data;
      try {
        data = JSON.parse(ev.data);
      } catch {
        data = ev.data;
      }
      const raw = JSON.stringify(ev.id === undefined ? { event: ev.event, data } : { id: ev.id, event: ev.event, data });
      const e = /** @type {ThreadsEvent | undefined} */ (record("in", "threads", "sse", raw));
      if (!e) continue;
      switch (e.event) {
        case "agent_text":
          if (key !== e.data.message_id) view.cut();
          key = e.data.message_id;
          view.agent(e.data.chunk, key);
          break;
        case "tool_call":
          view.cut();
          view.tool(e.data.tool_name, e.data.arguments);
          break;
        case "tool_result":
          view.cut();
          view.result("tool", JSON.stringify(e.data.result), !e.data.tool_result_id.startsWith("error-"));
          break;
        case "error":
          view.error(e.data.error);
          break;
      }
      if (e.event === "done" || e.event === "error") break;
    }
    saved.streaming[thread] = false;
    save();
    view.cut();
  }
  return {
    async open() {
      setStatus("open", "connected: threads (each turn is a POST answered with an event stream)");
      await renderHistory(thread, "threads");
      const last = saved.lastEventId[thread];
      if (saved.streaming[thread] && last) {
        view.notice(`resuming the event stream after event ${last}`);
        const res = await api(path + "/events", { headers: { Accept: "text/event-stream", "Last-Event-ID": last }, signal: abort.signal });
        if (res.ok) read(res).catch(failed);
      }
    },
    send(text) {
      view.user(text);
      /** @type {SendMessageRequest} */
      const body = { text };
      const raw = JSON.stringify(body);
      record("out", "threads", "SendMessageRequest", raw, "POST");
      api(path, { method: "POST", headers: { "Content-Type": "application/json", Accept: "text/event-stream" }, body: raw, signal: abort.signal })
        .then(async (res) => {
          if (!res.ok) {
            const t = await res.text();
            record("in", "threads", "Error", t, `POST ${res.status}`);
            view.error(`POST ${path}: ${res.status} ${t}`);
            return;
          }
          await read(res);
        })
        .catch(failed);
    },
    close() {
      abort.abort();
    },
  };
}
