/**
 * The seam between the lease client and the network: a transport sends one
 * POST and gives back the raw answer or a classified transport error. Two
 * implement it: Deno's `fetch` (`fetch_transport.ts`, the one transport of
 * the common path: native TLS, the proxy variables read by Deno itself, a
 * kept-alive connection) and `node:https` / `node:http`
 * (`node_transport.ts`, loaded only for what `fetch` cannot do: the
 * server-name override, skip-verify, a server certificate that is its own
 * CA, a port `fetch` refuses). Both end in the same
 * {@linkcode TransportError} kinds, classified here in one place (by error
 * code where the runtime gives one, else by the text of fetch's error or
 * its cause, one table), so one set of messages (here) serves both.
 *
 * @module
 */
import type { RawResponse } from "./answer.ts";
import { FIXES, type LeaseFailure } from "./rpc.ts";
import type { Target } from "./wire.ts";
import { presentedValidity } from "./tls_trust.ts";

/**
 * The most response body read. Real answers are a few hundred bytes; a
 * larger one is a misconfigured endpoint (a proxy page, a wrong URL), and
 * reading it unbounded would let it eat the sidecar's memory.
 */
export const MAX_RESPONSE_BYTES = 64 * 1024;

/**
 * The body chunks a transport collected, joined and decoded as UTF-8 (bad
 * bytes become U+FFFD, as `Response.text()` does).
 *
 * @param chunks The chunks in order.
 * @returns The body text.
 */
export function decodeChunks(chunks: Uint8Array[]): string {
  const body = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    body.set(c, at);
    at += c.length;
  }
  return new TextDecoder().decode(body);
}

/** One request as every transport sends it. */
export interface WireRequest {
  /** Path (with the base prefix) on the target. */
  path: string;
  /** Header names and values, sent as given. */
  headers: Record<string, string>;
  /** The JSON body. */
  body: string;
}

/** Why no answer came, in the terms the messages need. */
export type TransportErrorKind =
  | "refused"
  | "dns"
  /** The TLS handshake met something that is not TLS (a plain-HTTP server). */
  | "not-tls"
  /**
   * The answer was not HTTP at all: over `http://`, most often a TLS port
   * answering with a TLS alert (a rustls or Deno server, such as the
   * development server with `--tls-cert-file`).
   */
  | "not-http"
  /** The certificate chain does not lead to a trusted root. */
  | "untrusted"
  /**
   * The server presented a CA certificate as its own (a self-signed one
   * marked `CA:TRUE`), which is refused even when it is in the trust store.
   */
  | "ca-as-leaf"
  /** The certificate is outside its validity period. */
  | "dates"
  /** The certificate does not name the host (or the override). */
  | "wrong-name"
  /**
   * `fetch` refuses the URL's port outright, before any connection: a port
   * on the fetch standard's list of bad ports (6000, 6665-6669, 10080, ...).
   * The client then sends through the node transport (`node_fallback.ts`).
   */
  | "blocked-port"
  | "other";

/**
 * The texts `fetch`'s errors carry (its causes have no code or class, only
 * a message: the rustls, hyper and socket wording of Deno 2), one row per
 * kind, first match wins. `node:https` errors are classified by their code
 * first ({@linkcode ERROR_CODES}) and fall back to these rows.
 */
export const ERROR_TEXTS: readonly (readonly [RegExp, TransportErrorKind])[] = [
  [/connection refused/i, "refused"],
  [/dns error|failed to lookup address/i, "dns"],
  [/InvalidContentType|corrupt message|wrong version number/i, "not-tls"],
  [/invalid HTTP version parsed/i, "not-http"],
  [/certificate expired|not valid yet|not valid before/i, "dates"],
  [/NotValidForName|not valid for name/i, "wrong-name"],
  [/CaUsedAsEndEntity/, "ca-as-leaf"],
  // fetch's own error, with no cause: "Fetch failed: Requests to port 6000
  // are blocked". The one place that knows which ports fetch blocks is fetch.
  [/Requests to port \d+ are blocked/i, "blocked-port"],
  [/invalid peer certificate|UnknownIssuer|BadSignature/i, "untrusted"],
];

/**
 * The codes `node:https` (Deno's implementation) gives its errors. It reports
 * an expired, a not-yet-valid and an untrusted certificate alike
 * (`UNABLE_TO_VERIFY_LEAF_SIGNATURE`); the message tells them apart by a look
 * at the certificate ({@linkcode describeTransportError}).
 */
