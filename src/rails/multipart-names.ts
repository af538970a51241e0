/**
 * @module The boundary of a multipart Content-Type, read only when every parser reads it one way.
 */

/**
 * The boundary of a multipart Content-Type, or null when it is missing or could be read two ways.
 * Security: busboy takes the first `boundary=`, Rack's regex the last and stops at `,`; a boundary that
 * is given twice or holds `,`, `;` or `"` would let the two split the body differently.
 */
export function strictBoundary(contentType: string): string | null {
  const all = [...contentType.matchAll(/boundary\s*=\s*("((?:\\.|[^"\\])*)"|[^;\s]*)/gi)];
  if (all.length !== 1) return null;
  const m = all[0]!;
  const value = m[2] ?? m[1] ?? '';
  if (!/^[0-9A-Za-z'()+_\-./:=? ]{1,70}$/.test(value) || value.endsWith(' ')) return null;
  // And exactly what Rack 2.2 (`multipart/.*?boundary(\s*)="?([^";,]+)`) and Rack 3.2
  // (`multipart/.*boundary="?([^";,]+)`) take: `boundary=abc def` is `abc def` to them.
  const rack2 = /^multipart\/.*?boundary[ \t\n\v\f\r]*="?([^";,]+)/i.exec(contentType)?.[1];
  const rack3 = /^multipart\/.*boundary="?([^";,]+)/i.exec(contentType)?.[1];
  return rack2 === value && rack3 === value ? value : null;
}
