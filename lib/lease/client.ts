/**
 * The Berth lease API over HTTP(S): the request's bound, the key and its
 * redaction, which transport the options need and their warnings, and what
 * the client trusts: the system's store with the CA bundle added (never in
 * its place), set up once at start-up (docs/configuration.md, "Trust"). It
 * never retries: that is the acquire loop's and the renewer's.
 *
 * @module
 */
import { type ApiKeySource, redactor, redactOutcome } from "./api_key.ts";
import { describeTransportError } from "./errors.ts";
import {
  DEFAULT_REQUEST_TIMEOUT_MS,
  type GrantOutcome,
  type LeaseClient,
  type LeaseFailure,
  type LeaseKey,
  type ReleaseOutcome,
} from "./rpc.ts";
import {
  fetchTransport,
  nodeTransport,
  type Route,
  withNodeFallback,
} from "./transport.ts";
import {
  grantOutcome,
  parseApiServer,
  releaseOutcome,
  requestBody,
  requestHeaders,
  type Target,
} from "./wire.ts";
import { discardLogger, type Logger } from "../obs/log.ts";
import { bounded, systemClock } from "../state/clock.ts";

/** Options for {@linkcode createHttpLeaseClient}; `serverName` and `insecureSkipTlsVerify` go through `node:https`, directly (docs/lease-client.md, "Transports"). */
export interface HttpLeaseClientOptions {
  apiServer: string;
  key: LeaseKey;
  auth?: ApiKeySource;
  caBundleFile?: string;
  serverName?: string;
  insecureSkipTlsVerify?: boolean;
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
  const route = chooseRoute(options, target, logger);
  const { auth, serverName } = options;
  const [ns, lease] = [namespace, name].map(encodeURIComponent);
  const base = `${target.basePath}/v1alpha1/namespaces/${ns}/leases/${lease}`;

