/**
 * The Berth lease API over HTTP(S): composes the wire encoding
 * (`wire.ts`), a transport (`fetch_transport.ts`; `node_transport.ts` only
 * for the server-name override, skip-verify, a server certificate that is
 * its own CA and a port `fetch` refuses) and the answer decoding
 * (`answer.ts`) into the
 * {@linkcode LeaseClient} the subcommands use, and owns what spans them: the
 * request's bound, the key, redaction of the key from everything returned.
 * It never retries; retry policy belongs to the acquire loop and the
 * renewer.
 *
 * Only this module's graph loads network code, and `node:*` modules only on
 * demand, so the liveness probe and the common path never pay for them.
 *
 * @module
 */
import { grantOutcome, releaseOutcome } from "./answer.ts";
import type { ApiKeySource } from "./api_key.ts";
import { createFetchTransport } from "./fetch_transport.ts";
import { withNodeFallback } from "./node_fallback.ts";
import { createNodeTransport, warnGoesDirect } from "./node_transport.ts";
import { redactor, redactOutcome } from "./redact.ts";
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
  describeTransportError,
  MAX_RESPONSE_BYTES,
  type Transport,
} from "./transport.ts";
import {
  acquireBody,
  newRequestId,
  parseApiServer,
  releaseBody,
  renewBody,
  requestHeaders,
  type Rpc,
  rpcPath,
  type Target,
} from "./wire.ts";
import type { Logger } from "../obs/log.ts";
import { discardLogger } from "../obs/log.ts";
import { bounded, systemClock } from "../state/clock.ts";

/** Options for {@linkcode createHttpLeaseClient}. */
export interface HttpLeaseClientOptions {
  /**
   * Base URL of the Berth API server, `https://` (production) or `http://`
   * (development server). A path prefix is kept (`https://gw/berth` sends
   * `/berth/v1alpha1/...`); trailing slashes are dropped so no `//` is sent.
   * No query, fragment or credentials.
   */
  apiServer: string;
  /** The lease every call of this client is about. */
  key: LeaseKey;
  /** Where the API key comes from; without one no Authorization header is sent. */
  auth?: ApiKeySource;
  /**
   * A PEM file of CA certificates trusted in addition to the system's trust
   * store and Deno's bundled roots (lib/lease/tls_trust.ts), for a server
   * with a private CA. Read once, at construction; a file with no
   * certificate in it is an error.
   */
  caBundleFile?: string;
  /**
   * The name sent as TLS SNI and verified on the server certificate instead
   * of the URL's host, for servers reached by an address their certificate
   * does not name. The Host header still carries the URL's host. Sent
   * through `node:https` (`fetch` cannot), which connects directly: a proxy
   * variable is then not followed (a warning says so).
   */
  serverName?: string;
  /**
   * Accepts any server certificate. Development only: anyone on the path can
   * then impersonate the server; a warning is logged at construction. Sent
   * through `node:https`, directly, like {@linkcode serverName}.
   */
  insecureSkipTlsVerify?: boolean;
  /**
   * Upper bound of one request in milliseconds (default
   * {@linkcode DEFAULT_REQUEST_TIMEOUT_MS}), the key file's read included;
   * the caller's signal may end it sooner, never later.
   */
  requestTimeoutMs?: number;
  /** Receives construction warnings and per-request debug lines; default none. */
  logger?: Logger;
}

/**
 * Builds the {@linkcode LeaseClient} the subcommands use.
 *
 * @throws {Error} Everything that can be wrong in the options (URL, lease
 * key, CA bundle, server name, timeout) throws here, at start-up, with a
 * message naming the input; after that no call throws for anything the
 * server or the network does.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { startDevServer } from "../devserver/server.ts";
 * await using server = await startDevServer();
 * const client = createHttpLeaseClient({
 *   apiServer: server.url, // e.g. "https://berth-api.berth-system.svc:8443"
 *   key: { namespace: "prod", name: "checkout" },
 * });
 * const outcome = await client.acquire("east/prod:pod:p1", 30, AbortSignal.timeout(15_000));
 * assert.equal(outcome.kind, "acquired");
 * if (outcome.kind === "acquired") assert.equal(outcome.lease.holder, "east/prod:pod:p1");
 * ```
 */
