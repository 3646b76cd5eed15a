// Notebook rewriting of a run_typescript cell (part of js/harness.js's program, bundled ahead of
// it by jscells.py): a small tokenizer finds the cell's top-level declarations, which become
// globals of the cell context, so a later cell sees them and may declare them again. Pure
// functions, no node APIs.

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

module.exports = { rewriteCell, tokenize };
