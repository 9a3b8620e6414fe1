/**
 * Configuration: env first, then explicitly given flags, then defaults, then
 * validation, exactly as the webhook relies on (see the README's
 * configuration reference).
 *
 * @module
 */
import type { LogFormat } from "./log.ts";
import type { Secret } from "./log.ts";

/** `startup-gate` only proves admission; `runtime-singleton` keeps the lease for the pod's life. */
export type Mode = "startup-gate" | "runtime-singleton";

/** How a lost lease stops the workload: by failing its liveness probe, or by signals. */
export type EnforceMode = "probe" | "signal";

/** The resolved, validated configuration shared by `acquire`, `renew` and `run`. */
export interface Config {
  /** Lease name (path segment). */
  leaseName: string;
  /** Lease namespace (path segment); defaults to the pod's namespace. */
  leaseNamespace: string;
  /** See {@linkcode Mode}. */
  mode: Mode;
  /** See {@linkcode EnforceMode}. */
  enforce: EnforceMode;
  /** Process `comm` or executable basename to signal in `signal` mode ("" when unset). */
  signalTarget: string;
  /** Lease TTL sent to the server, whole seconds, 1..2147483647. */
  ttlSeconds: number;
  /** Renew interval in milliseconds; default TTL/3 kept exact (10 s -> 3333.33 ms). */
  heartbeatMs: number;
  /** SIGTERM -> SIGKILL grace in seconds (>= 0). */
  enforceGraceSeconds: number;
  /**
   * How long before the local lease deadline the gate closes, in ms, so the
   * workload is already stopped when the server may hand the lease over.
   */
  enforceLeadMs: number;
  /** Release the lease on SIGTERM/SIGINT. */
  releaseOnShutdown: boolean;
  /** Holder identity sent to the server. */
  holder: string;
  /** The shared state volume. */
  stateDir: string;
  /** Base URL of the Berth API server. */
  apiServer: string;
  /** API key given directly (mutually exclusive with `apiKeyFile`). */
  apiKey?: Secret;
  /** File holding the API key, re-read as it rotates. */
  apiKeyFile?: string;
  /** Extra PEM CA bundle added to the system roots. */
  caBundleFile?: string;
  /** TLS server-name override (SNI and verification). */
  serverName?: string;
  /** Skip TLS verification (development only). */
  insecureSkipTlsVerify: boolean;
  /** `acquire` gives up after this many ms; undefined = wait forever. */
  acquireTimeoutMs?: number;
  /** Log output shape. */
  logFormat: LogFormat;
}
