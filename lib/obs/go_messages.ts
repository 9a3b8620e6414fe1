/**
 * The Go helper's log messages (`msg`), for the events `acquire` and `renew`
 * share with it. Operators alert on these texts, so each such event logs the
 * Go text at the Go level, and this project's explanation goes into other
 * fields (`detail`, `reason`, `error`). Events the Go helper does not log
 * keep this project's own words. One table, so a test can hold it to the
 * list the Go helper's contract gives.
 *
 * @module
 */

/** Each Go message, by the event it names, with the level the Go helper logs it at. */
export const GO_MESSAGES = {
  // acquire (init container)
  /** INFO: the lease is held; `fencing_token`. */
  leaseAcquired: "lease acquired",
  /** INFO: another holder has it; `current_holder`, `retry_in`. */
  heldByAnother: "lease held by another, waiting",
  /** WARN: an Acquire failed; `error`, `retry_in`. */
  acquireFailed: "acquire failed, retrying",
  // renew (sidecar)
  /** INFO: the sidecar starts. */
  sidecarStarting: "sidecar starting",
  /** WARN: the handoff does not name the configured holder (or cannot be read). */
  noHandoff:
    "no matching lease handoff; gating before acquiring as the configured holder",
  /** DEBUG: a Renew confirmed the lease. */
  leaseRenewed: "lease renewed",
  /** WARN: a Renew failed, before the local deadline. */
  renewFailed: "renew failed; still within lease TTL, will retry",
  /** WARN: Renew failures reached the local deadline. */
  renewPastExpiry: "renew failing past lease expiry; enforcing",
  /** WARN: the server answered 409 to a Renew. */
  renewConflict: "renew conflict: lease lost",
  /** WARN: the server answered `acquired: false` to a Renew. */
  renewHeldByAnother: "renew reports lease held by another: lease lost",
  /** WARN: the local deadline (less the enforce lead) came before a confirmation. */
  localDeadline: "local lease deadline reached; enforcing",
  /** WARN: a Renew's success came after its own deadline. */
  renewLate: "renew response arrived after its local deadline; enforcing",
  /** WARN: a reacquire's success came after its own deadline. */
  acquireLate:
    "acquire response arrived after its local deadline; remaining gated",
  /** INFO: the lease was acquired again after a loss. */
  reacquired: "lease reacquired; main container released",
  /** INFO: another holder has it while the sidecar waits. */
  waitingToReacquire: "waiting to reacquire",
  /** WARN: an Acquire after a loss failed. */
  reacquireFailed: "reacquire failed",
  /** WARN: the state of a reacquired lease could not be written. */
  persistFailed: "persist reacquired state failed",
  /** WARN: stopping the workload failed. */
  enforceFailed: "enforce on lease loss failed",
  /** WARN: stopping the workload again, while the lease is not held, failed. */
  reenforceFailed: "re-enforce while gated failed",
  /** WARN: letting the workload run again failed. */
  enforcerReleaseFailed: "enforcer release failed",
  /** INFO: the lease was released at shutdown. */
  released: "released lease on shutdown",
  /** INFO: the release at shutdown met a 409. */
  releaseConflict:
    "release on shutdown skipped: lease already held by another (conflict)",
  /** WARN: the release at shutdown failed. */
  releaseFailed: "best-effort release on shutdown failed",
  /** INFO: the sidecar stops without releasing. */
  noRelease: "sidecar shutting down without release",
  /** INFO: the signal enforcer sent SIGTERM. */
  sentSigterm: "sent SIGTERM to main process",
  /** INFO: the signal enforcer sent SIGKILL. */
  sentSigkill: "sent SIGKILL to main process",
  /** WARN: SIGTERM could not be sent. */
  sigtermFailed: "SIGTERM failed",
  /** WARN: SIGKILL could not be sent. */
  sigkillFailed: "SIGKILL failed",
  // both
  /** ERROR: the program ends in failure; `error`. */
  failed: "berth-acquire failed",
} as const;
