/**
 * The Berth lease RPCs as values a caller can branch on. The acquire loop
 * and the renewer only see these types, so tests substitute a scripted
 * client and the safety logic never parses an HTTP status itself.
 *
 * @module
 */
import { GO_MESSAGES } from "../obs/go_messages.ts";

/** The per-request bound when the caller gives none, so a hung API server never blocks a caller. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;

/** Which lease: `/v1alpha1/namespaces/{namespace}/leases/{name}`. */
export type LeaseKey = { namespace: string; name: string };

/** A lease as the server described it (`holder` "", `fencingToken` 0 when absent); its times are the server's clock's, never trusted for safety. */
export interface LeaseRecord {
  holder: string;
  fencingToken: number;
  expiresAt: string;
  acquiredAt: string;
}

/**
 * Failures every RPC can end with. They are separate kinds because the
 * renewer treats them differently: a `conflict` (409) means the lease is
 * gone now, the others only mean "not confirmed" and the local deadline
 * decides. `fix` is set when no wait can heal it ({@linkcode configFix}).
 */
export type LeaseFailure =
  | { kind: "conflict"; message: string; requestId?: string }
  /** Any other status: the server's `error` text, a body excerpt, or a redirect's `Location`. */
  | ({ kind: "server-error"; url?: string } & Answered)
  /** A success status whose body is not what the API promises. */
  | ({ kind: "bad-response" } & Answered)
  /** No answer: connection refused, reset, TLS failure, DNS, ... */
  | { kind: "transport-error"; message: string; fix?: string }
  | { kind: "timeout"; message: string }
  /** The caller cancelled the request (shutdown); not an API problem. */
  | { kind: "aborted"; message: string };

type Answered = {
  status: number;
  message: string;
  requestId?: string;
  fix?: string;
};

/** `not-acquired`: on Acquire another live holder has it (`lease` says who); on Renew the lease is lost. */
export type GrantOutcome =
  | { kind: "acquired"; lease: LeaseRecord; requestId?: string }
  | { kind: "not-acquired"; lease: LeaseRecord; requestId?: string }
  | LeaseFailure;

/** What Release can answer; `conflict` means it already belongs to someone else. */
export type ReleaseOutcome =
  | { kind: "released"; requestId?: string }
  | LeaseFailure;

/** The three RPCs, bound to one lease and one set of credentials; `signal` bounds each call, and an implementation's own bound is never longer. */
export interface LeaseClient {
  acquire(
    holder: string,
    ttlSeconds: number,
    signal: AbortSignal,
  ): Promise<GrantOutcome>;
  renew(
    holder: string,
    fencingToken: number,
    ttlSeconds: number,
    signal: AbortSignal,
  ): Promise<GrantOutcome>;
  release(
    holder: string,
    fencingToken: number,
    signal: AbortSignal,
  ): Promise<ReleaseOutcome>;
}

/** Whether `f` will not change by retrying alone (a 400, 401, 403 or 404: a setting is wrong); a rotated key may still heal it, so callers retry, loudly. */
export function isPersistentFailure(f: LeaseFailure): boolean {
  return f.kind === "server-error" && [400, 401, 403, 404].includes(f.status);
}

/**
 * The one-line fix for a failure that no wait can heal; undefined for one
 * that may heal by itself (refused, reset, timeout, DNS, 5xx, 409, ...).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(configFix({ kind: "timeout", message: "after 10s" }), undefined);
 * assert.equal(
 *   configFix({ kind: "transport-error", message: "x", fix: "use http://" }),
 *   "use http://",
 * );
 * ```
 */
export function configFix(f: LeaseFailure): string | undefined {
  return "fix" in f ? f.fix : undefined;
}

