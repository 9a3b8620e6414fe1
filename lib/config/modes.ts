/**
 * The two choices that shape every role: what the lease is for, and how a
 * lost lease stops the workload. Leaf types, so that the holder identity, the
 * enforcement lead and the resolved configuration can share them without
 * importing one another.
 *
 * @module
 */

/** `startup-gate` only proves admission; `runtime-singleton` keeps the lease for the pod's life. */
export type Mode = "startup-gate" | "runtime-singleton";

/** How a lost lease stops the workload: by failing its liveness probe, or by signals. */
export type EnforceMode = "probe" | "signal";
