// Browser test of the playground (internal/playground): agentwire's own page
// at / of the main listener, in Chromium, against a real server started
// with --auth keys and the built-in scripted scenario. For every protocol:
// a chat turn, an approval (answered where the protocol can answer one,
// refused where it cannot), a reload that resumes the conversation, and no
// frame marked invalid; then one thread driven by all five protocols in
// turn, and a deliberately invalid frame, which must be marked.
//
// Run: npm ci here, then `node --test` (AGENTWIRE_BIN: a built cmd/server,
// else it is built; CHROMIUM: the browser, /usr/bin/chromium; SHOTS: the
// folder for screenshots, ./shots by default).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const shots = resolve(process.env.SHOTS || join(here, 'shots'));
const wait = 30_000;
const key = 'pk-' + crypto.randomUUID();

let tmp, server, serverLog = '', browser, base;

function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
    s.on('error', fail);
  });
}

before(async () => {
  mkdirSync(shots, { recursive: true });
  tmp = mkdtempSync(join(tmpdir(), 'agentwire-playground-'));
  let bin = process.env.AGENTWIRE_BIN;
  if (!bin) {
    bin = join(tmp, 'agentwire');
    const b = spawnSync('go', ['build', '-o', bin, './cmd/server'], { cwd: root, stdio: 'inherit' });
    assert.equal(b.status, 0, 'go build ./cmd/server');
  }
  writeFileSync(join(tmp, 'keys'), 'ada=' + key + '\n', { mode: 0o600 });
  const port = await freePort();
  base = 'http://127.0.0.1:' + port;
  // No model is configured: the built-in scenario answers ("demo approval", ...).
  const env = { ...process.env };
  for (const k of ['OPENAI_API_KEY', 'OPENAI_BASE_URL', 'ANTHROPIC_API_KEY', 'GEMINI_API_KEY']) delete env[k];
  server = spawn(bin, ['--addr', '127.0.0.1:' + port, '--auth', 'keys', '--api-keys-file', join(tmp, 'keys'),
    '--data-dir', join(tmp, 'data'), '--workdir', join(tmp, 'work')], { stdio: ['ignore', 'pipe', 'pipe'], env });
  server.stdout.on('data', (d) => { serverLog += d; });
  server.stderr.on('data', (d) => { serverLog += d; });
  const end = Date.now() + 60_000;
  let exited = false;
  server.once('exit', () => { exited = true; });
  for (;;) {
    if (exited) throw new Error('the server exited; its log:\n' + serverLog);
    try {
      if ((await fetch(base + '/readyz')).ok) break;
    } catch { /* not yet */ }
    if (Date.now() > end) throw new Error('the server never answered; its log:\n' + serverLog);
    await new Promise((r) => setTimeout(r, 200));
  }
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
});