  const call = async <T extends GrantOutcome | ReleaseOutcome>(
    rpc: "acquire" | "renew" | "release",
    fields: Parameters<typeof requestBody>[0],
    signal: AbortSignal,
  ): Promise<T> => {
    const body = requestBody(fields);
    // The key's read included; cleared at the end, waking nothing later.
    using bound = bounded(systemClock, DEFAULT_REQUEST_TIMEOUT_MS, signal);
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
    } else if ("kind" in answer) {
      outcome = answer;
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
  const log = logger.with({ api_server: target.origin });
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
      log.warn("TLS options have no effect on an http:// API server", {
        options: given,
      });
    }
    if (options.auth !== undefined) {
      log.warn(
        "the API key is sent unencrypted to an http:// API server; use https outside development",
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
      log.warn(
        "INSECURE: TLS certificate verification of the API server is DISABLED (--insecure-skip-tls-verify); anyone on the network path can impersonate it, see the API key and steal the lease; use only in development",
      );
    }
    if (insecureSkipTlsVerify || serverName !== undefined) {
      const flag = insecureSkipTlsVerify
        ? "--insecure-skip-tls-verify"
        : "--server-name";
      if (proxy !== undefined) {
        log.warn(
          `${proxy} names a proxy, but with ${flag} (node:https) the helper connects to the API server directly`,
        );
      }
      const tls = { caCerts, serverName, insecureSkipTlsVerify };
      return { send: nodeTransport(target, tls), proxy: () => undefined };
    }
  }
  const authority = (proxy === undefined ? "" : env(proxy) ?? "")
    .replace(/^[a-z][a-z0-9+.-]*:\/\//i, "").split(/[/?#]/, 1)[0];
  if (/^[^:@]*@/.test(authority)) {
    log.warn(
      `${proxy} names a proxy user without a password, and fetch ignores such a proxy URL: requests do not go through that proxy; write it as http://USER:PASSWORD@HOST:PORT (percent-encoded), or without the user`,
    );
  }
  return withNodeFallback(
    fetchTransport(target, caCerts, proxy),
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

/** The system trust store files Go's `crypto/x509` reads on Linux, in its order. */
export const SYSTEM_BUNDLE_FILES: readonly string[] = [
  "/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Alpine, distroless
  "/etc/pki/tls/certs/ca-bundle.crt", // Fedora, RHEL 6
  "/etc/ssl/ca-bundle.pem", // openSUSE
  "/etc/pki/tls/cacert.pem", // OpenELEC
  "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7
  "/etc/ssl/cert.pem", // Alpine
];

/** Deno builds its root certificates from it once per process, at the first TLS use. */
export const CA_STORE_VARIABLE = "DENO_TLS_CA_STORE";
export const SYSTEM_CA_STORES = "system,mozilla";

export type PathState = "readable" | "unreadable" | "absent";

/**
 * Which root stores to trust ({@linkcode CA_STORE_VARIABLE}'s value, none to
 * leave it as it is), and what to warn about: a system file that cannot be
 * read is not named, since Deno then refuses every TLS connection.
 */
export function chooseCaStores(
  env: (name: string) => string | undefined,
  look: (path: string) => PathState,
): { stores?: string; warning?: string } {
  if (env(CA_STORE_VARIABLE) !== undefined) return {};
  const file = env("SSL_CERT_FILE");
  if (file !== undefined && file !== "") {
    if (look(file) === "readable") return { stores: SYSTEM_CA_STORES };
    return {
      warning:
        `SSL_CERT_FILE names ${file}, which cannot be read as a file; the system trust store is not used (Deno's bundled Mozilla roots and the CA bundle are): fix or unset SSL_CERT_FILE`,
    };
  }
  // The first system file there, as Deno takes the first it finds.
  for (const f of SYSTEM_BUNDLE_FILES) {
    const state = look(f);
    if (state === "absent") continue;
    if (state === "readable") return { stores: SYSTEM_CA_STORES };
    return {
      warning:
        `the system trust store ${f} cannot be read by this user, so it is not used (Deno's bundled Mozilla roots and the CA bundle are): make it readable, or set SSL_CERT_FILE to a readable bundle`,
    };
  }
  return {};
}

/** Whether `path` is a regular file this process can open for reading. */
export function lookPath(path: string): PathState {
  try {
    using f = Deno.openSync(path, { read: true });
    return f.statSync().isFile ? "readable" : "unreadable";
  } catch (e) {
    return e instanceof Deno.errors.NotFound ? "absent" : "unreadable";
  }
}

/**
 * The root stores `stores` names and the CA bundle's PEM blocks, checked by
 * one HTTP client built and closed before the first TLS use: Deno reads
 * {@linkcode CA_STORE_VARIABLE} only then, so it is removed again for the
 * processes this one starts.
 *
 * @throws {Error} Naming the bundle (or its bad certificate) or the stores.
 */
export function readTrust(
  bundleFile: string | undefined,
  stores: string | undefined,
): string[] | undefined {
  let pems: string[] | undefined;
  if (bundleFile !== undefined) {
    try {
      pems = Deno.readTextFileSync(bundleFile).match(
        /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g,
      ) ?? undefined;
    } catch (e) {
      throw new Error(
        `CA bundle file ${bundleFile} cannot be read (${
          (e as Error).message
        }); set --ca-bundle-file / BERTH_CA_BUNDLE_FILE to a readable PEM file`,
      );
    }
    if (pems === undefined) {
      throw new Error(
        `CA bundle file ${bundleFile} contains no PEM certificate (no "-----BEGIN CERTIFICATE-----" block); give the CA certificate(s) of the API server in PEM form`,
      );
    }
  }
  const chosen = stores ?? Deno.env.get(CA_STORE_VARIABLE);
  if (pems === undefined && chosen === undefined) return undefined;
  const attempt = (caCerts?: string[]): Error | undefined => {
    try {
      Deno.createHttpClient(caCerts ? { caCerts } : {}).close();
    } catch (e) {
      return e as Error;
    }
  };
  if (stores !== undefined) Deno.env.set(CA_STORE_VARIABLE, stores);
  try {
    const failed = attempt(pems);
    if (failed === undefined) return pems;
    // Whose fault: the root stores (a client without the bundle fails too),
    // or the bundle, one certificate of which is found by trying each.
    const roots = pems === undefined ? failed : attempt();
    if (pems !== undefined && roots === undefined) {
      const errors = pems.map((pem) => attempt([pem]));
      const i = errors.findIndex((e) => e !== undefined);
      throw new Error(
        i < 0
          ? `CA bundle file ${bundleFile} cannot be used (${failed.message})`
          : `CA bundle file ${bundleFile}: certificate ${
            i + 1
          } of ${pems.length} is not a valid certificate (${
            errors[i]!.message
          })`,
      );
    }
    throw new Error(
      `the trust store cannot be loaded (${roots!.message}); ${
        stores === undefined && chosen !== undefined
          ? `check the stores ${CA_STORE_VARIABLE}=${chosen} names`
          : `fix the system's, or set ${CA_STORE_VARIABLE}=mozilla to trust Deno's bundled roots (and the CA bundle) alone`
      }`,
    );
  } finally {
    if (stores !== undefined) Deno.env.delete(CA_STORE_VARIABLE);
  }
}
