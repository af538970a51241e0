/** @module placeholder */
import type { ReplayReport } from './report.js';
export function reportPage(r: ReplayReport): string {
  return `<!doctype html><pre>${JSON.stringify(r)}</pre>`;
}
