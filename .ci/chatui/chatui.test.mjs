// Browser test: ChatUI-shaped flows against a real agentwire, in Chromium.
//
// page.html talks to the server as MozaiksAI's ChatUI does on the wire; it
// is served from an origin of its own, as ChatUI is, and the server is
// started as docs/PROTOCOLS.md says to run it for ChatUI (--auth none,
// --allowed-origins). The model is the scripted one, with the AG2 tests'
// scenario. Run: npm ci here, then `node --test` (AGENTWIRE_BIN: a built
// cmd/server, else it is built; CHROMIUM: the browser, /usr/bin/chromium).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const wait = 30_000;

let tmp, server, serverLog = '', pageServer, browser, api, pageURL;

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

async function until(what, ok) {
  const end = Date.now() + 60_000;
  for (;;) {
    try {
      if (await ok()) return;
    } catch { /* not yet */ }
    if (Date.now() > end) throw new Error(what + ' never happened; server log:\n' + serverLog);
    await new Promise((r) => setTimeout(r, 200));
  }
}

before(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'agentwire-chatui-'));
  let bin = process.env.AGENTWIRE_BIN;
  if (!bin) {
    bin = join(tmp, 'agentwire');
    const b = spawnSync('go', ['build', '-o', bin, './cmd/server'], { cwd: root, stdio: 'inherit' });
    assert.equal(b.status, 0, 'go build ./cmd/server');
  }
  const page = readFileSync(join(here, 'page.html'));
  pageServer = createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end(page);
  });
  await new Promise((r) => pageServer.listen(0, '127.0.0.1', r));
  const pageOrigin = 'http://127.0.0.1:' + pageServer.address().port;
  pageURL = pageOrigin + '/';

  const port = await freePort();
  api = 'http://127.0.0.1:' + port;
  server = spawn(bin, ['--addr', '127.0.0.1:' + port, '--auth', 'none', '--allowed-origins', pageOrigin,
    '--llm', 'scripted', '--scenario', join(root, 'internal/protocol/ag2/testdata/server.yaml'),
    '--data-dir', join(tmp, 'data'), '--workdir', join(tmp, 'work')], { stdio: ['ignore', 'pipe', 'pipe'] });
  server.stdout.on('data', (d) => { serverLog += d; });
  server.stderr.on('data', (d) => { serverLog += d; });
  await until('the server answering', async () => (await fetch(api + '/api/workflows')).ok);

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
  if (pageServer) await new Promise((r) => pageServer.close(r));
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

// logText waits until the page's log holds text.
async function logText(page, text) {
  await page.waitForFunction((t) => document.getElementById('log').innerText.includes(t), text, { timeout: wait });
}

// runsDone waits until the page has shown n chat.run_complete.
async function runsDone(page, n) {
  await page.waitForFunction((k) => document.querySelectorAll('[data-run-complete]').length >= k, n, { timeout: wait });
}

async function say(page, text) {
  await page.fill('#box', text);
  await page.click('#send');
}

test('ChatUI-shaped flows: start, turns, typed answers, a UI tool, reload and resume', async () => {
  const page = await browser.newPage();
  const sent = [];
  page.on('websocket', (ws) => ws.on('framesent', (f) => sent.push(String(f.payload))));
  await page.goto(pageURL + '?api=' + encodeURIComponent(api) + '&workflow=default&enterprise=acme&user=alice');
  await page.waitForFunction(() => document.getElementById('status').textContent.startsWith('connected'), null, { timeout: wait });
  const chat = (await page.textContent('#status')).split(' ')[1];

  // A turn over REST, streamed over the socket; usage read at the top level.
  await say(page, 'echo hello browser');
  await logText(page, 'You said: echo hello browser');
  await logText(page, 'Usage: tokens=1500 prompt=1000 completion=500');
  await runsDone(page, 1);
  let log = await page.innerText('#log');
  assert.ok(!log.includes('undefined'), log);
  assert.ok(!log.includes('user: echo hello browser'), 'the turn is not echoed back: ' + log);

  // A question, answered by typing.
  await say(page, 'ask me something');
  await logText(page, "What's your name?");
  await say(page, 'Ada');
  await logText(page, 'Hello, Ada!');
  await runsDone(page, 2);

  // An approval, answered by typing.
  await say(page, 'make a file');
  await logText(page, 'The agent wants to run: touch made.txt && echo done');
  await say(page, 'yes');
  await logText(page, 'Tool Response: done');
  await logText(page, 'made.txt exists now.');
  await runsDone(page, 3);

  // A UI tool, rendered from ui_tool_event and answered over REST.
  await say(page, 'show form');
  await page.click('.submit-component', { timeout: wait });
  await logText(page, 'Got {"key":"sk-browser"}');
  await runsDone(page, 4);
  log = await page.innerText('#log');
  assert.ok(!log.includes('Tool Failed'), log);
  assert.ok(!log.includes('Error:'), log);
  assert.equal(sent.filter((f) => f.includes('client.resume')).length, 0, 'a new chat does not resume');

  // Reload: the page starts empty and resumes from the seq it stored; the
  // server replays the conversation, so the page shows it again, once,
  // with the user's turns and answers, and asks nothing answered again.
  const stored = Number(await page.evaluate((c) => localStorage.getItem('ws_idx_' + c), chat));
  assert.ok(stored > 0, 'the page stored a seq');
  await page.reload();
  await page.waitForSelector('[data-boundary]', { timeout: wait });
  assert.equal(await page.textContent('#status'), 'connected ' + chat, 'the reload reuses the chat (exists)');
  const resumes = sent.filter((f) => f.includes('client.resume')).map((f) => JSON.parse(f));
  assert.equal(resumes.length, 1);
  assert.equal(resumes[0].lastClientIndex, stored);
  log = await page.innerText('#log');
  const shown = [
    'user: echo hello browser', 'You said: echo hello browser', 'Usage: tokens=1500 prompt=1000 completion=500',
    'user: ask me something', "What's your name?", 'user: Ada', 'Hello, Ada!',
    'user: make a file', 'The agent wants to run: touch made.txt && echo done', 'user: approve', 'Tool Response: done', 'made.txt exists now.',
    'user: show form', 'Got {"key":"sk-browser"}', 'Run complete (completed)',
  ];
  let at = 0;
  for (const s of shown) {
    const i = log.indexOf(s, at);
    assert.ok(i >= 0, `after the reload the page shows "${s}" (in order): ${log}`);
    at = i + s.length;
  }
  assert.equal(log.split('You said: echo hello browser').length - 1, 1, 'the reply is shown once: ' + log);
  assert.equal(await page.locator('[data-run-complete]').count(), 4, 'each run once');
  assert.equal(await page.locator('.component').count(), 0, 'the answered form is not shown again');
  assert.ok(!log.includes('Error:'), log);

  await say(page, 'echo after reload');
  await logText(page, 'You said: echo after reload');
  await runsDone(page, 5);

  // A form still waiting when the page reloads is shown again, and
  // answering it goes on with the run.
  await say(page, 'show form');
  await page.waitForSelector('.component', { timeout: wait });
  await page.reload();
  await page.waitForSelector('[data-boundary]', { timeout: wait });
  assert.equal(await page.locator('.component').count(), 1, 'the pending form, once');
  await page.click('.submit-component', { timeout: wait });
  await runsDone(page, 6);
  log = await page.innerText('#log');
  assert.equal(log.split('Got {"key":"sk-browser"}').length - 1, 2, 'both forms answered: ' + log);
  assert.equal(await page.locator('[data-gap]').count(), 0, 'no seq gap was ever seen');
  await page.close();
});