export const ERROR_CODES: Readonly<Record<string, TransportErrorKind>> = {
  ECONNREFUSED: "refused",
  ENOTFOUND: "dns",
  EAI_AGAIN: "dns",
  ERR_SSL_WRONG_VERSION_NUMBER: "not-tls",
  // node:http's parser meeting a TLS alert on an http:// URL.
  HPE_INVALID_CONSTANT: "not-http",
  ERR_TLS_CERT_ALTNAME_INVALID: "wrong-name",
  CERT_HAS_EXPIRED: "dates",
  CERT_NOT_YET_VALID: "dates",
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: "untrusted",
  UNABLE_TO_GET_ISSUER_CERT: "untrusted",
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: "untrusted",
  SELF_SIGNED_CERT_IN_CHAIN: "untrusted",
  DEPTH_ZERO_SELF_SIGNED_CERT: "untrusted",
  CERT_UNTRUSTED: "untrusted",
  CERT_SIGNATURE_FAILURE: "untrusted",
};

/**
 * The kind of an error's text, by {@linkcode ERROR_TEXTS}.
 *
 * @param detail The error's message (for `fetch`, its cause's).
 * @returns The kind; `other` for anything not recognised.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(
 *   kindOfErrorText("client error (Connect): tcp connect error: Connection refused (os error 111)"),
 *   "refused",
 * );
 * ```
 */
export function kindOfErrorText(detail: string): TransportErrorKind {
  return ERROR_TEXTS.find(([re]) => re.test(detail))?.[1] ?? "other";
}

/**
 * A failed request's error as a {@linkcode TransportError}: by its code
 * (`node:https`), else by its text, or its cause's (`fetch` throws a
 * `TypeError` whose cause says what happened).
 *
 * @param e What the request threw or emitted.
 * @returns The kind and the text to show for `other` (the URL, which the
 * caller's message names already, cut from fetch's wording).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const e = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" });
 * assert.equal(classifyError(e).error, "refused");
 * ```
 */
export function classifyError(e: unknown): TransportError {
  const err = e as { message?: unknown; cause?: unknown; code?: unknown };
  const inner = err?.cause instanceof Error ? err.cause : e;
  const message = inner instanceof Error ? inner.message : String(inner);
  const code = typeof err?.code === "string" ? err.code : undefined;
  const detail = (code === undefined ? message : `${code}: ${message}`)
    .replace(
      /^error sending request (?:from \S+ )?for (?:url \([^)]*\)|\S+)(?: \([^)]*\))?: /,
      "",
    );
  const kind = code !== undefined && code in ERROR_CODES
    ? ERROR_CODES[code]
    : kindOfErrorText(message);
  return { error: kind, detail };
}

/** A request that ended without an answer. */
export interface TransportError {
  /** The class of failure. */
  error: TransportErrorKind;
  /** The underlying error's text, for `other`. */
  detail: string;
}

/** An answer whose body was larger than {@linkcode MAX_RESPONSE_BYTES}. */
export interface TooLarge {
  /** The status line's code. */
  tooLarge: number;
  /** The `X-Request-Id` header, if any. */
  requestId?: string;
}

/** Sends one POST; resolves, never rejects (an abort resolves as an error too). */
export interface Transport {
  /** Sends `request`, ended early by `signal`. */
  send(
    request: WireRequest,
    signal: AbortSignal,
  ): Promise<RawResponse | TransportError | TooLarge>;
}

/** Where a transport error happened, for its message. */
export interface ErrorContext {
  /** The API server. */
  target: Target;
  /** The name the certificate is verified against (override or URL host). */
  verifiedName: string;
  /** The TLS name override, for the probe of the presented certificate. */
  serverName?: string;
  /**
   * The variable naming the proxy requests may go through (`HTTPS_PROXY`,
   * ...), if any: then a refusal may be the proxy's, and the presented
   * certificate is not looked at (the probe connects directly, which
   * through a proxy could reach another host, or nothing).
   */
  proxy?: string;
  /** Bounds the probe of the presented certificate. */
  signal: AbortSignal;
  /** The wall clock; default `Date.now`. */
  now?: () => number;
}

/**
 * The transport error as a failure a user can act on. A certificate that was
 * refused is looked at once more (its validity dates) so that an expired or
 * not-yet-valid one is said to be that, not untrusted. The failures no wait
 * can heal (the URL's scheme, the certificate) carry `fix`; a refused, reset,
 * timed-out or unresolved connection does not.
 *
 * @param e The transport error.
 * @param ctx Where it happened.
 * @returns A `transport-error` failure naming the server.
 */
