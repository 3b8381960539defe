// One Firefox for one quicbench trial, driven by puppeteer-core over WebDriver BiDi.
//
// Run by quicbench's Firefox child (src/quicbench/clients/browser/bidi.py) inside the lab's
// client node. It reads one JSON command a line on stdin, {"id", "op", ...}, and writes one JSON
// message a line on stdout: the reply {"id", "ok": true, "value"} or {"id", "ok": false,
// "error"}, and every WebDriver BiDi network event as {"event", "params"} the moment it comes.
// Everything else (what to load, when, what to measure) is decided by the Python side.
//
// Puppeteer's own network layer is off (networkEnabled: false): it would ask Firefox to keep a
// copy of every response body (network.addDataCollector). The raw BiDi events, subscribed here
// on puppeteer's connection, carry what the trial needs: protocol, status, sizes and timings.
import puppeteer from 'puppeteer-core';
import readline from 'node:readline';

const NETWORK_EVENTS = ['network.beforeRequestSent', 'network.responseStarted', 'network.responseCompleted',
  'network.fetchError'];
const send = (msg) => process.stdout.write(JSON.stringify(msg) + '\n');
let browser = null;
let page = null;

const ops = {
  async launch(c) {
    browser = await puppeteer.launch({
      browser: 'firefox', executablePath: c.executable, userDataDir: c.profile, headless: true,
      extraPrefsFirefox: c.prefs, args: c.args ?? [], env: process.env, networkEnabled: false,
      timeout: c.timeout_ms, protocolTimeout: c.timeout_ms, defaultViewport: c.viewport ?? null,
      handleSIGINT: false, handleSIGTERM: false, handleSIGHUP: false,
    });
    const connection = browser.connection;      // puppeteer's WebDriver BiDi connection
    if (!connection || typeof connection.on !== 'function') {
      throw new Error('this puppeteer-core exposes no BiDi connection (browser.connection): use the version pinned in firefox/package-lock.json');
    }
    for (const event of NETWORK_EVENTS) connection.on(event, (params) => send({event, params}));
    await connection.send('session.subscribe', {events: NETWORK_EVENTS});
    page = (await browser.pages())[0] ?? await browser.newPage();
    for (const script of c.preload ?? []) await page.evaluateOnNewDocument(script);
    const proc = browser.process();
    return {version: await browser.version(), user_agent: await browser.userAgent(), pid: proc?.pid ?? null,
      argv: proc?.spawnargs ?? null};
  },
  async goto(c) {
    await page.goto(c.url, {waitUntil: 'load', timeout: c.timeout_ms});
    return null;
  },
  // c.js is an expression; functions are called by the Python side: "(() => ...)()"
  async evaluate(c) {
    return await page.evaluate(c.js);
  },
  async close() {
    if (browser) await browser.close();
    browser = null;
    return null;
  },
};

const lines = readline.createInterface({input: process.stdin});
for await (const line of lines) {
  if (!line.trim()) continue;
  const cmd = JSON.parse(line);
  try {
    if (!(cmd.op in ops)) throw new Error(`unknown op ${cmd.op}`);
    send({id: cmd.id, ok: true, value: (await ops[cmd.op](cmd)) ?? null});
  } catch (e) {
    send({id: cmd.id, ok: false, error: `${e?.name ?? 'Error'}: ${String(e?.message ?? e).split('\n')[0]}`});
  }
  if (cmd.op === 'close') break;
}
if (browser) await browser.close().catch(() => {});
process.exit(0);
