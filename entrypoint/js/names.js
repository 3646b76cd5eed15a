// Server and tool names as run_typescript cells write them (part of js/harness.js's program,
// bundled ahead of it by jscells.py): `mcp__server__tool` split against the configured servers,
// and the identifier a name becomes. Pure functions, no node APIs.

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

module.exports = { alias, splitToolName };
