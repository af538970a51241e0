/** @module The opt-in blocks of the shipped examples, uncommented as an operator would, so tests run what the comments offer. */

/**
 * `text` with the commented rule `# - name: NAME` and its following commented lines (up to the first
 * line that is not a comment, or a blank comment line) uncommented in place; throws if the rule is absent.
 */
export function uncommentBlock(text: string, name: string): string {
  const lines = text.split('\n');
  const start = lines.findIndex((l) => l.trimStart() === `# - name: ${name}`);
  if (start < 0) throw new Error(`no commented rule ${name}`);
  for (let i = start; i < lines.length && /^\s*# /.test(lines[i]!) && lines[i]!.trim() !== '#'; i++) {
    if (i > start && /^\s*# - /.test(lines[i]!)) break;
    lines[i] = lines[i]!.replace('# ', '');
  }
  return lines.join('\n');
}

/** `text` with the commented top-level section `# KEY:` and the commented lines under it (up to a blank comment line or the end of the comment) uncommented. */
export function uncommentSection(text: string, key: string): string {
  const lines = text.split('\n');
  const start = lines.findIndex((l) => l === `# ${key}:`);
  if (start < 0) throw new Error(`no commented section ${key}`);
  for (let i = start; i < lines.length && lines[i]!.startsWith('# '); i++) lines[i] = lines[i]!.slice(2);
  return lines.join('\n');
}
