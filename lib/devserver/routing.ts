/**
 * Routing of the development server as Go's `http.ServeMux` does it for the
 * real server: `OPTIONS *` (200), paths not cleaned but redirected to their
 * clean form (307, Go 1.22 and later, the query kept), `404 page not found`,
 * 405 with `Allow` for a known path with another method, a bare 400 for a
 * malformed percent-escape. `/healthz` and `/readyz` are answered here; the
 * three lease RPCs are handed back as a {@linkcode LeaseTarget}.
 *
 * @module
 */
import type { Rpc } from "./request.ts";
import { plainResponse } from "./wire.ts";

/** A request routed to one of the three lease RPCs, its path keys percent-decoded (not yet validated). */
export interface LeaseTarget {
  rpc: Rpc;
  namespace: string;
  name: string;
}

const LEASE_PATH =
  /^\/v1alpha1\/namespaces\/([^/]+)\/leases\/([^/]+)\/(acquire|renew|release)$/;

/**
 * Routes one request: answers everything but a lease RPC as the real server's
 * `net/http` would, echoing the request id `id`; `ready` is `/readyz`'s state.
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
    return new Response(null, { headers: { "content-length": "0" } });
  }
  // Go's server refuses a malformed percent-escape before any handler: a bare
  // 400 without request id (and closes the connection, which Deno.serve
  // decides on its own: it stays open here).
  if (!/^(?:[^%]|%[0-9a-fA-F]{2})*$/.test(path)) {
    return new Response("400 Bad Request", {
      status: 400,
      headers: { "content-type": "text/plain; charset=utf-8" },
    });
  }
  // As Go's URL.EscapedPath(): the raw path when only characters a path may
  // carry raw, else the decoded path escaped again ("%41" becomes "A").
  const escaped = /^[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*$/.test(path)
    ? path
    : goEscapePath(decodePercent(path));
  const clean = cleanPath(escaped);
  if (clean !== escaped) {
    // An empty query ("?") is dropped, as Go's url.URL writes it.
    const location = goEscapePath(clean) + (query === "?" ? "" : query);
    return redirect(req.method, location, id);
  }
  if (path === "/healthz" || path === "/readyz") {
    if (req.method !== "GET" && req.method !== "HEAD") {
      return plainResponse(405, "Method Not Allowed\n", id, {
        allow: "GET, HEAD",
      });
    }
    const up = path === "/healthz" || ready;
    const body = req.method === "HEAD" ? null : up ? "ok\n" : "not ready\n";
    // The real server's probe handlers set only the content type: no nosniff.
    return plainResponse(up ? 200 : 503, body, id, {}, false);
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
  const headers = new Headers({ location, "x-request-id": id });
  if (method === "GET" || method === "HEAD") {
    headers.set("content-type", "text/html; charset=utf-8");
  }
  const html = location.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]);
  const body = method === "GET"
    ? `<a href="${html}">Temporary Redirect</a>.\n\n`
    : null;
  return new Response(body, { status: 307, headers });
}

const HTML_ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&#34;",
  "'": "&#39;",
};

const encoder = new TextEncoder();

// Go's url.URL{Path: p}.String(): "%" and the characters outside the path
// set escaped, upper-case hex (so "%2F" becomes "%252F").
function goEscapePath(p: string): string {
  let out = "";
  for (const ch of p) {
    if (/^[A-Za-z0-9\-._~$&+,/:;=@]$/.test(ch)) out += ch;
    else {
      for (const b of encoder.encode(ch)) {
        out += `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
      }
    }
  }
  return out;
}

// Go's cleanPath: path.Clean, keeping a trailing slash.
function cleanPath(p: string): string {
  const out: string[] = [];
  for (const seg of p.split("/")) {
    if (seg === "..") out.pop();
    else if (seg !== "" && seg !== ".") out.push(seg);
  }
  const np = "/" + out.join("/");
  return p.endsWith("/") && np !== "/" ? np + "/" : np;
}

// Percent-decoding (escapes already checked); bytes that are not UTF-8
// become U+FFFD, where Go would keep the raw bytes.
function decodePercent(s: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < s.length; i++) {
    if (s[i] !== "%") bytes.push(...encoder.encode(s[i]));
    else {
      bytes.push(parseInt(s.slice(i + 1, i + 3), 16));
      i += 2;
    }
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}
