/**
 * The development lease server against the wire contract in berth-api.md:
 * exact bytes, statuses, messages and check order, lease semantics with an
 * injected clock, request ids, routing, faults and TLS. The `dev-server`
 * subcommand is tested in tests/cmd/dev_server_process_test.ts.
 */
import assert from "node:assert/strict";
import {
  type DevServer,
  type DevServerOptions,
  startDevServer,
} from "../../lib/devserver/server.ts";
import { MAX_FENCING_TOKEN } from "../../lib/devserver/store.ts";
import { ListenError } from "../../lib/net/addr.ts";
import { makeTestPki, opensslMissing } from "../support/tls.ts";
import { waitFor } from "../support/wait.ts";

const T0 = Date.UTC(2026, 4, 7); // 2026-05-07T00:00:00Z
const ZERO = "0001-01-01T00:00:00Z";
const LEASE = "/v1alpha1/namespaces/prod/leases/checkout";

/** A server whose wall clock the test moves by hand. */
interface Harness {
  server: DevServer;
  /** Current injected time in ms. */
  t: number;
}

async function withServer(
  options: DevServerOptions,
  fn: (h: Harness) => Promise<void>,
): Promise<void> {
  const h = { t: T0 } as Harness;
  h.server = await startDevServer({ now: () => h.t, ...options });
  try {
    await fn(h);
  } finally {
    await h.server.close();
  }
}

interface Answer {
  status: number;
  text: string;
  headers: Headers;
}

