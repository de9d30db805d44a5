// @ts-check
// The agentwire playground: one page that talks to the server that served
// it over any of its five protocols, renders the conversation, and lists
// every frame beside it, each checked against its schema (validate.js).
//
// Plain ES modules with JSDoc types: the frame types come from the
// generated TypeScript package (generated/ts, written by cmd/tsgen from
// the same documents as the schemas), and tsc checks this file against
// them in CI (tsconfig.json here: checkJs, strict). The browser loads the
// file as it is; the type imports are comments to it.

import { Validator } from "./validate.js";

/** @typedef {import("../../../generated/ts/src/agentchat.js").ServerMessage} AgentchatIn */
/** @typedef {import("../../../generated/ts/src/agentchat.js").ClientMessage} AgentchatOut */
/** @typedef {import("../../../generated/ts/src/agentloop.js").ServerMessage} AgentloopIn */
/** @typedef {import("../../../generated/ts/src/agentloop.js").ClientMessage} AgentloopOut */
/** @typedef {import("../../../generated/ts/src/agentloop.js").ResponseItemMessage["payload"]} AgentloopItem */
/** @typedef {import("../../../generated/ts/src/agentloop.js").ApprovalResponseMessage["payload"]["review"]} AgentloopReview */
/** @typedef {import("../../../generated/ts/src/ag2.js").ServerMessage} Ag2In */
/** @typedef {import("../../../generated/ts/src/ag2.js").ClientMessage} Ag2Out */
/** @typedef {import("../../../generated/ts/src/loom.js").ServerMessage} LoomIn */
/** @typedef {import("../../../generated/ts/src/loom.js").ClientMessage} LoomOut */
/** @typedef {import("../../../generated/ts/src/loom.js").RunStreamEventResponse["event"]} LoomEvent */
/** @typedef {import("../../../generated/ts/src/loom.js").ToolApprovalResponseRequest["decision"]} LoomDecision */
/** @typedef {import("../../../generated/ts/src/threads.js").StreamEvent} ThreadsEvent */
/** @typedef {import("../../../generated/ts/src/threads.js").ThreadResponse} ThreadResponse */
/** @typedef {import("../../../generated/ts/src/threads.js").SendMessageRequest} SendMessageRequest */

/** @typedef {"agentchat" | "threads" | "agentloop" | "ag2" | "loom"} Protocol */

/**
 * What a protocol's connection does; each protocol's own frames drive the
 * view (View below).
 * @typedef {object} Connection
 * @property {() => Promise<void>} open connects and renders the thread so far
 * @property {(text: string) => void} send a user turn
 * @property {() => void} close
 */

/**
 * A request the agent waits on (an approval, a question, a UI component).
 * @typedef {object} Ask
 * @property {string} key what ties the request to its answer in the page
 * @property {"approval" | "input" | "ui"} kind
 * @property {string} prompt
 * @property {{label: string, value: string}[]} [choices] buttons; their value is the answer
 * @property {boolean} [text] a text field as well (a question)
 * @property {boolean} [secret] the text field masks what is typed
 * @property {(answer: string) => void} answer
 */

// ---------------------------------------------------------------------------
// Elements and state

/** @param {string} id */
function el(id) {
  const e = document.getElementById(id);
  if (!e) throw new Error("the page has no #" + id);
  return e;
}
const protocolSel = /** @type {HTMLSelectElement} */ (el("protocol"));
const threadInput = /** @type {HTMLInputElement} */ (el("thread"));
const tokenInput = /** @type {HTMLInputElement} */ (el("token"));
const messageInput = /** @type {HTMLInputElement} */ (el("message"));
const scenarioSel = /** @type {HTMLSelectElement} */ (el("scenario"));
const conversation = el("conversation");
const frameList = el("frame-list");
const statusEl = el("status");

const storeKey = "agentwire.playground";

