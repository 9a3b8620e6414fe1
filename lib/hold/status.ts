/**
 * The renewer's observable state, in a leaf module so that the health
 * endpoint and the metrics (and `run`) read it without loading the renewer.
 * The renewer's decision is the single source of the workload's permission
 * to run; these only observe it.
 *
 * @module
 */

/**
 * Hooks for the metrics (and `run`), so they are computed from the
 * renewer's own state instead of a second reading of the files. All
 * optional; none may throw.
 */
export interface RenewerObserver {
  /** After every state change (permission opened or closed, token changed). */
  changed?(status: RenewerStatus): void;
  /** The lease was acquired again after it was lost or refused. */
  reacquired?(token: number): void;
}

/** A snapshot of the renewer, for health checks and metrics. */
export interface RenewerStatus {
  /** True while the workload may run: the lease is confirmed and the permission is open. */
  permissionOpen: boolean;
  /** The fencing token held or last held (0: never held). */
  token: number;
  /** Monotonic ms at which the permission closes, when the lease is confirmed. */
  permissionClosesAt?: number;
  /** Monotonic ms of the local lease deadline, when the lease is confirmed. */
  deadline?: number;
  /** Why the permission is closed, when it is; in this project's words only (no server text). */
  reason?: string;
}
