/**
 * The development server's in-memory lease store: the Berth semantics
 * (tokens that strictly increase per key through releases, tombstones, lazy
 * expiry, acquired:false, the clean-up sweep) without any HTTP, so they can be
 * read and tested on their own. See `server.ts` for the server around it,
 * which runs {@linkcode LeaseStore.sweep} on a timer.
 *
 * @module
 */

/** The largest fencing token; the server refuses to wrap past it (500). */
export const MAX_FENCING_TOKEN = 2147483647;

/** How long a record stays expired before the sweep turns it into a tombstone: 5 minutes. */
export const CLEANUP_AFTER_MS = 5 * 60 * 1000;

/**
 * One lease record as the store keeps it. It is exported so tests can seed
 * states that are slow to reach through the API (a token at the ceiling).
 * Times are wall-clock milliseconds since the Unix epoch (fractions carry
 * the sub-millisecond digits), `null` when unset.
 */
export interface StoredLease {
  /** Current holder; "" once released or cleaned up (a tombstone). */
  holder: string;
  /** Fencing token; kept by a tombstone so tokens never go back. */
  fencingToken: number;
  /** TTL of the current grant in whole seconds; 0 for a tombstone. */
  ttlSeconds: number;
  /** When the last holder first got this token; a tombstone keeps it. */
  acquiredAt: number | null;
  /**
   * Last acquire or renew by the holder; for a tombstone the release or
   * clean-up time (with a TTL of 0 it is also the answered `expiresAt`).
   */
  renewedAt: number | null;
}

/**
 * What Acquire and Renew answer, before it is turned into JSON. Exported as
 * the return type of {@linkcode LeaseStore} methods.
 */
export interface LeaseGrant {
  /** Whether the caller holds the lease now. */
  acquired: boolean;
  /** The holder the answer describes ("" when none). */
  holder: string;
  /** The token the answer describes (0 when there is no record). */
  fencingToken: number;
  /** `renewedAt + ttl` in wall ms, `null` when unset. */
  expiresAt: number | null;
  /** Wall ms, `null` when unset. */
  acquiredAt: number | null;
}

/**
 * A failure of the store itself, answered `500 internal error`. A class of
 * its own so the HTTP layer can tell it from a bug while logging the reason.
 */
export class StoreFailure extends Error {
  /** Wraps the reason an operator reads in the server log. */
  constructor(message: string) {
    super(message);
    this.name = "StoreFailure";
  }
}

/**
 * The lease semantics of the contract (records per key, lazy expiry,
 * tombstones, fencing tokens, the clean-up sweep), separate from HTTP so that
 * they read as the contract reads. Expiry is evaluated on each call against
 * the `now` passed in; nothing runs in the background here (the server calls
 * {@linkcode LeaseStore.sweep}).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const store = new LeaseStore();
 * store.acquire("dev", "web", "a", 10, 0);
 * // Expired at 10 s, cleaned up once expired for more than 5 minutes.
 * assert.equal(store.sweep(10_000 + CLEANUP_AFTER_MS), 0);
 * assert.equal(store.sweep(10_001 + CLEANUP_AFTER_MS), 1);
 * assert.equal(store.get("dev", "web")?.holder, "");
 * ```
 */
export class LeaseStore {
  #records = new Map<string, StoredLease>();

  /** A copy of the record for (namespace, name), if any. */
  get(namespace: string, name: string): StoredLease | undefined {
    const rec = this.#records.get(storeKey(namespace, name));
    return rec && { ...rec };
  }

  /** Replaces the record for (namespace, name); for tests that need a given state. */
  put(namespace: string, name: string, record: StoredLease): void {
    this.#records.set(storeKey(namespace, name), { ...record });
  }