/**
 * What a reload keeps (localStorage): the protocol, the thread, the recent
 * threads, and per thread the position each protocol reached (AG2's last
 * seq, the threads API's last event id) and whether a threads run was still
 * streaming. The token stays in sessionStorage: it lasts the tab, not the
 * browser.
 * @typedef {object} Saved
 * @property {Protocol} protocol
 * @property {string} thread
 * @property {string[]} recent
 * @property {Record<string, number>} ag2Seq
 * @property {Record<string, string>} lastEventId
 * @property {Record<string, boolean>} streaming
 */

/** @returns {Saved} */
function load() {
  /** @type {Saved} */
  const empty = { protocol: "agentchat", thread: "", recent: [], ag2Seq: {}, lastEventId: {}, streaming: {} };
  try {
    const raw = localStorage.getItem(storeKey);
    return raw ? { ...empty, ...JSON.parse(raw) } : empty;
  } catch {
    return empty;
  }
}
const saved = load();
function save() {
  localStorage.setItem(storeKey, JSON.stringify(saved));
}

/** @type {{auth: string, protocols: string[]}} */
let config = { auth: "none", protocols: [] };

// ---------------------------------------------------------------------------
// Schemas: which document checks which frame

/** @type {Validator | undefined} */
let validator;
/** Per WebSocket protocol: frame type -> the documents that may describe it. @type {Record<string, Map<string, string[]>>} */
const byType = {};
/** threads: SSE event name -> its schema in the OpenAPI document. @type {Map<string, string>} */
const sseSchemas = new Map();

/**
 * Loads the documents (from this server) and indexes the frames they
 * describe: a protocol's frame documents are those no other document of it
 * refers to (the others are parts: items, events, usage), keyed by their
 * type's const. The threads API's SSE events are the OpenAPI document's
 * schemas whose `event` is a const.
 */
async function loadSchemas() {
  const res = await fetch("/playground/schemas.json");
  if (!res.ok) throw new Error(`GET /playground/schemas.json: ${res.status}`);
  /** @type {Record<string, Record<string, any>>} */
  const bundle = await res.json();
  /** @type {Record<string, any>} */
  const docs = {};
  let count = 0;
  for (const [proto, files] of Object.entries(bundle)) {
    if (proto === "threads") continue;
    const referred = new Set();
    for (const doc of Object.values(files)) {
      JSON.stringify(doc, (k, v) => {
        if (k === "$ref" && typeof v === "string" && !v.startsWith("#")) referred.add(v.split("#")[0]);
        return v;
      });
    }
    /** @type {Map<string, string[]>} */
    const types = new Map();
    for (const [name, doc] of Object.entries(files)) {
      docs[proto + "/" + name] = doc;
      count++;
      const t = doc?.properties?.type?.const;
      if (referred.has(name) || typeof t !== "string") continue;
      types.set(t, [...(types.get(t) ?? []), proto + "/" + name]);
    }
    byType[proto] = types;
  }
  // $refs between a protocol's documents are relative: "usage.json".
  // Name the documents by protocol and rewrite those refs to match.
  for (const [key, doc] of Object.entries(docs)) {
    const proto = key.split("/")[0];
    docs[key] = JSON.parse(JSON.stringify(doc), (k, v) =>
      k === "$ref" && typeof v === "string" && !v.startsWith("#") ? proto + "/" + v : v,
    );
  }
  const openapi = bundle.threads?.["openapi.json"];
  if (openapi) {
    docs["openapi.json"] = openapi;
    count++;
    for (const [name, s] of Object.entries(openapi.components?.schemas ?? {})) {
      const ev = /** @type {any} */ (s)?.properties?.event?.const;
      if (typeof ev === "string") sseSchemas.set(ev, "openapi.json#/components/schemas/" + name);
    }
  }
  validator = new Validator(docs);
  el("schema-status").textContent = `${count} schema documents loaded from this server; every frame is checked against its own.`;
}

/**
 * Checks a frame: the answer lists what is wrong (empty: valid) and names
 * the schema it was checked against.
 * @param {Protocol} proto
 * @param {string} kind "ws" for a WebSocket frame, "sse" for a threads event, or an OpenAPI schema name
 * @param {unknown} value
 * @returns {{schema: string, errors: string[]}}
 */