async function send(
  server: DevServer,
  path: string,
  init: RequestInit = {},
): Promise<Answer> {
  const res = await fetch(server.url + path, { redirect: "manual", ...init });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

function rpc(
  server: DevServer,
  op: "acquire" | "renew" | "release",
  body: string | Record<string, unknown>,
  headers: Record<string, string> = {},
  path = LEASE,
): Promise<Answer> {
  return send(server, `${path}/${op}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

function grant(
  acquired: boolean,
  holder: string | undefined,
  token: number | undefined,
  expiresAt: string,
  acquiredAt: string,
): string {
  const o: Record<string, unknown> = { acquired };
  if (holder !== undefined) o.holder = holder;
  if (token !== undefined) o.fencingToken = token;
  o.expiresAt = expiresAt;
  o.acquiredAt = acquiredAt;
  return JSON.stringify(o) + "\n";
}

function iso(ms: number): string {
  return new Date(ms).toISOString().replace(".000Z", "Z");
}

function errorBody(message: string): string {
  return JSON.stringify({ error: message }) + "\n";
}

async function sha256Hex(s: string): Promise<string> {
  const d = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(s));
  return new Uint8Array(d).toHex();
}

/** Sends bytes the fetch API would normalise (dot segments, bad escapes). */
async function rawRequest(server: DevServer, head: string): Promise<string> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: server.port });
  try {
    await conn.write(new TextEncoder().encode(head));
    let out = "";
    const buf = new Uint8Array(4096);
    for (;;) {
      const n = await conn.read(buf);
      if (n === null) return out;
      out += new TextDecoder().decode(buf.subarray(0, n));
    }
  } finally {
    conn.close();
  }
}

// --- success bodies and lease semantics -----------------------------------

Deno.test("acquire answers the exact success bytes of the contract", async () => {
  await withServer({}, async (h) => {
    h.t = T0 + 123;
    const a = await rpc(h.server, "acquire", {
      holder: "east/prod:pod-1",
      ttlSeconds: 30,
    });
    assert.equal(a.status, 200);
    assert.equal(a.headers.get("content-type"), "application/json");
    assert.equal(
      a.text,
      '{"acquired":true,"holder":"east/prod:pod-1","fencingToken":1,' +
        '"expiresAt":"2026-05-07T00:00:30.123Z","acquiredAt":"2026-05-07T00:00:00.123Z"}\n',
    );
    // Trailing zeros of the fraction are trimmed as Go does.
    h.t = T0 + 120;
    const b = await rpc(h.server, "acquire", {
      holder: "east/prod:pod-1",
      ttlSeconds: 30,
    });
    assert.match(b.text, /"expiresAt":"2026-05-07T00:00:30\.12Z"/);
    // HTML characters are escaped like Go's encoder.
    const c = await rpc(
      h.server,
      "acquire",
      { holder: "a<b>&c", ttlSeconds: 1 },
      {},
      "/v1alpha1/namespaces/prod/leases/other",
    );
    assert.match(c.text, /"holder":"a\\u003cb\\u003e\\u0026c"/);
  });
});

Deno.test("acquire: same holder keeps its token and acquiredAt; another live holder is refused", async () => {
  await withServer({}, async (h) => {
    await rpc(h.server, "acquire", { holder: "a", ttlSeconds: 10 });
    h.t = T0 + 5000;
    const again = await rpc(h.server, "acquire", {
      holder: "a",
      ttlSeconds: 20,
    });
    assert.equal(again.text, grant(true, "a", 1, iso(T0 + 25000), iso(T0)));
    const other = await rpc(h.server, "acquire", {
      holder: "b",
      ttlSeconds: 10,
    });
    assert.equal(other.status, 200);
    assert.equal(other.text, grant(false, "a", 1, iso(T0 + 25000), iso(T0)));
  });
});

Deno.test("expiry is strictly after renewedAt + ttl, and an expired lease gets a new token", async () => {
  await withServer({}, async (h) => {
    await rpc(h.server, "acquire", { holder: "a", ttlSeconds: 10 });
    h.t = T0 + 10_000; // exactly at expiry: still live
    const live = await rpc(h.server, "acquire", {
      holder: "b",
      ttlSeconds: 10,
    });
    assert.equal(live.text, grant(false, "a", 1, iso(T0 + 10_000), iso(T0)));
    const renewAt = await rpc(h.server, "renew", {
      holder: "a",
      fencingToken: 1,
      ttlSeconds: 10,
    });
    assert.equal(renewAt.text, grant(true, "a", 1, iso(T0 + 20_000), iso(T0)));

    h.t = T0 + 20_001; // one millisecond late: expired
    const lost = await rpc(h.server, "renew", {
      holder: "a",
      fencingToken: 1,
      ttlSeconds: 10,
    });
    assert.equal(lost.text, grant(false, "a", 1, iso(T0 + 20_000), iso(T0)));
    // The same holder too gets a new token and a new acquiredAt.
    const same = await rpc(h.server, "acquire", {
      holder: "a",
      ttlSeconds: 10,
    });
    assert.equal(same.text, grant(true, "a", 2, iso(h.t + 10_000), iso(h.t)));
    h.t += 10_001;
    const other = await rpc(h.server, "acquire", {
      holder: "b",
      ttlSeconds: 10,
    });
    assert.equal(other.text, grant(true, "b", 3, iso(h.t + 10_000), iso(h.t)));
  });
});

Deno.test("renew replaces the TTL, never creates a lease and never changes the token", async () => {
  await withServer({}, async (h) => {
    const none = await rpc(h.server, "renew", {
      holder: "a",
      fencingToken: 1,
      ttlSeconds: 10,
    });
    assert.equal(none.status, 200);
    assert.equal(none.text, grant(false, undefined, undefined, ZERO, ZERO));

    const first = await rpc(h.server, "acquire", {
      holder: "a",
      ttlSeconds: 10,
    });
    assert.equal(first.text, grant(true, "a", 1, iso(T0 + 10_000), iso(T0)));
    h.t = T0 + 3000;
    const ok = await rpc(h.server, "renew", {
      holder: "a",
      fencingToken: 1,
      ttlSeconds: 60,
    });
    assert.equal(ok.text, grant(true, "a", 1, iso(T0 + 63_000), iso(T0)));

    const wrongToken = await rpc(h.server, "renew", {
      holder: "a",
      fencingToken: 2,
      ttlSeconds: 60,
    });
    assert.equal(
      wrongToken.text,
      grant(false, "a", 1, iso(T0 + 63_000), iso(T0)),
    );
    const wrongHolder = await rpc(h.server, "renew", {
      holder: "b",
      fencingToken: 1,
      ttlSeconds: 60,
    });
    assert.equal(
      wrongHolder.text,
      grant(false, "a", 1, iso(T0 + 63_000), iso(T0)),
    );
    // The refused renews changed nothing.
    const rec = h.server.store.get("prod", "checkout");
    assert.deepEqual(rec, {
      holder: "a",
      fencingToken: 1,
      ttlSeconds: 60,
      acquiredAt: T0,
      renewedAt: T0 + 3000,
    });
  });
});

Deno.test("release: tombstones keep the token, so tokens increase through releases", async () => {
  await withServer({}, async (h) => {
    const absent = await rpc(h.server, "release", {
      holder: "a",
      fencingToken: 7,
    });
    assert.equal(absent.status, 204);
    assert.equal(absent.text, "");

    await rpc(h.server, "acquire", { holder: "a", ttlSeconds: 10 });
    const otherHolder = await rpc(h.server, "release", {
      holder: "b",
      fencingToken: 1,
    });
    assert.equal(otherHolder.status, 409);
    assert.equal(
      otherHolder.text,
      errorBody("lease held by another identity or token"),
    );
    const otherToken = await rpc(h.server, "release", {
      holder: "a",
      fencingToken: 2,
    });
    assert.equal(otherToken.status, 409);

    const released = await rpc(h.server, "release", {
      holder: "a",
      fencingToken: 1,
    });
    assert.equal(released.status, 204);
    assert.equal(released.text, "");
    const again = await rpc(h.server, "release", {
      holder: "b",
      fencingToken: 9,
    });
    assert.equal(again.status, 204, "already released is 204 whoever asks");

    // A renew on the tombstone, as the real server answers it: holder
    // omitted, token kept, expiresAt the release time, acquiredAt the first
    // acquire.
    const renew = await rpc(h.server, "renew", {
      holder: "a",
      fencingToken: 1,
      ttlSeconds: 10,
    });
    assert.equal(renew.text, grant(false, undefined, 1, iso(T0), iso(T0)));
    // The same holder re-acquires with a new token right away.
    h.t = T0 + 1000;
    const next = await rpc(h.server, "acquire", {
      holder: "a",
      ttlSeconds: 10,
    });
    assert.equal(
      next.text,
      grant(true, "a", 2, iso(T0 + 11_000), iso(T0 + 1000)),
    );
  });
});

Deno.test("release of an expired lease: matching releases it, anyone else gets 409 until the clean-up", async () => {
  await withServer({}, async (h) => {
    await rpc(h.server, "acquire", { holder: "a", ttlSeconds: 1 });
    h.t = T0 + 5000; // expired, not yet cleaned up
    const stranger = await rpc(h.server, "release", {
      holder: "b",
      fencingToken: 1,
    });
    assert.equal(stranger.status, 409, "expiry is not looked at on release");
    assert.equal(
      stranger.text,
      errorBody("lease held by another identity or token"),
    );
    const wrongToken = await rpc(h.server, "release", {
      holder: "a",
      fencingToken: 2,
    });
    assert.equal(wrongToken.status, 409);
    assert.equal(h.server.store.get("prod", "checkout")?.holder, "a");
    h.t = T0 + 6000;
    const owner = await rpc(h.server, "release", {
      holder: "a",
      fencingToken: 1,
    });
    assert.equal(owner.status, 204);
    assert.deepEqual(h.server.store.get("prod", "checkout"), {
      holder: "",
      fencingToken: 1,
      ttlSeconds: 0,
      acquiredAt: T0,
      renewedAt: T0 + 6000,
    });
    const renew = await rpc(h.server, "renew", {
      holder: "a",
      fencingToken: 1,
      ttlSeconds: 1,
    });
    assert.equal(
      renew.text,
      grant(false, undefined, 1, iso(T0 + 6000), iso(T0)),
      "expiresAt is the release time, acquiredAt the first acquire",
    );
  });
});

Deno.test("clean-up: records expired for more than 5 minutes become tombstones at the sweep", async () => {
  await withServer({}, async (h) => {
    await rpc(h.server, "acquire", { holder: "a", ttlSeconds: 10 });
    await rpc(
      h.server,
      "acquire",
      { holder: "b", ttlSeconds: 10 },
      {},
      `${LEASE}-2`,
    );
    h.t = T0 + 10_000 + 300_000; // expired exactly 5 minutes: kept
    assert.equal(h.server.sweep(), 0);
    await rpc(
      h.server,
      "renew",
      { holder: "b", fencingToken: 1, ttlSeconds: 10 },
      {},
      `${LEASE}-2`,
    )
      .then((r) => assert.match(r.text, /"acquired":false,"holder":"b"/));
    h.t += 1;
    assert.equal(h.server.sweep(), 2);
    const sweptAt = h.t;
    h.t += 40_000;
    const renew = await rpc(h.server, "renew", {
      holder: "a",
      fencingToken: 1,
      ttlSeconds: 10,
    });
    assert.equal(
      renew.text,
      grant(false, undefined, 1, iso(sweptAt), iso(T0)),
      "no holder, expiresAt the clean-up time",
    );
    const stranger = await rpc(h.server, "release", {
      holder: "x",
      fencingToken: 7,
    });
    assert.equal(stranger.status, 204, "a tombstone is released by anyone");
    const again = await rpc(h.server, "acquire", {
      holder: "c",
      ttlSeconds: 10,
    });
    assert.equal(
      again.text,
      grant(true, "c", 2, iso(h.t + 10_000), iso(h.t)),
      "the token survives the clean-up",
    );
  });
});

Deno.test("clean-up: the sweep runs on its own timer, which stops with the server", async () => {
  const h = { t: T0 } as Harness;
  h.server = await startDevServer({ now: () => h.t, sweepIntervalMs: 5 });
  try {
    await rpc(h.server, "acquire", { holder: "a", ttlSeconds: 1 });
    h.t = T0 + 1000 + 300_001;
    await waitFor(
      () => h.server.store.get("prod", "checkout")?.holder === "",
      { timeoutMs: 10_000, what: "the timer's sweep" },
    );
  } finally {
    await h.server.close();
  }
  // Leaving a timer running would fail this test (Deno's leak check).
});

Deno.test("release: only the non-empty holder check applies, not the length limit", async () => {
  await withServer({}, async (h) => {
    const empty = await rpc(h.server, "release", { fencingToken: 1 });
    assert.equal(empty.status, 400);
    assert.equal(empty.text, errorBody("holder is required"));
    const long = await rpc(h.server, "release", {
      holder: "x".repeat(254),
      fencingToken: 1,
    });
    assert.equal(long.status, 204, "nothing held: released, idempotently");
  });
});

Deno.test("500s: token ceiling refuses to wrap, negative renew token, with request id", async () => {
  await withServer({}, async (h) => {
    h.server.store.put("prod", "checkout", {
      holder: "",
      fencingToken: MAX_FENCING_TOKEN,
      ttlSeconds: 0,
      acquiredAt: null,
      renewedAt: null,
    });
    const a = await rpc(h.server, "acquire", { holder: "a", ttlSeconds: 10 }, {
      "x-request-id": "ceiling-1",
    });
    assert.equal(a.status, 500);
    assert.equal(
      a.text,
      '{"error":"internal error","requestId":"ceiling-1"}\n',
    );
    assert.equal(a.headers.get("x-request-id"), "ceiling-1");

    const r = await rpc(h.server, "renew", {
      holder: "a",
      fencingToken: -1,
      ttlSeconds: 10,
    });
    assert.equal(r.status, 500);
    const id = r.headers.get("x-request-id");
    assert.equal(
      r.text,
      JSON.stringify({ error: "internal error", requestId: id }) + "\n",
    );

    // One below the ceiling still works and reaches it.
    h.server.store.put("prod", "checkout", {
      holder: "",
      fencingToken: MAX_FENCING_TOKEN - 1,
      ttlSeconds: 0,
      acquiredAt: null,
      renewedAt: null,
    });
    const last = await rpc(h.server, "acquire", {
      holder: "a",
      ttlSeconds: 10,
    });
    assert.match(last.text, /"fencingToken":2147483647,/);
  });
});

// --- request bodies --------------------------------------------------------

Deno.test("invalid json bodies are 400 'invalid json body: ...'", async () => {
  await withServer({}, async (h) => {
    const cases: [string, string, string][] = [
      ["acquire", "", "invalid json body: EOF"],
      ["acquire", "  \n", "invalid json body: EOF"],
      ["acquire", '{"holder":"a",', "invalid json body: unexpected EOF"],
      [
        "acquire",
        "{holder:1}",
        "invalid json body: invalid character 'h' looking for beginning of object key string",
      ],
      [
        // A byte-order mark is no JSON to Go's decoder, which names its first byte.
        "acquire",
        '\uFEFF{"holder":"a","ttlSeconds":1}',
        "invalid json body: invalid character 'ï' looking for beginning of value",
      ],
      [
        "acquire",
        '{"holder":"a",\x01}',
        "invalid json body: invalid character '\\x01' looking for beginning of object key string",
      ],
      [
        "acquire",
        '{"holder":"a","ttlSeconds":1,"extra":1}',
        'invalid json body: json: unknown field "extra"',
      ],
      [
        "release",
        '{"holder":"a","fencingToken":1,"ttlSeconds":1}',
        'invalid json body: json: unknown field "ttlSeconds"',
      ],
      [
        "acquire",
        '{"holder":"a","ttlSeconds":1.5}',
        "invalid json body: json: cannot unmarshal number 1.5 into Go struct field AcquireRequest.ttlSeconds of type int32",
      ],
      [
        "acquire",
        '{"holder":"a","ttlSeconds":1e3}',
        "invalid json body: json: cannot unmarshal number 1e3 into Go struct field AcquireRequest.ttlSeconds of type int32",
      ],
      [
        "acquire",
        '{"holder":"a","ttlSeconds":1.0}',
        "invalid json body: json: cannot unmarshal number 1.0 into Go struct field AcquireRequest.ttlSeconds of type int32",
      ],
      [
        "acquire",
        '{"holder":"a","ttlSeconds":2147483648}',
        "invalid json body: json: cannot unmarshal number 2147483648 into Go struct field AcquireRequest.ttlSeconds of type int32",
      ],
      [
        "renew",
        '{"holder":"a","fencingToken":-2147483649,"ttlSeconds":1}',
        "invalid json body: json: cannot unmarshal number -2147483649 into Go struct field RenewRequest.fencingToken of type int32",
      ],
      [
        "acquire",
        '{"holder":"a","ttlSeconds":"10"}',
        "invalid json body: json: cannot unmarshal string into Go struct field AcquireRequest.ttlSeconds of type int32",
      ],
      [
        "acquire",
        '{"holder":5,"ttlSeconds":10}',
        "invalid json body: json: cannot unmarshal number into Go struct field AcquireRequest.holder of type string",
      ],
      [
        "acquire",
        '{"holder":true,"ttlSeconds":10}',
        "invalid json body: json: cannot unmarshal bool into Go struct field AcquireRequest.holder of type string",
      ],
      [
        "acquire",
        "[1]",
        "invalid json body: json: cannot unmarshal array into Go value of type api.AcquireRequest",
      ],
      // Go's decoder's own words for the other shapes and fields.
      [
        "renew",
        "[]",
        "invalid json body: json: cannot unmarshal array into Go value of type api.RenewRequest",
      ],
      [
        "release",
        '"x"',
        "invalid json body: json: cannot unmarshal string into Go value of type api.ReleaseRequest",
      ],
      [
        "acquire",
        "1",
        "invalid json body: json: cannot unmarshal number into Go value of type api.AcquireRequest",
      ],
      [
        "renew",
        '{"holder":"a","fencingToken":"1","ttlSeconds":1}',
        "invalid json body: json: cannot unmarshal string into Go struct field RenewRequest.fencingToken of type int32",
      ],
      [
        "release",
        '{"holder":"a","fencingToken":2147483648}',
        "invalid json body: json: cannot unmarshal number 2147483648 into Go struct field ReleaseRequest.fencingToken of type int32",
      ],
      [
        "release",
        '{"holder":"a","fencingToken":true}',
        "invalid json body: json: cannot unmarshal bool into Go struct field ReleaseRequest.fencingToken of type int32",
      ],
      [
        "acquire",
        '{"HOLDER":{}}',
        "invalid json body: json: cannot unmarshal object into Go struct field AcquireRequest.holder of type string",
      ],
      [
        "acquire",
        '{"holder":"a","ttlSeconds":[1]}',
        "invalid json body: json: cannot unmarshal array into Go struct field AcquireRequest.ttlSeconds of type int32",
      ],
      [
        "acquire",
        '{"holder":"a","ttlSeconds":-1.5e2}',
        "invalid json body: json: cannot unmarshal number -1.5e2 into Go struct field AcquireRequest.ttlSeconds of type int32",
      ],
      [
        "acquire",
        '{"h\\u00e9\\u0001":1}',
        'invalid json body: json: unknown field "hé\\x01"',
      ],
      // The first error in document order wins.
      [
        "acquire",
        '{"zz":1,"ttlSeconds":"x"}',
        'invalid json body: json: unknown field "zz"',
      ],
      // A decode error beats trailing data.
      [
        "acquire",
        '{"ttlSeconds":"x"} {}',
        "invalid json body: json: cannot unmarshal string into Go struct field AcquireRequest.ttlSeconds of type int32",
      ],
    ];
    for (const [op, body, message] of cases) {
      const a = await rpc(h.server, op as "acquire", body);
      assert.equal(a.status, 400, `${op} ${body}`);
      assert.equal(a.text, errorBody(message), `${op} ${body}`);
    }
  });
});

Deno.test("trailing data after the first value is 'request body must contain one JSON object'", async () => {
  await withServer({}, async (h) => {
    for (const tail of [" {}", "x", '{"holder":"b"}', " null"]) {
      const a = await rpc(
        h.server,
        "acquire",
        '{"holder":"a","ttlSeconds":1}' + tail,
      );
      assert.equal(a.status, 400, tail);
      assert.equal(
        a.text,
        errorBody("request body must contain one JSON object"),
      );
    }
    const ws = await rpc(
      h.server,
      "acquire",
      '{"holder":"a","ttlSeconds":1}\n \t',
    );
    assert.equal(ws.status, 200, "trailing whitespace is fine");
  });
});

Deno.test("Go decoder leniencies: case-insensitive names, null fields, int32 bounds", async () => {
  await withServer({}, async (h) => {
    const ci = await rpc(
      h.server,
      "acquire",
      '{"HOLDER":"a","TTLSeconds":2147483647}',
    );
    assert.equal(ci.status, 200);
    assert.match(ci.text, /^\{"acquired":true,"holder":"a","fencingToken":1,/);
    const nullTtl = await rpc(
      h.server,
      "acquire",
      '{"holder":"a","ttlSeconds":null}',
    );
    assert.equal(nullTtl.text, errorBody("ttlSeconds must be positive"));
    const nullBody = await rpc(h.server, "acquire", "null");
    assert.equal(nullBody.text, errorBody("holder is required"));
    const escaped = await rpc(
      h.server,
      "acquire",
      '{"holder":"\\u0061","ttlSeconds":1}',
      {},
      "/v1alpha1/namespaces/prod/leases/esc",
    );
    assert.match(escaped.text, /"holder":"a"/);
  });
});

Deno.test("field checks: holder, fencingToken, ttlSeconds", async () => {
  await withServer({}, async (h) => {
    const cases: [string, Record<string, unknown>, string][] = [
      ["acquire", { ttlSeconds: 1 }, "holder is required"],
      [
        "renew",
        { holder: "", fencingToken: 1, ttlSeconds: 1 },
        "holder is required",
      ],
      [
        "acquire",
        { holder: "x".repeat(254), ttlSeconds: 1 },
        "holder must be at most 253 bytes",
      ],
      // 127 two-byte characters are 254 bytes.
      [
        "acquire",
        { holder: "é".repeat(127), ttlSeconds: 1 },
        "holder must be at most 253 bytes",
      ],
      [
        "renew",
        { holder: "a", ttlSeconds: 1 },
        "fencingToken must be non-zero",
      ],
      [
        "renew",
        { holder: "a", fencingToken: 1 },
        "ttlSeconds must be positive",
      ],
      [
        "acquire",
        { holder: "a", ttlSeconds: 0 },
        "ttlSeconds must be positive",
      ],
      [
        "acquire",
        { holder: "a", ttlSeconds: -5 },
        "ttlSeconds must be positive",
      ],
    ];
    for (const [op, body, message] of cases) {
      const a = await rpc(h.server, op as "acquire", body);
      assert.equal(a.status, 400, `${op} ${JSON.stringify(body)}`);
      assert.equal(a.text, errorBody(message), `${op} ${JSON.stringify(body)}`);
    }
    const max = await rpc(h.server, "acquire", {
      holder: "x".repeat(253),
      ttlSeconds: 1,
    });
    assert.equal(max.status, 200);
  });
});

Deno.test("body limit: 4096 bytes pass, 4097 are 413, streamed or declared", async () => {
  await withServer({}, async (h) => {
    const base = '{"holder":"a","ttlSeconds":1}';
    const exact = base + " ".repeat(4096 - base.length);
    assert.equal((await rpc(h.server, "acquire", exact)).status, 200);
    const over = await rpc(h.server, "acquire", exact + " ");
    assert.equal(over.status, 413);
    assert.equal(
      over.text,
      errorBody("request body must be at most 4096 bytes"),
    );
    // Without a Content-Length (chunked), the limit still holds.
    const chunk = new TextEncoder().encode(" ".repeat(1000));
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < 5; i++) c.enqueue(chunk);
        c.close();
      },
    });
    const streamed = await send(h.server, `${LEASE}/acquire`, {
      method: "POST",
      body: stream,
    });
    assert.equal(streamed.status, 413);
    // 413 comes before any JSON check.
    const garbage = await rpc(h.server, "acquire", "x".repeat(5000));
    assert.equal(garbage.status, 413);
  });
});

// --- keys and authorization -------------------------------------------------

Deno.test("path keys are validated after the body and the authorization checks", async () => {
  await withServer({}, async (h) => {
    const body = { holder: "a", ttlSeconds: 1 };
    const ns = await rpc(
      h.server,
      "acquire",
      body,
      {},
      "/v1alpha1/namespaces/Prod/leases/x",
    );
    assert.equal(ns.status, 400);
    assert.match(ns.text, /^\{"error":"invalid namespace \\"Prod\\": /);
    const name = await rpc(
      h.server,
      "acquire",
      body,
      {},
      "/v1alpha1/namespaces/prod/leases/a..b",
    );
    assert.match(name.text, /^\{"error":"invalid name \\"a..b\\": /);
    const longKey = await rpc(
      h.server,
      "acquire",
      body,
      {},
      `/v1alpha1/namespaces/${"n".repeat(63)}/leases/${"m".repeat(190)}`,
    );
    assert.match(longKey.text, /^\{"error":"invalid key /);
    const escaped = await rpc(
      h.server,
      "acquire",
      body,
      {},
      "/v1alpha1/namespaces/prod/leases/%41",
    );
    assert.match(
      escaped.text,
      /^\{"error":"invalid name \\"A\\": /,
      "segments are percent-decoded",
    );
    const dotted = await rpc(
      h.server,
      "acquire",
      body,
      {},
      "/v1alpha1/namespaces/prod/leases/a.b-c",
    );
    assert.equal(dotted.status, 200);
    // The body checks come first.
    const first = await rpc(
      h.server,
      "acquire",
      { holder: "a" },
      {},
      "/v1alpha1/namespaces/Prod/leases/x",
    );
    assert.equal(first.text, errorBody("ttlSeconds must be positive"));
  });
});

Deno.test("API keys: bearer prefix exact, tenant rule on the holder, check order", async () => {
  const token = "s3cret-token";
  const rotated = "next-token";
  const keys = [
    `team:${await sha256Hex(token)}`,
    `team:${(await sha256Hex(rotated)).toUpperCase()}`,
  ];
  await withServer({ apiKeys: keys }, async (h) => {
    const auth = { authorization: `Bearer ${token}` };
    const body = { holder: "team/pod-1", ttlSeconds: 10 };
    const e401m = errorBody("missing or malformed Authorization header");
    for (
      const header of [
        undefined,
        "bearer " + token,
        "Bearer ",
        "Basic x",
        token,
      ]
    ) {
      const a = await rpc(
        h.server,
        "acquire",
        body,
        header === undefined ? {} : { authorization: header },
      );
      assert.equal(a.status, 401, String(header));
      assert.equal(a.text, e401m, String(header));
    }
    const wrong = await rpc(h.server, "acquire", body, {
      authorization: "Bearer nope",
    });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.text, errorBody("unauthorized"));

    assert.equal((await rpc(h.server, "acquire", body, auth)).status, 200);
    const tenantItself = await rpc(
      h.server,
      "acquire",
      { holder: "team", ttlSeconds: 1 },
      auth,
      "/v1alpha1/namespaces/prod/leases/b",
    );
    assert.equal(tenantItself.status, 200);
    const rot = await rpc(h.server, "renew", { ...body, fencingToken: 1 }, {
      authorization: `Bearer ${rotated}`,
    });
    assert.match(
      rot.text,
      /"acquired":true/,
      "a second key with the same id works",
    );
    for (const holder of ["teamx", "other/team", "Team/pod"]) {
      const a = await rpc(
        h.server,
        "acquire",
        { holder, ttlSeconds: 10 },
        auth,
      );
      assert.equal(a.status, 403, holder);
      assert.equal(
        a.text,
        errorBody("holder not authorized for this identity"),
      );
    }
    const releaseEmpty = await rpc(
      h.server,
      "release",
      { fencingToken: 1 },
      auth,
    );
    assert.equal(
      releaseEmpty.text,
      errorBody("holder is required"),
      "the holder check comes before the tenant's",
    );

    // Order: 401 before 413 before 400 before 403 before key validation.
    const big = "x".repeat(5000);
    assert.equal((await rpc(h.server, "acquire", big)).text, e401m);
    assert.equal(
      (await rpc(h.server, "acquire", big, { authorization: "Bearer nope" }))
        .text,
      errorBody("unauthorized"),
    );
    assert.equal((await rpc(h.server, "acquire", big, auth)).status, 413);
    assert.equal(
      (await rpc(h.server, "acquire", "{", auth)).text,
      errorBody("invalid json body: unexpected EOF"),
    );
    assert.equal(
      (await rpc(h.server, "acquire", { holder: "evil", ttlSeconds: 0 }, auth))
        .text,
      errorBody("ttlSeconds must be positive"),
    );
    assert.equal(
      (await rpc(h.server, "renew", { holder: "evil", ttlSeconds: 0 }, auth))
        .text,
      errorBody("fencingToken must be non-zero"),
    );
    assert.equal(
      (await rpc(h.server, "renew", { ttlSeconds: 0 }, auth)).text,
      errorBody("holder is required"),
    );
    assert.equal(
      (await rpc(
        h.server,
        "acquire",
        { holder: "evil", ttlSeconds: 1 },
        auth,
        "/v1alpha1/namespaces/BAD/leases/x",
      )).status,
      403,
      "authorization before key validation",
    );
    assert.equal(
      (await rpc(
        h.server,
        "release",
        { holder: "evil", fencingToken: 1 },
        auth,
      )).status,
      403,
      "authorization before the 409 of release",
    );

    // Health endpoints need no key.
    assert.equal((await send(h.server, "/healthz")).status, 200);
    assert.equal((await send(h.server, "/readyz")).status, 200);
  });
});

Deno.test("a malformed API key is refused at start without echoing it", async () => {
  for (const spec of ["just-a-token", "team:abc", ":" + "a".repeat(64)]) {
    await assert.rejects(
      startDevServer({ apiKeys: [spec] }),
      (e: Error) => {
        assert.match(e.message, /API key #1 is not "key-id:sha256hex"/);
        assert.ok(!e.message.includes(spec), "the key itself is not printed");
        return true;
      },
    );
  }
});

// --- transport: request ids, routing, health --------------------------------

Deno.test("X-Request-Id: inbound honoured, else traceparent trace id, else 32 random hex", async () => {
  await withServer({}, async (h) => {
    const id = async (headers: Record<string, string>, path = "/healthz") =>
      (await send(h.server, path, { headers })).headers.get("x-request-id");
    assert.equal(await id({ "x-request-id": "abc_DEF-123" }), "abc_DEF-123");
    assert.equal(await id({ "x-request-id": "a".repeat(64) }), "a".repeat(64));
    const trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    const tp = `00-${trace}-00f067aa0ba902b7-01`;
    assert.equal(
      await id({ "x-request-id": "a".repeat(65), traceparent: tp }),
      trace,
    );
    assert.equal(
      await id({ "x-request-id": "has.dot", traceparent: tp }),
      trace,
    );
    assert.equal(await id({ traceparent: tp }), trace);
    // The real server's rule: two characters, "-", 32 lower-case hex, "-";
    // the version, the parent id, the flags and zero ids are not checked.
    for (
      const good of [
        `ff-${trace}-00f067aa0ba902b7-01`,
        `zz-${trace}-`,
        `00-${trace}-${"0".repeat(16)}-01`,
        `00-${trace}-00f067aa0ba902b7-01-extra`,
      ]
    ) {
      assert.equal(await id({ traceparent: good }), trace, good);
    }
    const zeros = "0".repeat(32);
    assert.equal(await id({ traceparent: `00-${zeros}-0-0` }), zeros);
    for (
      const bad of [
        `00-${trace.toUpperCase()}-00f067aa0ba902b7-01`,
        `00-${trace}`,
        `0-${trace}-00f067aa0ba902b7-01`,
        `00_${trace}-00f067aa0ba902b7-01`,
        `00-${trace}_00f067aa0ba902b7-01`,
      ]
    ) {
      const got = await id({ traceparent: bad });
      assert.match(got ?? "", /^[0-9a-f]{32}$/, bad);
      assert.notEqual(got, trace, bad);
    }
    const a = await id({});
    const b = await id({});
    assert.match(a ?? "", /^[0-9a-f]{32}$/);
    assert.notEqual(a, b);
    // Echoed on every kind of response.
    for (
      const [path, init] of [
        ["/nope", {}],
        [`${LEASE}/acquire`, {}],
        ["/v1alpha1//x", {}],
        [`${LEASE}/release`, {
          method: "POST",
          body: '{"holder":"a","fencingToken":1}',
        }],
        [`${LEASE}/acquire`, { method: "POST", body: "" }],
      ] as [string, RequestInit][]
    ) {
      const r = await send(h.server, path, {
        ...init,
        headers: { "x-request-id": "echo-me" },
      });
      assert.equal(r.headers.get("x-request-id"), "echo-me", path);
    }
  });
});

Deno.test("routing: 404 page not found, 405 with Allow, 307 for empty and dot segments", async () => {
  await withServer({}, async (h) => {
    for (
      const path of [
        "/",
        "/v1alpha1/namespaces/prod/leases/x/steal",
        `${LEASE}/acquire/`,
        `${LEASE}/acquire/more`,
        "/v1/namespaces/prod/leases/x/acquire",
      ]
    ) {
      const r = await send(h.server, path, { method: "POST", body: "{}" });
      assert.equal(r.status, 404, path);
      assert.equal(r.text, "404 page not found\n");
      assert.equal(r.headers.get("content-type"), "text/plain; charset=utf-8");
    }
    for (const method of ["GET", "PUT", "DELETE", "PATCH"]) {
      const r = await send(h.server, `${LEASE}/renew`, { method });
      assert.equal(r.status, 405, method);
      assert.equal(r.headers.get("allow"), "POST");
      assert.equal(r.text, "Method Not Allowed\n");
      assert.equal(r.headers.get("content-type"), "text/plain; charset=utf-8");
    }
    const head = await send(h.server, `${LEASE}/renew`, { method: "HEAD" });
    assert.equal(head.status, 405);
    const postHealth = await send(h.server, "/healthz", { method: "POST" });
    assert.equal(postHealth.status, 405);
    assert.equal(postHealth.headers.get("allow"), "GET, HEAD");

    const redirect = await send(
      h.server,
      "/v1alpha1/namespaces//prod/leases/x/acquire?a=1",
      {
        method: "POST",
        body: '{"holder":"a","ttlSeconds":1}',
      },
    );
    assert.equal(redirect.status, 307);
    assert.equal(
      redirect.headers.get("location"),
      "/v1alpha1/namespaces/prod/leases/x/acquire?a=1",
    );
    assert.equal(redirect.text, "");
    assert.equal(
      h.server.store.get("prod", "x"),
      undefined,
      "a redirect acquires nothing",
    );
    assert.equal(redirect.headers.get("content-type"), null);
    const getRedirect = await send(h.server, "//healthz?");
    assert.equal(getRedirect.status, 307);
    assert.equal(
      getRedirect.headers.get("location"),
      "/healthz",
      "an empty query is dropped",
    );
    assert.equal(
      getRedirect.text,
      '<a href="/healthz">Temporary Redirect</a>.\n\n',
    );
    assert.equal(
      getRedirect.headers.get("content-type"),
      "text/html; charset=utf-8",
    );

    // Dot segments are cleaned the same way (fetch would remove them itself).
    const dots = await rawRequest(
      h.server,
      `POST /v1alpha1/namespaces/prod/./leases/x/../y/acquire HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`,
    );
    assert.match(dots, /^HTTP\/1\.1 307 /);
    assert.match(
      dots,
      /\r\nlocation: \/v1alpha1\/namespaces\/prod\/leases\/y\/acquire\r\n/i,
    );
    // Go's ServeMux escapes the cleaned path again: "%" becomes "%25", and
    // characters outside its path set are escaped; the query is kept as sent.
    const escapes = await rawRequest(
      h.server,
      `GET /x/../a%2Fb/(c)?q=%2F&r=' HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n`,
    );
    assert.match(escapes, /^HTTP\/1\.1 307 /);
    assert.match(escapes, /\r\nlocation: \/a%252Fb\/%28c%29\?q=%2F&r='\r\n/i);
    assert.ok(
      escapes.endsWith(
        `<a href="/a%252Fb/%28c%29?q=%2F&amp;r=&#39;">Temporary Redirect</a>.\n\n`,
      ),
      escapes,
    );
    const badEscape = await rawRequest(
      h.server,
      `POST ${
        LEASE.replace("checkout", "%zz")
      }/acquire HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`,
    );
    assert.match(badEscape, /^HTTP\/1\.1 400 /);
  });
});

