/**
 * The renewer's store, the state volume: the handoff the init container
 * wrote (lib/hold/write_handoff.ts; read once at start-up) and the holder and token written whenever
 * they change, so a restarted sidecar and the workload see the current
 * token, and the line that says a token could not be written
 * ({@linkcode reportPersistFailure}). Kept apart from the renewer's timing
 * rules because its failures are of another kind: a volume that cannot be
 * read or written.
 *
 * @module
 */
import { GO_MESSAGES } from "../obs/go_messages.ts";
import type { Clock } from "../state/clock.ts";
import type { Logger } from "../obs/log.ts";
import type { MarkerDeadlines } from "../state/marker.ts";
import { adoptedDeadlineMs } from "./deadline.ts";

/**
 * What the renewer reads and writes on the state volume: the init
 * container's handoff on start-up, and the holder and token whenever they
 * change, so a restarted sidecar and the workload see the current token.
 */
export interface RenewerStore {
  /** The `holder` file; undefined when absent. */
  readHolder(): string | undefined;
  /** The `token` file; undefined when absent; throws when it is not a positive int32. */
  readToken(): number | undefined;
  /** The deadlines inside the health marker; undefined when absent or not ours. */
  readMarkerDeadlines(): MarkerDeadlines | undefined;
  /** Persists the holder (atomic). */
  writeHolder(holder: string): Promise<void>;
  /** Persists the fencing token (atomic). */
  writeToken(token: number): Promise<void>;
}

/** What the init container handed over, as the renewer may use it. */
export type Handoff =
  /** Nothing usable: acquire as the configured holder. `reason` is why the permission stays closed. */
  | { kind: "none"; reason: string }
  /** A lease of ours; `leftMs` when the marker says how long it still runs. */
  | { kind: "lease"; token: number; leftMs?: number };

/**
 * Reads the handoff: the holder must be the configured one byte for byte
 * (never renew or release another's lease), and the marker's deadline is
 * trusted only as {@linkcode adoptedDeadlineMs} allows. Logs what it refuses.
 *
 * @param store The state volume.
 * @param holder The configured holder identity.
 * @param clock For the boot-time and wall clocks the marker is written on.
 * @param ttlSeconds The configured TTL, bounding a trusted deadline.
 * @param logger Where refusals go.
 * @param quiet Says an absent handoff at DEBUG rather than WARN (`run`,
 * which never has one).
 * @returns What the renewer may adopt.
 */
export function readHandoff(
  store: RenewerStore,
  holder: string,
  clock: Clock,
  ttlSeconds: number,
  logger: Logger,
  quiet = false,
): Handoff {
  let fileHolder: string | undefined;
  let token: number | undefined;
  let unreadable: unknown;
  try {
    fileHolder = store.readHolder();
    token = store.readToken();
  } catch (e) {
    unreadable = e;
  }
  if (fileHolder === undefined || token === undefined) {
    // The Go helper's line for every handoff it does not adopt, an absent
    // one included (`run`, which has none by design, says it at DEBUG).
    (quiet && unreadable === undefined ? logger.debug : logger.warn)(
      GO_MESSAGES.noHandoff,
      {
        detail: unreadable !== undefined
          ? "cannot read the init container's handoff; acquiring afresh"
          : fileHolder === undefined
          ? "no lease handed over by the init container; acquiring afresh"
          : "the state volume has a holder but no token; acquiring afresh",
        error: unreadable,
      },
    );
    return {
      kind: "none",
      reason: "no lease handed over by the init container; acquiring",
    };
  }
  if (fileHolder !== holder) {
    logger.warn(GO_MESSAGES.noHandoff, {
      detail:
        "the state volume names another holder; never renewing or releasing its lease, acquiring as the configured holder",
      file_holder: fileHolder,
    });
    return {
      kind: "none",
      reason: "the handed-over lease belongs to another holder",
    };
  }
  let marker: MarkerDeadlines | undefined;
  try {
    marker = store.readMarkerDeadlines();
  } catch (e) {
    logger.warn(
      "cannot read the health marker's deadline; confirming the lease first",
      { error: e },
    );
  }
  const leftMs = marker &&
    adoptedDeadlineMs(marker, clock.bootNow(), clock.wallNow(), ttlSeconds);
  return { kind: "lease", token, leftMs };
}

