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

// -- names: mcp__server__tool and aliases -----------------------------------------------------

/** The identifier for a server or tool name: every character outside [A-Za-z0-9_] becomes `_`,
 * and `_` goes in front when it starts with a digit (the Python side's `proxies.alias`). */
function alias(name) {
  const text = String(name).replace(/[^A-Za-z0-9_]/g, '_');
  return /^[0-9]/.test(text) ? '_' + text : text;
}

/** Splits `mcp__server__tool` with the configured `servers`: the longest server name that fits
 * wins (names may hold `__`); null when the name does not have that form or no server fits. */
function splitToolName(full, servers) {
  if (typeof full !== 'string' || !full.startsWith('mcp__')) return null;
  const rest = full.slice(5);
  let best = null;
  for (const server of servers) {
    if (typeof server !== 'string' || !server) continue;
    if (rest.startsWith(server + '__') && rest.length > server.length + 2) {
      if (best === null || server.length > best.length) best = server;
    }
  }
  if (best === null) return null;
  return { server: best, tool: rest.slice(best.length + 2) };
}

// -- notebook rewriting -------------------------------------------------------------------------

const REGEX_AFTER = new Set(['return', 'typeof', 'instanceof', 'in', 'of', 'new', 'delete',
  'void', 'throw', 'case', 'do', 'else', 'yield', 'await']);

/** The tokens of `src` (comments dropped): {t: 'id'|'num'|'str'|'tpl'|'re'|'p', v, s, e, nl}
 * where `nl` says a line break came before it. Enough of JavaScript's lexical grammar to track
 * nesting; an unterminated string or comment ends the token list. */
function tokenize(src) {
  const out = [];
  const tpl = []; // brace depths at which a template's `${` opened
  let depth = 0;
  let i = 0;
  let nl = false;
  const n = src.length;
  const last = () => out[out.length - 1];
  const regexAllowed = () => {
    const p = last();
    if (!p) return true;
    if (p.t === 'id') return REGEX_AFTER.has(p.v);
    if (p.t === 'p') return !(p.v === ')' || p.v === ']' || p.v === '}');
    return false;
  };
  const readTemplate = (start) => { // from just after ` or }, to the closing ` or ${
    let j = start;
    while (j < n) {
      const c = src[j];
      if (c === '\\') { j += 2; continue; }
      if (c === '`') return { end: j + 1, open: false };
      if (c === '$' && src[j + 1] === '{') return { end: j + 2, open: true };
      j++;
    }
    return { end: n, open: false };
  };
  while (i < n) {
    const c = src[i];
    if (c === '\n' || c === '\r' || c === '\u2028' || c === '\u2029') { nl = true; i++; continue; }
    if (c === ' ' || c === '\t' || c === '\v' || c === '\f' || c === '\ufeff' || c === '\u00a0') { i++; continue; }
    if (c === '/' && src[i + 1] === '/') {
      while (i < n && src[i] !== '\n') i++;
      continue;
    }
    if (c === '/' && src[i + 1] === '*') {
      const end = src.indexOf('*/', i + 2);
      const stop = end < 0 ? n : end + 2;
      if (src.slice(i, stop).includes('\n')) nl = true;
      i = stop;
      continue;
    }
    const s = i;
    if (/[A-Za-z_$\u0080-\uffff\\]/.test(c)) {
      while (i < n && /[A-Za-z0-9_$\u0080-\uffff\\]/.test(src[i])) i++;
      out.push({ t: 'id', v: src.slice(s, i), s, e: i, nl });
    } else if (/[0-9]/.test(c) || (c === '.' && /[0-9]/.test(src[i + 1] || ''))) {
      while (i < n && /[0-9A-Za-z_.]/.test(src[i])) i++;
      out.push({ t: 'num', v: src.slice(s, i), s, e: i, nl });
    } else if (c === '"' || c === "'") {
      i++;
      while (i < n && src[i] !== c && src[i] !== '\n') i += src[i] === '\\' ? 2 : 1;
      i++;
      out.push({ t: 'str', v: '', s, e: Math.min(i, n), nl });
    } else if (c === '`') {
      const r = readTemplate(i + 1);
      i = r.end;
      if (r.open) { tpl.push(depth); depth++; }
      out.push({ t: 'tpl', v: '', s, e: i, nl });
    } else if (c === '}' && tpl.length && tpl[tpl.length - 1] === depth - 1) {
      tpl.pop();
      depth--;
      const r = readTemplate(i + 1);
      i = r.end;
      if (r.open) { tpl.push(depth); depth++; }
      out.push({ t: 'tpl', v: '', s, e: i, nl });
    } else if (c === '/' && regexAllowed()) {
      i++;
      let cls = false;
      while (i < n && src[i] !== '\n') {
        const d = src[i];
        if (d === '\\') { i += 2; continue; }
        if (d === '[') cls = true;
        else if (d === ']') cls = false;
        else if (d === '/' && !cls) break;
        i++;
      }
      i++;
      while (i < n && /[a-z]/.test(src[i])) i++;
      out.push({ t: 're', v: '', s, e: Math.min(i, n), nl });
    } else {
      const three = src.slice(i, i + 3);
      const two = src.slice(i, i + 2);
      let v = c;
      if (['...', '===', '!==', '**=', '<<=', '>>=', '>>>', '&&=', '||=', '??='].includes(three)) v = three;
      else if (['=>', '==', '!=', '<=', '>=', '&&', '||', '??', '?.', '++', '--', '+=', '-=', '*=', '/=', '%=', '&=', '|=', '^=', '**', '<<', '>>'].includes(two)) v = two;
      i += v.length;
      if (v === '{' || v === '(' || v === '[') depth++;
      if (v === '}' || v === ')' || v === ']') depth--;
      out.push({ t: 'p', v, s, e: i, nl });
    }
    nl = false;
  }
  return out;
}

