/**
 * The literal text of a number in a JSON object. `JSON.parse` reads `1.0`,
 * `1e0` and `1E1` as integers, while the Berth API (and the Go client) only
 * accept an integer literal for an int32 field; the answer decoder needs the
 * token as it was written to tell them apart.
 *
 * @module
 */

/**
 * The literal of the top-level member `field` of the JSON object `text`,
 * when its value is a number. With duplicate members the last one wins, as
 * in `JSON.parse`.
 *
 * @param text A JSON object that `JSON.parse` accepted (not re-validated).
 * @param field The member name, compared after unescaping.
 * @returns The number exactly as written (e.g. `"1e0"`), or undefined when
 * the member is absent or not a number.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(
 *   jsonNumberLiteral('{"a":{"fencingToken":2},"fencingToken":1.0}', "fencingToken"),
 *   "1.0",
 * );
 * ```
 */
export function jsonNumberLiteral(
  text: string,
  field: string,
): string | undefined {
  let i = skipSpace(text, 0);
  if (text[i] !== "{") return undefined;
  i = skipSpace(text, i + 1);
  let found: string | undefined;
  while (i < text.length && text[i] !== "}") {
    const keyEnd = stringEnd(text, i);
    const key = JSON.parse(text.slice(i, keyEnd)) as string;
    i = skipSpace(text, keyEnd);
    i = skipSpace(text, i + 1); // the colon
    const valueEnd = valueEndAt(text, i);
    if (key === field) {
      const raw = text.slice(i, valueEnd);
      found = /^[-0-9]/.test(raw) ? raw : undefined;
    }
    i = skipSpace(text, valueEnd);
    if (text[i] === ",") i = skipSpace(text, i + 1);
  }
  return found;
}

function skipSpace(text: string, i: number): number {
  while (i < text.length && " \t\r\n".includes(text[i])) i++;
  return i;
}

/** The index just past the string starting at `i` (a `"`). */
function stringEnd(text: string, i: number): number {
  for (let j = i + 1; j < text.length; j++) {
    if (text[j] === "\\") j++;
    else if (text[j] === '"') return j + 1;
  }
  return text.length;
}

/** The index just past the value starting at `i`. */
function valueEndAt(text: string, i: number): number {
  const c = text[i];
  if (c === '"') return stringEnd(text, i);
  if (c === "{" || c === "[") {
    let depth = 0;
    for (let j = i; j < text.length; j++) {
      const d = text[j];
      if (d === '"') j = stringEnd(text, j) - 1;
      else if (d === "{" || d === "[") depth++;
      else if (d === "}" || d === "]") {
        if (--depth === 0) return j + 1;
      }
    }
    return text.length;
  }
  let j = i;
  while (j < text.length && !",}] \t\r\n".includes(text[j])) j++;
  return j;
}
