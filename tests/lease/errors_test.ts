/**
 * The one table of transport errors: one test per row with the wording Deno
 * 2.9's fetch gives (its causes carry text only), and every code
 * `node:https` gives that the table names; then the messages and fixes.
 */
import assert from "node:assert/strict";
import { configFix, FIXES } from "../../lib/lease/rpc.ts";
import {
  classifyError,
  describeTransportError,
  ERROR_TABLE,
  type TransportErrorKind,
} from "../../lib/lease/errors.ts";
import { parseApiServer } from "../../lib/lease/wire.ts";

/** A fetch error as Deno throws it: a TypeError whose cause says what happened. */
function fetchError(cause: string): TypeError {
  return new TypeError("fetch failed", {
    cause: new Error(
      `error sending request for url (https://127.0.0.1:8443/v1alpha1/namespaces/a/leases/b/renew): ${cause}`,
    ),
  });
}

/** One row each: the text as Deno 2.9's fetch words it, and its kind. */
const ROWS: [string, TransportErrorKind][] = [
  [
    "client error (Connect): tcp connect error: Connection refused (os error 111)",
    "refused",
  ],
  [
    "client error (Connect): dns error: failed to lookup address information: Name or service not known",
    "dns",
  ],
  [
    "client error (Connect): received corrupt message of type InvalidContentType",
    "not-tls",
  ],
  [
    "client error (SendRequest): invalid HTTP version parsed",
    "not-http",
  ],
  [
    "client error (SendRequest): connection closed before message completed",
    "reset",
  ],
  [
    "client error (Connect): invalid peer certificate: certificate expired: verification time 1796179573 (UNIX), but certificate is not valid after 1580515200 (215664373 seconds ago)",
    "dates",
  ],
  [
    'client error (Connect): invalid peer certificate: certificate not valid for name "127.0.0.1"; certificate is only valid for DnsName("berth.test")',
    "wrong-name",
  ],
  [
    "client error (Connect): invalid peer certificate: Other(OtherError(CaUsedAsEndEntity))",
    "ca-as-leaf",
  ],
  // fetch's own error, no cause (the real shape: see the test below).
  ["Fetch failed: Requests to port 6000 are blocked", "blocked-port"],
  [
    "client error (Connect): invalid peer certificate: UnknownIssuer",
    "untrusted",
  ],
];

for (const [text, kind] of ROWS) {
  Deno.test(`fetch's "${text.slice(23, 80)}..." is ${kind}`, () => {
    assert.equal(classifyError(new Error(text)).error, kind);
    assert.deepEqual(classifyError(fetchError(text)), {
      error: kind,
      detail: text,
    });
  });
}

Deno.test("every row of the table is tested, and the rows are in the order tested", () => {
  const kinds = ERROR_TABLE.map(([, k]) => k);
  assert.deepEqual(kinds, ROWS.map(([, k]) => k));
});

Deno.test("a certificate that is not yet valid is a dates one too", () => {
  assert.equal(
    classifyError(
      new Error(
        "invalid peer certificate: certificate not valid yet: verification time 1796179573 (UNIX), but certificate is not valid before 2208988800 (412809227 seconds in future)",
      ),
    ).error,
    "dates",
  );
});

Deno.test("anything else is other, with fetch's wording of the URL cut (the message names the server)", () => {
  const text = "client error (Connect): unsuccessful tunnel";
  assert.deepEqual(classifyError(fetchError(text)), {
    error: "other",
    detail: text,
  });
  assert.equal(
    classifyError(
      fetchError(
        "client error (Connect): Connection reset by peer (os error 104)",
      ),
    ).error,
    "reset",
  );
  // Deno 2.9's other wording, once a connection was made: its local
  // address, the URL unbracketed, the peer address.
  assert.deepEqual(
    classifyError(
      new TypeError("fetch failed", {
        cause: new Error(
          "error sending request from 127.0.0.1:45068 for http://127.0.0.1:37741/v1alpha1/namespaces/a/leases/b/acquire (127.0.0.1:37741): client error (SendRequest): connection closed before message completed",
        ),
      }),
    ),
    {
      error: "reset",
      detail:
        "client error (SendRequest): connection closed before message completed",
    },
  );
});

Deno.test("this Deno's fetch refuses the fetch standard's bad ports before any connection, and the table knows its refusal; a neighbouring port is tried", async () => {
  const refusal = async (url: string) => {
    try {
      await fetch(url, {
        method: "POST",
        body: "{}",
        signal: AbortSignal.timeout(5_000),
      });
      return undefined;
    } catch (e) {
      return classifyError(e);
    }
  };
  for (const port of [1, 6000, 6665, 6669, 10080]) {
    for (const scheme of ["http", "https"]) {
      assert.deepEqual(await refusal(`${scheme}://127.0.0.1:${port}/x`), {
        error: "blocked-port",
        detail: `Fetch failed: Requests to port ${port} are blocked`,
      });
    }
  }
  // Whatever listens there (or nothing), fetch tries to connect.
  for (const port of [5999, 6001, 6664, 6670, 10079, 10081]) {
    const e = await refusal(`http://127.0.0.1:${port}/x`);
    assert.notEqual(e?.error, "blocked-port", String(port));
  }
});

