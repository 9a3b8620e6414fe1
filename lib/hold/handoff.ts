/**
 * The handoff on the state volume: what `acquire` writes (holder, token,
 * marker, probe), what the sidecar reads back, and the holder and token it
 * writes again whenever they change, for a restarted sidecar and the workload.
 *
 * @module
 */
import type { AcquiredLease } from "./acquire.ts";
import type { Clock } from "../state/clock.ts";
import type { Config } from "../config/config.ts";
import type { Logger } from "../obs/log.ts";
import { GO_MESSAGES } from "../obs/go_messages.ts";
import { type LeaseParams, markerDeadlines, releaseLease } from "./lease.ts";
import type { MarkerDeadlines } from "../state/marker.ts";
import type { StateDir } from "../state/state_dir.ts";

/** The state volume as the renewer reads and writes it (a `StateDir`, or run's memory); undefined: absent. */
export interface RenewerStore {
  readHolder(): string | undefined;
  /** Throws when it is not a positive int32. */
  readToken(): number | undefined;
  readMarkerDeadlines(): MarkerDeadlines | undefined;
  writeHolder(holder: string): Promise<void>;
  writeToken(token: number): Promise<void>;
}

/**
 * The marker `acquire` hands over: in runtime-singleton mode it carries the
 * acquisition's deadline, so the workload cannot outlive the lease even if
 * the sidecar never starts; in startup-gate mode nobody renews, so only its
 * presence counts.
 *
 * @param config Mode, TTL and lead.
 * @param sent When the granted Acquire was sent.
 * @returns Its deadlines, or undefined for a marker without any.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const sent = { sentAt: 0, sentAtBoot: 1_000, sentAtWall: 2_000 };
 * const config = { mode: "runtime-singleton", ttlSeconds: 10, enforceLeadMs: 4_000 } as const;
 * assert.equal(handoffMarker(config, sent)?.gateClosesBootMs, 7_000);
 * assert.equal(handoffMarker({ ...config, mode: "startup-gate" }, sent), undefined);
 * ```
 */
export function handoffMarker(
  config: Pick<Config, "mode" | "ttlSeconds" | "enforceLeadMs">,
  sent: Pick<AcquiredLease, "sentAtBoot" | "sentAtWall">,
): MarkerDeadlines | undefined {
  if (config.mode === "startup-gate") return undefined;
  const { ttlSeconds, enforceLeadMs } = config;
  return markerDeadlines(
    ttlSeconds * 1000,
    enforceLeadMs,
    sent.sentAtBoot,
    sent.sentAtWall,
  );
}

/** Options for {@linkcode writeHandoff}. */
export interface WriteHandoffOptions
  extends Pick<LeaseParams, "client" | "clock" | "logger"> {
  state: StateDir;
  config: Pick<
    Config,
    "mode" | "ttlSeconds" | "enforceLeadMs" | "holder" | "stateDir"
  >;
  lease: AcquiredLease;
  /** Installs the probe `<state>/check`, last (`acquire`; `run` has none). */
  installCheck?: () => Promise<void>;
}

/**
 * Writes holder, token and marker (and the probe). When the volume refuses,
 * the marker is removed and the lease released at once, so the standby
 * does not wait a TTL for a lease nobody renews; a marker that cannot be
 * removed keeps the lease (it would pass the probe for a lease given back).
 *
 * @param o The state directory, the lease and what releasing it needs.
 * @returns False when the handoff could not be written.
 */
export async function writeHandoff(o: WriteHandoffOptions): Promise<boolean> {
  const { state, config, lease, logger } = o;
  try {
    await state.writeHolder(config.holder);
    await state.writeToken(lease.token);
    await state.writeMarker(handoffMarker(config, lease));
    await o.installCheck?.();
    return true;
  } catch (e) {
    logger.error("cannot write the state volume; releasing the lease", {
      error: e,
      state_dir: config.stateDir,
      fencing_token: lease.token,
    });
  }
  try {
    await state.removeMarker();
  } catch (e) {
    logger.error(
      "not releasing the lease: the health marker in the state directory cannot be removed, so the probe may keep passing on it; the lease expires on its own",
      { error: e, fencing_token: lease.token },
    );
    return false;
  }
  await releaseLease({ ...o, holder: config.holder }, lease.token, false);
  return false;
}

