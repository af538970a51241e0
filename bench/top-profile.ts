/**
 * @module Summarizes a V8 `.cpuprofile` (from `node --cpu-prof`): self time aggregated by function and
 * location, and by area (our src/ files, each node_modules package, Node internals, GC). Locations in
 * compiled JS are mapped back to the TypeScript source through the `.js.map` next to the file.
 *
 *   npx tsx bench/top-profile.ts FILE.cpuprofile [--top 25]
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  hitCount?: number;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples?: number[];
  timeDeltas?: number[];
  startTime: number;
  endTime: number;
}

export interface FunctionRow {
  name: string;
  /** `src/pipeline/gateway.ts:120`, `node_modules/undici/lib/…:88`, `node:internal/…:12`, or a V8 pseudo-frame. */
  location: string;
  area: string;
  selfMs: number;
  /** Share of the profile's busy (non-idle) time. */
  pct: number;
}

export interface ProfileSummary {
  totalMs: number;
  busyMs: number;
  functions: FunctionRow[];
  /**
   * Time charged to the nearest function of ours (src/) on the stack: its self time plus that of the
   * Node internals and dependencies it called, down to the next src/ frame. Says which of our calls
   * cost the most, where the plain self-time list shows mostly Node and undici internals.
   */
  bySrcCaller: Array<{ name: string; location: string; selfMs: number; pct: number }>;
  areas: Array<{ area: string; selfMs: number; pct: number }>;
}

// ---- source maps (VLQ "mappings", version 3) ----

