/** @module The Dockerfile and .dockerignore, checked statically (there is no Docker engine in CI). */
import { existsSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { parseDockerfile, read, ROOT, type Instruction } from './support.js';

const instructions = parseDockerfile(read('Dockerfile'));
const finalStage = Math.max(...instructions.map((i) => i.stage));
const inFinal = (keyword: string): Instruction[] =>
  instructions.filter((i) => i.keyword === keyword && i.stage === finalStage);

/** The single instruction of a kind in the final stage (Docker uses the last one). */
function last(keyword: string): Instruction {
  const found = inFinal(keyword).at(-1);
  if (found === undefined) throw new Error(`no ${keyword} in the final stage`);
  return found;
}

function execForm(args: string): string[] {
  const parsed: unknown = JSON.parse(args);
  if (!Array.isArray(parsed) || !parsed.every((a) => typeof a === 'string'))
    throw new Error(`not a JSON array of strings: ${args}`);
  return parsed as string[];
}

/** `ENV A=1 B=2` (the only form the Dockerfile uses) → { A: '1', B: '2' }. */
function envOf(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const i of inFinal('ENV')) {
    for (const m of i.args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|\S+)/g))
      env[m[1] ?? ''] = (m[2] ?? '').replace(/^"|"$/g, '');
  }
  return env;
}

/** The default of an ARG declared before the first FROM. */
function globalArg(name: string): string | undefined {
  const arg = instructions.find((i) => i.stage === -1 && i.keyword === 'ARG' && i.args.startsWith(`${name}=`));
  return arg?.args.slice(name.length + 1);
}

