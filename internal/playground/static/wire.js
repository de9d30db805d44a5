// @ts-check
// What the protocols' adapters share on the wire: the credential, opening
// a WebSocket and sending over it (each frame recorded in the frames
// pane), requests to the threads API, reading an event stream, and the
// thread's history over the threads API.

import { record } from "./frames.js";
import { current, setStatus, tokenInput } from "./state.js";
import { view } from "./view.js";

/** @typedef {import("../../../generated/ts/src/threads.js").ThreadResponse} ThreadResponse */
/** @typedef {import("./state.js").Protocol} Protocol */

// ---------------------------------------------------------------------------
// Wire helpers

/** @returns {string | undefined} */
function token() {
  return tokenInput.value.trim() || undefined;
}

/** @param {string} path */
function wsURL(path) {
  return (location.protocol === "https:" ? "wss://" : "ws://") + location.host + path;
}

/**
 * Opens a WebSocket with the credential as the subprotocol bearer.<token>
 * (docs/SECURITY.md: a browser cannot set an Authorization header on a
 * WebSocket).
 * @param {string} path
 * @param {Protocol} proto
 * @param {(frame: any) => void} onFrame called with every parsed frame, after it is recorded
 * @returns {Promise<WebSocket>}
 */
export function dial(path, proto, onFrame) {
  const t = token();
  const ws = new WebSocket(wsURL(path), t ? ["agentwire", "bearer." + t] : ["agentwire"]);
  return new Promise((resolve, reject) => {
    let opened = false;
    ws.addEventListener("open", () => {
      opened = true;
      setStatus("open", `connected: ${proto}`);
      resolve(ws);
    });
    ws.addEventListener("message", (ev) => {
      const raw = typeof ev.data === "string" ? ev.data : new TextDecoder().decode(ev.data);
      const f = record("in", proto, "ws", raw);
      if (f !== undefined) {
        try {
          onFrame(f);
        } catch (err) {
          view.error("the page failed on a frame: " + String(err));
        }
      }
    });
    ws.addEventListener("close", (ev) => {
      if (!opened) {
        reject(new Error(`the server refused the ${proto} WebSocket (${ev.code}${ev.reason ? " " + ev.reason : ""}; a missing or wrong token is refused before the upgrade)`));
        return;
      }
      if (current?.ws === ws) setStatus("closed", `closed: ${ev.code} ${ev.reason}`.trim());
    });
  });
}

/**
 * Sends a frame over a socket and records it.
 * @param {WebSocket} ws
 * @param {Protocol} proto
 * @param {object} frame
 */
export function sendFrame(ws, proto, frame) {
  const raw = JSON.stringify(frame);
  record("out", proto, "ws", raw);
  ws.send(raw);
}

/**
 * A request to the threads API with the credential as an Authorization
 * header.
 * @param {string} path
 * @param {RequestInit} init
 */
export async function api(path, init = {}) {
  const headers = new Headers(init.headers);
  const t = token();
  if (t) headers.set("Authorization", "Bearer " + t);
  return fetch(path, { ...init, headers });
}

/**
 * Reads a text/event-stream body: each event's id, name and data.
 * @param {Response} res
 * @returns {AsyncGenerator<{id: string | undefined, event: string, data: string}>}
 */
export async function* sse(res) {
  if (!res.body) return;
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  let event = "";
  /** @type {string[]} */
  let data = [];
  /** @type {string | undefined} */
  let id;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let nl;
      while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
        if (buf[nl] === "\r" && nl === buf.length - 1) break;
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf.startsWith("\r\n", nl) ? 2 : 1));
        if (line === "") {
          if (data.length > 0) yield { id, event: event || "message", data: data.join("\n") };
          event = "";
          data = [];
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? "" : line.slice(colon + 1);
        if (val.startsWith(" ")) val = val.slice(1);
        if (field === "event") event = val;
        else if (field === "data") data.push(val);
        else if (field === "id") id = val;
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

/**
 * Renders a thread's history as the threads API answers it (agentchat has
 * no replay: a page that comes back to an agentchat session reads the
 * thread's history over the threads API, which shares the thread).
 * @param {string} thread
 * @param {Protocol} proto
 */
export async function renderHistory(thread, proto) {
  const res = await api("/api/v1/threads/" + encodeURIComponent(thread), { headers: { Accept: "application/json" } });
  const raw = await res.text();
  if (res.status === 404) {
    record("in", "threads", "Error", raw, "GET history: a new thread");
    return;
  }
  if (res.status === 400 && proto !== "threads") {
    // The threads API names threads by UUID; another id has no history there.
    record("in", "threads", "Error", raw, "GET history: not a UUID");
    view.notice("This thread id is not a UUID, so its history cannot be read over the threads API: only what happens from now on shows.");
    return;
  }
  if (!res.ok) {
    record("in", "threads", "Error", raw, `GET history ${res.status}`);
    view.error(`GET /api/v1/threads/${thread}: ${res.status} ${raw}`);
    return;
  }
  const h = /** @type {ThreadResponse | undefined} */ (record("in", "threads", "ThreadResponse", raw, "GET history" + (proto === "threads" ? "" : ` for ${proto}`)));
  for (const m of h?.messages ?? []) {
    const c = m.content;
    switch (c.type) {
      case "user":
        view.user(c.text);
        break;
      case "agent":
        view.agent(c.text);
        break;
      case "tool_call":
        view.tool(c.tool_name, c.arguments);
        break;
      case "tool_result":
        view.result("tool", JSON.stringify(c.result), !c.tool_result_id.startsWith("error-"));
        break;
    }
  }
}
