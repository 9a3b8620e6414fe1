/**
 * Routing of the development server as Go's `http.ServeMux` does it for the
 * real server: paths are not cleaned but redirected (307 Temporary Redirect,
 * Go 1.22 and later) to their clean form, the query kept; unknown paths are
 * `404 page not found`; a known path with another method is 405 with
 * `Allow`; a malformed percent-escape anywhere in the path is a bare 400. `/healthz` and `/readyz` are answered here;
 * the three lease RPCs are handed back as a {@linkcode LeaseTarget}.
 *
 * @module
 */
import type { Rpc } from "./request.ts";
import { plainResponse } from "./wire.ts";

/** A request routed to one of the three lease RPCs, its path keys decoded. */
export interface LeaseTarget {
  /** Which RPC. */
  rpc: Rpc;
  /** The namespace path segment, percent-decoded (not yet validated). */
  namespace: string;
  /** The lease name path segment, percent-decoded (not yet validated). */
  name: string;
}

const LEASE_PATH =
  /^\/v1alpha1\/namespaces\/([^/]+)\/leases\/([^/]+)\/(acquire|renew|release)$/;

/**
 * Routes one request. Everything but a lease RPC is answered here, as the
 * real server's `net/http` would: `OPTIONS *` (200), redirects to the clean
 * path (307), the probes, 404 and 405.
 *
 * @param req The request; only its method and raw URL are read.
 * @param id The request id, echoed on every answer.
 * @param ready Whether `/readyz` answers `200 ok` (else `503 not ready`).
 * @returns The answer, or the lease RPC to serve.
 */
export function routeRequest(
  req: Pick<Request, "method" | "url">,
  id: string,
  ready: boolean,
): Response | LeaseTarget {
  // req.url keeps the raw request target (no dot-segment removal).
  const target = req.url.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/]*/i, "");
  const q = target.indexOf("?");
  const path = q < 0 ? target : target.slice(0, q);
  const query = q < 0 ? "" : target.slice(q);
  // `OPTIONS *` reaches here as the path "/*" (Deno.serve's URL); Go's
  // server answers it itself, before any handler: 200, empty, no request id.
  if (req.method === "OPTIONS" && target === "/*") {
    return new Response(null, {
      status: 200,
      headers: { "content-length": "0" },
    });
  }
  // Go's server refuses a malformed percent-escape before any handler: a
  // bare 400 without request id (it also closes the connection, which
  // Deno.serve decides on its own: it stays open here).
  if (!VALID_ESCAPES.test(path)) {
    return new Response("400 Bad Request", {
      status: 400,
      headers: { "content-type": "text/plain; charset=utf-8" },
    });
  }
  const escaped = escapedPath(path);
  const clean = cleanPath(escaped);
  if (clean !== escaped) {
    // An empty query ("?") is dropped, as Go's url.URL writes it.
    return redirect(
      req.method,
      goEscapePath(clean) + (query === "?" ? "" : query),
      id,
    );
  }
  if (path === "/healthz" || path === "/readyz") {
    if (req.method !== "GET" && req.method !== "HEAD") {
      return plainResponse(405, "Method Not Allowed\n", id, {
        allow: "GET, HEAD",
      });
    }
    const up = path === "/healthz" || ready;
    // The real server's probe handlers set only the content type: no nosniff.
    const res = plainResponse(
      up ? 200 : 503,
      up ? "ok\n" : "not ready\n",
      id,
      undefined,
      false,
    );
    return req.method === "HEAD"
      ? new Response(null, { status: res.status, headers: res.headers })
      : res;
  }
  const m = LEASE_PATH.exec(path);
  if (!m) return plainResponse(404, "404 page not found\n", id);
  if (req.method !== "POST") {
    return plainResponse(405, "Method Not Allowed\n", id, { allow: "POST" });
  }
  return {
    rpc: m[3] as Rpc,
    namespace: decodePercent(m[1]),
    name: decodePercent(m[2]),
  };
}

// ServeMux's redirect to the clean path (http.Redirect with 307): an HTML
// body for GET only, a content type for GET and HEAD.
function redirect(method: string, location: string, id: string): Response {
  const body = method === "GET"
    ? `<a href="${htmlEscape(location)}">Temporary Redirect</a>.\n\n`
    : null;
  const headers = new Headers({ location, "x-request-id": id });
  if (method === "GET" || method === "HEAD") {
    headers.set("content-type", "text/html; charset=utf-8");
  }
  return new Response(body, { status: 307, headers });
}

const encoder = new TextEncoder();

// Percent-encodes every byte of `s` outside `keep`, upper-case hex.
function percentEncode(s: string, keep: RegExp): string {
  let out = "";
  for (const ch of s) {
    if (keep.test(ch)) {
      out += ch;
      continue;
    }
    for (const b of encoder.encode(ch)) {
      out += `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
    }
  }
  return out;
}

/** Percent signs only as the start of a two-hex-digit escape. */
const VALID_ESCAPES = /^(?:[^%]|%[0-9a-fA-F]{2})*$/;

// The request path as Go's URL.EscapedPath() gives it: the raw path when it
// is a valid encoding (only characters a path may carry raw), else the
// decoded path escaped again (so "%41" becomes "A" there).
function escapedPath(raw: string): string {
  if (/^[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*$/.test(raw)) return raw;
  return goEscapePath(decodePercent(raw));
}

// Go's url.URL{Path: p}.String() for the redirect: "%" and the characters
// outside the path set are escaped again (so "%2F" becomes "%252F").
function goEscapePath(p: string): string {
  return percentEncode(p, /^[A-Za-z0-9\-._~$&+,/:;=@]$/);
}

// Go's cleanPath: path.Clean, keeping a trailing slash.
function cleanPath(p: string): string {
  if (p === "") return "/";
  if (p[0] !== "/") p = "/" + p;
  const out: string[] = [];
  for (const seg of p.split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") out.pop();
    else out.push(seg);
  }
  let np = "/" + out.join("/");
  if (p.endsWith("/") && np !== "/") np += "/";
  return np;
}

const HTML_ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&#34;",
  "'": "&#39;",
};

// As Go's htmlEscape, for the body of a redirect.
function htmlEscape(s: string): string {
  return s.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]);
}

// Percent-decoding (escapes already checked); bytes that are not UTF-8
// become U+FFFD, where Go would keep the raw bytes.
function decodePercent(s: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < s.length; i++) {
    if (s[i] === "%") {
      bytes.push(parseInt(s.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      bytes.push(...encoder.encode(s[i]));
    }
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}
