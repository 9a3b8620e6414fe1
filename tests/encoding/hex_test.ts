// Hex encoding: the alphabet, the width, and the random form.
import assert from "node:assert/strict";
import { encodeHex, randomHex } from "../../lib/encoding/hex.ts";

Deno.test("encodeHex writes two lower-case digits per byte", () => {
  assert.equal(encodeHex(new Uint8Array([])), "");
  assert.equal(
    encodeHex(new Uint8Array([0, 1, 15, 16, 171, 255])),
    "00010f10abff",
  );
});

Deno.test("randomHex gives twice as many hex characters as bytes, and differs between calls", () => {
  const a = randomHex(16);
  assert.match(a, /^[0-9a-f]{32}$/);
  assert.notEqual(a, randomHex(16));
});
