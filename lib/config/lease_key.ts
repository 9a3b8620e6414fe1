/**
 * The lease key rules the API server enforces on the path
 * `/v1alpha1/namespaces/{namespace}/leases/{name}`, with the server's own
 * messages: checked at start-up, because the server answers a bad key with
 * 400 on every attempt and `acquire` would otherwise retry it forever. The
 * development server answers its 400s with the same texts.
 *
 * @module
 */
import { goQuote } from "../encoding/go_quote.ts";

/** The longest namespace: an RFC 1123 DNS label. */
const MAX_NAMESPACE_LENGTH = 63;
/** The longest name: an RFC 1123 DNS subdomain. */
const MAX_NAME_LENGTH = 253;
/** The longest `namespace.name` (the server's encoded key). */
const MAX_KEY_LENGTH = 253;

const LABEL_FORMAT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const SUBDOMAIN_FORMAT = `${LABEL_FORMAT}(\\.${LABEL_FORMAT})*`;
const DNS_LABEL = new RegExp(`^${LABEL_FORMAT}$`);
const DNS_SUBDOMAIN = new RegExp(`^${SUBDOMAIN_FORMAT}$`);

// The details of Kubernetes' validation (k8s.io/apimachinery), which the
// server appends to its own sentence: only the first one is shown.
const LABEL_DETAIL =
  `a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '${LABEL_FORMAT}')`;
const SUBDOMAIN_DETAIL =
  `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '${SUBDOMAIN_FORMAT}')`;

/** Which part of the key is wrong, so the caller can say where to fix it. */
export type LeaseKeyPart = "namespace" | "name" | "key";

/** A lease key the server would refuse. */
export interface LeaseKeyProblem {
  /** The part at fault (the key: both together are too long). */
  part: LeaseKeyPart;
  /** The server's exact message, e.g. `invalid namespace "Prod": must be an RFC 1123 DNS label (...): ...`. */
  message: string;
}

const utf8 = new TextEncoder();

/**
 * Checks a lease key as the server does, in its order and with its words:
 * the namespace is an RFC 1123 DNS label (at most 63 bytes), the name an RFC
 * 1123 DNS subdomain (at most 253), and `namespace.name` at most 253
 * characters. A refused namespace or name is quoted as Go's `%q` quotes it
 * and followed by the first detail Kubernetes' validation gives (too long,
 * `must not contain dots`, or the pattern).
 *
 * @param namespace The lease namespace.
 * @param name The lease name.
 * @returns The first problem, or undefined when the server accepts the key.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(
 *   leaseKeyProblem("a.b", "web")?.message,
 *   `invalid namespace "a.b": must be an RFC 1123 DNS label (lowercase alphanumerics and '-', at most 63 characters): must not contain dots`,
 * );
 * assert.equal(leaseKeyProblem("prod", "web"), undefined);
 * ```
 */
export function leaseKeyProblem(
  namespace: string,
  name: string,
): LeaseKeyProblem | undefined {
  const namespaceDetail = labelDetail(namespace);
  if (namespaceDetail !== undefined) {
    return {
      part: "namespace",
      message: `invalid namespace ${
        goQuote(namespace)
      }: must be an RFC 1123 DNS label (lowercase alphanumerics and '-', at most ${MAX_NAMESPACE_LENGTH} characters): ${namespaceDetail}`,
    };
  }
  const nameDetail = subdomainDetail(name);
  if (nameDetail !== undefined) {
    return {
      part: "name",
      message: `invalid name ${
        goQuote(name)
      }: must be an RFC 1123 DNS subdomain (lowercase alphanumerics, '-' and '.', at most ${MAX_NAME_LENGTH} characters): ${nameDetail}`,
    };
  }
  const length = namespace.length + 1 + name.length;
  if (length > MAX_KEY_LENGTH) {
    return {
      part: "key",
      message:
        `invalid key ${namespace}/${name}: namespace and name joined with '.' must be at most ${MAX_KEY_LENGTH} characters, got ${length}`,
    };
  }
  return undefined;
}

// Kubernetes' IsDNS1123Label, first message only (lengths in UTF-8 bytes).
function labelDetail(value: string): string | undefined {
  if (utf8.encode(value).length > MAX_NAMESPACE_LENGTH) {
    return `must be no more than ${MAX_NAMESPACE_LENGTH} characters`;
  }
  if (DNS_LABEL.test(value)) return undefined;
  return DNS_SUBDOMAIN.test(value) ? "must not contain dots" : LABEL_DETAIL;
}

// Kubernetes' IsDNS1123Subdomain, first message only.
function subdomainDetail(value: string): string | undefined {
  if (utf8.encode(value).length > MAX_NAME_LENGTH) {
    return `must be no more than ${MAX_NAME_LENGTH} characters`;
  }
  return DNS_SUBDOMAIN.test(value) ? undefined : SUBDOMAIN_DETAIL;
}
