// The cells' state kept across an idle stop (part of js/harness.js's program, bundled ahead of
// it by jscells.py): `save` lines out, `restore-item` lines back in. Values go through v8's
// serializer and are rebuilt with the context's own constructors; functions and classes go by
// their source, evaluated again in the new context.

const vm = require('node:vm');
const v8 = require('node:v8');

const MAX_VALUE = 6 << 20; // bytes of one saved value (a line of its own, under jscells' MAX_LINE)
const MAX_TAGGED = 10000; // objects of one value looked at for instances of the cells' classes
const MAX_DEPTH = 64; // how deep in one value instances are looked for

/** An object whose prototype is Object.prototype of some realm, or null. */
function isPlain(v) {
  const proto = Object.getPrototypeOf(v);
  return proto === null || Object.getPrototypeOf(proto) === null;
}

/** [path, class name] of each object in `value` (itself, array items and own data properties
 * of plain objects and instances; not Map or Set contents, not getters) whose prototype is one
 * of `classes` (prototype -> name): v8's serializer keeps such an object's data, not its class.
 * Each object once, at most MAX_TAGGED, at most MAX_DEPTH deep. */
function classPaths(value, classes) {
  const out = [];
  const seen = new Set();
  const todo = [[value, []]];
  while (todo.length && seen.size < MAX_TAGGED) {
    const [v, path] = todo.pop();
    if (v === null || typeof v !== 'object' || seen.has(v)) continue;
    seen.add(v);
    const cls = classes.get(Object.getPrototypeOf(v));
    if (cls !== undefined) out.push([path, cls]);
    if (path.length >= MAX_DEPTH || !(Array.isArray(v) || cls !== undefined || isPlain(v))) continue;
    for (const k of Object.keys(v)) {
      const desc = Object.getOwnPropertyDescriptor(v, k);
      if (desc && 'value' in desc) todo.push([desc.value, path.concat(k)]);
    }
  }
  return out;
}

/** The object at `path` (property names) below `root`, or undefined. */
function at(root, path) {
  let v = root;
  for (const k of path) {
    if (v === null || typeof v !== 'object' || typeof k !== 'string') return undefined;
    const desc = Object.getOwnPropertyDescriptor(v, k);
    v = desc && 'value' in desc ? desc.value : undefined;
  }
  return v;
}

/** The state operations over one cell context: `sandbox` its global object, `baseline` the
 * names it had before any cell ran, `send` the message writer, `filename` for its scripts. */
function makeState({ sandbox, context, baseline, send, filename }) {
  /** The names cells bound: the context's own properties but its baseline and the proxies. */
  function userNames() {
    return Object.getOwnPropertyNames(sandbox).filter((n) => !baseline.has(n) && !n.startsWith('mcp_'));
  }

  /** The classes (and constructor functions) cells bound: prototype -> name. */
  function cellClasses() {
    const out = new Map();
    for (const name of userNames()) {
      const desc = Object.getOwnPropertyDescriptor(sandbox, name);
      const fn = desc && desc.value;
      if (typeof fn === 'function' && fn.prototype !== null && typeof fn.prototype === 'object') {
        out.set(fn.prototype, name);
      }
    }
    return out;
  }

  /** Sends the user's names as `state` lines (a value by v8's serializer, a function or class by
   * its source, to be evaluated again in the new context), then `saved` with those left out and
   * why; at most `limit` bytes of values in all. */
  function saveState(msg) {
    let budget = Number.isInteger(msg.limit) && msg.limit > 0 ? msg.limit : 0;
    const skipped = [];
    let count = 0;
    const classes = cellClasses();
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
          const tagged = classPaths(value, classes);
          if (tagged.length) item.classes = tagged;
        }
      } catch (e) {
        skipped.push([name, 'cannot be saved: ' + String(e && e.message).slice(0, 200)]);
        continue;
      }
      const size = item.data.length + (item.classes ? JSON.stringify(item.classes).length : 0);
      if (size > MAX_VALUE || size > budget) {
        skipped.push([name, 'too big for the snapshot']);
        continue;
      }
      budget -= size;
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
  })`, context, { filename: filename + '-adopt' });

  /** Puts the `restore-item` lines (saveState's `state` lines, sent back) into the context, then
   * gives instances of the cells' classes their class again (once every class is back);
   * answers `restored` with the names that came back and those that did not, with why. */
  const restoring = [];
  function restoreState(msg) {
    const names = [];
    const failed = [];
    const items = restoring.splice(0, restoring.length);
    const instances = [];
    for (const item of items) {
      const name = item && typeof item.name === 'string' ? item.name : null;
      if (name === null || baseline.has(name) || name.startsWith('mcp_')) continue;
      try {
        if (item.kind === 'source' && typeof item.data === 'string') {
          sandbox[name] = vm.runInContext('(' + item.data + '\n)', context, { filename: filename + '-restored' });
        } else if (item.kind === 'value' && typeof item.data === 'string') {
          sandbox[name] = adopt(v8.deserialize(Buffer.from(item.data, 'base64')), new Map());
          if (Array.isArray(item.classes)) instances.push([name, item.classes.slice(0, MAX_TAGGED)]);
        } else {
          continue;
        }
        names.push(name);
      } catch (e) {
        failed.push([name, 'could not be restored: ' + String(e && e.message).slice(0, 200)]);
      }
    }
    for (const [name, tagged] of instances) {
      for (const entry of tagged) {
        if (!Array.isArray(entry) || !Array.isArray(entry[0]) || entry[0].length > MAX_DEPTH) continue;
        const target = at(sandbox[name], entry[0]);
        const desc = typeof entry[1] === 'string' ? Object.getOwnPropertyDescriptor(sandbox, entry[1]) : undefined;
        const cls = desc && desc.value;
        if (target !== null && typeof target === 'object' && typeof cls === 'function'
            && cls.prototype !== null && typeof cls.prototype === 'object') {
          Object.setPrototypeOf(target, cls.prototype);
        }
      }
    }
    send({ t: 'restored', id: msg.id, names, failed });
  }

  return { userNames, saveState, restoreState, restoring };
}

module.exports = { makeState };
