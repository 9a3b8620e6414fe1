/**
 * The names of the configuration flags and whether each takes a value: what
 * the argument parser needs to read (or, in `check`, to skip) them. A leaf,
 * so the liveness probe can accept and ignore the other roles' flags, as the
 * Go helper does, without loading the settings table. The table
 * (settings.ts) is the source of the rest; a test keeps the two in step.
 *
 * @module
 */
import type { FlagKind } from "./argv.ts";

/** Every configuration flag, by name without dashes: a boolean, or one that takes a value. */
export const CONFIG_FLAG_KINDS: Readonly<Record<string, FlagKind>> = {
  "lease-name": "value",
  "lease-namespace": "value",
  "mode": "value",
  "enforce": "value",
  "signal-target": "value",
  "ttl-seconds": "value",
  "heartbeat-seconds": "value",
  "enforce-grace-seconds": "value",
  "enforce-lead-seconds": "value",
  "release-on-shutdown": "boolean",
  "holder-identity": "value",
  "cluster-id": "value",
  "workload-kind": "value",
  "workload-name": "value",
  "state-dir": "value",
  "api-server": "value",
  "api-key": "value",
  "api-key-file": "value",
  "ca-bundle-file": "value",
  "server-name": "value",
  "insecure-skip-tls-verify": "boolean",
  "acquire-timeout": "value",
  "log-format": "value",
  "log-level": "value",
  "pod-namespace": "value",
  "pod-name": "value",
  "pod-uid": "value",
};
