/**
 * The seam between the lease client and the network: a transport sends one
 * POST and gives back the raw answer or a classified transport error. Three
 * implement it: Deno's `fetch` (the default: native TLS, one trust store and
 * a kept-alive connection per process); HTTP/1.1 over `Deno.startTls` (the
 * server-name override, which `fetch` cannot express); and `node:https`
 * (only for skip-verify, which neither can). All end in the same
 * {@linkcode TransportError} kinds, so one set of messages (here) serves all.
 *
 * @module
 */
import type { RawResponse } from "./answer.ts";
import type { LeaseFailure } from "./rpc.ts";
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
  | "other";

/**
 * The kind of a connection or TLS error from its text (Deno gives no codes):
 * the rustls, hyper and socket wording of Deno 2, the same whether `fetch`
 * or `Deno.connect` / `Deno.startTls` met it.
 *
 * @param detail The error's message (for `fetch`, its cause's).
 * @returns The kind; `other` for anything not recognised.
 */
export function kindOfTlsError(detail: string): TransportErrorKind {
  const rules: [RegExp, TransportErrorKind][] = [
    [/connection refused/i, "refused"],
    [/dns error|failed to lookup address/i, "dns"],
    [/InvalidContentType|corrupt message|wrong version number/i, "not-tls"],
    [/certificate expired|not valid yet|not valid before/i, "dates"],
    [/NotValidForName|not valid for name/i, "wrong-name"],
    [/CaUsedAsEndEntity/, "ca-as-leaf"],
    [/invalid peer certificate|UnknownIssuer|BadSignature/i, "untrusted"],
  ];
  return rules.find(([re]) => re.test(detail))?.[1] ?? "other";
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
   * Whether requests reach the server without a proxy; the presented
   * certificate is looked at only then (the probe connects directly, which
   * through a proxy could reach another host, or nothing). Default true.
   */
  direct?: boolean;
  /** Bounds the probe of the presented certificate. */
  signal: AbortSignal;
  /** The wall clock; default `Date.now`. */
  now?: () => number;
}

/**
 * The transport error as a failure a user can act on. A certificate that was
 * refused is looked at once more (its validity dates) so that an expired or
 * not-yet-valid one is said to be that, not untrusted.
 */
export async function describeTransportError(
  e: TransportError,
  ctx: ErrorContext,
): Promise<LeaseFailure> {
  const where = ctx.target.origin;
  const fail = (message: string): LeaseFailure => ({
    kind: "transport-error",
    message: `${where}: ${message}`,
  });
  switch (e.error) {
    case "refused":
      return fail(
        "connection refused; is the API server running and is --api-server / BERTH_API_SERVER right?",
      );
    case "dns":
      return fail(
        `cannot resolve ${ctx.target.hostname}; check --api-server / BERTH_API_SERVER and the cluster DNS`,
      );
    case "not-tls":
      return fail(
        "the TLS handshake failed: the server answered with something that is not TLS, it may not speak TLS (a plain-HTTP server?); check the URL's scheme (https:// or http://) and port",
      );
    case "wrong-name":
      return fail(
        `the server certificate is not valid for ${ctx.verifiedName}; if the certificate names another host, set --server-name / BERTH_SERVER_NAME to that name`,
      );
    case "ca-as-leaf":
      return fail(
        "the server certificate is a CA certificate (basicConstraints CA:TRUE, as a bare `openssl req -x509` makes one), which Deno's TLS refuses as a server's own certificate, in --ca-bundle-file / BERTH_CA_BUNDLE_FILE or not; through a proxy it cannot be verified the Go helper's way: reissue it with basicConstraints=CA:FALSE, or have a CA sign the server's certificate and pass the CA",
      );
    case "untrusted":
    case "dates": {
      const now = (ctx.now ?? Date.now)();
      const validity = ctx.direct === false
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
        );
      }
      if (validity !== undefined && now < validity.notBefore) {
        return fail(
          `the server certificate is not valid until ${
            iso(validity.notBefore)
          } (${nowText}); check this node's clock, or the certificate's start date`,
        );
      }
      if (e.error === "dates") {
        return fail(
          `the server certificate is outside its validity period (${nowText}); renew it or check this node's clock`,
        );
      }
      return fail(
        "the server certificate is not trusted; if the server uses a private CA, pass its certificate with --ca-bundle-file / BERTH_CA_BUNDLE_FILE",
      );
    }
    case "other":
      return fail(e.detail);
  }
}

function iso(ms: number): string {
  return new Date(ms).toISOString().replace(/\.000Z$/, "Z");
}