Deno.test("healthz and readyz answer plain ok; readyz can be flipped to 503", async () => {
  await withServer({}, async (h) => {
    const health = await send(h.server, "/healthz");
    assert.equal(health.status, 200);
    assert.equal(health.text, "ok\n");
    assert.equal(
      health.headers.get("content-type"),
      "text/plain; charset=utf-8",
    );
    assert.equal((await send(h.server, "/readyz")).text, "ok\n");
    h.server.setReady(false);
    const notReady = await send(h.server, "/readyz");
    assert.equal(notReady.status, 503);
    assert.equal(notReady.text, "not ready\n");
    assert.equal(
      (await send(h.server, "/healthz")).status,
      200,
      "liveness unaffected",
    );
    h.server.setReady(true);
    assert.equal((await send(h.server, "/readyz")).status, 200);
    const head = await send(h.server, "/healthz", { method: "HEAD" });
    assert.equal(head.status, 200);
    assert.equal(head.text, "");
  });
});

// --- faults --------------------------------------------------------------------

async function until(cond: () => boolean, what: string): Promise<void> {
  await waitFor(cond, { timeoutMs: 10_000, what, intervalMs: 5 });
}

Deno.test("faults: failNext and failAll answer 500 internal error until cleared", async () => {
  await withServer({}, async (h) => {
    const body = { holder: "a", ttlSeconds: 10 };
    h.server.faults.failNext(2);
    for (let i = 0; i < 2; i++) {
      const r = await rpc(h.server, "acquire", body, {
        "x-request-id": `f${i}`,
      });
      assert.equal(r.status, 500);
      assert.equal(r.text, `{"error":"internal error","requestId":"f${i}"}\n`);
    }
    assert.equal((await rpc(h.server, "acquire", body)).status, 200);
    h.server.faults.failAll();
    for (let i = 0; i < 3; i++) {
      assert.equal(
        (await rpc(h.server, "renew", { ...body, fencingToken: 1 })).status,
        500,
      );
    }
    assert.equal(
      (await send(h.server, "/healthz")).status,
      200,
      "health is never faulted",
    );
    h.server.faults.clear();
    assert.equal(
      (await rpc(h.server, "renew", { ...body, fencingToken: 1 })).status,
      200,
    );
    assert.equal(h.server.rpcCount("acquire"), 3);
    assert.equal(h.server.rpcCount("renew"), 4);
    assert.equal(h.server.rpcCount("release"), 0);
  });
});