const OPENERS = { '{': 1, '(': 1, '[': 1 };
const CLOSERS = { '}': 1, ')': 1, ']': 1 };
// Tokens after which a line break does not end a statement (the expression goes on).
const CONTINUES = new Set(['.', '?.', ',', '=', '+', '-', '*', '/', '%', '**', '&&', '||', '??',
  '?', ':', '==', '===', '!=', '!==', '<', '>', '<=', '>=', '&', '|', '^', '<<', '>>', '>>>',
  '=>', '+=', '-=', '*=', '/=', '%=', '&&=', '||=', '??=', '...', '!', '~']);

/** Where the declaration list starting at token `k` (just after its keyword) ends: the index
 * of the `;` token at its own depth, or of the first token of the next statement (a line
 * break where the expression cannot go on), or tokens.length. */
function statementEnd(toks, k) {
  let depth = 0;
  for (let j = k; j < toks.length; j++) {
    const t = toks[j];
    if (t.t === 'p' && OPENERS[t.v]) depth++;
    else if (t.t === 'p' && CLOSERS[t.v]) {
      if (depth === 0) return j; // the cell's own closing brace: cannot happen at top level
      depth--;
    } else if (depth === 0 && t.t === 'p' && t.v === ';') return j;
    if (depth === 0 && j > k && t.nl) {
      const prev = toks[j - 1];
      const goesOn = (prev.t === 'p' && CONTINUES.has(prev.v))
        || (t.t === 'p' && (CONTINUES.has(t.v) || t.v === '(' || t.v === '[') && t.v !== '!' && t.v !== '~' && t.v !== '++' && t.v !== '--')
        || (t.t === 'tpl')
        || (t.t === 'id' && (t.v === 'in' || t.v === 'of' || t.v === 'instanceof'));
      if (!goesOn) return j;
    }
  }
  return toks.length;
}

/** Names bound by the declaration tokens [k, end): a plain name, or the names of an object or
 * array pattern (keys before `:` and default values left out). */
function declaredNames(toks, k, end) {
  const names = [];
  let depth = 0;
  let expectName = true;
  for (let j = k; j < end; j++) {
    const t = toks[j];
    if (t.t === 'p' && OPENERS[t.v]) { depth++; if (t.v !== '(') expectName = true; continue; }
    if (t.t === 'p' && CLOSERS[t.v]) { depth--; continue; }
    if (t.t === 'p' && t.v === '=') {
      // skip the initializer / default value up to the next `,` at this depth
      let d = 0;
      let m = j + 1;
      for (; m < end; m++) {
        const u = toks[m];
        if (u.t === 'p' && OPENERS[u.v]) d++;
        else if (u.t === 'p' && CLOSERS[u.v]) { if (d === 0) break; d--; }
        else if (d === 0 && u.t === 'p' && u.v === ',') break;
      }
      j = m - 1;
      expectName = false;
      continue;
    }
    if (t.t === 'p' && t.v === ',') { expectName = true; continue; }
    if (t.t === 'p' && t.v === '...') { expectName = true; continue; }
    if (t.t === 'p' && t.v === ':') { expectName = true; continue; }
    if (t.t === 'id' && expectName) {
      const next = toks[j + 1];
      if (depth > 0 && next && next.t === 'p' && next.v === ':') continue; // a key
      names.push(t.v);
      expectName = false;
    }
  }
  return names.filter((v) => /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(v));
}