Deno.test("node:https errors are classified by their code (every one in the table), named in the detail", () => {
  const cases: [string, string, TransportErrorKind][] = [
    ["ECONNREFUSED", "connect ECONNREFUSED 127.0.0.1:1", "refused"],
    ["ENOTFOUND", "getaddrinfo ENOTFOUND nonexistent.invalid", "dns"],
    ["EAI_AGAIN", "getaddrinfo EAI_AGAIN berth.example", "dns"],
    [
      "ERR_SSL_WRONG_VERSION_NUMBER",
      "received corrupt message of type InvalidContentType (SSL routines:ssl3_get_record:wrong version number)",
      "not-tls",
    ],
    [
      "ERR_TLS_CERT_ALTNAME_INVALID",
      "Hostname/IP does not match certificate's altnames",
      "wrong-name",
    ],
    [
      "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
      "unable to verify the first certificate",
      "untrusted",
    ],
    [
      "UNABLE_TO_GET_ISSUER_CERT",
      "unable to get issuer certificate",
      "untrusted",
    ],
    [
      "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
      "unable to get local issuer certificate",
      "untrusted",
    ],
    [
      "SELF_SIGNED_CERT_IN_CHAIN",
      "self-signed certificate in certificate chain",
      "untrusted",
    ],
    ["DEPTH_ZERO_SELF_SIGNED_CERT", "self-signed certificate", "untrusted"],
    ["CERT_UNTRUSTED", "certificate not trusted", "untrusted"],
    ["CERT_SIGNATURE_FAILURE", "certificate signature failure", "untrusted"],
    ["CERT_HAS_EXPIRED", "certificate has expired", "dates"],
    ["CERT_NOT_YET_VALID", "certificate is not yet valid", "dates"],
    // node:http reading a TLS alert as an answer.
    [
      "HPE_INVALID_CONSTANT",
      "Parse Error: Expected HTTP/, RTSP/ or ICE/",
      "not-http",
    ],
    [
      "ECONNRESET",
      "Client network socket disconnected before secure TLS connection was established",
      "reset",
    ],
    ["ECONNRESET", "socket hang up", "reset"],
  ];
  for (const [code, message, kind] of cases) {
    const e = Object.assign(new Error(message), { code });
    assert.deepEqual(
      classifyError(e),
      { error: kind, detail: `${code}: ${message}` },
      code,
    );
  }
});

Deno.test("the scheme and the certificate failures name their fix; refused, DNS and the rest do not (they may heal)", async () => {
  const ctx = {
    target: parseApiServer("https://berth.example:8443"),
    // Through a proxy: no second look at the certificate.
    proxy: "HTTPS_PROXY",
    signal: new AbortController().signal,
  };
  const want: [TransportErrorKind, string | undefined][] = [
    ["not-tls", FIXES.useHttp],
    // Through a proxy the port is not probed for TLS: no fix.
    ["not-http", undefined],
    ["reset", undefined],
    ["untrusted", FIXES.untrusted],
    ["wrong-name", FIXES.wrongName],
    ["ca-as-leaf", FIXES.caAsLeaf],
    ["dates", FIXES.dates],
    ["refused", undefined],
    ["dns", undefined],
    ["blocked-port", undefined],
    ["other", undefined],
  ];
  for (const [error, fix] of want) {
    const f = await describeTransportError({ error, detail: "d" }, ctx);
    assert.equal(f.kind, "transport-error");
    assert.equal(configFix(f), fix, error);
  }
  assert.match(FIXES.useHttp, /^use http:\/\//);
  assert.match(FIXES.untrusted, /--ca-bundle-file \/ BERTH_CA_BUNDLE_FILE/);
  assert.match(FIXES.wrongName, /--server-name \/ BERTH_SERVER_NAME/);
});

Deno.test("a name that does not resolve with a proxy set names the proxy's host first (an http or https proxy resolves the API server's itself)", async () => {
  const describe = (proxy: string | undefined) =>
    describeTransportError({ error: "dns", detail: "d" }, {
      target: parseApiServer("https://berth.example:8443"),
      proxy,
      signal: new AbortController().signal,
    });
  const direct = await describe(undefined);
  assert.equal(
    direct.kind === "transport-error" && direct.message,
    "https://berth.example:8443: cannot resolve berth.example; check --api-server / BERTH_API_SERVER and the cluster DNS",
  );
  const proxied = await describe("HTTPS_PROXY");
  assert.match(
    proxied.kind === "transport-error" ? proxied.message : "",
    /cannot resolve the host of the proxy HTTPS_PROXY names, or berth\.example; check HTTPS_PROXY \(a password with an unencoded "\/" ends the host early: percent-encode it as %2F\)/,
  );
});

Deno.test("a reset over http:// asks once per client whether the port speaks TLS: a port that does not (an outage) is said as it is, without a fix, and not asked again", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let connections = 0;
  const serving = (async () => {
    for await (const conn of listener) connections++, conn.close();
  })();
  const origin = `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`;
  const reset = { error: "reset", detail: "connection closed" } as const;
  const signal = new AbortController().signal;
  try {
    const ctx = { target: parseApiServer(origin), signal };
    for (const _ of [1, 2]) {
      assert.deepEqual(await describeTransportError(reset, ctx), {
        kind: "transport-error",
        message: `${origin}: connection closed`,
      });
    }
    assert.equal(connections, 1);
    // Another client (its own target) asks for itself.
    await describeTransportError(reset, {
      ...ctx,
      target: parseApiServer(origin),
    });
    assert.equal(connections, 2);
  } finally {
    listener.close();
    await serving.catch(() => {});
  }
});