const B64 = new Map([...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'].map((c, i) => [c, i]));

/** Per generated line: sorted [generatedColumn, sourceIndex, originalLine] triples. */
type LineMap = Array<Array<[number, number, number]>>;

function decodeMappings(mappings: string): LineMap {
  const lines: LineMap = [];
  let src = 0;
  let origLine = 0;
  for (const lineText of mappings.split(';')) {
    const segs: Array<[number, number, number]> = [];
    let genCol = 0;
    if (lineText !== '') {
      for (const seg of lineText.split(',')) {
        const values: number[] = [];
        let shift = 0;
        let value = 0;
        for (const ch of seg) {
          const digit = B64.get(ch)!;
          value += (digit & 31) << shift;
          if (digit & 32) shift += 5;
          else {
            values.push(value & 1 ? -(value >>> 1) : value >>> 1);
            value = 0;
            shift = 0;
          }
        }
        genCol += values[0] ?? 0;
        if (values.length >= 4) {
          src += values[1]!;
          origLine += values[2]!;
          segs.push([genCol, src, origLine]);
        }
      }
    }
    lines.push(segs);
  }
  return lines;
}

interface LoadedMap {
  sources: string[];
  lines: LineMap;
}
const mapCache = new Map<string, LoadedMap | null>();

function loadMap(jsFile: string): LoadedMap | null {
  if (mapCache.has(jsFile)) return mapCache.get(jsFile)!;
  let loaded: LoadedMap | null = null;
  const mapFile = `${jsFile}.map`;
  if (existsSync(mapFile)) {
    const raw = JSON.parse(readFileSync(mapFile, 'utf8')) as {
      sources: string[];
      sourceRoot?: string;
      mappings: string;
    };
    const base = path.dirname(mapFile);
    loaded = {
      sources: raw.sources.map((s) => path.resolve(base, raw.sourceRoot ?? '', s)),
      lines: decodeMappings(raw.mappings),
    };
  }
  mapCache.set(jsFile, loaded);
  return loaded;
}

/** Maps a 0-based generated position to `file:line` (1-based) in the original source, when a map exists. */
function original(jsFile: string, line0: number, col0: number): { file: string; line: number } | null {
  const m = loadMap(jsFile);
  const segs = m?.lines[line0];
  if (m == null || segs === undefined || segs.length === 0) return null;
  let best = segs[0]!;
  for (const s of segs) {
    if (s[0] <= col0) best = s;
    else break;
  }
  return { file: m.sources[best[1]]!, line: best[2] + 1 };
}

// ---- aggregation ----

function rel(file: string): string {
  const r = path.relative(process.cwd(), file);
  return r.startsWith('..') ? file : r;
}

function areaOf(location: string, url: string): string {
  if (url === '') return location.startsWith('(') ? location : '(native)';
  if (url.startsWith('node:')) return 'node internals';
  const nm = location.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = location.slice(nm + 'node_modules/'.length).split('/');
    return `node_modules/${rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]}`;
  }
  if (location.startsWith('src/')) return location.split(':')[0]!.replace(/\/[^/]+$/, '/');
  return location.split(':')[0]!;
}

export function summarize(profileFile: string, top = 25): ProfileSummary {
  const prof = JSON.parse(readFileSync(profileFile, 'utf8')) as CpuProfile;
  const selfUs = new Map<number, number>();
  if (prof.samples !== undefined && prof.timeDeltas !== undefined) {
    // timeDeltas[i+1] is the time until the next sample: the time spent in samples[i].
    for (let i = 0; i < prof.samples.length; i++) {
      const dt = prof.timeDeltas[i + 1] ?? 0;
      selfUs.set(prof.samples[i]!, (selfUs.get(prof.samples[i]!) ?? 0) + Math.max(0, dt));
    }
  } else {
    const interval =
      (prof.endTime - prof.startTime) /
      Math.max(
        1,
        prof.nodes.reduce((a, n) => a + (n.hitCount ?? 0), 0),
      );
    for (const n of prof.nodes) selfUs.set(n.id, (n.hitCount ?? 0) * interval);
  }
  const locations = new Map<number, string>();
  const locationOf = (n: ProfileNode): string => {
    let location = locations.get(n.id);
    if (location !== undefined) return location;
    const cf = n.callFrame;
    const name = cf.functionName || '(anonymous)';
    if (cf.url === '') location = name.startsWith('(') ? name : '(native)';
    else if (cf.url.startsWith('node:')) location = `${cf.url}:${cf.lineNumber + 1}`;
    else {
      const file = cf.url.startsWith('file:') ? fileURLToPath(cf.url) : cf.url;
      const orig = original(file, cf.lineNumber, cf.columnNumber);
      location = orig !== null ? `${rel(orig.file)}:${orig.line}` : `${rel(file)}:${cf.lineNumber + 1}`;
    }
    locations.set(n.id, location);
    return location;
  };
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const bySrc = new Map<string, { name: string; location: string; us: number }>();
  const byFn = new Map<string, { name: string; location: string; area: string; us: number }>();
  let totalUs = 0;
  let idleUs = 0;
  for (const n of prof.nodes) {
    const us = selfUs.get(n.id) ?? 0;
    if (us === 0) continue;
    totalUs += us;
    const cf = n.callFrame;
    const name = cf.functionName || '(anonymous)';
    if (name === '(idle)') idleUs += us;
    const location = locationOf(n);
    if (name !== '(idle)') {
      let at: ProfileNode | undefined = n;
      while (at !== undefined && !locationOf(at).startsWith('src/')) at = byId.get(parent.get(at.id) ?? -1);
      const srcName = at === undefined ? '(no src/ frame on the stack)' : at.callFrame.functionName || '(anonymous)';
      const pseudo = name === '(garbage collector)' || name === '(program)' || name === '(root)';
      const srcLoc = at === undefined ? (pseudo ? name : 'Node / dependencies') : locationOf(at);
      const k = `${srcName}\u0000${srcLoc}`;
      const row = bySrc.get(k) ?? { name: srcName, location: srcLoc, us: 0 };
      row.us += us;
      bySrc.set(k, row);
    }
    const key = `${name}\u0000${location}`;
    const row = byFn.get(key) ?? { name, location, area: areaOf(location, cf.url), us: 0 };
    row.us += us;
    byFn.set(key, row);
  }
  const busyUs = Math.max(1, totalUs - idleUs);
  const rows = [...byFn.values()].filter((r) => r.name !== '(idle)').sort((a, b) => b.us - a.us);
  const areas = new Map<string, number>();
  for (const r of rows) areas.set(r.area, (areas.get(r.area) ?? 0) + r.us);
  return {
    totalMs: totalUs / 1000,
    busyMs: busyUs / 1000,
    functions: rows.slice(0, top).map((r) => ({
      name: r.name,
      location: r.location,
      area: r.area,
      selfMs: r.us / 1000,
      pct: (100 * r.us) / busyUs,
    })),
    bySrcCaller: [...bySrc.values()]
      .sort((a, b) => b.us - a.us)
      .slice(0, top)
      .map((r) => ({ name: r.name, location: r.location, selfMs: r.us / 1000, pct: (100 * r.us) / busyUs })),
    areas: [...areas.entries()]
      .sort((a, b) => b[1] - a[1])
      .map(([area, us]) => ({ area, selfMs: us / 1000, pct: (100 * us) / busyUs })),
  };
}

export function toMarkdown(title: string, s: ProfileSummary, topAreas = 12): string {
  const out = [
    `### ${title}`,
    '',
    `Busy (non-idle) CPU: ${(s.busyMs / 1000).toFixed(1)} s of ${(s.totalMs / 1000).toFixed(1)} s profiled.`,
    '',
  ];
  out.push('| # | self ms | % busy | function | location |', '|---:|---:|---:|---|---|');
  s.functions.forEach((f, i) =>
    out.push(`| ${i + 1} | ${f.selfMs.toFixed(0)} | ${f.pct.toFixed(1)} | \`${f.name}\` | ${f.location} |`),
  );
  out.push(
    '',
    'Charged to the nearest src/ function on the stack (its self time + the Node/dependency code it called):',
    '',
  );
  out.push('| # | ms | % busy | src/ function | location |', '|---:|---:|---:|---|---|');
  s.bySrcCaller.forEach((f, i) =>
    out.push(`| ${i + 1} | ${f.selfMs.toFixed(0)} | ${f.pct.toFixed(1)} | \`${f.name}\` | ${f.location} |`),
  );
  out.push('', 'By area (self time):', '', '| area | self ms | % busy |', '|---|---:|---:|');
  for (const a of s.areas.slice(0, topAreas)) out.push(`| ${a.area} | ${a.selfMs.toFixed(0)} | ${a.pct.toFixed(1)} |`);
  out.push('');
  return out.join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const file = process.argv[2];
  if (file === undefined) {
    console.error('usage: tsx bench/top-profile.ts FILE.cpuprofile [--top N]');
    process.exit(1);
  }
  const topIdx = process.argv.indexOf('--top');
  const top = topIdx > 0 ? Number(process.argv[topIdx + 1]) : 25;
  console.log(toMarkdown(path.basename(file), summarize(file, top)));
}
