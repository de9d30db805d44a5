// A scripted scenario that runs every typed client of this folder against
// a running agentwire server: a turn per protocol, up to its end, and a
// resume per protocol. agentwire's tests run it (cmd/tsgen/clients_test.go)
// against a server with the scenario cmd/tsgen/testdata/clients.yaml:
//
//	node --experimental-websocket smoke.js ws://127.0.0.1:8080
//
// with the server's API key, if it has one, in AGENTWIRE_TOKEN. It prints
// one "ok ..." line per check and exits 1 at the first failure.

import type * as ag2 from "../ag2.js";
import type * as agentloop from "../agentloop.js";
import type * as threads from "../threads.js";
import { Ag2Client } from "./ag2.js";
import { AgentChatClient } from "./agentchat.js";
import { AgentLoopClient } from "./agentloop.js";
import { LoomClient } from "./loom.js";
import { ThreadsClient, ThreadsError } from "./threads.js";

// Node's process, declared here so that the package needs no @types/node.
declare const process: { argv: string[]; env: Record<string, string | undefined>; exit(code: number): never };

const base = process.argv[2] ?? "ws://127.0.0.1:8080";
const token = process.env["AGENTWIRE_TOKEN"] || undefined;

function check(ok: boolean, what: string): void {
  if (!ok) throw new Error("check failed: " + what);
}

function ok(what: string): void {
  console.log("ok " + what);
}

async function credentials(): Promise<void> {
  if (!token) return;
  (await AgentChatClient.connect(base, { token })).close();
  let refused = false;
  try {
    const c = await AgentChatClient.connect(base, { token: "not-" + token });
    c.close();
  } catch {
    refused = true;
  }
  check(refused, "a WebSocket with a wrong bearer.<token> subprotocol is refused");
  let got = "no error";
  try {
    await new ThreadsClient(base, { token: "not-" + token }).history(crypto.randomUUID());
  } catch (err) {
    got = err instanceof ThreadsError ? String(err.status) : String(err);
  }
  check(got === "401", `a threads request with a wrong token gets 401 (got ${got})`);
  ok("credentials: wrong tokens are refused");
}

function userTexts(h: threads.ThreadResponse): string[] {
  return h.messages.flatMap((m) => (m.content.type === "user" ? [m.content.text] : []));
}

async function agentchat(): Promise<void> {
  const session = crypto.randomUUID();
  const a = await AgentChatClient.connect(base, { token });
  const echo = a.next("user_message");
  const reply = a.next("agent_message");
  a.chat("echo one", session);
  check((await echo).message === "echo one", "agentchat echoes the user's message");
  const r1 = (await reply).message;
  check(r1 === "You said: echo one", `agentchat agent_message "${r1}"`);
  a.close();
  ok("agentchat: a turn");

  // The same session_id on a new socket continues the thread.
  const b = await AgentChatClient.connect(base, { token, stream: "chunks" });
  let text = "";
  b.on("agent_message", (f) => (text += f.message));
  const done = b.next("agent_message", () => text === "You said: echo two");
  b.chat("echo two", session);
  await done;
  b.close();
  const h = await new ThreadsClient(base, { token }).history(session);
  const users = userTexts(h);
  check(users.join("|") === "echo one|echo two", `the session's thread holds both turns (users: ${users.join("|")})`);
  ok("agentchat: the session continued on a new socket, in chunks, and read back over threads");
}

function itemText(f: agentloop.ResponseItemMessage): string {
  return f.payload.type === "message" ? f.payload.content.map((p) => p.text).join("") : "";
}

async function agentloopScenario(): Promise<void> {
  const c = await AgentLoopClient.connect(base, { token });
  const thread = c.threadId;
  check(thread !== undefined, "agentloop names the thread in its first context_info");
  const approval = c.next("approval_request");
  const finished = c.next("agent_finished", undefined, 60_000);
  c.userInput("make a file agentloop.txt");
  const req = await approval;
  check(req.payload.command.join(" ").includes("touch"), `agentloop asks about the command (${req.payload.command.join(" ")})`);
  c.review("yes");
  await finished;
  ok("agentloop: a turn with an approval");

  // Rejoin the thread (?thread_id=): its conversation is replayed.
  const seen: agentloop.ServerMessage[] = [];
  c.onAny((f) => seen.push(f));
  await c.reconnect();
  check(c.threadId === thread, "agentloop rejoins the same thread");
  // Frames that arrive together are handled in one go: wait for the
  // live turn's end with a waiter registered before it starts.
  let live = false;
  c.on("response_item", (f) => {
    if (itemText(f) === "You said: echo three") live = true;
  });
  const liveEnd = c.next("agent_finished", () => live, 60_000);
  c.userInput("echo three");
  await liveEnd;
  const finishes = seen.filter((f) => f.type === "agent_finished").length;
  check(finishes === 2, `agentloop replays the earlier turn's agent_finished, then the new one (${finishes})`);
  check(
    seen.some((f) => f.type === "response_item" && f.payload.type === "local_shell_call"),
    "agentloop's replay has the earlier turn's shell call",
  );
  c.close();
  ok("agentloop: rejoined with thread_id, replayed, and a second turn");
}