/** The fixes {@linkcode configFix} gives, one per cause (docs/lease-client.md, "Failures no wait can heal"). */
export const FIXES = {
  useHttp:
    "use http:// in --api-server / BERTH_API_SERVER (the server on that port speaks plain HTTP, not TLS), or the server's TLS port",
  useHttps:
    "use https:// in --api-server / BERTH_API_SERVER (the server on that port speaks TLS)",
  untrusted:
    "give the CA bundle that issued the server's certificate (--ca-bundle-file / BERTH_CA_BUNDLE_FILE)",
  wrongName:
    "set --server-name / BERTH_SERVER_NAME to a name on the server certificate, or use that name in --api-server / BERTH_API_SERVER",
  caAsLeaf:
    "reissue the server certificate with basicConstraints=CA:FALSE (or have a CA sign it and give that CA with --ca-bundle-file / BERTH_CA_BUNDLE_FILE), or reach the server without a proxy (NO_PROXY)",
  dates: "renew the server certificate, or fix this node's clock",
  notBerth:
    "this is not a Berth API server: check --api-server / BERTH_API_SERVER",
} as const;

/**
 * One line for a log or error message, with the request id the server gave
 * and, for a status that needs an operator, what to do.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const f = { kind: "server-error", status: 401, message: "no" } as const;
 * assert.match(describeFailure(f), /^server answered 401: no; /);
 * ```
 */
export function describeFailure(f: LeaseFailure): string {
  switch (f.kind) {
    case "conflict":
      return `lease conflict (409): ${f.message}${rid(f.requestId)}`;
    case "server-error":
      return `server answered ${f.status}: ${f.message}${rid(f.requestId)}${
        whatToDo(f.status, f.url)
      }`;
    case "bad-response":
      return `unusable answer (status ${f.status}): ${f.message}${
        rid(f.requestId)
      }`;
    case "transport-error":
      return `cannot reach the API server: ${f.message}`;
    case "timeout":
      return `request timed out: ${f.message}`;
    case "aborted":
      return `request cancelled: ${f.message}`;
  }
}

/** What to do about a 401, 403 or 404: a wrong key, namespace or URL, which no wait heals. */
export function statusFix(f: LeaseFailure): string | undefined {
  return f.kind === "server-error" && [401, 403, 404].includes(f.status)
    ? whatToDo(f.status, f.url).slice(2)
    : undefined;
}

function whatToDo(status: number, url: string | undefined): string {
  const requested = url === undefined ? "" : ` (requested ${url})`;
  switch (status) {
    case 400:
      return "; the server refused the request as invalid: check the lease name (--lease-name / BERTH_LEASE_NAME), namespace (--lease-namespace / BERTH_LEASE_NAMESPACE) and holder identity (--holder-identity / BERTH_HOLDER_IDENTITY) against the server's message";
    case 401:
      return "; the API key was refused or not sent: check --api-key-file / BERTH_API_KEY_FILE (or --api-key / BERTH_API_KEY) and that the key is one the server knows";
    case 403:
      return '; the key may not act for this holder or namespace: the holder identity must be the API key\'s id or start with "<key-id>/" (the cluster id, --cluster-id / BERTH_CLUSTER_ID, or an explicit --holder-identity / BERTH_HOLDER_IDENTITY)';
    case 404:
      return `; no such endpoint${requested}: --api-server / BERTH_API_SERVER must name the Berth API server; a path in it is kept as a prefix of every request`;
    default:
      if (status >= 300 && status < 400) {
        return `; redirects are not followed${requested}: set --api-server / BERTH_API_SERVER to the URL the server answers at`;
      }
      return "";
  }
}

const rid = (id?: string) => id ? ` (request id ${id})` : "";

/** What a Renew answer means: `reason` may quote the server (logs only), `summary` is for `/healthz`, `message` the Go helper's line. */
export type RenewVerdict =
  | { kind: "confirmed" }
  | { kind: "cancelled" }
  | {
    kind: "lost";
    reason: string;
    summary: string;
    message?: string;
    /** Someone else, who holds it now. */
    holder?: string;
  }
  /** No answer that counts: the lease stands until its local deadline. */
  | { kind: "unconfirmed"; reason: string; failure: LeaseFailure };

