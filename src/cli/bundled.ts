/**
 * @module Runs a command's bundle (dist/cli/NAME.bundle.cjs, made by `npm run build`: scripts/bundle-cli.ts)
 * with the V8 code cache the build made beside it (NAME.bundle.cjs.cache), so a short command neither
 * resolves ~200 module files nor compiles the functions it runs. A cache made by another Node is rejected
 * by V8 and the bundle simply compiles; no bundle (running from the sources, or a tsc-only build) → undefined,
 * and the caller imports the command's own module.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Script } from 'node:vm';

export type CodeCache = 'used' | 'rejected' | 'none';

function readOrUndefined(file: string): Buffer | undefined {
  try {
    return readFileSync(file);
  } catch {
    return undefined;
  }
}

/** The CommonJS wrapper Node itself puts around a module, so the bundle sees require, module and exports. */
export function wrapCommonJs(source: string): string {
  return `(function (exports, require, module, __filename, __dirname) {${source}\n})`;
}

/** The bundle compiled with its code cache (if any); undefined when there is no bundle. */
export function compileBundle(file: string): { script: Script; cache: CodeCache } | undefined {
  const source = readOrUndefined(file);
  if (source === undefined) return undefined;
  const cachedData = readOrUndefined(`${file}.cache`);
  const script = new Script(wrapCommonJs(source.toString('utf8')), {
    filename: file,
    ...(cachedData === undefined ? {} : { cachedData }),
  });
  return {
    script,
    cache: cachedData === undefined ? 'none' : script.cachedDataRejected === true ? 'rejected' : 'used',
  };
}

/** Runs a compiled bundle as Node runs a CommonJS module; returns its exports. */
export function runScript<T>(script: Script, file: string): T {
  const module = { exports: {} as T };
  const init = script.runInThisContext() as (
    exports: T,
    require: NodeJS.Require,
    module: { exports: T },
    filename: string,
    dirname: string,
  ) => void;
  init(module.exports, createRequire(file), module, file, path.dirname(file));
  return module.exports;
}

/** The bundle's exports and whether its code cache was used; undefined when there is no bundle. */
export function runBundle<T>(file: string): { exports: T; cache: CodeCache } | undefined {
  const compiled = compileBundle(file);
  return compiled === undefined ? undefined : { exports: runScript<T>(compiled.script, file), cache: compiled.cache };
}
