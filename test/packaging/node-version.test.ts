/**
 * @module The image runs a supported Node LTS, and CI tests on that same major: the Dockerfile's runtime
 * major is what scripts/test-image-node.sh installs and runs the suite's wire and packaging tests on.
 */
import { describe, expect, it } from 'vitest';
import { read } from './support.js';

/** Node's LTS lines and the month each reaches end of life (nodejs.org release schedule). */
const LTS_END: Record<number, string> = { 20: '2026-04-30', 22: '2027-04-30', 24: '2028-04-30' };

const dockerMajor = Number(/^ARG NODE_IMAGE=node:(\d+)-/m.exec(read('Dockerfile'))?.[1]);

describe("the image's Node", () => {
  it('is an LTS line that has not reached end of life', () => {
    expect(LTS_END[dockerMajor], `node ${dockerMajor} is not an LTS line`).toBeDefined();
    expect(new Date(LTS_END[dockerMajor]!).getTime()).toBeGreaterThan(Date.now());
  });

  it('is the major CI tests on: .ci/run runs scripts/test-image-node.sh, which reads it from the Dockerfile', () => {
    const ci = read('.ci/run');
    expect(ci).toMatch(/^scripts\/test-image-node\.sh \|\|/m);
    // Its failure fails the run.
    expect(ci).toMatch(/\[ "\$status" -eq 0 \] && status=\$image_node_status/);
    const script = read('scripts/test-image-node.sh');
    expect(script).toContain("sed -n 's/^ARG NODE_IMAGE=node:\\([0-9]*\\)-.*/\\1/p' Dockerfile");
    expect(script).toMatch(/node-linux-\$arch@\$major/);
    expect(script).toMatch(/vitest\.mjs run[^\n]*\n[^\n]*test\/gateway test\/packaging/);
  });
});
