// @ts-check
// The playground's page elements and what it keeps: the controls, the
// state a reload keeps (localStorage), the connection in use and the
// status line. Every other module of the page reads them from here.

/** @typedef {"agentchat" | "threads" | "agentloop" | "ag2" | "loom"} Protocol */

/**
 * What a protocol's connection does; each protocol's own frames drive the
 * view (view.js).
 * @typedef {object} Connection
 * @property {() => Promise<void>} open connects and renders the thread so far
 * @property {(text: string) => void} send a user turn
 * @property {() => void} close
 */

/** @param {string} id */
export function el(id) {
  const e = document.getElementById(id);
  if (!e) throw new Error("the page has no #" + id);
  return e;
}
export const protocolSel = /** @type {HTMLSelectElement} */ (el("protocol"));
export const threadInput = /** @type {HTMLInputElement} */ (el("thread"));
export const tokenInput = /** @type {HTMLInputElement} */ (el("token"));
export const messageInput = /** @type {HTMLInputElement} */ (el("message"));
export const scenarioSel = /** @type {HTMLSelectElement} */ (el("scenario"));
export const conversation = el("conversation");
export const frameList = el("frame-list");
export const statusEl = el("status");

export const storeKey = "agentwire.playground";

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
export const saved = load();
export function save() {
  localStorage.setItem(storeKey, JSON.stringify(saved));
}

/** The connection in use (app.js sets it). @type {(Connection & {ws?: WebSocket}) | undefined} */
export let current;

/** @param {(Connection & {ws?: WebSocket}) | undefined} c */
export function setCurrent(c) {
  current = c;
}

/**
 * @param {"open" | "closed" | "error" | "connecting"} state
 * @param {string} text
 */
export function setStatus(state, text) {
  statusEl.dataset.state = state;
  statusEl.textContent = text;
}
