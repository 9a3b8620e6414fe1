/**
 * The Go helper's log messages (`msg`) for the events `acquire` and `renew`
 * share with it, each logged at the Go level noted beside it. Operators alert
 * on these texts: this project's explanation goes into other fields.
 * @module
 */

/** Each Go message, by the event it names. */
export const GO_MESSAGES = {
  // acquire (init container)
  leaseAcquired: "lease acquired", // INFO
  heldByAnother: "lease held by another, waiting", // INFO
  acquireFailed: "acquire failed, retrying", // WARN
  // renew (sidecar)
  sidecarStarting: "sidecar starting", // INFO
  noHandoff:
    "no matching lease handoff; gating before acquiring as the configured holder", // WARN
  leaseRenewed: "lease renewed", // DEBUG
  renewFailed: "renew failed; still within lease TTL, will retry", // WARN
  renewPastExpiry: "renew failing past lease expiry; enforcing", // WARN
  renewConflict: "renew conflict: lease lost", // WARN
  renewHeldByAnother: "renew reports lease held by another: lease lost", // WARN
  localDeadline: "local lease deadline reached; enforcing", // WARN
  renewLate: "renew response arrived after its local deadline; enforcing", // WARN
  acquireLate:
    "acquire response arrived after its local deadline; remaining gated", // WARN
  reacquired: "lease reacquired; main container released", // INFO
  waitingToReacquire: "waiting to reacquire", // INFO
  reacquireFailed: "reacquire failed", // WARN
  persistFailed: "persist reacquired state failed", // WARN
  enforceFailed: "enforce on lease loss failed", // WARN
  reenforceFailed: "re-enforce while gated failed", // WARN
  enforcerReleaseFailed: "enforcer release failed", // WARN
  released: "released lease on shutdown", // INFO
  releaseConflict:
    "release on shutdown skipped: lease already held by another (conflict)", // INFO
  releaseFailed: "best-effort release on shutdown failed", // WARN
  noRelease: "sidecar shutting down without release", // INFO
  sentSigterm: "sent SIGTERM to main process", // INFO
  sentSigkill: "sent SIGKILL to main process", // INFO
  sigtermFailed: "SIGTERM failed", // WARN
  sigkillFailed: "SIGKILL failed", // WARN
  // both
  failed: "berth-acquire failed", // ERROR
} as const;
