// The node side of run_typescript (ARCHITECTURE.md, "TypeScript cells"): started by the Python
// entrypoint (jscells.py) on first use, it reads JSON lines on fd 0 (`exec`, `reply`) and writes
// JSON lines on fd 3 (`out`, `err`, `call`, `done`). One vm context holds the notebook's state;
// each cell's TypeScript types are stripped, its top-level declarations become globals of that
// context (so a later cell sees them and may declare them again), and it runs inside an async
// function (top-level await). MCP calls go to Python as `call` lines, which forwards them to
// the host like its own proxies do. Never writes to fd 1 or 2 itself.
'use strict';
const fs = require('node:fs');
const vm = require('node:vm');
const readline = require('node:readline');
const { Console } = require('node:console');
const { Writable } = require('node:stream');

const FLAG = '--mcp-bridge-cells';
const OUT_FD = (() => { // the message pipe's fd, after FLAG on the command line
  const at = process.argv.indexOf(FLAG);
  const fd = at >= 0 ? Number(process.argv[at + 1]) : NaN;
  return Number.isInteger(fd) && fd > 2 ? fd : 3;
})();
const CHUNK = 65536; // characters of output per `out`/`err` line
const FILENAME = '<run_typescript>';
const MAX_SERVERS_LISTED = 64; // discoverMCPTools lists the tools of this many servers at most

let stripTypes = null;
try {
  stripTypes = require('node:module').stripTypeScriptTypes || null;
} catch {
  stripTypes = null;
}

function send(msg) {
  const data = Buffer.from(JSON.stringify(msg) + '\n');
  let off = 0;
  while (off < data.length) {
    try {
      off += fs.writeSync(OUT_FD, data, off);
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
    }
  }
}

// The program's other parts, js/{names,rewrite,state}.js: jscells.py bundles them ahead of this
// file as `__mcpParts` (node -e runs one script); on disk (tests) they are read from beside it.
/* global __mcpParts */
const part = (name) => (typeof __mcpParts === 'object' ? __mcpParts[name] : require(`./${name}.js`));
const { alias, splitToolName } = part('names');
const { rewriteCell, tokenize } = part('rewrite');

// -- the context --------------------------------------------------------------------------------

let nextCallId = 1;
const pending = new Map();

function hostCall(method, params) {
  const id = nextCallId++;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    send({ t: 'call', id, method, params: params === undefined ? {} : params });
  });
}

function settle(msg) {
  const entry = pending.get(msg.id);
  if (!entry) return;
  pending.delete(msg.id);
  if (msg.ok === true) {
    entry.resolve(msg.value);
  } else {
    const err = new Error(typeof msg.error === 'string' ? msg.error : 'the call failed');
    err.name = typeof msg.kind === 'string' && msg.kind ? msg.kind : 'BridgeCallError';
    entry.reject(err);
  }
}

function stream(kind) {
  return new Writable({
    decodeStrings: false,
    write(chunk, _encoding, done) {
      const text = typeof chunk === 'string' ? chunk : chunk.toString('utf8');
      for (let at = 0; at < text.length; at += CHUNK) send({ t: kind, s: text.slice(at, at + CHUNK) });
      done();
    },
  });
}

const cellStdout = stream('out');
const cellStderr = stream('err');
const cellConsole = new Console({ stdout: cellStdout, stderr: cellStderr, colorMode: false });

let configured = null; // the configured server names, fetched once per cell when needed
async function serverNames() {
  if (configured === null) {
    const reply = await hostCall('list_servers', {});
    configured = Array.isArray(reply) ? reply.filter((s) => typeof s === 'string') : [];
  }
  return configured;
}

async function resolveToolName(nameOrServer, maybeTool) {
  if (typeof maybeTool === 'string') return { server: String(nameOrServer), tool: maybeTool };
  const split = splitToolName(nameOrServer, await serverNames());
  if (split === null) {
    throw new TypeError(`'${String(nameOrServer).slice(0, 200)}' is not mcp__<server>__<tool> for a configured server; call callMCPTool(server, tool, args) or see listServers()`);
  }
  return split;
}

async function callMCPTool(a, b, c) {
  const twoNames = typeof b === 'string';
  const { server, tool } = await resolveToolName(a, twoNames ? b : undefined);
  const args = twoNames ? c : b;
  if (args !== undefined && args !== null && (typeof args !== 'object' || Array.isArray(args))) {
    throw new TypeError('callMCPTool takes the tool arguments as one object');
  }
  return hostCall('call_tool', { server, tool, arguments: args || {} });
}

async function searchTools(query, limit) {
  const reply = await hostCall('search_tool_docs', {
    query: String(query), limit: Number.isInteger(limit) && limit > 0 ? limit : 10, detail: 'summary',
  });
  const hits = reply && Array.isArray(reply.results) ? reply.results : (Array.isArray(reply) ? reply : []);
  return hits.map((h) => ({ server: h.server, tool: h.tool, description: h.description || '' }));
}

async function getToolSchema(a, b) {
  const { server, tool } = await resolveToolName(a, b);
  const docs = await hostCall('query_tool_docs', { server, tool, detail: 'full' });
  const doc = Array.isArray(docs) ? docs[0] : null;
  if (!doc) throw new Error(`no tool '${tool}' on server '${server}'`);
  return { server, tool: doc.tool || tool, description: doc.description || '', inputSchema: doc.input_schema || {} };
}

async function listServers() {
  configured = null;
  return [...await serverNames()];
}

async function discoverMCPTools() {
  const out = [];
  for (const server of (await listServers()).slice(0, MAX_SERVERS_LISTED)) {
    let tools;
    try {
      tools = await hostCall('list_tools', { server });
    } catch (e) {
      out.push({ server, tool: null, description: '', error: e.message });
      continue;
    }
    for (const t of Array.isArray(tools) ? tools : []) {
      out.push({ server, tool: t.name, description: t.description || '' });
    }
  }
  return out;
}