/** `LABEL a="x" b="y"` in the final stage → { a: 'x', b: 'y' }. */
function labelsOf(): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const i of inFinal('LABEL')) {
    for (const m of i.args.matchAll(/([A-Za-z0-9_.-]+)=("[^"]*"|\S+)/g))
      labels[m[1] ?? ''] = (m[2] ?? '').replace(/^"|"$/g, '');
  }
  return labels;
}

describe('the Dockerfile', () => {
  it('labels the image with the OCI annotations, its version being the package version', () => {
    const labels = labelsOf();
    for (const key of ['title', 'description', 'licenses', 'version', 'revision', 'created', 'source', 'base.name']) {
      expect(labels[`org.opencontainers.image.${key}`], key).toBeTruthy();
    }
    expect(labels['org.opencontainers.image.version']).toBe('${VERSION}');
    const version = inFinal('ARG')
      .find((a) => a.args.startsWith('VERSION='))
      ?.args.slice('VERSION='.length);
    expect(version).toBe((JSON.parse(read('package.json')) as { version: string }).version);
    expect(labels['org.opencontainers.image.licenses']).toBe(
      (JSON.parse(read('package.json')) as { license: string }).license,
    );
  });

  it('pins the base image by digest, or says why not and how to pin it at build time', () => {
    if (/@sha256:/.test(globalArg('NODE_IMAGE') ?? '')) return;
    const text = read('Dockerfile');
    expect(text).toMatch(/not by digest, on purpose/);
    expect(text).toMatch(/--build-arg NODE_IMAGE=node:[^\s]+@sha256:/);
  });

  it('builds in one stage and runs from another, copying only build outputs across', () => {
    const froms = instructions.filter((i) => i.keyword === 'FROM');
    expect(froms.length).toBeGreaterThanOrEqual(2);
    // Every stage starts from the one base image argument, a Node image.
    expect(froms.every((f) => /^\$\{NODE_IMAGE\}\s/.test(f.args))).toBe(true);
    expect(globalArg('NODE_IMAGE')).toMatch(/^node:\d+-bookworm-slim(@sha256:[a-f0-9]{64})?$/);
    const buildStage = /\bAS\s+(\S+)/i.exec(froms[0]?.args ?? '')?.[1];
    expect(buildStage).toBeDefined();
    const copiedFromBuild = inFinal('COPY')
      .filter((c) => c.args.includes(`--from=${buildStage}`))
      .map((c) => c.args.split(/\s+/).filter((a) => !a.startsWith('--'))[0]);
    expect(copiedFromBuild).toEqual(
      expect.arrayContaining(['/app/dist', '/app/node_modules', '/app/package.json', '/app/config']),
    );
  });

  it('installs with npm ci and drops the dev dependencies before they reach the runtime stage', () => {
    const build = instructions.filter((i) => i.keyword === 'RUN' && i.stage < finalStage).map((i) => i.args);
    expect(build.some((r) => /\bnpm ci\b/.test(r))).toBe(true);
    expect(build.some((r) => /\bnpm run build\b/.test(r))).toBe(true);
    expect(build.some((r) => /\bnpm (prune|ci)\b[^&]*--omit=dev/.test(r))).toBe(true);
    // Nothing is installed in the runtime stage itself: it only copies the pruned tree.
    expect(inFinal('RUN').filter((r) => /\bnpm (ci|install)\b/.test(r.args))).toEqual([]);
  });

  it('runs as a numeric non-root user, the uid the Helm chart asks for', () => {
    const user = last('USER').args;
    const [uid] = user.split(':');
    expect(uid).toMatch(/^[0-9]+$/);
    expect(Number(uid)).toBeGreaterThan(0);
    const values = parseYaml(read('helm/rategate/values.yaml')) as { securityContext: { runAsUser: number } };
    expect(Number(uid)).toBe(values.securityContext.runAsUser);
    // USER comes before the start instructions, so they run as that user.
    const order = instructions.map((i) => i.keyword);
    expect(order.lastIndexOf('USER')).toBeLessThan(order.lastIndexOf('ENTRYPOINT'));
  });

  it('starts in exec form: node as PID 1 receives SIGTERM and drains', () => {
    expect(execForm(last('ENTRYPOINT').args)).toEqual(['node', 'dist/cli/index.js']);
    const cmd = execForm(last('CMD').args);
    expect(cmd[0]).toBe('serve');
    // The config it names is the file the image ships.
    const config = cmd[cmd.indexOf('--config') + 1];
    expect(config).toBe('/etc/rategate/limits.yaml');
    expect(inFinal('COPY').some((c) => c.args.trim().endsWith(' /etc/rategate/limits.yaml'))).toBe(true);
  });

  it('sets production mode, binds the admin listener for probes, and exposes both ports', () => {
    const env = envOf();
    expect(env.NODE_ENV).toBe('production');
    expect(env.RATEGATE_ADMIN_LISTEN).toBe('0.0.0.0:9464');
    expect(last('EXPOSE').args.split(/\s+/).sort()).toEqual(['8080', '9464']);
  });

  it('declares an exec-form health check that runs the compiled health-check script', () => {
    const hc = last('HEALTHCHECK').args;
    const m = /\bCMD\s+(\[.*\])\s*$/.exec(hc);
    expect(m).not.toBeNull();
    const command = execForm(m?.[1] ?? '[]');
    expect(command.slice(0, 2)).toEqual(['node', 'dist/cli/healthcheck.js']);
    // dist/cli/healthcheck.js is what tsc (rootDir src, outDir dist) makes of src/cli/healthcheck.ts.
    expect(existsSync(`${ROOT}src/cli/healthcheck.ts`)).toBe(true);
    const build = JSON.parse(read('tsconfig.build.json')) as { compilerOptions: { rootDir: string; outDir: string } };
    expect([build.compilerOptions.rootDir, build.compilerOptions.outDir]).toEqual(['src', 'dist']);
    expect(hc).toMatch(/--timeout=\d+s/);
  });

  it('never runs a shell-form start command', () => {
    for (const keyword of ['ENTRYPOINT', 'CMD']) {
      for (const i of instructions.filter((x) => x.keyword === keyword)) expect(i.args.startsWith('[')).toBe(true);
    }
  });
});

describe('the .dockerignore', () => {
  const patterns = read('.dockerignore')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  const ignored = (path: string): boolean =>
    patterns.some((p) => !p.startsWith('!') && (p === path || p === path.split('/')[0] || p === `**/${path}`));

  it('keeps node_modules, dist, .git and test output out of the build context', () => {
    for (const path of ['node_modules', 'dist', '.git', 'coverage']) expect(ignored(path), path).toBe(true);
    expect(patterns).toContain('.vitest-*');
  });

  it('does not exclude anything the build stage copies from the context', () => {
    const sources = instructions
      .filter((i) => i.keyword === 'COPY' && !i.args.includes('--from='))
      .flatMap((i) =>
        i.args
          .split(/\s+/)
          .filter((a) => !a.startsWith('--'))
          .slice(0, -1),
      );
    expect(sources).toEqual(expect.arrayContaining(['package.json', 'package-lock.json', 'src']));
    for (const source of sources) {
      expect(ignored(source), source).toBe(false);
      expect(existsSync(`${ROOT}${source}`), source).toBe(true);
    }
  });
});
