/**
 * The Berth lease API over HTTP(S): composes the wire encoding
 * (`wire.ts`), a transport (`stream_transport.ts`; `fetch_transport.ts` for a
 * proxy only `fetch` can use; `node_transport.ts` for skip-verify) and the
 * answer decoding
 * (`answer.ts`) into the {@linkcode LeaseClient} the subcommands use, and
 * owns what spans them: the request's bound, the key, redaction of the key
 * from everything returned. It never retries; retry policy belongs to the
 * acquire loop and the renewer.
 *
 * Only this module's graph loads network code, and `node:*` modules only on
 * demand, so the liveness probe never pays for it.
 *
 * @module
 */
import { grantOutcome, releaseOutcome } from "./answer.ts";
import type { ApiKeySource } from "./api_key.ts";
import { withCaLeafFallback } from "./ca_leaf_fallback.ts";
import { createFetchTransport } from "./fetch_transport.ts";
import { createNodeTransport } from "./node_transport.ts";
import { createStreamTransport } from "./stream_transport.ts";
import { type HttpProxy, type ProxyChoice, proxyFor } from "./proxy_env.ts";
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
  /** The bearer token source; without one no Authorization header is sent. */
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
   * does not name. The Host header still carries the URL's host.
   */
  serverName?: string;
  /**
   * Accepts any server certificate. Development only: anyone on the path can
   * then impersonate the server; a warning is logged at construction.
   */
  insecureSkipTlsVerify?: boolean;
  /**
   * Upper bound of one request in milliseconds (default
   * {@linkcode DEFAULT_REQUEST_TIMEOUT_MS}), the key file's read included;
   * the caller's signal may end it sooner, never later.
   */
  requestTimeoutMs?: number;
  /**
   * Which transport to use. By default `stream` (HTTP/1.1 on one kept
   * socket, `Deno.startTls` for TLS: the least CPU per renewal, and the
   * memory of a long-running sidecar stays flat); `fetch` when the
   * environment names an `https://` or `socks5://` proxy, which only `fetch`
   * can use (not with the server-name override, which `fetch` cannot do);
   * with skip-verify `node` (`node:https`, the only one that can skip
   * verification). Any of them gives the same answers where it can do what
   * is asked; tests run all three.
   */
  transport?: "fetch" | "node" | "stream";
  /**
   * Reads the proxy variables (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`,
   * `NO_PROXY`, lower case too); default `Deno.env.get`. `fetch` reads them
   * itself; the stream transport follows the same rules (proxy_env.ts); the
   * node transport (skip-verify, development only) goes direct, with a
   * warning when one is set for the server.
   */
  env?: (name: string) => string | undefined;
  /** Receives construction warnings and per-request debug lines; default none. */
  logger?: Logger;
}

/**
 * Builds the {@linkcode LeaseClient} the subcommands use.
 *
 * @throws {Error} Everything that can be wrong in the options (URL, lease
 * key, CA bundle, server name, timeout, a transport that cannot do what is
 * asked) throws here, at start-up, with a message naming the input; after
 * that no call throws for anything the server or the network does.
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
  const { transport, direct } = buildTransport(options, target, logger);
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
          direct,
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
 * The transport the TLS options need, and the warnings they deserve;
 * `direct` when it connects to the server itself (no proxy in between).
 */
function buildTransport(
  options: HttpLeaseClientOptions,
  target: Target,
  logger: Logger,
): { transport: Transport; direct: boolean } {
  const given = [
    options.caBundleFile !== undefined && "--ca-bundle-file",
    options.serverName !== undefined && "--server-name",
    options.insecureSkipTlsVerify && "--insecure-skip-tls-verify",
  ].filter((x): x is string => typeof x === "string");
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
    // Plain HTTP has no certificate to look at: `direct` does not matter.
    const choice = proxyFor(target, envOf(options));
    const chosen = options.transport ??
      (choice.kind === "unsupported" ? "fetch" : "stream");
    const transport = chosen === "node"
      ? createNodeTransport(target, {})
      : chosen === "stream"
      ? createStreamTransport(target, { proxy: usableProxy(choice) })
      : createFetchTransport(target, undefined);
    return { transport, direct: true };
  }
  // Before the first TLS use, which fixes the process's root certificates.
  const stores = chooseCaStores(envOf(options), lookPath);
  if (stores.warning !== undefined) logger.warn(stores.warning);
  const caCerts = readTrust(
    options.caBundleFile,
    options.env === undefined ? stores.stores : undefined,
  );
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
  const proxy = proxyFor(target, envOf(options));
  const chosen = options.transport ??
    (options.insecureSkipTlsVerify
      ? "node"
      : serverName !== undefined || proxy.kind !== "unsupported"
      ? "stream"
      : "fetch");
  if (options.insecureSkipTlsVerify && chosen !== "node") {
    throw new Error(
      `the ${chosen} transport cannot skip TLS verification; use the node transport`,
    );
  }
  if (serverName !== undefined && chosen === "fetch") {
    throw new Error(
      "the fetch transport cannot override the TLS server name; use the stream or node transport",
    );
  }
  const proxied = proxy.kind !== "direct";
  switch (chosen) {
    case "node":
      if (proxied) {
        logger.warn(
          "a proxy is set for the API server, but with --insecure-skip-tls-verify (node:https) the helper connects to it directly",
          { api_server: target.origin },
        );
      }
      return {
        transport: createNodeTransport(target, {
          caCerts,
          serverName,
          insecureSkipTlsVerify: options.insecureSkipTlsVerify,
        }),
        direct: true,
      };
    case "stream": {
      const stream = createStreamTransport(target, {
        caCerts,
        serverName,
        proxy: usableProxy(proxy),
      });
      // node:https goes direct: through a proxy the refusal stays.
      return {
        transport: proxied ? stream : withCaLeafFallback(
          stream,
          () => createNodeTransport(target, { caCerts, serverName }),
          logger,
          target.origin,
        ),
        direct: !proxied,
      };
    }
    case "fetch":
      return {
        transport: createFetchTransport(target, caCerts),
        direct: !proxied,
      };
  }
}

function envOf(options: HttpLeaseClientOptions) {
  return options.env ?? ((n: string) => Deno.env.get(n));
}

/**
 * The proxy to go through, for a transport that does not read the
 * environment itself.
 *
 * @throws {Error} When the named proxy is of a kind it cannot use.
 */
function usableProxy(choice: ProxyChoice): HttpProxy | undefined {
  if (choice.kind === "direct") return undefined;
  if (choice.kind === "proxy") return choice.proxy;
  throw new Error(
    `${choice.detail}; use an http:// proxy URL, or list the API server's host in NO_PROXY`,
  );
}

function abortFailure(reason: unknown): LeaseFailure {
  const timedOut = reason instanceof Error && reason.name === "TimeoutError";
  return timedOut
    ? { kind: "timeout", message: "no answer within the request's time bound" }
    : { kind: "aborted", message: "the request was cancelled" };
}