/** What the init container handed over; `leftMs` and the marker's deadlines when it can be trusted. */
export type Handoff =
  | { kind: "none"; reason: string }
  | { kind: "lease"; token: number; leftMs?: number; marker?: MarkerDeadlines };

const NO_HANDOFF = "no lease handed over by the init container; acquiring";

/**
 * Reads the handoff, taken only when its holder is the configured one byte
 * for byte (never renew or release another's lease). Says what it refuses;
 * never throws: an unreadable file or clock only refuses.
 *
 * @returns What the renewer may adopt.
 */
export function readHandoff(
  p: Pick<LeaseParams, "holder" | "ttlSeconds" | "clock" | "logger"> & {
    store: RenewerStore;
  },
): Handoff {
  const { store, holder, clock, logger } = p;
  const refuse = (detail: string, fields = {}, reason = NO_HANDOFF) => {
    logger.warn(GO_MESSAGES.noHandoff, { detail, ...fields });
    return { kind: "none", reason } as const;
  };
  let fileHolder, token;
  try {
    fileHolder = store.readHolder();
    token = store.readToken();
  } catch (error) {
    return refuse(
      "cannot read the init container's handoff; acquiring afresh",
      { error },
    );
  }
  if (fileHolder === undefined || token === undefined) {
    const missing = fileHolder === undefined
      ? "no lease handed over by the init container"
      : "the state volume has a holder but no token";
    return refuse(`${missing}; acquiring afresh`);
  }
  if (fileHolder !== holder) {
    return refuse(
      "the state volume names another holder; never renewing or releasing its lease, acquiring as the configured holder",
      { file_holder: fileHolder },
      "the handed-over lease belongs to another holder",
    );
  }
  try {
    // The earlier of the marker's two copies, trusted only while it lies
    // ahead and no further than one TTL away.
    const m = store.readMarkerDeadlines();
    const left = m && Math.min(
      m.leaseDeadlineBootMs - clock.bootNow(),
      (m.leaseDeadlineWallMs ?? Infinity) - clock.wallNow(),
    );
    if (!left || left <= 0 || left > p.ttlSeconds * 1000) {
      return { kind: "lease", token };
    }
    return { kind: "lease", token, leftMs: left, marker: m };
  } catch (error) {
    logger.warn(
      "cannot read the health marker's deadline; confirming the lease first",
      { error },
    );
    return { kind: "lease", token };
  }
}

/**
 * Writes what `saved` says the volume lacks of the holder and `token`, and
 * updates `saved`: three tries, 100 ms apart unless `signal` cuts the pauses
 * short. Gives up with the Go helper's line naming the file, the error and
 * the release that follows (the caller's).
 *
 * @returns Undefined once written, else the file given up on.
 */
export async function persistHandoff(
  p: { store: RenewerStore; holder: string; clock: Clock; logger: Logger },
  token: number,
  saved: { holder: boolean; token: number },
  signal: AbortSignal,
): Promise<"holder" | "token" | undefined> {
  let write: "holder" | "token" = "holder";
  let error: unknown;
  for (let attempt = 1; attempt <= PERSIST_ATTEMPTS; attempt++) {
    if (attempt > 1) await p.clock.sleep(100, signal);
    try {
      write = "holder";
      if (!saved.holder) await p.store.writeHolder(p.holder);
      saved.holder = true;
      write = "token";
      if (saved.token !== token) await p.store.writeToken(token);
      saved.token = token;
      return undefined;
    } catch (e) {
      error = e;
    }
  }
  p.logger.warn(GO_MESSAGES.persistFailed, {
    detail:
      `cannot write the ${write} file to the state volume, so the workload cannot get the new fencing token; releasing the lease (make the state volume writable: it is read-only or full)`,
    write,
    error,
    fencing_token: token,
    attempts: PERSIST_ATTEMPTS,
  });
  return write;
}

const PERSIST_ATTEMPTS = 3;
