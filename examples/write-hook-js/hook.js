// A pre-execute hook: writes inside a configured subtree go ahead; writes
// anywhere else ask a person first.
//
// A call is a write when its tool is not annotated read-only and one of
// its path arguments names a file; the path is normalised lexically (`.`
// and `..` resolved, no file system access) and compared with the
// subtree. The hook runs the listeners after it first (`next()`): their
// deny stands, their ask stands, and only their allow can become an ask.
//
// Settings (the `vars` of `[plugins.write-hook]`, read as environment
// variables):
//   SUBTREE      where writes need no question (default `scratch`), relative
//                to the tool's root, or absolute
//   PATH_KEYS    comma-separated argument names holding paths (default
//                `path,file,file_path,filename,dest,destination,target,to,dir,directory,output`)

import { next } from 'toolgate:plugin/pre-execute-chain@0.2.8';
import { getEnvironment } from 'wasi:cli/environment@0.2.12';

// Read on the first call, not at the top level: componentize-js runs the
// top level at build time (Wizer), when no import can be called.
let settings = null;
function config() {
  if (settings === null) {
    const env = Object.fromEntries(getEnvironment());
    settings = {
      subtree: normalize(env.SUBTREE || 'scratch'),
      pathKeys: (env.PATH_KEYS ||
        'path,file,file_path,filename,dest,destination,target,to,dir,directory,output')
        .split(',').map((k) => k.trim()).filter(Boolean),
    };
  }
  return settings;
}

/// `a/./b/../c` -> `a/c`; `../x` keeps its `..` (it leaves the root);
/// absolute paths stay absolute.
export function normalize(path) {
  const absolute = path.startsWith('/');
  const out = [];
  for (const part of path.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (out.length && out[out.length - 1] !== '..') out.pop();
      else if (!absolute) out.push('..');
      continue;
    }
    out.push(part);
  }
  return (absolute ? '/' : '') + out.join('/');
}

export function inside(path, subtree) {
  const p = normalize(path);
  if (p.startsWith('/') !== subtree.startsWith('/')) return false;
  if (p === '..' || p.startsWith('../')) return false;
  return subtree === '' || p === subtree || p.startsWith(subtree + '/');
}

/// The path arguments of a call (top-level keys only), as strings.
function paths(call) {
  const found = [];
  for (const key of config().pathKeys) {
    const text = call.argument('/' + key);
    if (text === undefined) continue;
    const value = JSON.parse(text);
    if (typeof value === 'string') found.push(value);
    else if (Array.isArray(value)) found.push(...value.filter((v) => typeof v === 'string'));
  }
  return found;
}

export const preExecuteHook = {
  preExecute(call) {
    const inner = next();
    if (inner.tag !== 'allow') return inner;
    if (call.annotations().readOnly) return inner;
    const { subtree } = config();
    const outside = paths(call).filter((p) => !inside(p, subtree));
    if (outside.length === 0) return inner;
    return {
      tag: 'ask',
      val: `\`${call.toolName()}\` writes outside \`${subtree || '.'}\`: ${outside.join(', ')}. Allow it?`,
    };
  },
};