function check(proto, kind, value) {
  if (!validator) return { schema: "", errors: ["the schemas did not load: the frame is unchecked"] };
  try {
    if (kind === "sse") {
      const ev = /** @type {any} */ (value)?.event;
      const ref = sseSchemas.get(ev);
      if (!ref) return { schema: "", errors: [`no schema describes the event ${JSON.stringify(ev)}`] };
      return { schema: ref.split("/").pop() ?? ref, errors: validator.validate(ref, value) };
    }
    if (kind !== "ws") {
      return { schema: kind, errors: validator.validate("openapi.json#/components/schemas/" + kind, value) };
    }
    const t = /** @type {any} */ (value)?.type;
    const candidates = byType[proto]?.get(t) ?? [];
    if (candidates.length === 0) return { schema: "", errors: [`no ${proto} schema describes a frame of type ${JSON.stringify(t)}`] };
    /** @type {string[]} */
    let errors = [];
    for (const c of candidates) {
      const e = validator.validate(c, value);
      if (e.length === 0) return { schema: c, errors: [] };
      errors = errors.concat(e.map((x) => `${c.split("/")[1]}: ${x}`));
    }
    return { schema: candidates.join(" or "), errors };
  } catch (err) {
    return { schema: "", errors: [String(err)] };
  }
}

// ---------------------------------------------------------------------------
// The frames pane

let frames = 0;
let invalid = 0;
/** Frames listed per protocol. @type {Record<string, number>} */
let perProto = {};

/**
 * Lists a frame and marks it valid or invalid.
 * @param {"in" | "out"} dir
 * @param {Protocol} proto
 * @param {string} kind see check
 * @param {string} raw the frame as on the wire
 * @param {string} [note] said beside the frame (e.g. "injected", "GET history")
 * @returns {unknown} the parsed frame (undefined when it is not JSON)
 */
