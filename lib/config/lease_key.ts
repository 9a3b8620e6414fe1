/**
 * The lease key rules the API server enforces on the path
 * `/v1alpha1/namespaces/{namespace}/leases/{name}`: checked at start-up,
 * because the server answers a bad key with 400 on every attempt and
 * `acquire` would otherwise retry it forever.
 *
 * @module
 */
import { quote } from "./holder.ts";

/** The longest namespace: an RFC 1123 DNS label. */
const MAX_NAMESPACE_LENGTH = 63;
/** The longest name: an RFC 1123 DNS subdomain. */
const MAX_NAME_LENGTH = 253;
/** The longest `namespace/name`. */
const MAX_KEY_LENGTH = 253;

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN =
  /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Which part of the key is wrong, so the caller can say where to fix it. */
export type LeaseKeyPart = "namespace" | "name" | "key";

/** A lease key the server would refuse. */
export interface LeaseKeyProblem {
  /** The part at fault (the key: both together are too long). */
  part: LeaseKeyPart;
  /** The server's shape: `invalid namespace "Prod": must be ...`. */
  message: string;
}

/**
 * Checks a lease key as the server does, in its order: the namespace is an
 * RFC 1123 label (1-63 characters), the name an RFC 1123 subdomain (1-253),
 * and `namespace/name` at most 253 characters.
 *
 * @param namespace The lease namespace.
 * @param name The lease name.
 * @returns The first problem, or undefined when the server accepts the key.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.match(
 *   leaseKeyProblem("prod", "Checkout")?.message ?? "",
 *   /^invalid name "Checkout": must be an RFC 1123 subdomain/,
 * );
 * assert.equal(leaseKeyProblem("prod", "checkout"), undefined);
 * ```
 */
export function leaseKeyProblem(
  namespace: string,
  name: string,
): LeaseKeyProblem | undefined {
  if (namespace.length > MAX_NAMESPACE_LENGTH || !DNS_LABEL.test(namespace)) {
    return {
      part: "namespace",
      message: `invalid namespace ${
        quote(namespace)
      }: must be an RFC 1123 label (1-${MAX_NAMESPACE_LENGTH} characters of [a-z0-9-], starting and ending with a letter or digit)`,
    };
  }
  if (name.length > MAX_NAME_LENGTH || !DNS_SUBDOMAIN.test(name)) {
    return {
      part: "name",
      message: `invalid name ${
        quote(name)
      }: must be an RFC 1123 subdomain (1-${MAX_NAME_LENGTH} characters of [a-z0-9.-], each dot-separated part starting and ending with a letter or digit)`,
    };
  }
  const length = namespace.length + 1 + name.length;
  if (length > MAX_KEY_LENGTH) {
    return {
      part: "key",
      message: `invalid key ${
        quote(`${namespace}/${name}`)
      }: namespace, "/" and name together must be at most ${MAX_KEY_LENGTH} characters (this one has ${length})`,
    };
  }
  return undefined;
}