/** The cell `src` as {prelude, body}: `prelude` declares (as `var`) every name the cell binds at
 * its top level, to run at the context's top level; `body` runs inside an async function, its
 * top-level `const`/`let`/`var` declarations turned into assignments to those globals, its
 * functions assigned to them as it starts and its classes as they are defined. Positions of
 * the code keep their lines (only text without line breaks is inserted). */
function rewriteCell(src) {
  const toks = tokenize(src);
  const edits = []; // [position, deleteCount, insert]
  const names = new Set();
  const functions = [];
  let depth = 0;
  for (let k = 0; k < toks.length; k++) {
    const t = toks[k];
    if (t.t === 'p' && OPENERS[t.v]) { depth++; continue; }
    if (t.t === 'p' && CLOSERS[t.v]) { depth--; continue; }
    if (depth !== 0 || t.t !== 'id') continue;
    const prev = toks[k - 1];
    const atStart = !prev || (prev.t === 'p' && (prev.v === ';' || prev.v === '}')) || (t.nl && !(prev.t === 'p' && CONTINUES.has(prev.v)));
    if (!atStart) continue;
    const next = toks[k + 1];
    if ((t.v === 'const' || t.v === 'let' || t.v === 'var') && next
        && (next.t === 'id' || (next.t === 'p' && (next.v === '{' || next.v === '[')))) {
      if (t.v === 'let' && next.t === 'id' && (next.v === 'in' || next.v === 'of' || next.v === 'instanceof')) continue;
      const end = statementEnd(toks, k + 1);
      for (const name of declaredNames(toks, k + 1, end)) names.add(name);
      const stop = end < toks.length ? toks[end - 1].e : toks[toks.length - 1].e;
      edits.push([t.s, t.e - t.s, 'void (']);
      edits.push([stop, 0, ')']);
      // `let x;` binds undefined again, as a fresh declaration would
      continue;
    }
    let fk = k;
    if (t.v === 'async' && next && next.t === 'id' && next.v === 'function' && !next.nl) fk = k + 1;
    const f = toks[fk];
    if (f.v === 'function') {
      let nameTok = toks[fk + 1];
      if (nameTok && nameTok.t === 'p' && nameTok.v === '*') nameTok = toks[fk + 2];
      if (nameTok && nameTok.t === 'id') { names.add(nameTok.v); functions.push(nameTok.v); }
      continue;
    }
    if (t.v === 'class' && next && next.t === 'id' && next.v !== 'extends') {
      names.add(next.v);
      // find the class body's closing brace: the first `{` at this depth and its match
      let d = 0;
      let j = k + 2;
      let opened = false;
      for (; j < toks.length; j++) {
        const u = toks[j];
        if (u.t === 'p' && OPENERS[u.v]) { d++; if (u.v === '{' && d === 1) opened = true; }
        else if (u.t === 'p' && CLOSERS[u.v]) { d--; if (d === 0 && opened) break; }
      }
      edits.push([t.s, 0, next.v + ' = ']);
      if (j < toks.length) edits.push([toks[j].e, 0, ';']);
    }
  }
  let body = src;
  edits.sort((a, b) => b[0] - a[0]);
  for (const [at, del, ins] of edits) body = body.slice(0, at) + ins + body.slice(at + del);
  const hoisted = functions.map((name) => `globalThis.${name} = ${name};`).join(' ');
  const list = [...names];
  return {
    prelude: list.length ? 'var ' + list.join(', ') + ';' : '',
    body: hoisted + body,
    names: list,
  };
}

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

// -- state kept across an idle stop -------------------------------------------------------------

const v8 = require('node:v8');
const MAX_VALUE = 6 << 20; // bytes of one saved value (a line of its own, under jscells' MAX_LINE)

