/**
 * Why no answer came: both transports' errors classified by one table and
 * worded once, with a fix when no wait heals it.
 *
 * @module
 */
import { FIXES, type LeaseFailure } from "./rpc.ts";
import type { Target } from "./wire.ts";

/**
 * First match wins: the texts of `fetch`'s errors (no code or class, only
 * Deno 2's rustls, hyper and socket wording), and the codes `node:http(s)`
 * gives, matched as `CODE: message`; each kind is worded once below
 * (docs/lease-client.md, "Transport errors").
 */
export const ERROR_TABLE = [
  [/connection refused|ECONNREFUSED/i, "refused"],
  [/dns error|failed to lookup address|ENOTFOUND|EAI_AGAIN/i, "dns"],
  [/InvalidContentType|corrupt message|wrong.version.number/i, "not-tls"],
  // HPE_INVALID_CONSTANT: node:http's parser meeting a TLS alert.
  [/invalid HTTP version parsed|HPE_INVALID_CONSTANT/i, "not-http"],
  [/closed before message completed|reset by peer|ECONNRESET/i, "reset"],
  [
    /certificate expired|not valid (yet|before)|CERT_(HAS_EXPIRED|NOT_YET_VALID)/i,
    "dates",
  ],
  [
    /NotValidForName|not valid for name|ERR_TLS_CERT_ALTNAME_INVALID/i,
    "wrong-name",
  ],
  [/CaUsedAsEndEntity/, "ca-as-leaf"],
  // fetch's own error. Which ports it blocks is fetch's to say: no copy here.
  [/Requests to port \d+ are blocked/i, "blocked-port"],
  [
    /invalid peer certificate|UnknownIssuer|BadSignature|UNABLE_TO_(VERIFY_LEAF_SIGNATURE|GET_ISSUER_CERT)|SELF_SIGNED_CERT|CERT_(UNTRUSTED|SIGNATURE_FAILURE)/i,
    "untrusted",
  ],
] as const;

/** Why no answer came, in the terms the messages need. */
export type TransportErrorKind = (typeof ERROR_TABLE)[number][1] | "other";

/** A request that ended without an answer; `detail` is shown for `other`. */
export type TransportError = { error: TransportErrorKind; detail: string };

/**
 * A failed request's error (or its cause's: `fetch` throws a `TypeError`
 * whose cause says what happened) as a {@linkcode TransportError}, without
 * `fetch`'s wording of the URL, which the message names already.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const e = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" });
 * assert.equal(classifyError(e).error, "refused");
 * ```
 */
export function classifyError(e: unknown): TransportError {
  const err = e as { cause?: unknown; code?: unknown };
  const inner = err?.cause instanceof Error ? err.cause : e;
  const message = inner instanceof Error ? inner.message : String(inner);
  const code = typeof err?.code === "string" ? `${err.code}: ` : "";
  const detail = (code + message).replace(
    /^error sending request (?:from \S+ )?for (?:url \([^)]*\)|\S+)(?: \([^)]*\))?: /,
    "",
  );
  const error: TransportErrorKind =
    ERROR_TABLE.find(([re]) => re.test(detail))?.[1] ?? "other";
  return { error, detail };
}

/** Where a transport error happened; through a `proxy` a refusal may be its, and the certificate is not looked at directly. */
export interface ErrorContext {
  target: Target;
  serverName?: string;
  proxy?: string;
  signal: AbortSignal;
}

/**
 * The transport error as a `transport-error` naming the server. A refused
 * certificate is looked at once more (its dates): Deno's `node:https`
 * reports an expired, a not-yet-valid and an untrusted one alike.
 */
