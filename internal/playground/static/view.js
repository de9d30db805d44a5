// @ts-check
// The conversation: what the protocols' frames render as (bubbles of the
// user, the agent, its reasoning, tool calls and results, and requests
// the agent waits on, with their answers).

import { conversation, setStatus } from "./state.js";

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

export const view = {
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

/** @param {unknown} err */
export function failed(err) {
  setStatus("error", String(err instanceof Error ? err.message : err));
  view.error(String(err instanceof Error ? err.message : err));
}