after(async () => {
  if (browser) await browser.close();
  if (server) {
    const exited = new Promise((r) => server.once('exit', r));
    server.kill('SIGTERM');
    await exited;
  }
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

// open loads the playground in a new page of its own browser context
// (its own localStorage) and waits until it is ready.
async function open(ctx) {
  const page = await ctx.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  // A new thread's history is a 404 (the page says "a new thread"); any
  // other failed request or error is a failure.
  page.on('console', (m) => {
    if (m.type() === 'error' && !m.text().includes('status of 404 (Not Found)')) errors.push(m.text());
  });
  page.errors = errors;
  await page.goto(base + '/');
  await page.waitForSelector('body[data-ready="true"]', { timeout: wait });
  return page;
}

async function connected(page, proto) {
  await page.waitForFunction((p) => {
    const s = document.getElementById('status');
    return s.dataset.state === 'open' && s.textContent.includes(p);
  }, proto, { timeout: wait });
}

async function say(page, text) {
  await page.fill('#message', text);
  await page.click('#send');
}

// shows waits until an element of the conversation matching selector
// contains text.
async function shows(page, selector, text) {
  try {
    await page.waitForFunction(([s, t]) => [...document.querySelectorAll('#conversation ' + s)].some((e) => e.textContent.includes(t)),
      [selector, text], { timeout: wait });
  } catch (err) {
    throw new Error(`the conversation never showed ${selector} "${text}":\n${await page.innerText('#conversation')}\n${err}`);
  }
}

async function noInvalidFrames(page, what) {
  const n = await page.getAttribute('#invalid-count', 'data-count');
  if (n !== '0') {
    const bad = await page.$$eval('.frame.invalid', (l) => l.map((e) => e.innerText).join('\n---\n'));
    assert.fail(`${what}: ${n} frames marked invalid:\n${bad}`);
  }
  const total = Number(await page.textContent('#frame-count'));
  assert.ok(total > 0, what + ': frames were listed');
  assert.deepEqual(page.errors, [], what + ': no error in the page');
}

const fallback = 'running on its offline scripted model';

// What "demo approval" does on each protocol: answered where the protocol
// answers approvals; refused (a failed tool result) where it cannot.
const approvals = {
  agentchat: null,
  threads: null,
  agentloop: 'yes',
  ag2: 'approve',
  loom: 'approve',
};

for (const proto of Object.keys(approvals)) {
  test(`${proto}: a turn, an approval, a reload that resumes`, async () => {
    const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    try {
      const page = await open(ctx);
      assert.equal(await page.isVisible('#token'), true, 'the token field shows under --auth keys');
      await page.fill('#token', key);
      await page.selectOption('#protocol', proto);
      await page.click('#new-thread');
      await connected(page, proto);
      const thread = await page.inputValue('#thread');

      await say(page, 'hello there');
      await shows(page, '.msg.user', 'hello there');
      await shows(page, '.msg.agent', fallback);

      await say(page, 'demo approval');
      const answer = approvals[proto];
      if (answer) {
        await page.click(`.request.approval:not(.answered) button[data-answer="${answer}"]`, { timeout: wait });
        await shows(page, '.msg.agent', 'Done: approved.txt now exists');
      } else {
        await shows(page, '.msg.result.failed', '');
        await shows(page, '.msg.agent', 'The command did not run.');
      }
      await noInvalidFrames(page, proto + ' live');
      await page.screenshot({ path: join(shots, `${proto}-live.png`) });

      // A reload: the same protocol and thread, the conversation shown again.
      await page.reload();
      await page.waitForSelector('body[data-ready="true"]', { timeout: wait });
      await connected(page, proto);
      assert.equal(await page.inputValue('#thread'), thread, 'the reload keeps the thread');
      assert.equal(await page.inputValue('#protocol'), proto, 'the reload keeps the protocol');
      await shows(page, '.msg.user', 'hello there');
      await shows(page, '.msg.user', 'demo approval');
      await shows(page, '.msg.agent', answer ? 'Done: approved.txt now exists' : 'The command did not run.');
      await say(page, 'hello again');
      await shows(page, '.msg.user', 'hello again');
      await page.waitForFunction((t) => [...document.querySelectorAll('#conversation .msg.agent')].filter((e) => e.textContent.includes(t)).length >= 2,
        fallback, { timeout: wait });
      await noInvalidFrames(page, proto + ' after the reload');
      await page.screenshot({ path: join(shots, `${proto}-resumed.png`) });
    } finally {
      await ctx.close();
    }
  });
}

// Questions and UI components, answered where each protocol answers them:
// AG2 and Loom show a question with a field to answer in; AgentLoop takes
// the next message as the answer; AG2 renders a UI component's options.
test('questions and UI components', async () => {
  const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  try {
    const page = await open(ctx);
    await page.fill('#token', key);
    for (const proto of ['ag2', 'loom', 'agentloop']) {
      await page.selectOption('#protocol', proto);
      await page.click('#new-thread');
      await connected(page, proto);
      await page.selectOption('#scenario', 'demo input');
      assert.equal(await page.inputValue('#message'), 'demo input', 'the scenario picker fills the message');
      await page.click('#send');
      if (proto === 'agentloop') {
        await shows(page, '.msg.agent', 'Your next message answers this question');
        await say(page, 'Ada ' + proto);
      } else {
        await page.fill('.request.input:not(.answered) input', 'Ada ' + proto, { timeout: wait });
        await page.press('.request.input:not(.answered) input', 'Enter');
        await page.waitForSelector('.request.input.answered', { timeout: wait });
      }
      await shows(page, '.msg.agent', `Nice to meet you, Ada ${proto}!`);
      await noInvalidFrames(page, proto + ' question');
    }
    await page.selectOption('#protocol', 'ag2');
    await page.click('#new-thread');
    await connected(page, 'ag2');
    await say(page, 'demo ui');
    await page.click('.request.ui:not(.answered) button[data-answer="green"]', { timeout: wait });
    await shows(page, '.msg.agent', 'Your frontend answered');
    await shows(page, '.msg.agent', 'green');
    await noInvalidFrames(page, 'ag2 UI component');
    await page.screenshot({ path: join(shots, 'ag2-ui.png') });
  } finally {
    await ctx.close();
  }
});

test('one thread through all five protocols, then an invalid frame is marked', async () => {
  const ctx = await browser.newContext({ viewport: { width: 1600, height: 1300 } });
  try {
    const page = await open(ctx);
    await page.fill('#token', key);
    await page.selectOption('#protocol', 'agentchat');
    await page.click('#new-thread');
    await connected(page, 'agentchat');
    const thread = await page.inputValue('#thread');
    const protos = ['agentchat', 'threads', 'agentloop', 'ag2', 'loom'];
    for (const [i, proto] of protos.entries()) {
      if (i > 0) {
        // Switching protocols keeps the thread; the new protocol shows
        // what the earlier ones said.
        await page.selectOption('#protocol', proto);
        await connected(page, proto);
        assert.equal(await page.inputValue('#thread'), thread);
        await shows(page, '.msg.user', `turn over ${protos[i - 1]}`);
      }
      await say(page, `turn over ${proto}: list the files`);
      await shows(page, '.msg.user', `turn over ${proto}`);
      await shows(page, '.msg.agent', 'working folder');
      if (proto === 'ag2' || proto === 'loom') await page.waitForTimeout(300); // let the run's last frames land
    }
    for (const proto of protos) {
      assert.ok(await page.locator(`.frame[data-proto="${proto}"]`).count() > 0, `frames of ${proto} are listed`);
    }
    await noInvalidFrames(page, 'five protocols');
    await page.screenshot({ path: join(shots, 'all-protocols.png') });
    await page.selectOption('#frame-filter', 'ag2');
    const visible = await page.$$eval('.frame', (l) => l.filter((e) => e.offsetParent !== null).map((e) => e.dataset.proto));
    assert.ok(visible.length > 0 && visible.every((p) => p === 'ag2'), 'the filter lists one protocol\'s frames');
    await page.selectOption('#frame-filter', '');

    // A frame the schema refuses (agent text without its message) is
    // marked invalid, and a good one is not.
    await page.selectOption('#protocol', 'agentchat');
    await connected(page, 'agentchat');
    await page.evaluate(() => window.agentwirePlayground.inject('{"type":"agent_message"}'));
    await page.evaluate(() => window.agentwirePlayground.inject('{"type":"agent_message","message":"hi","extra":1}'));
    await page.evaluate(() => window.agentwirePlayground.inject('not json'));
    await page.evaluate(() => window.agentwirePlayground.inject('{"type":"agent_message","message":"fine"}'));
    assert.equal(await page.getAttribute('#invalid-count', 'data-count'), '3');
    await page.selectOption('#frame-filter', 'invalid');
    assert.equal(await page.locator('.frame:visible').count(), 3, 'the filter lists the invalid frames only');
    const marks = await page.$$eval('.frame.invalid .errors', (l) => l.map((e) => e.textContent));
    assert.match(marks[0], /message is missing/);
    assert.match(marks[1], /extra is not allowed/);
    assert.match(marks[2], /not JSON/);
    const last = page.locator('.frame').last();
    assert.match(await last.getAttribute('class'), /\bvalid\b/);
    await page.locator('.frame.invalid').first().scrollIntoViewIfNeeded();
    await page.screenshot({ path: join(shots, 'invalid-frame.png') });
  } finally {
    await ctx.close();
  }
});

test('a wrong token is refused, and the page says so', async () => {
  const ctx = await browser.newContext();
  try {
    const page = await open(ctx);
    await page.fill('#token', 'not-' + key);
    await page.selectOption('#protocol', 'agentloop');
    await page.click('#new-thread');
    await page.waitForFunction(() => document.getElementById('status').dataset.state === 'error', null, { timeout: wait });
    assert.match(await page.textContent('#status'), /refused/);
  } finally {
    await ctx.close();
  }
});

// The README's steps for a fresh TypeScript project: pack generated/ts,
// install the tarball, `tsc --init` with its defaults (strict, and
// exactOptionalPropertyTypes) and type-check the README's example with it.
// It uses the TypeScript that .ci/lint installs (CI's lint step).
test("the README's fresh TypeScript project type-checks against the package", async (t) => {
  const tsc = join(root, '.ci', 'lint', 'node_modules', '.bin', 'tsc');
  if (!existsSync(tsc)) {
    t.skip('no TypeScript: run npm ci in .ci/lint first');
    return;
  }
  const dir = join(tmp, 'fresh');
  mkdirSync(join(dir, 'my-app'), { recursive: true });
  const run = (cmd, args, cwd) => {
    const r = spawnSync(cmd, args, { cwd, encoding: 'utf8' });
    assert.equal(r.status, 0, `${cmd} ${args.join(' ')}:\n${r.stdout}\n${r.stderr}`);
    return r;
  };
  run('npm', ['pack', '--pack-destination', dir, '--loglevel=error'], join(root, 'generated', 'ts'));
  const tgz = readdirSync(dir).find((f) => f.endsWith('.tgz'));
  assert.ok(tgz, 'npm pack wrote a tarball');
  const app = join(dir, 'my-app');
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'my-app', version: '1.0.0', type: 'module' }));
  run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', join(dir, tgz)], app);
  run(tsc, ['--init', '--strict', '--module', 'nodenext', '--target', 'es2022', '--lib', 'es2022,dom', '--noEmit'], app);
  writeFileSync(join(app, 'main.ts'), `import { AgentChatClient, type agentchat } from "@agentwire/protocols";

const c = await AgentChatClient.connect("ws://127.0.0.1:8080"); // { token } under --auth
c.on("agent_message", (f: agentchat.AgentMessageEvent) => console.log(f.message));
const reply = c.next("agent_message");
c.chat("hello", crypto.randomUUID()); // the session_id is the thread: open it in the playground
await reply;
c.close();
`);
  run(tsc, ['-p', '.'], app);
  // And a mistake is caught: a frame field misspelt.
  writeFileSync(join(app, 'main.ts'), `import type { agentchat } from "@agentwire/protocols";
const f: agentchat.ChatRequest = { type: "chat", mesage: "hi" };
console.log(f);
`);
  const bad = spawnSync(tsc, ['-p', '.'], { cwd: app, encoding: 'utf8' });
  assert.notEqual(bad.status, 0, 'a misspelt field fails to type-check');
  assert.match(bad.stdout, /mesage/);
});