Deno.test("faults: a hanging request is answered once cleared, or 500 when the server closes", async () => {
  const h = { t: T0 } as Harness;
  h.server = await startDevServer({ now: () => h.t });
  h.server.faults.hangNext();
  const pending = rpc(h.server, "acquire", { holder: "a", ttlSeconds: 10 });
  await until(() => h.server.faults.hanging === 1, "the request to hang");
  // Others are not held once the single hang is used up.
  assert.equal((await send(h.server, "/healthz")).status, 200);
  h.server.faults.clear();
  const answered = await pending;
  assert.equal(answered.status, 200);
  assert.match(answered.text, /"acquired":true/);

  h.server.faults.hangAll();
  const stuck = [
    rpc(h.server, "renew", { holder: "a", fencingToken: 1, ttlSeconds: 10 }),
    rpc(h.server, "release", { holder: "a", fencingToken: 1 }),
  ];
  await until(() => h.server.faults.hanging === 2, "two requests to hang");
  await h.server.close();
  for (const r of await Promise.all(stuck)) {
    assert.equal(r.status, 500);
    assert.match(
      r.text,
      /^\{"error":"internal error","requestId":"[0-9a-f]{32}"\}\n$/,
    );
  }
  assert.equal(
    h.server.store.get("prod", "checkout")?.holder,
    "a",
    "nothing was released",
  );
});