/** A proxy for `server`: each property is an async function calling that tool (by name, or by
 * its alias when `tools` lists the real names). */
function serverProxy(server, tools) {
  const byAlias = new Map();
  for (const t of tools || []) byAlias.set(alias(t), t);
  const target = { [Symbol.toStringTag]: `mcp_${alias(server)}` };
  return new Proxy(target, {
    get(obj, prop) {
      if (typeof prop !== 'string') return obj[prop];
      if (prop === 'then') return undefined; // not a thenable
      if (prop === 'toJSON') return () => ({ server, tools: tools || null });
      const tool = byAlias.get(prop) || prop;
      return (args) => callMCPTool(server, tool, args === undefined ? {} : args);
    },
    ownKeys() { return (tools || []).map(alias).concat([]); },
    getOwnPropertyDescriptor(_obj, prop) {
      return byAlias.has(prop) ? { enumerable: true, configurable: true, value: undefined } : undefined;
    },
  });
}

const sandbox = {
  console: cellConsole,
  process, require, Buffer, URL, URLSearchParams, TextEncoder, TextDecoder,
  setTimeout, clearTimeout, setInterval, clearInterval, setImmediate, clearImmediate,
  queueMicrotask, structuredClone, AbortController, AbortSignal, performance, fetch,
  callMCPTool, searchTools, getToolSchema, listServers, discoverMCPTools,
};
const context = vm.createContext(sandbox, { name: 'run_typescript' });
// The context's own names before any cell ran: never the user's state.
const BASELINE = new Set(Object.getOwnPropertyNames(sandbox));

// -- state kept across an idle stop (js/state.js) ---------------------------------------------

const { userNames, saveState, restoreState, restoring } = part('state').makeState({
  sandbox, context, baseline: BASELINE, send, filename: FILENAME,
});
// -- one cell -----------------------------------------------------------------------------------

let current = null; // {reject} of the running cell's wait, for an interrupt

let cellLines = 0; // lines of the running cell

function cleanStack(err) {
  // errors of the cell's context are not `instanceof Error` here (another realm)
  if (err === null || typeof err !== 'object' || typeof err.stack !== 'string') {
    let text;
    try { text = String(err); } catch { text = 'a value that cannot be shown'; }
    return 'Uncaught ' + text;
  }
  const lines = err.stack.split('\n');
  const head = [];
  let i = 0;
  for (; i < lines.length && !/^\s+at /.test(lines[i]); i++) head.push(lines[i]);
  // the cell's own frames, not the wrapper's call of it (on the line after the cell's last)
  const frames = lines.slice(i).filter((l) => {
    const m = l.match(/<run_typescript>:(\d+):/);
    return m !== null && Number(m[1]) <= cellLines;
  });
  return head.concat(frames).join('\n');
}

function bindServers(servers) {
  const loaded = {};
  for (const [name, tools] of Object.entries(servers || {})) {
    const proxy = serverProxy(name, Array.isArray(tools) ? tools : null);
    loaded[name] = proxy;
    context['mcp_' + alias(name)] = proxy;
  }
  context.mcp_servers = loaded;
}

async function runCell(msg) {
  configured = null;
  let code = typeof msg.code === 'string' ? msg.code : '';
  bindServers(msg.servers);
  if (stripTypes !== null) {
    code = stripTypes(code, { mode: 'strip' });
  }
  // syntax first, on the code as written (positions the user recognises)
  new vm.Script('(async () => {' + code + '\n})', { filename: FILENAME });
  cellLines = code.split('\n').length;
  const cell = rewriteCell(code);
  if (cell.prelude) vm.runInContext(cell.prelude, context, { filename: FILENAME + '-names' });
  const script = new vm.Script('(async () => {' + cell.body + '\n})()', { filename: FILENAME });
  const promise = script.runInContext(context, { breakOnSigint: true });
  await new Promise((resolve, reject) => {
    current = { reject };
    Promise.resolve(promise).then(resolve, reject);
  });
}

async function exec(msg) {
  let ok = true;
  let error = null;
  try {
    await runCell(msg);
  } catch (e) {
    ok = false;
    error = cleanStack(e);
  } finally {
    current = null;
  }
  send({ t: 'done', id: msg.id, ok, error });
}

process.on('SIGINT', () => {
  if (current !== null) {
    const err = new Error('interrupted');
    err.name = 'Interrupted';
    err.stack = 'Interrupted: the cell was stopped while it waited';
    current.reject(err);
  }
});

if (process.argv.includes(FLAG)) {
  // stray writes to the process's own streams are the cell's output too
  process.stdout.write = (chunk) => cellStdout.write(String(chunk));
  process.stderr.write = (chunk) => cellStderr.write(String(chunk));
  const queue = [];
  let busy = false;
  const pump = async () => {
    if (busy) return;
    busy = true;
    while (queue.length) await exec(queue.shift());
    busy = false;
  };
  readline.createInterface({ input: process.stdin, crlfDelay: Infinity }).on('line', (line) => {
    let msg;
    try { msg = JSON.parse(line); } catch { return; }
    if (!msg || typeof msg !== 'object') return;
    if (msg.t === 'reply') settle(msg);
    else if (msg.t === 'exec') { queue.push(msg); pump(); }
    else if (msg.t === 'save') saveState(msg);
    else if (msg.t === 'restore-item') restoring.push(msg);
    else if (msg.t === 'restore') restoreState(msg);
  }).on('close', () => process.exit(0));
  send({ t: 'ready', version: process.version, strip: stripTypes !== null });
}

module.exports = { alias, splitToolName, rewriteCell, tokenize, userNames };
