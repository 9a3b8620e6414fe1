/**
 * The hand-over from `fetch` to the node transport, on scripted transports:
 * which refusals hand over (a blocked port always, a CA certificate as the
 * server's own only without a proxy), that it happens once for the
 * client's life, requests sent alongside included, and what it says.
 */
import assert from "node:assert/strict";
import type {
  TransportError,
  TransportErrorKind,
} from "../../lib/lease/errors.ts";
import {
  type Transport,
  type WireRequest,
  withNodeFallback,
} from "../../lib/lease/transport.ts";
import { createLogger } from "../../lib/obs/log.ts";
import { parseApiServer } from "../../lib/lease/wire.ts";

const REQUEST: WireRequest = { path: "/x", headers: {}, body: "{}" };
const ANSWER = { status: 200, body: "{}" };
const never = () => new AbortController().signal;

/** A scripted fetch that refuses with `kind`, and a node transport that answers; counts of each. */
function setup(
  kind: TransportErrorKind,
  proxy: string | undefined,
  url = "http://127.0.0.1:6000",
) {
  const counts = { fetch: 0, node: 0, made: 0 };
  const levels: string[] = [];
  const lines: string[] = [];
  const refusal: TransportError = { error: kind, detail: "refused" };
  let release = () => {};
  const gate = new Promise<void>((r) => release = r);
  const first: Transport = async () => {
    counts.fetch++;
    await gate;
    return refusal;
  };
  const route = withNodeFallback(
    first,
    () => {
      counts.made++;
      return () => {
        counts.node++;
        return Promise.resolve(ANSWER);
      };
    },
    parseApiServer(url),
    proxy,
    createLogger({
      format: "json",
      level: "DEBUG",
      write: (l) => {
        const r = JSON.parse(l);
        levels.push(r.level);
        lines.push(r.msg);
      },
    }),
  );
  return { route, transport: route.send, counts, levels, lines, release };
}

Deno.test("a blocked port hands over once, requests sent alongside included, and fetch is not asked again", async () => {
  const s = setup("blocked-port", undefined);
  const both = Promise.all([
    s.transport(REQUEST, never()),
    s.transport(REQUEST, never()),
  ]);
  s.release();
  assert.deepEqual(await both, [ANSWER, ANSWER]);
  assert.deepEqual(await s.transport(REQUEST, never()), ANSWER);
  assert.deepEqual(s.counts, { fetch: 2, node: 3, made: 1 });
  // Requests now go direct: errors are worded as the API server's.
  assert.equal(s.route.proxy(), undefined);
  assert.deepEqual(s.levels, ["DEBUG"]);
  assert.deepEqual(s.lines, [
    "fetch refuses port 6000 (a bad port of the fetch standard); sending through node:http",
  ]);
});

Deno.test("a blocked port with a proxy variable set hands over too, with one WARN that it goes direct", async () => {
  const s = setup("blocked-port", "HTTPS_PROXY", "https://berth.example:10080");
  assert.equal(s.route.proxy(), "HTTPS_PROXY");
  s.release();
  assert.deepEqual(await s.transport(REQUEST, never()), ANSWER);
  assert.deepEqual(await s.transport(REQUEST, never()), ANSWER);
  assert.deepEqual(s.levels, ["WARN"]);
  assert.deepEqual(s.lines, [
    "HTTPS_PROXY names a proxy, but on port 10080, which fetch refuses (node:https), the helper connects to the API server directly",
  ]);
});

Deno.test("a CA certificate as the server's own hands over only on a direct connection", async () => {
  const direct = setup("ca-as-leaf", undefined, "https://berth.example:8443");
  direct.release();
  assert.deepEqual(await direct.transport(REQUEST, never()), ANSWER);
  assert.deepEqual(direct.levels, ["WARN"]);
  assert.match(direct.lines[0], /presents a CA certificate as its own/);

  const proxied = setup(
    "ca-as-leaf",
    "HTTPS_PROXY",
    "https://berth.example:8443",
  );
  proxied.release();
  const out = await proxied.transport(REQUEST, never());
  assert.deepEqual(out, { error: "ca-as-leaf", detail: "refused" });
  assert.equal(proxied.counts.made, 0);
  assert.equal(proxied.route.proxy(), "HTTPS_PROXY");
  assert.deepEqual(proxied.lines, []);
});

Deno.test("any other refusal is fetch's answer, with no hand-over", async () => {
  for (const kind of ["refused", "untrusted", "other"] as const) {
    const s = setup(kind, undefined, "https://berth.example:8443");
    s.release();
    assert.deepEqual(await s.transport(REQUEST, never()), {
      error: kind,
      detail: "refused",
    });
    assert.equal(s.counts.made, 0, kind);
  }
});