/** The names cells bound: the context's own properties but its baseline and the proxies. */
function userNames() {
  return Object.getOwnPropertyNames(sandbox).filter((n) => !BASELINE.has(n) && !n.startsWith('mcp_'));
}

/** Sends the user's names as `state` lines (a value by v8's serializer, a function or class by
 * its source, to be evaluated again in the new context), then `saved` with those left out and
 * why; at most `limit` bytes of values in all. */
function saveState(msg) {
  let budget = Number.isInteger(msg.limit) && msg.limit > 0 ? msg.limit : 0;
  const skipped = [];
  let count = 0;
  for (const name of userNames()) {
    const desc = Object.getOwnPropertyDescriptor(sandbox, name);
    if (!desc || !('value' in desc)) { skipped.push([name, 'a getter or setter: not saved']); continue; }
    const value = desc.value;
    let item;
    try {
      if (typeof value === 'function') {
        const src = Function.prototype.toString.call(value);
        if (/\{\s*\[native code\]\s*\}$/.test(src)) { skipped.push([name, 'a built-in function']); continue; }
        item = { t: 'state', id: msg.id, name, kind: 'source', data: src };
      } else {
        item = { t: 'state', id: msg.id, name, kind: 'value', data: v8.serialize(value).toString('base64') };
      }
    } catch (e) {
      skipped.push([name, 'cannot be saved: ' + String(e && e.message).slice(0, 200)]);
      continue;
    }
    if (item.data.length > MAX_VALUE || item.data.length > budget) {
      skipped.push([name, 'too big for the snapshot']);
      continue;
    }
    budget -= item.data.length;
    count++;
    send(item);
  }
  send({ t: 'saved', id: msg.id, count, skipped });
}

/** `value` (made by v8's deserializer in the harness's realm) rebuilt with the context's own
 * Object, Array, Map, Set and Date, so that `instanceof` in a cell holds for it as for values
 * the cells made; other objects (typed arrays, RegExps, errors) stay as they came. Defined in
 * the context, so its literals are the context's. */
const adopt = vm.runInContext(`(function adopt(v, seen) {
  if (v === null || typeof v !== 'object') return v;
  if (seen.has(v)) return seen.get(v);
  const tag = Object.prototype.toString.call(v);
  const proto = Object.getPrototypeOf(v);
  let out;
  if (tag === '[object Array]') {
    out = []; seen.set(v, out);
    for (let i = 0; i < v.length; i++) if (i in v) out[i] = adopt(v[i], seen);
    out.length = v.length;
  } else if (tag === '[object Map]') {
    out = new Map(); seen.set(v, out);
    for (const [k, x] of v) out.set(adopt(k, seen), adopt(x, seen));
  } else if (tag === '[object Set]') {
    out = new Set(); seen.set(v, out);
    for (const x of v) out.add(adopt(x, seen));
  } else if (tag === '[object Date]') {
    out = new Date(v.getTime()); seen.set(v, out);
  } else if (tag === '[object Object]' && (proto === null || Object.getPrototypeOf(proto) === null)) {
    out = proto === null ? Object.create(null) : {}; seen.set(v, out);
    for (const k of Object.keys(v)) out[k] = adopt(v[k], seen);
  } else {
    return v;
  }
  return out;
})`, context, { filename: FILENAME + '-adopt' });

/** Puts the `restore-item` lines (saveState's `state` lines, sent back) into the context;
 * answers `restored` with the names that came back and those that did not, with why. */
const restoring = [];
function restoreState(msg) {
  const names = [];
  const failed = [];
  const items = restoring.splice(0, restoring.length);
  for (const item of items) {
    const name = item && typeof item.name === 'string' ? item.name : null;
    if (name === null || BASELINE.has(name) || name.startsWith('mcp_')) continue;
    try {
      if (item.kind === 'source' && typeof item.data === 'string') {
        sandbox[name] = vm.runInContext('(' + item.data + '\n)', context, { filename: FILENAME + '-restored' });
      } else if (item.kind === 'value' && typeof item.data === 'string') {
        sandbox[name] = adopt(v8.deserialize(Buffer.from(item.data, 'base64')), new Map());
      } else {
        continue;
      }
      names.push(name);
    } catch (e) {
      failed.push([name, 'could not be restored: ' + String(e && e.message).slice(0, 200)]);
    }
  }
  send({ t: 'restored', id: msg.id, names, failed });
}

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
