/**
 * Go's `strconv.Quote` (`%q`), for texts that must read as the Berth API server's.
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

// unicode.IsPrint: no space but the ASCII one is printable. Made at the
// first quote: its Unicode classes would cost every start (docs/benchmarks.md).
let printable: RegExp | undefined;

/**
 * Quotes `s` as Go's `strconv.Quote` does; a lone surrogate becomes U+FFFD.
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
    else if (cp >= 0x20 && cp < 0x7f) out += ch; // ASCII: no class to make
    else if ((printable ??= /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u).test(ch)) {
      out += ch;
    } else if (cp < 0x80) out += `\\x${cp.toString(16).padStart(2, "0")}`;
    else if (cp < 0x10000) out += `\\u${cp.toString(16).padStart(4, "0")}`;
    else out += `\\U${cp.toString(16).padStart(8, "0")}`;
  }
  return out + '"';
}
