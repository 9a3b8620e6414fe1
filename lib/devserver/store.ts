/**
 * The development server's in-memory lease store: the Berth semantics
 * (tokens that strictly increase per key through releases, tombstones, lazy
 * expiry, acquired:false) without any HTTP, so they can be read and tested on
 * their own. See `server.ts` for the server around it.
 *
 * @module
 */

/** The largest fencing token; the server refuses to wrap past it (500). */
export const MAX_FENCING_TOKEN = 2147483647;

/**
 * One lease record as the store keeps it. It is exported so tests can seed
 * states that are slow to reach through the API (a token at the ceiling).
 * Times are wall-clock milliseconds since the Unix epoch, `null` when unset.
 */
export interface StoredLease {
  /** Current holder; "" once released (a tombstone). */
  holder: string;
  /** Fencing token; kept by a tombstone so tokens never go back. */
  fencingToken: number;
  /** TTL of the current grant in whole seconds; 0 for a tombstone. */
  ttlSeconds: number;
  /** When the current holder first got this token; `null` for a tombstone. */
  acquiredAt: number | null;
  /** Last acquire or renew by the current holder; `null` for a tombstone. */
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
 * tombstones, fencing tokens), separate from HTTP so that they read as the
 * contract reads. Expiry is evaluated on each call against the `now` passed
 * in: nothing runs in the background.
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
   * The contract's Release: `conflict` only when a live record has another
   * holder or token; everything else (released now, already released,
   * absent, expired under someone else) is `released`.
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
    if (rec.holder === holder && rec.fencingToken === fencingToken) {
      rec.holder = "";
      rec.ttlSeconds = 0;
      rec.acquiredAt = null;
      rec.renewedAt = null;
      return "released";
    }
    return isLive(rec, now) ? "conflict" : "released";
  }
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