export function createHttpLeaseClient(
  options: HttpLeaseClientOptions,
): LeaseClient {
  const logger = options.logger ?? discardLogger;
  const target = parseApiServer(options.apiServer);
  const { namespace, name } = options.key;
  if (namespace === "" || name === "") {
    throw new Error(
      `lease key ${
        JSON.stringify(`${namespace}/${name}`)
      }: namespace and name must both be non-empty`,
    );
  }
  const timeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new RangeError(
      `requestTimeoutMs must be a positive number of milliseconds, got ${timeoutMs}`,
    );
  }
  const { transport, proxy } = buildTransport(options, target, logger);
  const auth = options.auth;

  const call = async (
    rpc: Rpc,
    body: string,
    holder: string,
    signal: AbortSignal,
  ): Promise<GrantOutcome | ReleaseOutcome> => {
    // Cleared when the call ends, so no finished request wakes the process
    // again at its bound.
    using bound = bounded(systemClock, timeoutMs, signal);
    return await callWithin(rpc, body, holder, bound.signal);
  };

  const callWithin = async (
    rpc: Rpc,
    body: string,
    holder: string,
    bounded: AbortSignal,
  ): Promise<GrantOutcome | ReleaseOutcome> => {
    if (bounded.aborted) return abortFailure(bounded.reason);
    const key = await auth?.current(bounded);
    if (bounded.aborted) return abortFailure(bounded.reason);
    const requestId = newRequestId();
    const path = rpcPath(target, options.key, rpc);
    const headers = requestHeaders(body, requestId, key?.reveal());
    logger.debug("lease request", { rpc, path, request_id: requestId });
    const answer = await transport.send({ path, headers, body }, bounded);
    const redact = redactor(auth?.secrets() ?? []);
    let outcome: GrantOutcome | ReleaseOutcome;
    if ("error" in answer) {
      outcome = bounded.aborted
        ? abortFailure(bounded.reason)
        : await describeTransportError(answer, {
          target,
          verifiedName: options.serverName ?? target.hostname,
          serverName: options.serverName,
          proxy: proxy(),
          signal: bounded,
        });
    } else if ("tooLarge" in answer) {
      outcome = {
        kind: "bad-response",
        status: answer.tooLarge,
        message: `response body exceeds ${
          MAX_RESPONSE_BYTES / 1024
        } KiB; is --api-server pointing at the Berth API server?`,
        requestId: answer.requestId,
      };
    } else {
      const ctx = { holder, url: `${target.origin}${path}`, redact };
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
    return outcome;
  };

  return {
    async acquire(holder, ttlSeconds, signal) {
      const body = acquireBody(holder, ttlSeconds);
      return await call("acquire", body, holder, signal) as GrantOutcome;
    },
    async renew(holder, fencingToken, ttlSeconds, signal) {
      const body = renewBody(holder, fencingToken, ttlSeconds);
      return await call("renew", body, holder, signal) as GrantOutcome;
    },
    async release(holder, fencingToken, signal) {
      const body = releaseBody(holder, fencingToken);
      return await call("release", body, holder, signal) as ReleaseOutcome;
    },
  };
}

/**
 * The transport the TLS options need, and the warnings they deserve:
 * `fetch`, unless the options ask for what only `node:https` can do (the
 * server-name override, skip-verify); `fetch` hands over to the node
 * transport when it refuses the server's port, or (over a direct
 * connection) a server certificate that is its own CA
 * (`node_fallback.ts`). `proxy` names the variable of the proxy requests
 * may go through, now (none once they go direct).
 */
