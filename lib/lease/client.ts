/**
 * The Berth lease API over HTTP(S): wire encoding, a transport and answer
 * decoding, with what spans them (the request's bound, the key and its
 * redaction, which transport the options need and their warnings). It never
 * retries: retry policy belongs to the acquire loop and the renewer.
 *
 * @module
 */
import {
  grantOutcome,
  redactor,
  redactOutcome,
  releaseOutcome,
} from "./answer.ts";
import type { ApiKeySource } from "./api_key.ts";
import { describeTransportError } from "./errors.ts";
import {
  DEFAULT_REQUEST_TIMEOUT_MS,
  type GrantOutcome,
  type LeaseClient,
  type LeaseFailure,
  type LeaseKey,
  type ReleaseOutcome,
} from "./rpc.ts";
import { chooseCaStores, lookPath, readTrust } from "./tls_trust.ts";
import {
  fetchTransport,
  MAX_RESPONSE_BYTES,
  nodeTransport,
  type Route,
  withNodeFallback,
} from "./transport.ts";
import {
  parseApiServer,
  requestBody,
  requestHeaders,
  type Target,
} from "./wire.ts";
import { discardLogger, type Logger } from "../obs/log.ts";
import { bounded, systemClock } from "../state/clock.ts";

/** Options for {@linkcode createHttpLeaseClient}. */
export interface HttpLeaseClientOptions {
  /** `https://` (production) or `http://` (development server); a path prefix is kept. */
  apiServer: string;
  key: LeaseKey;
  /** Without one no Authorization header is sent. */
  auth?: ApiKeySource;
  /** A PEM file of CA certificates trusted beside the system's store; read once, at construction. */
  caBundleFile?: string;
  /** Sent as SNI and verified instead of the URL's host (which Host keeps). Through `node:https`, directly. */
  serverName?: string;
  /** Development only (a warning says so). Through `node:https`, directly. */
  insecureSkipTlsVerify?: boolean;
  /** The key file's read included; the caller's signal may end it sooner, never later. */
  requestTimeoutMs?: number;
  logger?: Logger;
}

/**
 * Builds the {@linkcode LeaseClient} the subcommands use.
 *
 * @throws {Error} For anything wrong in the options, at start-up, naming the
 * input; after that no call throws for anything the server or network does.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { startDevServer } from "../devserver/server.ts";
 * await using server = await startDevServer();
 * const key = { namespace: "prod", name: "checkout" };
 * const client = createHttpLeaseClient({ apiServer: server.url, key });
 * const outcome = await client.acquire("east/p1", 30, AbortSignal.timeout(15_000));
 * assert.equal(outcome.kind === "acquired" && outcome.lease.holder, "east/p1");
 * ```
 */
export function createHttpLeaseClient(
  options: HttpLeaseClientOptions,
): LeaseClient {
  const logger = options.logger ?? discardLogger;
  const target = parseApiServer(options.apiServer);
  const { namespace, name } = options.key;
  if (namespace === "" || name === "") {
    const shown = JSON.stringify(`${namespace}/${name}`);
    throw new Error(
      `lease key ${shown}: namespace and name must both be non-empty`,
    );
  }
  const timeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new RangeError(
      `requestTimeoutMs must be a positive number of milliseconds, got ${timeoutMs}`,
    );
  }
  const route = chooseRoute(options, target, logger);
  const { auth, serverName } = options;
  const [ns, lease] = [namespace, name].map(encodeURIComponent);
  const base = `${target.basePath}/v1alpha1/namespaces/${ns}/leases/${lease}`;

  // Release answers a ReleaseOutcome, the others a GrantOutcome.
  const call = async <T extends GrantOutcome | ReleaseOutcome>(
    rpc: "acquire" | "renew" | "release",
    fields: Parameters<typeof requestBody>[0],
    signal: AbortSignal,
  ): Promise<T> => {
    const body = requestBody(fields);
    // Cleared at the end, so no finished request wakes the process again.
    using bound = bounded(systemClock, timeoutMs, signal);
    const within = bound.signal;
    const key = within.aborted ? undefined : await auth?.current(within);
    if (within.aborted) return abortFailure(within.reason) as T;
    const requestId = crypto.getRandomValues(new Uint8Array(16)).toHex();
    const path = `${base}/${rpc}`;
    const headers = requestHeaders(body, requestId, key?.reveal());
    logger.debug("lease request", { rpc, path, request_id: requestId });
    const answer = await route.send({ path, headers, body }, within);
    const redact = redactor(auth?.secrets() ?? []);
    let outcome: GrantOutcome | ReleaseOutcome;
    if ("error" in answer) {
      outcome = within.aborted
        ? abortFailure(within.reason)
        : await describeTransportError(answer, {
          target,
          serverName,
          proxy: route.proxy(),
          signal: within,
        });
    } else if ("tooLarge" in answer) {
      const kib = MAX_RESPONSE_BYTES / 1024;
      outcome = {
        kind: "bad-response",
        status: answer.tooLarge,
        message:
          `response body exceeds ${kib} KiB; is --api-server pointing at the Berth API server?`,
        requestId: answer.requestId,
      };
    } else {
      const ctx = { holder: fields.holder, url: target.origin + path, redact };
      outcome = rpc === "release"
        ? releaseOutcome(answer, ctx)
        : grantOutcome(answer, ctx);
    }
    outcome = redactOutcome(outcome, redact);
    logger.debug("lease outcome", {
      rpc,
      request_id: ("requestId" in outcome && outcome.requestId) || requestId,
      kind: outcome.kind,
      ...("status" in outcome ? { status: outcome.status } : {}),
    });
    return outcome as T;
  };

  return {
    acquire: (holder, ttlSeconds, signal) =>
      call("acquire", { holder, ttlSeconds }, signal),
    renew: (holder, fencingToken, ttlSeconds, signal) =>
      call("renew", { holder, fencingToken, ttlSeconds }, signal),
    release: (holder, fencingToken, signal) =>
      call("release", { holder, fencingToken }, signal),
  };
}

