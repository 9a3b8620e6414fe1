/**
 * One lease RPC of the development server, checked in the contract's order:
 * authentication (401), body size (413), decoding (400), field checks (400),
 * the tenant rule (403), the path keys (400), then the store (200, 204, 409
 * or 500), each refusal with the contract's exact message.
 *
 * Where the contract leaves a choice open: Release checks only that the
 * holder is not empty ("release: only non-empty"), as the reference server
 * limits the length on Acquire and Renew only; a released or cleaned-up
 * record (tombstone) keeps its token and `acquiredAt`, so a lost Renew on it
 * answers `acquired:false` with them (the real server's answer), and a lost
 * Renew on no record answers only the zero times.
 *
 * @module
 */
import { type ApiKey, authenticate } from "./api_keys.ts";
import type { Logger } from "../obs/log.ts";
import { decodeRequest } from "./request.ts";
import type { LeaseTarget } from "./routing.ts";
import { type LeaseStore, StoreFailure } from "./store.ts";
import { errorResponse, grantBody, jsonResponse } from "./wire.ts";
import { leaseKeyProblem } from "../config/identity.ts";

/** The body limit of the contract; larger bodies are answered 413. */
const MAX_BODY_BYTES = 4096;

/**
 * How much of an over-long body is read and dropped so the connection can
 * serve the next request, as Go's server does (`maxPostHandlerReadBytes`); a
 * longer one is left unread and the connection closes.
 */
const MAX_DISCARD_BYTES = 256 << 10;

/** What serving a lease RPC needs from the server: its API keys (none: no authentication), clock, logger and store. */
export interface LeaseRpcContext {
  keys: readonly ApiKey[];
  now: () => number;
  log: Logger;
  store: LeaseStore;
}

/** Serves one routed lease RPC with the request id `id` (echoed and logged). */
export async function serveLeaseRpc(
  ctx: LeaseRpcContext,
  req: Request,
  id: string,
  { rpc, namespace, name }: LeaseTarget,
): Promise<Response> {
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
  const { holder, fencingToken: token, ttlSeconds } = decoded.request;
  if (holder === "") return fail(400, "holder is required");
  if (rpc !== "release" && new TextEncoder().encode(holder).length > 253) {
    return fail(400, "holder must be at most 253 bytes");
  }
  if (rpc === "renew" && token === 0) {
    return fail(400, "fencingToken must be non-zero");
  }
  if (rpc !== "release" && ttlSeconds <= 0) {
    return fail(400, "ttlSeconds must be positive");
  }
  // The tenant rule: a holder must be the key id or start with `<key-id>/`.
  if (
    tenant !== undefined && holder !== tenant &&
    !holder.startsWith(`${tenant}/`)
  ) {
    return fail(403, "holder not authorized for this identity");
  }
  const invalidKey = leaseKeyProblem(namespace, name);
  if (invalidKey) return fail(400, invalidKey.message);

  const now = ctx.now();
  const fields = { request_id: id, namespace, lease: name, holder };
  try {
    if (rpc === "release") {
      const outcome = ctx.store.release(namespace, name, holder, token, now);
      if (outcome === "conflict") {
        return fail(409, "lease held by another identity or token");
      }
      ctx.log.info("lease released", { ...fields, fencing_token: token });
      return new Response(null, {
        status: 204,
        headers: { "x-request-id": id },
      });
    }
    const grant = rpc === "acquire"
      ? ctx.store.acquire(namespace, name, holder, ttlSeconds, now)
      : ctx.store.renew(namespace, name, holder, token, ttlSeconds, now);
    const event = rpc === "acquire" ? "lease acquired" : "lease renewed";
    ctx.log.info(grant.acquired ? event : `${rpc} refused`, {
      ...fields,
      acquired: grant.acquired,
      fencing_token: grant.fencingToken,
    });
    return jsonResponse(200, grantBody(grant), id);
  } catch (e) {
    if (!(e instanceof StoreFailure)) throw e;
    ctx.log.error("internal error", { ...fields, error: e });
    return errorResponse(500, "internal error", id);
  }
}

// The body as text, or null when it exceeds the limit. An over-long body of
// up to MAX_DISCARD_BYTES is read to its end (and dropped), so that the
// connection stays open after the 413 as it does with the real server.
async function readBody(req: Request): Promise<string | null> {
  const declared = Number(req.headers.get("content-length") ?? "0");
  if (declared > MAX_DISCARD_BYTES) return null;
  if (req.body === null) return "";
  const chunks: Uint8Array<ArrayBuffer>[] = [];
  let size = 0;
  // Not cancelled when left: the rest stays unread, and the connection closes.
  for await (const chunk of req.body.values({ preventCancel: true })) {
    size += chunk.length;
    if (size > MAX_DISCARD_BYTES) return null;
    if (size <= MAX_BODY_BYTES) chunks.push(chunk);
  }
  if (size > MAX_BODY_BYTES) return null;
  // A byte-order mark is kept, so it is refused as Go's decoder refuses it.
  return new TextDecoder("utf-8", { ignoreBOM: true }).decode(
    await new Blob(chunks).bytes(),
  );
}