function buildTransport(
  options: HttpLeaseClientOptions,
  target: Target,
  logger: Logger,
): { transport: Transport; proxy: () => string | undefined } {
  const env = (name: string) => Deno.env.get(name);
  let proxy = proxyVariable(target, env);
  const given = [
    options.caBundleFile !== undefined && "--ca-bundle-file",
    options.serverName !== undefined && "--server-name",
    options.insecureSkipTlsVerify && "--insecure-skip-tls-verify",
  ].filter((x): x is string => typeof x === "string");
  const viaFetch = (caCerts: string[] | undefined) => {
    warnIgnoredProxy(logger, proxy, env, target);
    return {
      transport: withNodeFallback(createFetchTransport(target, caCerts), {
        node: () => createNodeTransport(target, { caCerts }),
        target,
        proxy,
        logger,
        onHandOver: () => {
          proxy = undefined;
        },
      }),
      proxy: () => proxy,
    };
  };
  if (!target.secure) {
    if (given.length > 0) {
      logger.warn("TLS options have no effect on an http:// API server", {
        api_server: target.origin,
        options: given.join(","),
      });
    }
    if (options.auth !== undefined) {
      logger.warn(
        "the API key is sent unencrypted to an http:// API server; use https outside development",
        { api_server: target.origin },
      );
    }
    return viaFetch(undefined);
  }
  // Before the first TLS use, which fixes the process's root certificates.
  const stores = chooseCaStores(env, lookPath);
  if (stores.warning !== undefined) logger.warn(stores.warning);
  const caCerts = readTrust(options.caBundleFile, stores.stores);
  const serverName = options.serverName;
  if (serverName === "") {
    throw new Error(
      "the TLS server name override is empty; set --server-name / BERTH_SERVER_NAME to the name on the server certificate, or unset it",
    );
  }
  if (options.insecureSkipTlsVerify) {
    logger.warn(
      "INSECURE: TLS certificate verification of the API server is DISABLED (--insecure-skip-tls-verify); anyone on the network path can impersonate it, see the API key and steal the lease; use only in development",
      { api_server: target.origin },
    );
  }
  if (options.insecureSkipTlsVerify || serverName !== undefined) {
    const flag = options.insecureSkipTlsVerify
      ? "--insecure-skip-tls-verify"
      : "--server-name";
    warnGoesDirect(logger, proxy, `with ${flag} (node:https)`, target.origin);
    const transport = createNodeTransport(target, {
      caCerts,
      serverName,
      insecureSkipTlsVerify: options.insecureSkipTlsVerify,
    });
    return { transport, proxy: () => undefined };
  }
  return viaFetch(caCerts);
}

/**
 * The proxy variable set for the API server's scheme (the first of
 * `ALL_PROXY` and `HTTPS_PROXY` or `HTTP_PROXY`, upper case before lower, as
 * Deno reads them), if any. Whether `NO_PROXY` exempts the server is
 * `fetch`'s to decide; this only tells whether requests may go through a
 * proxy, for the wording of errors and the warning of a transport that
 * goes direct.
 */
function proxyVariable(
  target: Target,
  env: (name: string) => string | undefined,
): string | undefined {
  const scheme = target.secure ? "HTTPS_PROXY" : "HTTP_PROXY";
  return ["ALL_PROXY", scheme].flatMap((n) => [n, n.toLowerCase()])
    .find((n) => (env(n) ?? "") !== "");
}

/**
 * Warns when the proxy variable names a user without a password
 * (`http://user@proxy:3128`): Deno's `fetch` ignores such a proxy URL
 * altogether, so requests would not go through that proxy, with nothing
 * said. The line names the variable, never its value.
 */
function warnIgnoredProxy(
  logger: Logger,
  proxy: string | undefined,
  env: (name: string) => string | undefined,
  target: Target,
): void {
  if (proxy === undefined) return;
  const authority = (env(proxy) ?? "").replace(/^[a-z][a-z0-9+.-]*:\/\//i, "")
    .split(/[/?#]/, 1)[0];
  const at = authority.indexOf("@");
  if (at < 0 || authority.slice(0, at).includes(":")) return;
  logger.warn(
    `${proxy} names a proxy user without a password, and fetch ignores such a proxy URL: requests do not go through that proxy; write it as http://USER:PASSWORD@HOST:PORT (percent-encoded), or without the user`,
    { api_server: target.origin },
  );
}

function abortFailure(reason: unknown): LeaseFailure {
  const timedOut = reason instanceof Error && reason.name === "TimeoutError";
  return timedOut
    ? { kind: "timeout", message: "no answer within the request's time bound" }
    : { kind: "aborted", message: "the request was cancelled" };
}
