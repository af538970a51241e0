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
