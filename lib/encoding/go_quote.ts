/**
 * Go's `strconv.Quote` (what `%q` prints), for messages that must read
 * exactly as the Berth API server's: the lease key errors and the JSON
 * decoder's `unknown field` error.
 *
 * @module
 */

const ESCAPES: Record<string, string> = {
  "\x07": "\\a",
  "\b": "\\b",
  "\f": "\\f",
  "\n": "\\n",
  "\r": "\\r",
  "\t": "\\t",
  "\v": "\\v",
  "\\": "\\\\",
  '"': '\\"',
};

// unicode.IsPrint: letters, marks, numbers, punctuation, symbols and the
// ASCII space (other spaces are not printable in Go's sense).
const PRINTABLE = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u;

/**
 * Quotes a string as Go's `strconv.Quote` does: printable characters as
 * they are, `\n`-style escapes, `\xNN` below U+0080, `\uNNNN` and
 * `\UNNNNNNNN` above, and U+FFFD for a lone surrogate (Go holds UTF-8).
 *
 * @param s The string.
 * @returns The quoted string, double quotes included.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(goQuote('a"\u0001\u00a0é'), '"a\\"\\x01\\u00a0é"');
 * ```
 */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s.toWellFormed()) {
    const cp = ch.codePointAt(0)!;
    if (ESCAPES[ch] !== undefined) out += ESCAPES[ch];
    else if (PRINTABLE.test(ch)) out += ch;
    else if (cp < 0x80) out += `\\x${cp.toString(16).padStart(2, "0")}`;
    else if (cp < 0x10000) out += `\\u${cp.toString(16).padStart(4, "0")}`;
    else out += `\\U${cp.toString(16).padStart(8, "0")}`;
  }
  return out + '"';
}
