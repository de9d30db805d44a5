// @ts-check
// The frames pane and the schema checks behind it: the schema documents
// are loaded from this server and indexed by the frames they describe;
// every frame the page sends or receives is listed here, checked against
// its own document (validate.js).

import { Validator } from "./validate.js";
import { el, frameList } from "./state.js";

/** @typedef {import("./state.js").Protocol} Protocol */

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
export async function loadSchemas() {
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
export function record(dir, proto, kind, raw, note) {
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

/** Empties the frames pane and its counts. */
export function clearFrames() {
  frameList.replaceChildren();
  frames = 0;
  invalid = 0;
  perProto = {};
  el("frame-summary").textContent = "";
  el("frame-count").textContent = "0";
  const ic = el("invalid-count");
  ic.dataset.count = "0";
  ic.textContent = "";
}