Deno.test("faults: a hung request whose client gave up is still applied once cleared", async () => {
  await withServer({}, async (h) => {
    h.server.faults.hangAll();
    const ctl = new AbortController();
    const pending = fetch(`${h.server.url}${LEASE}/acquire`, {
      method: "POST",
      body: '{"holder":"a","ttlSeconds":1}',
      signal: ctl.signal,
    });
    await until(() => h.server.faults.hanging === 1, "the request to hang");
    ctl.abort();
    await assert.rejects(pending);
    assert.equal(h.server.store.get("prod", "checkout"), undefined);
    h.server.faults.clear();
    await until(() => h.server.faults.hanging === 0, "the hang to end");
    await until(
      () => h.server.store.get("prod", "checkout") !== undefined,
      "the late acquire",
    );
    assert.equal(h.server.store.get("prod", "checkout")?.holder, "a");
  });
});

// --- TLS ---------------------------------------------------------------------------

Deno.test({
  name: "TLS: serves HTTPS with a PEM cert and key for 127.0.0.1",
  ignore: opensslMissing() !== undefined,
  fn: async () => {
    await using pki = await makeTestPki({ names: ["127.0.0.1"] });
    await using server = await startDevServer({
      tls: { certFile: pki.serverCert, keyFile: pki.serverKey },
    });
    assert.match(server.url, /^https:\/\/127\.0\.0\.1:\d+$/);
    using client = Deno.createHttpClient({
      caCerts: [await Deno.readTextFile(pki.caCert)],
    });
    const res = await fetch(`${server.url}${LEASE}/acquire`, {
      method: "POST",
      body: '{"holder":"a","ttlSeconds":5}',
      client,
    });
    assert.equal(res.status, 200);
    assert.match(
      await res.text(),
      /^\{"acquired":true,"holder":"a","fencingToken":1,/,
    );
    // A client that does not trust the certificate cannot talk to it.
    await assert.rejects(fetch(`${server.url}/healthz`));
  },
});

Deno.test("a missing TLS file is a start-up error naming the file", async () => {
  await assert.rejects(
    startDevServer({
      tls: { certFile: "/nonexistent/c.pem", keyFile: "/nonexistent/k.pem" },
    }),
    /cannot read the TLS certificate \/nonexistent\/c\.pem/,
  );
});

Deno.test("a port already bound is a ListenError naming the address", async () => {
  await using first = await startDevServer();
  await assert.rejects(
    startDevServer({ port: first.port }),
    (e) => {
      assert.ok(e instanceof ListenError);
      assert.equal(
        e.message,
        `cannot listen on 127.0.0.1:${first.port}: address already in use`,
      );
      return true;
    },
  );
});
