// @ts-check
// The agentwire playground: one page that talks to the server that served
// it over any of its five protocols, renders the conversation, and lists
// every frame beside it, each checked against its schema (validate.js).
//
// Plain ES modules with JSDoc types: the frame types come from the
// generated TypeScript package (generated/ts, written by cmd/tsgen from
// the same documents as the schemas), and tsc checks these files against
// them in CI (tsconfig.json here: checkJs, strict). The browser loads the
// files as they are; the type imports are comments to it.
//
// The page is split by concern: state.js (its elements and what a reload
// keeps), frames.js (the frames pane and the schema checks), view.js (the
// conversation), wire.js (what the protocols share on the wire) and one
// adapter per protocol (agentchat.js, threads.js, agentloop.js, ag2.js,
// loom.js); this module picks the adapter and wires the controls.

import { ag2 } from "./ag2.js";
import { agentchat } from "./agentchat.js";
import { agentloop } from "./agentloop.js";
import { clearFrames, loadSchemas, record } from "./frames.js";
import { loom } from "./loom.js";
import { current, el, frameList, messageInput, protocolSel, save, saved, scenarioSel, setCurrent, setStatus, storeKey, threadInput, tokenInput } from "./state.js";
import { threads } from "./threads.js";
import { failed, view } from "./view.js";

/** @typedef {import("./state.js").Protocol} Protocol */
/** @typedef {import("./state.js").Connection} Connection */

/** @type {{auth: string, protocols: string[]}} */
let config = { auth: "none", protocols: [] };

/** @type {Record<Protocol, (thread: string) => Connection & {ws?: WebSocket}>} */
const protocols = { agentchat, threads, agentloop, ag2, loom };

/** @type {Record<Protocol, string>} */
const notes = {
  agentchat:
    "agentchat: `chat` frames with this thread as session_id. It cannot answer approvals: a call that needs one is refused (a failed tool_result). Nothing is replayed to a socket, so the history comes from the threads API.",
  threads:
    "threads: POST /api/v1/threads/{id} answers with the run's events (SSE); GET gives the history; GET …/events with Last-Event-ID resumes. It cannot answer approvals: such a call is refused.",
  agentloop:
    "AgentLoop: user_input, approval_response; joining the thread (?thread_id=) replays its conversation. A question of the agent is answered with your next message.",
  ag2: "AG2 chat.*: user.input.submit answers turns, questions and approvals; inline_component.result answers UI components; client.resume replays the chat.",
  loom: "Loom: each message is a run on this thread; tool_approval_response and input_response answer approvals and questions; user_messages lists the history.",
};

// ---------------------------------------------------------------------------
// Wiring

function newThread() {
  threadInput.value = crypto.randomUUID();
}

function rememberThread() {
  const t = threadInput.value.trim();
  saved.thread = t;
  saved.protocol = /** @type {Protocol} */ (protocolSel.value);
  saved.recent = [t, ...saved.recent.filter((x) => x !== t)].slice(0, 20);
  save();
  const dl = el("recent-threads");
  dl.replaceChildren(
    ...saved.recent.map((x) => {
      const o = document.createElement("option");
      o.value = x;
      return o;
    }),
  );
}

/** (Re)connects with the protocol and thread the controls name. */
async function connect() {
  current?.close();
  setCurrent(undefined);
  if (!threadInput.value.trim()) newThread();
  rememberThread();
  sessionStorage.setItem(storeKey + ".token", tokenInput.value);
  const proto = /** @type {Protocol} */ (protocolSel.value);
  el("protocol-note").textContent = notes[proto];
  view.clear();
  setStatus("connecting", `connecting: ${proto}…`);
  const c = protocols[proto](threadInput.value.trim());
  setCurrent(c);
  try {
    await c.open();
  } catch (err) {
    if (current === c) failed(err);
  }
}

async function start() {
  try {
    const res = await fetch("/playground/config.json");
    if (res.ok) config = await res.json();
  } catch {
    // the defaults: no token field
  }
  el("token-field").hidden = config.auth === "none";
  tokenInput.value = sessionStorage.getItem(storeKey + ".token") ?? "";
  for (const o of protocolSel.options) o.disabled = config.protocols.length > 0 && !config.protocols.includes(o.value);
  try {
    await loadSchemas();
  } catch (err) {
    el("schema-status").textContent = "The schemas did not load, so frames are not checked: " + String(err);
  }
  protocolSel.value = saved.protocol;
  threadInput.value = saved.thread;
  el("new-thread").addEventListener("click", () => {
    newThread();
    connect();
  });
  el("connect").addEventListener("click", () => connect());
  // Switching protocols keeps the thread: the conversation continues.
  protocolSel.addEventListener("change", () => connect());
  threadInput.addEventListener("change", () => connect());
  const filter = /** @type {HTMLSelectElement} */ (el("frame-filter"));
  filter.addEventListener("change", () => {
    frameList.dataset.filter = filter.value;
  });
  el("clear-frames").addEventListener("click", () => clearFrames());
  scenarioSel.addEventListener("change", () => {
    if (scenarioSel.value) messageInput.value = scenarioSel.value;
    scenarioSel.value = "";
    messageInput.focus();
  });
  el("composer").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const text = messageInput.value.trim();
    if (!text || !current) return;
    try {
      current.send(text);
      messageInput.value = "";
    } catch (err) {
      failed(err);
    }
  });
  // For tests and the curious: inject(raw) lists a frame as if the server
  // had sent it on the current protocol, checked like the others.
  /** @type {any} */ (window).agentwirePlayground = {
    /** @param {string} raw */
    inject(raw) {
      const proto = /** @type {Protocol} */ (protocolSel.value);
      return record("in", proto, proto === "threads" ? "sse" : "ws", raw, "injected");
    },
  };
  // A reload resumes where the page was: the same protocol and thread.
  if (saved.thread || config.auth === "none") await connect();
  document.body.dataset.ready = "true";
}

start();