export async function describeTransportError(
  e: TransportError,
  ctx: ErrorContext,
): Promise<LeaseFailure> {
  const where = ctx.target.origin;
  const fail = (message: string, fix?: string): LeaseFailure => ({
    kind: "transport-error",
    message: `${where}: ${message}`,
    ...(fix === undefined ? {} : { fix }),
  });
  switch (e.error) {
    case "refused":
      return fail(
        ctx.proxy === undefined
          ? "connection refused; is the API server running and is --api-server / BERTH_API_SERVER right?"
          : `connection refused, by the proxy ${ctx.proxy} names or by the API server behind it; check ${ctx.proxy} and --api-server / BERTH_API_SERVER`,
      );
    case "dns":
      // Through a proxy this node resolves the proxy's host (an http or https
      // proxy resolves the API server's; NO_PROXY or socks5:// leave it here).
      return fail(
        ctx.proxy === undefined
          ? `cannot resolve ${ctx.target.hostname}; check --api-server / BERTH_API_SERVER and the cluster DNS`
          : `cannot resolve the host of the proxy ${ctx.proxy} names, or ${ctx.target.hostname}; check ${ctx.proxy} (a password with an unencoded "/" ends the host early: percent-encode it as %2F), --api-server / BERTH_API_SERVER and the cluster DNS`,
      );
    case "not-tls":
      return fail(
        "the TLS handshake failed: the server answered with something that is not TLS, it may not speak TLS (a plain-HTTP server?); check the URL's scheme (https:// or http://) and port",
        FIXES.useHttp,
      );
    case "not-http":
      // Over http://, a port that completes a TLS handshake is a TLS port:
      // no wait heals that. Anything else is said as it is, without a fix.
      if (
        !ctx.target.secure && ctx.proxy === undefined &&
        await presentedValidity(ctx.target, ctx.serverName, ctx.signal) !==
          undefined
      ) {
        return fail(
          "the server answered with something that is not HTTP, and the port speaks TLS: the URL says http:// for a TLS port",
          FIXES.useHttps,
        );
      }
      return fail(
        `the server answered with something that is not HTTP (${e.detail}); check the URL's scheme (https:// or http://) and port`,
      );
    case "wrong-name":
      return fail(
        `the server certificate is not valid for ${ctx.verifiedName}; if the certificate names another host, set --server-name / BERTH_SERVER_NAME to that name`,
        FIXES.wrongName,
      );
    case "ca-as-leaf":
      return fail(
        "the server certificate is a CA certificate (basicConstraints CA:TRUE, as a bare `openssl req -x509` makes one), which Deno's TLS refuses as a server's own certificate, in --ca-bundle-file / BERTH_CA_BUNDLE_FILE or not; through a proxy it cannot be verified the Go helper's way: reissue it with basicConstraints=CA:FALSE, or have a CA sign the server's certificate and pass the CA",
        FIXES.caAsLeaf,
      );
    case "untrusted":
    case "dates": {
      const now = (ctx.now ?? Date.now)();
      const validity = ctx.proxy !== undefined
        ? undefined
        : await presentedValidity(
          ctx.target,
          ctx.serverName,
          ctx.signal,
        );
      const nowText = `this node's clock says ${iso(now)}`;
      if (validity !== undefined && now > validity.notAfter) {
        return fail(
          `the server certificate expired on ${
            iso(validity.notAfter)
          } (${nowText}); renew the server's certificate, or fix this node's clock`,
          FIXES.dates,
        );
      }
      if (validity !== undefined && now < validity.notBefore) {
        return fail(
          `the server certificate is not valid until ${
            iso(validity.notBefore)
          } (${nowText}); check this node's clock, or the certificate's start date`,
          FIXES.dates,
        );
      }
      if (e.error === "dates") {
        return fail(
          `the server certificate is outside its validity period (${nowText}); renew it or check this node's clock`,
          FIXES.dates,
        );
      }
      return fail(
        "the server certificate is not trusted; if the server uses a private CA, pass its certificate with --ca-bundle-file / BERTH_CA_BUNDLE_FILE",
        FIXES.untrusted,
      );
    }
    // Only a transport without the node fallback gets here; the client's
    // never does (it sends such a request through node:http(s)).
    case "blocked-port":
    case "other":
      return fail(e.detail);
  }
}

function iso(ms: number): string {
  return new Date(ms).toISOString().replace(/\.000Z$/, "Z");
}
