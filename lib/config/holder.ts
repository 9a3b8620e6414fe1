/**
 * The holder identity: the string the API server records as the lease's
 * owner. Its shape is a contract with the server (the first segment is the
 * tenant root it authorizes) and with upstream deployments, so it is derived
 * here by one pure function, and the checks that keep a bad identity from
 * ever reaching the server live next to it.
 *
 * @module
 */
import type { Mode } from "./modes.ts";

/** The API's limit on a holder: at most this many bytes of UTF-8. */
export const MAX_HOLDER_BYTES = 253;

/**
 * What a holder identity is made of: the explicit identity, or the pod's
 * downward-API facts it is derived from. All fields are strings as read from
 * env/flags; "" means unset.
 */
export interface HolderInput {
  /** `startup-gate` names the workload; `runtime-singleton` names one pod incarnation. */
  mode: Mode;
  /** `BERTH_HOLDER_IDENTITY`: used byte for byte when non-empty. */
  explicit?: string;
  /** `BERTH_CLUSTER_ID`: the tenant root when set. */
  clusterId: string;
  /** `POD_NAMESPACE` (not the lease namespace). */
  podNamespace: string;
  /** `BERTH_WORKLOAD_KIND`: the pod's controller kind, e.g. `ReplicaSet`. */
  workloadKind: string;
  /** `BERTH_WORKLOAD_NAME`: the pod's controller name, e.g. `checkout-7f6c`. */
  workloadName: string;
  /** `POD_NAME`. */
  podName: string;
  /** `POD_UID`: tells pod incarnations apart in runtime-singleton mode. */
  podUid: string;
}

/**
 * Derives the holder exactly as upstream does, so that a pod upgraded from the
 * Go helper keeps (or, in runtime-singleton mode, re-derives) the identity the
 * server already knows. Pure and unvalidated: see
 * {@linkcode runtimeHolderProblem} and {@linkcode holderProblem} for the
 * checks.
 *
 * An explicit holder wins verbatim (not trimmed). Otherwise the parts are
 * cluster id, pod namespace, workload kind, workload name (empty ones
 * skipped); startup-gate adds the pod name only when kind and name are both
 * empty and never the UID; runtime-singleton adds `pod`, name when the name is
 * set and always `uid`, UID. One part is the holder; more are joined as
 * `parts[0] + "/" + parts[1:].join(":")`.
 */
export function holderIdentity(input: HolderInput): string {
  if (input.explicit !== undefined && input.explicit !== "") {
    return input.explicit;
  }
  const parts = [
    input.clusterId,
    input.podNamespace,
    input.workloadKind,
    input.workloadName,
  ].filter((p) => p !== "");
  if (input.mode === "startup-gate") {
    if (
      input.workloadKind === "" && input.workloadName === "" &&
      input.podName !== ""
    ) {
      parts.push(input.podName);
    }
  } else {
    if (input.podName !== "") parts.push("pod", input.podName);
    parts.push("uid", input.podUid);
  }
  if (parts.length <= 1) return parts[0] ?? "";
  return parts[0] + "/" + parts.slice(1).join(":");
}

const encoder = new TextEncoder();

/** The length the API measures a holder by: bytes of UTF-8, not UTF-16 units. */
export function utf8Length(s: string): number {
  return encoder.encode(s).length;
}

// Go's unicode.IsSpace set (which has U+0085) plus JavaScript's \s (which has
// U+FEFF): a UID with any of them is rejected whichever definition one holds.
const SPACE = /[\s\u0085]/u;

/**
 * Quotes a value for an error message so that invisible characters (a
 * no-break space, an ideographic space) show up as `\u00a0`, `\u3000`.
 */
