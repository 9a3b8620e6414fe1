/**
 * The development server's in-memory lease store: the Berth semantics (tokens
 * that strictly increase per key through releases, tombstones, lazy expiry,
 * acquired:false, the clean-up sweep) without any HTTP, so they read as the
 * contract reads. Expiry is evaluated against the `now` of each call; nothing
 * runs in the background here (the server runs the sweep on a timer).
 *
 * @module
 */

/** The largest fencing token; the server refuses to wrap past it (500). */
export const MAX_FENCING_TOKEN = 2147483647;

/** How long a record stays expired before the sweep turns it into a tombstone. */
export const CLEANUP_AFTER_MS = 5 * 60 * 1000;

/**
 * One lease record, for tests that seed states slow to reach through the API
 * (a token at the ceiling). Times are Unix milliseconds, `null` when unset. A
 * tombstone (released or cleaned up) has holder "" and TTL 0, keeps its token
 * (so tokens never go back) and `acquiredAt`, and its `renewedAt` is the
 * release or clean-up time, which is then its answered `expiresAt`.
 */
export interface StoredLease {
  holder: string;
  fencingToken: number;
  ttlSeconds: number;
  acquiredAt: number | null;
  renewedAt: number | null;
}

/** What Acquire and Renew answer (`acquired`: whether the caller holds the lease now), before it is JSON. */
export interface LeaseGrant {
  acquired: boolean;
  holder: string;
  fencingToken: number;
  expiresAt: number | null;
  acquiredAt: number | null;
}

/** A failure of the store itself, answered `500 internal error` and logged with its reason. */
export class StoreFailure extends Error {
  override name = "StoreFailure";
}

/**
 * The contract's lease records per key.
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

  /** The contract's Acquire; a {@linkcode StoreFailure} at the token ceiling. */
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

  /** The contract's Renew; a {@linkcode StoreFailure} on a negative token. */
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

  /** The contract's Release, blind to expiry: `conflict` when the record has another holder or token. */
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

  /** The real server's clean-up at `now`: how many records expired for over {@linkcode CLEANUP_AFTER_MS} became tombstones. */
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
