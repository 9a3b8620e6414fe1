/**
 * One lease RPC of the development server, checked in the contract's order:
 * authentication (401), body size (413), decoding (400), field checks (400),
 * the tenant rule (403), the path keys (400), then the store (200, 204, 409
 * or 500). Each refusal carries the contract's exact message.
 *
 * Where the contract leaves a choice open this server decides as follows:
 * - Release checks only that the holder is not empty (the contract lists the
 *   holder checks as "release: only non-empty"): a holder longer than 253
 *   bytes can still be released, as the reference server's lease manager
 *   limits the length on Acquire and Renew only.
 * - A released or cleaned-up record (tombstone) keeps its token and its
 *   `acquiredAt`, clears the holder, and expires at the release or clean-up
 *   time, so a lost Renew on it answers `acquired:false` with the token and
 *   those two times (the real server's answer); a lost Renew on no record
 *   answers only the zero times.
 *
 * @module
 */
import { type ApiKey, authenticate, holderAllowed } from "./api_keys.ts";
import type { Logger } from "../obs/log.ts";
import { decodeRequest } from "./request.ts";
import type { LeaseTarget } from "./routing.ts";
import { type LeaseStore, StoreFailure } from "./store.ts";
import { errorResponse, grantBody, jsonResponse } from "./wire.ts";
import { leaseKeyProblem } from "../config/lease_key.ts";

/** The body limit of the contract; larger bodies are answered 413. */
const MAX_BODY_BYTES = 4096;

const encoder = new TextEncoder();

/** What serving a lease RPC needs from the server. */
export interface LeaseRpcContext {
  /** Static API keys; empty: no authentication. */
  keys: readonly ApiKey[];
  /** Wall clock in Unix milliseconds. */
  now: () => number;
  /** Where refusals (debug), lease events (info) and store failures (error) go. */
  log: Logger;
  /** The lease records. */
  store: LeaseStore;
}

/**
 * Serves one routed lease RPC.
 *
 * @param ctx The server's keys, clock, logger and store.
 * @param req The request (its `Authorization` header and body are read).
 * @param id The request id, echoed and logged.
 * @param target The RPC and its decoded path keys.
 * @returns The contract's answer.
 */
export async function serveLeaseRpc(
  ctx: LeaseRpcContext,
  req: Request,
  id: string,
  target: LeaseTarget,
): Promise<Response> {
  const { rpc, namespace, name } = target;
  const fail = (status: number, message: string) => {
    ctx.log.debug("request rejected", {
      request_id: id,
      status,
      error: message,
    });
    return errorResponse(status, message, id);
  };

  let tenant: string | undefined;
  if (ctx.keys.length > 0) {
    const auth = await authenticate(ctx.keys, req.headers.get("authorization"));
    if (!auth.ok) return fail(401, auth.message);
    tenant = auth.tenant;
  }

  const body = await readBody(req);
  if (body === null) {
    return fail(413, `request body must be at most ${MAX_BODY_BYTES} bytes`);
  }
  const decoded = decodeRequest(rpc, body);
  if (!decoded.ok) return fail(400, decoded.message);
  const { holder, fencingToken, ttlSeconds } = decoded.request;

  if (holder === "") return fail(400, "holder is required");
  if (rpc !== "release" && encoder.encode(holder).length > 253) {
    return fail(400, "holder must be at most 253 bytes");
  }
  if (rpc === "renew" && fencingToken === 0) {
    return fail(400, "fencingToken must be non-zero");
  }
  if (rpc !== "release" && ttlSeconds <= 0) {
    return fail(400, "ttlSeconds must be positive");
  }
  if (tenant !== undefined && !holderAllowed(tenant, holder)) {
    return fail(403, "holder not authorized for this identity");
  }
  const invalidKey = leaseKeyProblem(namespace, name);
  if (invalidKey) return fail(400, invalidKey.message);

  const now = ctx.now();
  const fields = { request_id: id, namespace, lease: name, holder };
  try {
    if (rpc === "release") {
      const outcome = ctx.store.release(
        namespace,
        name,
        holder,
        fencingToken,
        now,
      );
      if (outcome === "conflict") {
        return fail(409, "lease held by another identity or token");
      }
      ctx.log.info("lease released", {
        ...fields,
        fencing_token: fencingToken,
      });
      return new Response(null, {
        status: 204,
        headers: { "x-request-id": id },
      });
    }
    const grant = rpc === "acquire"
      ? ctx.store.acquire(namespace, name, holder, ttlSeconds, now)
      : ctx.store.renew(namespace, name, holder, fencingToken, ttlSeconds, now);
    ctx.log.info(
      grant.acquired
        ? `lease ${rpc === "acquire" ? "acquired" : "renewed"}`
        : `${rpc} refused`,
      {
        ...fields,
        acquired: grant.acquired,
        fencing_token: grant.fencingToken,
      },
    );
    return jsonResponse(200, grantBody(grant), id);
  } catch (e) {
    if (!(e instanceof StoreFailure)) throw e;
    ctx.log.error("internal error", { ...fields, error: e });
    return errorResponse(500, "internal error", id);
  }
}

/**
 * How much of an over-long body is read and thrown away so the connection
 * can serve the next request, as Go's server does after a handler
 * (`maxPostHandlerReadBytes`); a longer one is left unread and the
 * connection closes.
 */
const MAX_DISCARD_BYTES = 256 << 10;

// The body as text, or null when it exceeds the limit. An over-long body of
// up to MAX_DISCARD_BYTES is read to its end (and dropped), so that the
// connection stays open after the 413 as it does with the real server.
async function readBody(req: Request): Promise<string | null> {
  const declared = Number(req.headers.get("content-length") ?? "0");
  if (declared > MAX_DISCARD_BYTES) return null;
  if (req.body === null) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = req.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.length;
      if (size > MAX_DISCARD_BYTES) return null;
      if (size <= MAX_BODY_BYTES) chunks.push(value);
    }
  } finally {
    reader.releaseLock();
  }
  if (size > MAX_BODY_BYTES) return null;
  const all = new Uint8Array(size);
  let off = 0;
  for (const c of chunks) {
    all.set(c, off);
    off += c.length;
  }
  // A byte-order mark is kept, so it is refused as Go's decoder refuses it.
  return new TextDecoder("utf-8", { ignoreBOM: true }).decode(all);
}