export async function describeTransportError(
  e: TransportError,
  ctx: ErrorContext,
): Promise<LeaseFailure> {
  const { target, proxy } = ctx;
  const fail = (message: string, fix?: string): LeaseFailure => ({
    kind: "transport-error",
    message: `${target.origin}: ${message}`,
    ...(fix === undefined ? {} : { fix }),
  });
  switch (e.error) {
    case "refused":
      return fail(
        proxy === undefined
          ? "connection refused; is the API server running and is --api-server / BERTH_API_SERVER right?"
          : `connection refused, by the proxy ${proxy} names or by the API server behind it; check ${proxy} and --api-server / BERTH_API_SERVER`,
      );
    case "dns":
      return fail(
        proxy === undefined
          ? `cannot resolve ${target.hostname}; check --api-server / BERTH_API_SERVER and the cluster DNS`
          : `cannot resolve the host of the proxy ${proxy} names, or ${target.hostname}; check ${proxy} (a password with an unencoded "/" ends the host early: percent-encode it as %2F), --api-server / BERTH_API_SERVER and the cluster DNS`,
      );
    case "not-tls":
      return fail(
        "the TLS handshake failed: the server answered with something that is not TLS, it may not speak TLS (a plain-HTTP server?); check the URL's scheme (https:// or http://) and port",
        FIXES.useHttp,
      );
    case "not-http":
    case "reset": {
      // Over http://, a port that completes a TLS handshake is a TLS port:
      // a TLS server not Go's closes on a plain request without a word.
      const what = e.error === "reset"
        ? `the server closed the connection without an answer (${e.detail})`
        : "the server answered with something that is not HTTP";
      if (!target.secure && await speaksTls(ctx)) {
        return fail(
          `${what}, and the port speaks TLS: the URL says http:// for a TLS port`,
          FIXES.useHttps,
        );
      }
      return fail(
        e.error === "reset"
          ? e.detail
          : `${what} (${e.detail}); check the URL's scheme (https:// or http://) and port`,
      );
    }
    case "wrong-name": {
      const name = ctx.serverName ?? target.hostname;
      return fail(
        `the server certificate is not valid for ${name}; if the certificate names another host, set --server-name / BERTH_SERVER_NAME to that name`,
        FIXES.wrongName,
      );
    }
    case "ca-as-leaf":
      return fail(
        "the server certificate is a CA certificate (basicConstraints CA:TRUE, as a bare `openssl req -x509` makes one), which Deno's TLS refuses as a server's own certificate, in --ca-bundle-file / BERTH_CA_BUNDLE_FILE or not; through a proxy it cannot be verified the Go helper's way: reissue it with basicConstraints=CA:FALSE, or have a CA sign the server's certificate and pass the CA",
        FIXES.caAsLeaf,
      );
    case "untrusted":
    case "dates": {
      const now = Date.now();
      const dates = await presentedValidity(ctx);
      const clock = `this node's clock says ${iso(now)}`;
      if (dates !== undefined && now > dates.notAfter) {
        const end = iso(dates.notAfter);
        return fail(
          `the server certificate expired on ${end} (${clock}); renew the server's certificate, or fix this node's clock`,
          FIXES.dates,
        );
      }
      if (dates !== undefined && now < dates.notBefore) {
        const start = iso(dates.notBefore);
        return fail(
          `the server certificate is not valid until ${start} (${clock}); check this node's clock, or the certificate's start date`,
          FIXES.dates,
        );
      }
      return e.error === "dates"
        ? fail(
          `the server certificate is outside its validity period (${clock}); renew it or check this node's clock`,
          FIXES.dates,
        )
        : fail(
          "the server certificate is not trusted; if the server uses a private CA, pass its certificate with --ca-bundle-file / BERTH_CA_BUNDLE_FILE",
          FIXES.untrusted,
        );
    }
    // The client hands a blocked port to node:http(s): never seen here.
    case "blocked-port":
    case "other":
      return fail(e.detail);
  }
}

type Validity = { notBefore: number; notAfter: number };

/** Per client (a client's `target` is its own), so an outage is not probed at every attempt. */
const tlsPorts = new WeakMap<Target, boolean>();

/** Whether the port completes a TLS handshake, any certificate accepted: asked once, within a short bound, never through a proxy. */
async function speaksTls(ctx: ErrorContext): Promise<boolean> {
  const cached = tlsPorts.get(ctx.target);
  if (cached !== undefined) return cached;
  const signal = AbortSignal.any([ctx.signal, AbortSignal.timeout(2_000)]);
  const known = await presentedValidity({ ...ctx, signal }) !== undefined;
  if (!ctx.signal.aborted && ctx.proxy === undefined) {
    tlsPorts.set(ctx.target, known);
  }
  return known;
}

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.000Z$/, "Z");

/**
 * The validity period of the certificate `target` presents, by a handshake
 * that verifies and sends nothing (through a proxy it could reach another
 * host); undefined when that fails too.
 */
async function presentedValidity(
  { target, serverName, proxy, signal }: ErrorContext,
): Promise<Validity | undefined> {
  if (proxy !== undefined || signal.aborted) return undefined;
  const tls = await import("node:tls");
  return await new Promise((resolve) => {
    const name = serverName ?? target.hostname;
    const socket = tls.connect({
      host: target.hostname,
      port: target.port,
      // SNI takes names only, never an address.
      servername: /^[\d.]+$|:/.test(name) ? undefined : name,
      rejectUnauthorized: false,
    });
    const done = (v?: Validity) => {
      signal.removeEventListener("abort", onAbort);
      socket.destroy();
      resolve(v);
    };
    const onAbort = () => done();
    signal.addEventListener("abort", onAbort, { once: true });
    socket.on("error", () => done());
    socket.on("secureConnect", () => {
      const cert = socket.getPeerCertificate();
      const notBefore = Date.parse(cert?.valid_from ?? "");
      // Unknown dates (NaN) compare false: the port speaks TLS all the same.
      done({ notBefore, notAfter: Date.parse(cert?.valid_to ?? "") });
    });
  });
}