  /** The contract's Acquire; throws {@linkcode StoreFailure} at the token ceiling. */
  acquire(
    namespace: string,
    name: string,
    holder: string,
    ttlSeconds: number,
    now: number,
  ): LeaseGrant {
    const key = storeKey(namespace, name);
    const rec = this.#records.get(key);
    if (rec && isLive(rec, now)) {
      if (rec.holder !== holder) return grantOf(rec, false);
      rec.ttlSeconds = ttlSeconds;
      rec.renewedAt = now;
      return grantOf(rec, true);
    }
    const previous = rec?.fencingToken ?? 0;
    if (previous >= MAX_FENCING_TOKEN) {
      throw new StoreFailure(
        `fencing token of ${key} is at the ceiling ${MAX_FENCING_TOKEN}; refusing to wrap`,
      );
    }
    const next: StoredLease = {
      holder,
      fencingToken: previous + 1,
      ttlSeconds,
      acquiredAt: now,
      renewedAt: now,
    };
    this.#records.set(key, next);
    return grantOf(next, true);
  }

  /** The contract's Renew; throws {@linkcode StoreFailure} on a negative token. */
  renew(
    namespace: string,
    name: string,
    holder: string,
    fencingToken: number,
    ttlSeconds: number,
    now: number,
  ): LeaseGrant {
    if (fencingToken < 0) {
      throw new StoreFailure(`negative fencing token ${fencingToken} on renew`);
    }
    const rec = this.#records.get(storeKey(namespace, name));
    if (!rec) return EMPTY_GRANT;
    if (
      !isLive(rec, now) || rec.holder !== holder ||
      rec.fencingToken !== fencingToken
    ) {
      return grantOf(rec, false);
    }
    rec.ttlSeconds = ttlSeconds;
    rec.renewedAt = now;
    return grantOf(rec, true);
  }

  /**
   * The contract's Release. It does not look at expiry: `conflict` when the
   * record has a holder and that holder or its token differ (expired or
   * not); `released` when the holder and token match (the record becomes a
   * tombstone: holder cleared, token and `acquiredAt` kept, `expiresAt` the
   * release time), when it is already a tombstone, or when there is none.
   */
  release(
    namespace: string,
    name: string,
    holder: string,
    fencingToken: number,
    now: number,
  ): "released" | "conflict" {
    const rec = this.#records.get(storeKey(namespace, name));
    if (!rec || rec.holder === "") return "released";
    if (rec.holder !== holder || rec.fencingToken !== fencingToken) {
      return "conflict";
    }
    entomb(rec, now);
    return "released";
  }

  /**
   * The real server's clean-up: every record expired for more than
   * {@linkcode CLEANUP_AFTER_MS} becomes a tombstone as a release would make
   * it, with the sweep time as its `expiresAt`. Afterwards a Release by
   * anyone answers 204 and a Renew answer names no holder.
   *
   * @param now The sweep time, Unix milliseconds.
   * @returns How many records were cleaned up.
   */
  sweep(now: number): number {
    let cleaned = 0;
    for (const rec of this.#records.values()) {
      if (rec.holder === "" || rec.renewedAt === null) continue;
      if (now > rec.renewedAt + rec.ttlSeconds * 1000 + CLEANUP_AFTER_MS) {
        entomb(rec, now);
        cleaned++;
      }
    }
    return cleaned;
  }
}

// A tombstone: no holder, the token and first acquire kept, expiring now.
function entomb(rec: StoredLease, now: number): void {
  rec.holder = "";
  rec.ttlSeconds = 0;
  rec.renewedAt = now;
}

const EMPTY_GRANT: LeaseGrant = {
  acquired: false,
  holder: "",
  fencingToken: 0,
  expiresAt: null,
  acquiredAt: null,
};

function storeKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

// Held and not expired; expired means strictly after renewedAt + ttl.
function isLive(rec: StoredLease, now: number): boolean {
  return rec.holder !== "" && rec.renewedAt !== null &&
    now <= rec.renewedAt + rec.ttlSeconds * 1000;
}

function grantOf(rec: StoredLease, acquired: boolean): LeaseGrant {
  return {
    acquired,
    holder: rec.holder,
    fencingToken: rec.fencingToken,
    expiresAt: rec.renewedAt === null
      ? null
      : rec.renewedAt + rec.ttlSeconds * 1000,
    acquiredAt: rec.acquiredAt,
  };
}