export function quote(s: string): string {
  return JSON.stringify(s).replace(
    /[\s\u0085]/gu,
    (c) =>
      c === " " ? c : `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

/**
 * The spec's validation item 6: in runtime-singleton mode without an explicit
 * holder, the UID is what keeps two incarnations of a pod from sharing a
 * lease, so it must be present and must not blur the `:`/`/` structure of the
 * holder; and the derived holder must fit the API's limit (the server would
 * answer 400 forever). Returns the problem, or undefined when there is none
 * (always undefined in startup-gate mode or with an explicit holder).
 */
export function runtimeHolderProblem(input: HolderInput): string | undefined {
  if (input.mode !== "runtime-singleton") return undefined;
  if (input.explicit !== undefined && input.explicit !== "") return undefined;
  const uid = input.podUid;
  if (uid === "") {
    return "POD_UID is required in runtime-singleton mode without an explicit holder identity " +
      "(set POD_UID from the downward API field metadata.uid, or --pod-uid, or set BERTH_HOLDER_IDENTITY)";
  }
  if (uid.includes(":") || uid.includes("/") || SPACE.test(uid)) {
    return `invalid POD_UID ${
      quote(uid)
    }: it must not contain ":", "/" or whitespace, nor be surrounded by spaces ` +
      "(set POD_UID from the downward API field metadata.uid)";
  }
  return lengthProblem(holderIdentity(input), "derived ");
}

/**
 * Checks any final holder against what the server accepts (non-empty, at most
 * {@linkcode MAX_HOLDER_BYTES} bytes of UTF-8). Upstream sends an empty or
 * oversized holder anyway and then retries forever against a 400; rejecting
 * it at start-up turns that hang into an error the operator sees.
 */
export function holderProblem(holder: string): string | undefined {
  if (holder === "") {
    return "holder identity is empty: set BERTH_HOLDER_IDENTITY, or POD_NAMESPACE, " +
      "BERTH_WORKLOAD_KIND/BERTH_WORKLOAD_NAME or POD_NAME to derive one " +
      "(the API rejects an empty holder and acquire would retry forever)";
  }
  return lengthProblem(holder, "");
}

function lengthProblem(holder: string, what: string): string | undefined {
  const n = utf8Length(holder);
  if (n <= MAX_HOLDER_BYTES) return undefined;
  return `${what}holder identity is ${n} bytes of UTF-8, over the API's limit of ${MAX_HOLDER_BYTES} ` +
    (what
      ? "(shorten BERTH_CLUSTER_ID or the workload names, or set a shorter BERTH_HOLDER_IDENTITY)"
      : "(set a shorter BERTH_HOLDER_IDENTITY, or shorten the values it is derived from)");
}

/** What a holder on a plain machine (`run` outside a pod) is derived from. */
export interface HostFacts {
  /** The host name (`Deno.hostname()`). */
  hostname: string;
  /** This process's PID: tells two live `run`s on the host apart at a glance. */
  pid: number;
  /**
   * Random, new for every process start (a UUID): no two `run`s, on one host
   * or across restarts and reboots, ever share a holder, even when a PID is
   * reused.
   */
  instance: string;
}

/**
 * The holder of `run` on a plain machine: `[cluster id/]host` then
 * `pid:PID:uid:INSTANCE`, joined as the pod holders are (the first part is
 * the tenant root). A restarted `run` gets a new holder, so it never adopts
 * a lease its predecessor (perhaps frozen, not dead) still holds: it waits
 * for that lease to be released or to expire.
 *
 * @param clusterId `BERTH_CLUSTER_ID` ("" when unset).
 * @param host The host facts.
 * @returns The holder identity.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const host = { hostname: "vm1", pid: 42, instance: "1b9d" };
 * assert.equal(hostHolderIdentity("", host), "vm1/pid:42:uid:1b9d");
 * assert.equal(hostHolderIdentity("east", host), "east/vm1:pid:42:uid:1b9d");
 * ```
 */
export function hostHolderIdentity(clusterId: string, host: HostFacts): string {
  // A host name never holds "/" or ":"; a strange one must not blur the shape.
  const name = host.hostname.replace(/[\/:\s]/gu, "-") || "localhost";
  const parts = [clusterId, name, "pid", String(host.pid), "uid", host.instance]
    .filter((p) => p !== "");
  return parts[0] + "/" + parts.slice(1).join(":");
}