function record(dir, proto, kind, raw, note) {
  /** @type {unknown} */
  let value;
  /** @type {{schema: string, errors: string[]}} */
  let verdict;
  try {
    value = JSON.parse(raw);
    verdict = check(proto, kind, value);
  } catch (err) {
    verdict = { schema: "", errors: ["not JSON: " + String(err)] };
  }
  frames++;
  const li = document.createElement("li");
  const ok = verdict.errors.length === 0;
  li.className = "frame " + dir + (ok ? " valid" : " invalid");
  li.dataset.proto = proto;
  const v = /** @type {any} */ (value);
  const type = String(v?.type ?? v?.event ?? (kind === "ws" || kind === "sse" ? "?" : kind));
  li.dataset.type = type;
  // One line per frame; the frame itself unfolds on a click (an invalid
  // one is unfolded, with what is wrong).
  const details = document.createElement("details");
  details.open = !ok;
  const head = document.createElement("summary");
  head.className = "head";
  const inner = v?.type === "run_stream_event" ? ` ${v?.event?.type ?? ""}` : "";
  const parts = [
    ["dir", dir === "in" ? "←" : "→"],
    ["proto", proto],
    ["kind", type + inner + (note ? ` (${note})` : "")],
    ["verdict", ok ? "✓ " + verdict.schema.replace(/^.*\//, "") : "✗ invalid"],
  ];
  for (const [cls, text] of parts) {
    const s = document.createElement("span");
    s.className = cls;
    s.textContent = text;
    head.append(s);
  }
  const pre = document.createElement("pre");
  pre.textContent = value === undefined ? raw : JSON.stringify(value, null, 1);
  details.append(head, pre);
  li.append(details);
  if (!ok) {
    invalid++;
    const e = document.createElement("div");
    e.className = "errors";
    e.textContent = verdict.errors.join("\n");
    li.append(e);
  }
  const atEnd = frameList.scrollTop + frameList.clientHeight >= frameList.scrollHeight - 20;
  frameList.append(li);
  if (atEnd) frameList.scrollTop = frameList.scrollHeight;
  perProto[proto] = (perProto[proto] ?? 0) + 1;
  el("frame-summary").textContent = Object.entries(perProto)
    .map(([p, n]) => `${p} ${n}`)
    .join(" · ");
  el("frame-count").textContent = String(frames);
  const ic = el("invalid-count");
  ic.dataset.count = String(invalid);
  ic.textContent = invalid ? `${invalid} invalid` : "";
  return value;
}

// ---------------------------------------------------------------------------
// The conversation

/** The agent bubble text is appended to, by key. @type {Map<string, HTMLElement>} */
const bubbles = new Map();

/**
 * @param {string} cls user, agent, thinking, tool, result, error or notice
 * @param {string} who
 * @param {string} text
 * @returns {HTMLElement}
 */
function bubble(cls, who, text) {
  const d = document.createElement("div");
  d.className = "msg " + cls;
  d.dataset.role = cls;
  const w = document.createElement("span");
  w.className = "who";
  w.textContent = who;
  const t = document.createElement("span");
  t.className = "text";
  t.textContent = text;
  d.append(w, t);
  const atEnd = conversation.scrollTop + conversation.clientHeight >= conversation.scrollHeight - 20;
  conversation.append(d);
  if (atEnd) conversation.scrollTop = conversation.scrollHeight;
  return d;
}

const view = {
  /** @param {string} text */
  user(text) {
    bubble("user", "you", text);
  },
  /**
   * Agent text: with a key, text is appended to that key's bubble (a
   * stream of chunks); without, it is a bubble of its own.
   * @param {string} text
   * @param {string} [key]
   * @param {string} [who]
   */
  agent(text, key, who = "agent") {
    const b = key ? bubbles.get(key) : undefined;
    if (b) {
      const t = b.querySelector(".text");
      if (t) t.textContent += text;
      return;
    }
    const nb = bubble("agent", who, text);
    if (key) bubbles.set(key, nb);
  },
  /** @param {string} text @param {string} [key] */
  thinking(text, key) {
    const b = key ? bubbles.get(key) : undefined;
    if (b) {
      const t = b.querySelector(".text");
      if (t) t.textContent += text;
      return;
    }
    const nb = bubble("thinking", "reasoning", text);
    if (key) bubbles.set(key, nb);
  },
  /** @param {string} name @param {unknown} args */
  tool(name, args) {
    bubble("tool", "tool call", `${name} ${typeof args === "string" ? args : JSON.stringify(args)}`);
  },
  /** @param {string} name @param {string} output @param {boolean} ok */
  result(name, output, ok) {
    const b = bubble("result", ok ? `${name} result` : `${name} failed`, output);
    if (!ok) b.classList.add("failed");
  },
  /** @param {string} text */
  error(text) {
    bubble("error", "error", text);
  },
  /** @param {string} text */
  notice(text) {
    bubble("notice", "notice", text);
  },
  /**
   * Shows a request with its answers; answering it sends the answer and
   * greys the request out.
   * @param {Ask} ask
   */
  ask(ask) {
    const d = document.createElement("div");
    d.className = "request " + ask.kind;
    d.dataset.key = ask.key;
    d.dataset.kind = ask.kind;
    const p = document.createElement("div");
    p.className = "prompt";
    p.textContent = ask.prompt;
    const answers = document.createElement("div");
    answers.className = "answers";
    /** @param {string} a */
    const answer = (a) => {
      d.classList.add("answered");
      ask.answer(a);
    };
    if (ask.text) {
      const f = document.createElement("form");
      const i = document.createElement("input");
      i.type = ask.secret ? "password" : "text";
      i.placeholder = "your answer";
      const b = document.createElement("button");
      b.textContent = "answer";
      f.append(i, b);
      f.addEventListener("submit", (ev) => {
        ev.preventDefault();
        answer(i.value);
      });
      answers.append(f);
    }
    for (const c of ask.choices ?? []) {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = c.label;
      b.dataset.answer = c.value;
      b.addEventListener("click", () => answer(c.value));
      answers.append(b);
    }
    d.append(p, answers);
    conversation.append(d);
    conversation.scrollTop = conversation.scrollHeight;
  },
  /** Marks a request answered (elsewhere, or it timed out). @param {string} key */
  resolved(key) {
    for (const d of conversation.querySelectorAll(".request")) {
      if (/** @type {HTMLElement} */ (d).dataset.key === key) d.classList.add("answered");
    }
  },
  /** Ends every bubble being appended to: the next text starts a new one. */
  cut() {
    bubbles.clear();
  },
  clear() {
    bubbles.clear();
    conversation.replaceChildren();
  },
};

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
function dial(path, proto, onFrame) {
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
function sendFrame(ws, proto, frame) {
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
async function api(path, init = {}) {
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
async function* sse(res) {
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
async function renderHistory(thread, proto) {
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

// ---------------------------------------------------------------------------
// The protocols

/**
 * agentchat (ws /ws): `chat` with the thread as session_id. Nothing is
 * replayed to a socket, so opening renders the history over the threads
 * API. Runs it starts cannot ask for approval (the call is refused and
 * shows as a failed tool_result).
 * @param {string} thread
 * @returns {Connection & {ws?: WebSocket}}
 */
function agentchat(thread) {
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

/**
 * threads (REST + SSE): POST a message and read the run's events from the
 * answer; GET the history on opening; a run that was still streaming when
 * the page went away is followed again from the last event id
 * (GET …/events with Last-Event-ID).
 * @param {string} thread
 * @returns {Connection}
 */
function threads(thread) {
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

/**
 * AgentLoop (ws /agentloop?thread_id=): the server replays the thread's
 * conversation to a socket that joins it, then live frames follow; an
 * approval_request waits for an approval_response.
 * @param {string} thread
 * @returns {Connection & {ws?: WebSocket}}
 */
function agentloop(thread) {
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

/**
 * AG2 chat.* (ws /ws/default/playground/{thread}/playground): the chat id
 * is the thread. Opening sends client.resume from seq 0, so the server
 * replays every frame of the chat (replay: true) up to chat.resume_boundary;
 * questions and approvals are chat.input_request, UI components are
 * chat.tool_call awaiting a response.
 * @param {string} thread
 * @returns {Connection & {ws?: WebSocket}}
 */
function ag2(thread) {
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

/**
 * Loom (ws /loom): each turn is a `run` on the thread (thread_id); opening
 * lists the thread's messages (user_messages). tool_approval events wait
 * for tool_approval_response; an ask_user question is a custom
 * input_requested event, answered with input_response.
 * @param {string} thread
 * @returns {Connection & {ws?: WebSocket}}
 */
function loom(thread) {
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

/** @type {(Connection & {ws?: WebSocket}) | undefined} */
let current;

/**
 * @param {"open" | "closed" | "error" | "connecting"} state
 * @param {string} text
 */
function setStatus(state, text) {
  statusEl.dataset.state = state;
  statusEl.textContent = text;
}

/** @param {unknown} err */
function failed(err) {
  setStatus("error", String(err instanceof Error ? err.message : err));
  view.error(String(err instanceof Error ? err.message : err));
}

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
  current = undefined;
  if (!threadInput.value.trim()) newThread();
  rememberThread();
  sessionStorage.setItem(storeKey + ".token", tokenInput.value);
  const proto = /** @type {Protocol} */ (protocolSel.value);
  el("protocol-note").textContent = notes[proto];
  view.clear();
  setStatus("connecting", `connecting: ${proto}…`);
  const c = protocols[proto](threadInput.value.trim());
  current = c;
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
  el("clear-frames").addEventListener("click", () => {
    frameList.replaceChildren();
    frames = 0;
    invalid = 0;
    perProto = {};
    el("frame-summary").textContent = "";
    el("frame-count").textContent = "0";
    const ic = el("invalid-count");
    ic.dataset.count = "0";
    ic.textContent = "";
  });
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