/**
 * The answer to a Renew of `token` for `holder`. Only a definite answer
 * loses the lease at once (409, `acquired:false`, another token); no answer
 * (5xx, timeout, network) leaves the local deadline in charge, because the
 * lease may well still be ours.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const lease = { holder: "h", fencingToken: 7, expiresAt: "", acquiredAt: "" };
 * assert.equal(classifyRenew({ kind: "acquired", lease }, 7, "h").kind, "confirmed");
 * assert.equal(classifyRenew({ kind: "acquired", lease }, 6, "h").kind, "lost");
 * assert.equal(classifyRenew({ kind: "timeout", message: "" }, 7, "h").kind, "unconfirmed");
 * ```
 */
export function classifyRenew(
  outcome: GrantOutcome,
  token: number,
  holder: string,
): RenewVerdict {
  switch (outcome.kind) {
    case "acquired": {
      const got = outcome.lease.fencingToken;
      return got === token ? { kind: "confirmed" } : {
        kind: "lost",
        summary: "the server renewed with another fencing token",
        reason:
          `the server renewed with fencing token ${got}, not the held ${token}; treating the lease as lost`,
      };
    }
    case "not-acquired": {
      const other = outcome.lease.holder;
      const reason = other === holder
        ? "this holder's lease expired before the renewal reached the server"
        : other
        ? `the lease is held by ${other}`
        : "the lease expired or was released, and nobody holds it";
      return {
        kind: "lost",
        summary: "the server refused the renewal",
        message: GO_MESSAGES.renewHeldByAnother,
        holder: other && other !== holder ? other : undefined,
        reason: `the server refused the renewal: ${reason}`,
      };
    }
    case "conflict":
      return {
        kind: "lost",
        message: GO_MESSAGES.renewConflict,
        summary:
          "the server answered 409: the lease belongs to another holder or token",
        reason: describeFailure(outcome),
      };
    case "aborted":
      return { kind: "cancelled" };
    default:
      return {
        kind: "unconfirmed",
        reason: describeFailure(outcome),
        failure: outcome,
      };
  }
}

/**
 * A grant's age on the server's clock (`expiresAt` less the TTL, less
 * `acquiredAt`): the live holder's Acquire is answered like a Renew, keeping
 * `acquiredAt`, so a fresh grant has age 0. Undefined without both times.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const lease = { holder: "h", fencingToken: 1, acquiredAt: "2026-05-07T00:00:00Z", expiresAt: "2026-05-07T00:00:12.5Z" };
 * assert.equal(grantAgeNs(lease, 10), 2_500_000_000n);
 * ```
 */
export function grantAgeNs(
  lease: LeaseRecord,
  ttlSeconds: number,
): bigint | undefined {
  const acquiredAt = parseTimeNs(lease.acquiredAt);
  const expiresAt = parseTimeNs(lease.expiresAt);
  if (!acquiredAt || !expiresAt || acquiredAt <= 0n || expiresAt <= 0n) {
    return undefined;
  }
  return expiresAt - BigInt(ttlSeconds) * 1_000_000_000n - acquiredAt;
}

const RFC3339 =
  /^(\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * An RFC 3339 time in nanoseconds since the epoch, all nine fractional
 * digits kept (`Date.parse` keeps three).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(parseTimeNs("1970-01-01T00:00:01.5Z"), 1_500_000_000n);
 * assert.equal(parseTimeNs("yesterday"), undefined);
 * ```
 */
export function parseTimeNs(text: string): bigint | undefined {
  const m = RFC3339.exec(text);
  if (!m) return undefined;
  const whole = Date.parse(`${m[1].toUpperCase()}${m[3].toUpperCase()}`);
  if (!Number.isFinite(whole)) return undefined;
  return BigInt(whole) * 1_000_000n + BigInt((m[2] ?? "").padEnd(9, "0"));
}
