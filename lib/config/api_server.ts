/**
 * The API server URL: checked at start-up, and never echoed with its
 * credentials. A URL such as `https://user:SECRET@host` is refused (the key
 * belongs in `--api-key-file`), and every message that quotes the URL shows
 * `***` in place of its user information.
 *
 * @module
 */

/**
 * `url` with any user information replaced by `***`, for messages. When the
 * text does not parse as a URL, everything between `://` (or the start) and
 * the last `@` is replaced: over-redacting a malformed URL is safe, leaking
 * a password is not.
 *
 * @param url The URL as configured.
 * @returns A version safe to print.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(
 *   redactUrl("https://user:SECRET@berth.example:8443/x"),
 *   "https://***@berth.example:8443/x",
 * );
 * ```
 */
export function redactUrl(url: string): string {
  const at = url.lastIndexOf("@");
  if (at < 0) return url;
  const scheme = url.indexOf("://");
  const from = scheme >= 0 && scheme < at ? scheme + 3 : 0;
  let parsed = false;
  try {
    new URL(url);
    parsed = true;
  } catch {
    // Not a URL: cut at the last "@" anywhere.
  }
  let cut = at;
  if (parsed) {
    // The authority ends at the first "/", "?", "#" or "\\"; its user
    // information at the last "@" inside it, as the URL parser splits it.
    const rest = url.slice(from);
    const end = rest.search(/[/?#\\]/);
    const authority = end < 0 ? rest : rest.slice(0, end);
    const inner = authority.lastIndexOf("@");
    if (inner < 0) return url;
    cut = from + inner;
  }
  return `${url.slice(0, from)}***${url.slice(cut)}`;
}

/**
 * Checks the API server URL: http or https with a host, no credentials, no
 * query or fragment, no empty path segment (the path is kept as a prefix of
 * the API's paths).
 *
 * @param url The URL as configured (not empty).
 * @returns The problem, quoting the URL redacted, or undefined when it is usable.
 */
export function apiServerProblem(url: string): string | undefined {
  const shown = JSON.stringify(redactUrl(url));
  const hint =
    "set BERTH_API_SERVER or --api-server to e.g. https://berth.example:8443";
  let u: URL | undefined;
  try {
    u = new URL(url);
  } catch {
    u = undefined;
  }
  if (
    u === undefined || (u.protocol !== "http:" && u.protocol !== "https:") ||
    u.host === ""
  ) {
    return `api server URL ${shown} is not an http:// or https:// URL (${hint})`;
  }
  if (u.username !== "" || u.password !== "") {
    return `api server URL ${shown} must not carry credentials: put the API key in a file and set BERTH_API_KEY_FILE or --api-key-file`;
  }
  if (u.search !== "" || u.hash !== "") {
    return `api server URL ${shown} must not have a query or fragment (${hint})`;
  }
  if (u.pathname.replace(/\/+$/, "").includes("//")) {
    return `api server URL ${shown} has an empty path segment (${hint})`;
  }
  return undefined;
}