/** `fetch`, unless the options ask for what only `node:https` can do (the server-name override, skip-verify). */
function chooseRoute(
  options: HttpLeaseClientOptions,
  target: Target,
  logger: Logger,
): Route {
  const { caBundleFile, serverName, insecureSkipTlsVerify } = options;
  const env = (name: string) => Deno.env.get(name);
  const field = { api_server: target.origin };
  // The proxy variable for the server's scheme, as Deno reads them (NO_PROXY
  // is fetch's to judge): for the wording of errors and warnings only.
  const scheme = target.secure ? "HTTPS_PROXY" : "HTTP_PROXY";
  const proxy = ["ALL_PROXY", scheme].flatMap((n) => [n, n.toLowerCase()])
    .find((n) => (env(n) ?? "") !== "");
  let caCerts: string[] | undefined;
  if (!target.secure) {
    const given = [
      caBundleFile !== undefined && "--ca-bundle-file",
      serverName !== undefined && "--server-name",
      insecureSkipTlsVerify && "--insecure-skip-tls-verify",
    ].filter(Boolean).join(",");
    if (given !== "") {
      logger.warn("TLS options have no effect on an http:// API server", {
        ...field,
        options: given,
      });
    }
    if (options.auth !== undefined) {
      logger.warn(
        "the API key is sent unencrypted to an http:// API server; use https outside development",
        field,
      );
    }
  } else {
    // Before the first TLS use, which fixes the process's root certificates.
    const stores = chooseCaStores(env, lookPath);
    if (stores.warning !== undefined) logger.warn(stores.warning);
    caCerts = readTrust(caBundleFile, stores.stores);
    if (serverName === "") {
      throw new Error(
        "the TLS server name override is empty; set --server-name / BERTH_SERVER_NAME to the name on the server certificate, or unset it",
      );
    }
    if (insecureSkipTlsVerify) {
      logger.warn(
        "INSECURE: TLS certificate verification of the API server is DISABLED (--insecure-skip-tls-verify); anyone on the network path can impersonate it, see the API key and steal the lease; use only in development",
        field,
      );
    }
    if (insecureSkipTlsVerify || serverName !== undefined) {
      const flag = insecureSkipTlsVerify
        ? "--insecure-skip-tls-verify"
        : "--server-name";
      if (proxy !== undefined) {
        logger.warn(
          `${proxy} names a proxy, but with ${flag} (node:https) the helper connects to the API server directly`,
          field,
        );
      }
      const tls = { caCerts, serverName, insecureSkipTlsVerify };
      return { send: nodeTransport(target, tls), proxy: () => undefined };
    }
  }
  // fetch ignores a proxy URL with a user but no password, with nothing said.
  // The line names the variable, never its value.
  const authority = (proxy === undefined ? "" : env(proxy) ?? "")
    .replace(/^[a-z][a-z0-9+.-]*:\/\//i, "").split(/[/?#]/, 1)[0];
  const at = authority.indexOf("@");
  if (at >= 0 && !authority.slice(0, at).includes(":")) {
    logger.warn(
      `${proxy} names a proxy user without a password, and fetch ignores such a proxy URL: requests do not go through that proxy; write it as http://USER:PASSWORD@HOST:PORT (percent-encoded), or without the user`,
      field,
    );
  }
  return withNodeFallback(
    fetchTransport(target, caCerts),
    () => nodeTransport(target, { caCerts }),
    target,
    proxy,
    logger,
  );
}

function abortFailure(reason: unknown): LeaseFailure {
  return reason instanceof Error && reason.name === "TimeoutError"
    ? { kind: "timeout", message: "no answer within the request's time bound" }
    : { kind: "aborted", message: "the request was cancelled" };
}