/** How often a refused write is tried before {@linkcode HandoffWriter.persist} gives up. */
export const PERSIST_ATTEMPTS = 3;
/** The pause between those tries (ms). */
const PERSIST_RETRY_MS = 100;

/** Why {@linkcode HandoffWriter.persist} gave up. */
export interface PersistFailure {
  /** Which file: `holder` or `token`. */
  write: "holder" | "token";
  /** The last error (it names the path). */
  error: unknown;
}

/**
 * Logs a {@linkcode PersistFailure}: the Go helper's `persist reacquired
 * state failed` at WARN, naming the file, the error and the fix, and that
 * the lease is released (a token the workload cannot read is held for
 * nothing).
 *
 * @param logger Where the line goes.
 * @param failure What {@linkcode HandoffWriter.persist} gave up on.
 * @param token The fencing token that could not be written.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { createLogger } from "../obs/log.ts";
 * const lines: string[] = [];
 * const logger = createLogger({ format: "json", write: (l) => lines.push(l) });
 * const error = new Error("EROFS: read-only file system, open '/berth/token'");
 * reportPersistFailure(logger, { write: "token", error }, 8);
 * const record = JSON.parse(lines[0]);
 * assert.equal(record.level, "WARN");
 * assert.equal(record.write, "token");
 * assert.match(record.detail, /releasing the lease/);
 * ```
 */
export function reportPersistFailure(
  logger: Logger,
  failure: PersistFailure,
  token: number,
): void {
  const { write, error } = failure;
  logger.warn(GO_MESSAGES.persistFailed, {
    detail:
      `cannot write the ${write} file to the state volume, so the workload cannot get the new fencing token; releasing the lease (make the state volume writable: it is read-only or full)`,
    write,
    error,
    fencing_token: token,
    attempts: PERSIST_ATTEMPTS,
  });
}

/**
 * Writes the holder and token the workload reads, remembering what the
 * volume already holds so that only changes are written.
 */
export class HandoffWriter {
  #store: RenewerStore;
  #holder: string;
  #clock: Clock;
  #savedToken = 0;
  #holderSaved = false;

  /**
   * Knows nothing of the volume's content yet: call
   * {@linkcode HandoffWriter.adopted} after reading a handoff.
   *
   * @param store The state volume.
   * @param holder The configured holder identity.
   * @param clock Times the retries.
   */
  constructor(store: RenewerStore, holder: string, clock: Clock) {
    this.#store = store;
    this.#holder = holder;
    this.#clock = clock;
  }

  /**
   * Records that the volume holds our holder and `token` (an adopted handoff).
   *
   * @param token The handed-over token.
   */
  adopted(token: number): void {
    this.#savedToken = token;
    this.#holderSaved = true;
  }

  /**
   * Writes whatever of the holder and `token` the volume does not hold yet,
   * trying {@linkcode PERSIST_ATTEMPTS} times.
   *
   * @param token The fencing token just granted.
   * @param signal Cuts the pauses between tries short (shutdown).
   * @returns `undefined` once written, else the last failure.
   */
  async persist(
    token: number,
    signal: AbortSignal,
  ): Promise<PersistFailure | undefined> {
    let failure: PersistFailure | undefined;
    for (let attempt = 1; attempt <= PERSIST_ATTEMPTS; attempt++) {
      try {
        if (!this.#holderSaved) {
          failure = { write: "holder", error: undefined };
          await this.#store.writeHolder(this.#holder);
          this.#holderSaved = true;
        }
        if (this.#savedToken !== token) {
          failure = { write: "token", error: undefined };
          await this.#store.writeToken(token);
          this.#savedToken = token;
        }
        return undefined;
      } catch (e) {
        failure!.error = e;
      }
      if (attempt < PERSIST_ATTEMPTS) {
        await this.#clock.sleep(PERSIST_RETRY_MS, signal);
      }
    }
    return failure;
  }
}
