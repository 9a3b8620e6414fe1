/**
 * Who holds which lease: the lease key and the holder identity, checked at
 * start-up as the API server checks them (it answers a bad one with 400 on
 * every attempt). The holder's shape is a contract with the server and Go's
 * helper.
 *
 * @module
 */
import { goQuote } from "../obs/log.ts";

const MAX_NAMESPACE_LENGTH = 63;
const MAX_NAME_LENGTH = 253;
const MAX_KEY_LENGTH = 253;

const LABEL_FORMAT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const SUBDOMAIN_FORMAT = `${LABEL_FORMAT}(\\.${LABEL_FORMAT})*`;
const DNS_LABEL = new RegExp(`^${LABEL_FORMAT}$`);
const DNS_SUBDOMAIN = new RegExp(`^${SUBDOMAIN_FORMAT}$`);

// Kubernetes' validation details, which the server appends to its sentence.
const LABEL_DETAIL =
  `a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '${LABEL_FORMAT}')`;
const SUBDOMAIN_DETAIL =
  `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '${SUBDOMAIN_FORMAT}')`;

/** A lease key the server would refuse: the part at fault (`key`: both together are too long), and the server's exact message. */
export interface LeaseKeyProblem {
  part: "namespace" | "name" | "key";
  message: string;
}

/**
 * Checks a lease key as the server does, in its order and words (Go's `%q`,
 * then the first detail of Kubernetes' validation: length, dots, pattern).
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.match(leaseKeyProblem("a.b", "web")!.message, /^invalid namespace "a.b": .*: must not contain dots$/);
 * assert.equal(leaseKeyProblem("prod", "web"), undefined);
 * ```
 */
export function leaseKeyProblem(
  namespace: string,
  name: string,
): LeaseKeyProblem | undefined {
  const ns = dnsDetail(namespace, MAX_NAMESPACE_LENGTH);
  if (ns !== undefined) {
    const message = `invalid namespace ${
      goQuote(namespace)
    }: must be an RFC 1123 DNS label (lowercase alphanumerics and '-', at most ${MAX_NAMESPACE_LENGTH} characters): ${ns}`;
    return { part: "namespace", message };
  }
  const nm = dnsDetail(name, MAX_NAME_LENGTH);
  if (nm !== undefined) {
    const message = `invalid name ${
      goQuote(name)
    }: must be an RFC 1123 DNS subdomain (lowercase alphanumerics, '-' and '.', at most ${MAX_NAME_LENGTH} characters): ${nm}`;
    return { part: "name", message };
  }
  const length = namespace.length + 1 + name.length;
  if (length <= MAX_KEY_LENGTH) return undefined;
  const message =
    `invalid key ${namespace}/${name}: namespace and name joined with '.' must be at most ${MAX_KEY_LENGTH} characters, got ${length}`;
  return { part: "key", message };
}

// The first message of Kubernetes' IsDNS1123Label (the namespace's `max`)
// or IsDNS1123Subdomain; lengths in UTF-8 bytes.
function dnsDetail(value: string, max: number): string | undefined {
  const label = max === MAX_NAMESPACE_LENGTH;
  if (utf8Length(value) > max) return `must be no more than ${max} characters`;
  if ((label ? DNS_LABEL : DNS_SUBDOMAIN).test(value)) return undefined;
  if (!label) return SUBDOMAIN_DETAIL;
  return DNS_SUBDOMAIN.test(value) ? "must not contain dots" : LABEL_DETAIL;
}

/** `startup-gate` only proves admission; `runtime-singleton` keeps the lease for the pod's life. */
export type Mode = "startup-gate" | "runtime-singleton";

const MAX_HOLDER_BYTES = 253;

/** What a holder is made of ("" is unset): the explicit identity, else the pod's facts (`POD_NAMESPACE`, not the lease's). */
export interface HolderInput {
  mode: Mode;
  explicit?: string;
  clusterId: string;
  podNamespace: string;
  workloadKind: string;
  workloadName: string;
  podName: string;
  podUid: string;
}

/** Derives the holder as the Go helper does (docs/configuration.md), so an upgraded pod keeps the identity the server knows. */
export function holderIdentity(input: HolderInput): string {
  if (input.explicit) return input.explicit;
  const parts = [
    input.clusterId,
    input.podNamespace,
    input.workloadKind,
    input.workloadName,
  ].filter((p) => p !== "");
  if (input.mode === "startup-gate") {
    if (!input.workloadKind && !input.workloadName && input.podName) {
      parts.push(input.podName);
    }
  } else {
    if (input.podName !== "") parts.push("pod", input.podName);
    parts.push("uid", input.podUid);
  }
  return parts.length <= 1
    ? parts[0] ?? ""
    : parts[0] + "/" + parts.slice(1).join(":");
}

/** The length the API measures a holder by: bytes of UTF-8, not UTF-16 units. */
export function utf8Length(s: string): number {
  return new TextEncoder().encode(s).length;
}

// Go's unicode.IsSpace (U+0085) and JavaScript's \s (U+FEFF) alike.
const SPACE = /[\s\u0085]/u;

/** Quotes a value for a message, invisible characters as `\u00a0`, `\u3000`. */
export function quote(s: string): string {
  return JSON.stringify(s).replace(
    /[\s\u0085]/gu,
    (c) =>
      c === " " ? c : `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

/** Without an explicit holder in runtime-singleton mode, the UID keeps two incarnations of a pod from sharing a lease: it must be there, and not blur the holder's `:`/`/` shape. */
export function runtimeHolderProblem(input: HolderInput): string | undefined {
  if (input.mode !== "runtime-singleton" || input.explicit) return undefined;
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

/** The final holder must be what the server accepts (the Go helper retries any other forever against a 400). */
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

/** A plain machine's host name and PID, and an instance new at every start: no two `run`s ever share a holder. */
export interface HostFacts {
  hostname: string;
  pid: number;
  instance: string;
}

/**
 * The holder of `run` outside a pod, joined as the pod holders are; new at
 * every start, so `run` never adopts a lease its predecessor (perhaps frozen,
 * not dead) still holds.
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