async function ag2Scenario(): Promise<void> {
  const opts = { token, enterpriseId: "acme", chatId: crypto.randomUUID(), userId: "ada" };
  const a = await Ag2Client.connect(base, opts);
  const request = a.next("chat.input_request");
  const complete = a.next("chat.run_complete", undefined, 60_000);
  a.submit("make a file ag2.txt");
  const r = await request;
  a.answer(r.data.request_id, "approve");
  const rc = await complete;
  check(rc.data.reason === "completed", `ag2 run_complete reason ${rc.data.reason}`);
  const held = a.lastSeq;
  check(held >= rc.data.seq, "ag2 tracks the last seq");
  a.close();
  ok("ag2: a turn with an approval");

  // Another socket runs a turn while the first is away.
  const b = await Ag2Client.connect(base, opts);
  const bDone = b.next("chat.run_complete", (f) => f.replay !== true, 60_000);
  b.submit("echo four");
  await bDone;
  b.close();

  // The first reconnects and resumes from its last seq: it gets that turn.
  const replayed: ag2.ServerMessage[] = [];
  a.onAny((f) => {
    if (f.replay) replayed.push(f);
  });
  const boundary = await a.reconnect();
  const seqs = replayed.map((f) => (f.data as { seq?: number }).seq ?? 0);
  // The server replays the transcript from the start (its default, for
  // ChatUI); the client keeps only what it missed.
  const sent = boundary.data.replayed_messages ?? 0;
  check(replayed.length > 0 && replayed.length < sent, `ag2 keeps ${replayed.length} of the ${sent} frames replayed`);
  check(seqs.every((s) => s > held), "ag2 replays only frames after lastClientIndex");
  check(replayed.some((f) => f.type === "chat.text" && f.data.content === "You said: echo four"), "ag2's replay has the missed reply");
  check(replayed.some((f) => f.type === "chat.run_complete"), "ag2's replay has the missed run_complete");
  check(a.lastSeq >= Math.max(...seqs), "ag2 tracks the replayed seqs");
  a.close();
  ok(`ag2: client.resume after lastClientIndex ${held} replayed ${replayed.length} frames`);
}

async function loomScenario(): Promise<void> {
  const l = await LoomClient.connect(base, { token });
  let approvals = 0;
  l.onEvent("tool_approval", (ev, runId) => {
    approvals++;
    l.approve(runId, ev.call_id ?? "", "approve");
  });
  const run1 = l.run("make a file loom.txt");
  const end1 = await l.finished(run1);
  const thread = l.threadId;
  check(thread !== undefined && end1.session_id === thread, "loom keeps the run's thread");
  check(approvals === 1, `loom asked for one approval (${approvals})`);
  l.close();
  ok("loom: a run with an approval");

  // A new socket continues the thread with thread_id.
  const l2 = await LoomClient.connect(base, { token, threadId: thread });
  const end2 = await l2.finished(l2.run("echo five"));
  check(end2.reply === "You said: echo five", `loom run_end reply "${end2.reply}"`);
  check(end2.session_id === thread, "loom's second run is on the same thread");
  const page = await l2.userMessages();
  const users = page.messages.filter((m) => m.role === "user").map((m) => m.content);
  check(users.join("|") === "make a file loom.txt|echo five", `loom's thread has both runs (${users.join("|")})`);
  l2.close();
  ok("loom: continued the thread on a new socket");
}

async function threadsScenario(): Promise<void> {
  const t = new ThreadsClient(base, { token });
  const id = crypto.randomUUID();
  const evs: threads.StreamEvent[] = [];
  for await (const e of t.post(id, "echo six")) evs.push(e);
  const last = evs[evs.length - 1];
  check(last?.event === "done", `the threads stream ends with done (${last?.event})`);
  const text = evs.flatMap((e) => (e.event === "agent_text" ? [e.data.chunk] : [])).join("");
  check(text === "You said: echo six", `threads agent_text "${text}"`);
  const h = await t.history(id);
  check(userTexts(h).join("|") === "echo six" && h.messages.length === 2, "threads history has the turn");
  ok("threads: a post streamed to done, and the history");

  // Resume after the first event: the rest of the run, then done.
  const first = evs[0]?.id;
  check(first !== undefined, "threads events carry ids");
  const rest: threads.StreamEvent[] = [];
  for await (const e of t.events(id, first)) rest.push(e);
  const restText = rest.flatMap((e) => (e.event === "agent_text" ? [e.data.chunk] : [])).join("");
  check(rest[rest.length - 1]?.event === "done", "the resumed stream ends with done");
  check(rest.length < evs.length && text.endsWith(restText), `the resumed stream continues after Last-Event-ID ${first ?? ""}`);
  // Resume from the client's own last id: nothing was missed.
  const quiet: threads.StreamEvent[] = [];
  for await (const e of t.events(id)) quiet.push(e);
  check(quiet.length === 1 && quiet[0]?.event === "done", "a resume with nothing missed is done at once");
  ok(`threads: resumed with Last-Event-ID ${first ?? ""} and ${t.lastEventId.get(id) ?? ""}`);
}

const scenarios: [string, () => Promise<void>][] = [
  ["credentials", credentials],
  ["agentchat", agentchat],
  ["agentloop", agentloopScenario],
  ["ag2", ag2Scenario],
  ["loom", loomScenario],
  ["threads", threadsScenario],
];

for (const [name, run] of scenarios) {
  try {
    await run();
  } catch (err) {
    console.error(`FAIL ${name}: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  }
}
process.exit(0);
